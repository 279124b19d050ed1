"""prep (optional): embed every distinct memory and query text of a validated dataset once,
into a vector cache that hydrate/query/snapshot-roundtrip read with `--cache DIR`, so the
per-run work needs no model. Only for systems with the embedder capability."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.errors import RecallbenchError
from recallbench.spool import stream_scopes
from recallbench.stages.execution import Execution, cache_source, run_tasks
from recallbench.stages.hydrate import Truncation, counted

PREP_BATCH = 64


def run_prep(
    suite_env: Mapping[str, Any], cache_dir: Path, system_name: str, *, workers: int = 1
) -> dict[str, Any]:
    """Write the cache; return its manifest (with `timing`, a local diagnostic)."""
    from recallbench.cache import CacheWriter, text_key
    from recallbench.stages import tasks
    from recallbench.systems import get_system

    system = get_system(system_name)
    if system.embedder is None:
        raise RecallbenchError(f"{system.name} has no embedder: it needs no vector cache")
    writer = CacheWriter(Path(cache_dir), system.embedder.identity())
    tally = Truncation(system)  # counted on the same pass over the spool
    rows: dict[bytes, int] = {}  # text key -> its row, in order of first appearance
    batches: deque[list[bytes]] = deque()
    texts_seen = 0
    started = time.perf_counter()
    inside = 0.0

    def texts() -> Iterator[list[str]]:
        nonlocal texts_seen
        batch: list[str] = []
        keys: list[bytes] = []
        for _, scope in counted(stream_scopes(suite_env), tally):
            scope_rows = []
            for text in [q["text"] for q in scope["queries"]] + [
                m["text"] for m in scope["memories"]
            ]:
                texts_seen += 1
                key = text_key(text)
                row = rows.get(key)
                scope_rows.append(len(rows) if row is None else row)
                if row is not None:
                    continue
                rows[key] = len(rows)
                batch.append(text)
                keys.append(key)
                if len(batch) >= PREP_BATCH:
                    batches.append(keys)
                    yield batch
                    batch, keys = [], []
            writer.add_scope(scope_rows)
        if batch:
            batches.append(keys)
            yield batch

    try:
        for result in run_tasks(
            tasks.embed_batch,
            texts(),
            system=system_name,
            execution=Execution(workers=workers),
            cache=None,
            total=0,
            desc="prep",
            unit="batch",
        ):
            writer.add(batches.popleft(), result["blob"], result["dimension"])
            inside += result["seconds_inside"]
    except BaseException:
        writer.abort()
        raise
    manifest = writer.finish(
        {
            "source": cache_source(suite_env),
            "truncation": tally.report(),
            "system": system_name,
            "texts": {"seen": texts_seen, "distinct": len(rows)},
            "recallbench_version": __version__,
        }
    )
    return {
        **manifest,
        "timing": {
            "wall_seconds": time.perf_counter() - started,
            "seconds_inside_system": inside,
            "workers": workers,
        },
    }
