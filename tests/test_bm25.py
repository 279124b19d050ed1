"""The BM25 baseline behind the seam: ranking, ties, and its verified clone path."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from recallbench.systems import get_system
from recallbench.systems.base import SnapshotRejected, StoreRecord

DOCS = [
    StoreRecord("m2", "p", "apple banana"),
    StoreRecord("m1", "p", "apple cherry cherry"),
    StoreRecord("m3", "q", "durian"),
]


def lucene_bm25(tf: int, df: int, n: int, dl: int, avgdl: float, k1=1.5, b=0.75) -> float:
    """Lucene's BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); tf part without (k1 + 1)."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_scores_follow_lucene_bm25_and_ties_break_by_id(tmp_path: Path) -> None:
    system = get_system("bm25")
    store = system.open_store(tmp_path / "s")
    assert store.ingest(DOCS) == 3
    avgdl = (2 + 3 + 1) / 3
    hits = store.search("cherry", 3)
    assert hits[0].memory_id == "m1"
    assert hits[0].score == pytest.approx(round(lucene_bm25(2, 1, 3, 3, avgdl), 4), abs=1e-4)
    # "apple" is in m1 and m2; m2 is shorter so it scores higher; m3 scores 0 and comes last.
    assert [h.memory_id for h in store.search("apple", 3)] == ["m2", "m1", "m3"]
    # No term matches: every score is 0, so the order is memory id ascending.
    assert [h.memory_id for h in store.search("zebra", 3)] == ["m1", "m2", "m3"]


def test_roundtrip_is_verified_and_tampering_is_rejected(tmp_path: Path) -> None:
    system = get_system("bm25")
    store = system.open_store(tmp_path / "s")
    store.ingest(DOCS)
    info = system.snapshot(store, tmp_path / "pkg")
    assert info.records == 3 and info.size_bytes > 0
    assert system.verify(tmp_path / "pkg", tmp_path / "w") == 3
    clone = system.restore(tmp_path / "pkg", tmp_path / "clone")
    assert clone.search("apple cherry", 3) == store.search("apple cherry", 3)
    reopened = system.attach(tmp_path / "s")
    assert reopened.search("durian", 1) == store.search("durian", 1)
    payload = tmp_path / "pkg" / "records.jsonl"
    raw = bytearray(payload.read_bytes())
    raw[5] ^= 0x01
    payload.write_bytes(bytes(raw))
    with pytest.raises(SnapshotRejected) as exc:
        system.verify(tmp_path / "pkg", tmp_path / "w")
    assert exc.value.reason == "checksum_mismatch"


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    store = get_system("bm25").open_store(tmp_path / "s")
    with pytest.raises(SnapshotRejected, match="duplicate memory id"):
        store.ingest([DOCS[0], DOCS[0]])


def test_lexical_matches_are_records_sharing_a_token(tmp_path: Path) -> None:
    store = get_system("bm25").open_store(tmp_path / "s")
    store.ingest(DOCS)
    assert store.lexical_matches("Apple pie") == ("BM25", ["m1", "m2"])
    assert store.lexical_matches("zebra") == ("BM25", [])
