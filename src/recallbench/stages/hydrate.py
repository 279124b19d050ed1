"""hydrate: a fresh store of the system under test, every corpus record ingested."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope
from recallbench.stages.validate import suite_of
from recallbench.systems import get_system
from recallbench.systems.base import StoreRecord


def run_hydrate(suite_env: dict[str, Any], store_dir: Path, system_name: str) -> dict[str, Any]:
    """Ingest the suite's memories into a new store in `store_dir` (replacing an old one)."""
    suite = suite_of(suite_env)
    store_dir = Path(store_dir)
    if store_dir.exists():
        shutil.rmtree(store_dir)
    system = get_system(system_name)
    records = [
        StoreRecord(m.memory_id, m.identifier, m.fact, m.importance, m.tags) for m in suite.memories
    ]
    start = time.perf_counter()
    store = system.open_store(store_dir)
    try:
        stored = store.ingest(records)
    finally:
        store.close()
    seconds = time.perf_counter() - start
    data = {
        "system": system_name,
        "configuration": system.configuration(),
        "records": stored,
        "timing": {
            "seconds": seconds,
            "records_per_second": stored / seconds if seconds > 0 else None,
        },
    }
    return envelope("hydrate", data, {"suite": suite_env["fingerprint"]})
