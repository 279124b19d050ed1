"""HotMem behind the seam: its own tamper reasons, and the digest catching a damaged store."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import orjson
import pytest

from recallbench.systems import get_system
from recallbench.systems.base import SnapshotRejected, StoreRecord
from recallbench.systems.hotmem import DB_NAME

RECORDS = [StoreRecord(f"m{i}", "d", f"memory number {i} about the garden") for i in range(8)]


def test_hotmem_rejects_its_corruptions_with_its_own_reasons(tmp_path: Path) -> None:
    system = get_system("hotmem")
    store = system.open_store(tmp_path / "s")
    store.ingest(RECORDS)
    system.clone.snapshot(store, tmp_path / "pkg")
    reasons = {}
    for c in system.clone.corruptions(tmp_path / "pkg", tmp_path / "bad"):
        with pytest.raises(SnapshotRejected) as rejected:
            system.clone.verify(c.package_dir, tmp_path / "w" / c.name)
        reasons[c.name] = rejected.value.reason
    assert reasons == {
        "raw_byte": "corrupt_compression",
        # the payload re-compressed validly at the manifest's size: HotMem's own sha256
        "stale_manifest": "decompressed_digest_mismatch",
    }
    stale = tmp_path / "bad" / "stale_manifest"
    assert (stale / "manifest.json").read_bytes() == (
        tmp_path / "pkg" / "manifest.json"
    ).read_bytes()
    lines = gzip.decompress((stale / "memories.jsonl.gz").read_bytes()).splitlines()
    assert len(lines) == len(RECORDS)
    edited = orjson.loads(lines[-1])  # the last record is the one edited
    assert edited["fact_text"] != {r.memory_id: r.text for r in RECORDS}[edited["id"]]


def test_the_digest_catches_a_row_deleted_behind_hotmems_back(tmp_path: Path) -> None:
    system = get_system("hotmem")
    store = system.open_store(tmp_path / "s")
    store.ingest(RECORDS)
    digest = store.digest()
    store.close()
    with sqlite3.connect(tmp_path / "s" / DB_NAME) as db:
        db.execute("DELETE FROM memories WHERE id = 'm3'")
    damaged = system.attach(tmp_path / "s")
    assert damaged.count() == len(RECORDS) - 1
    assert damaged.digest() != digest
