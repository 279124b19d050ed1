"""The BM25 baseline's own behaviour: Lucene BM25 scores, ties by id, its tokenizer and the
reasons its verifier gives. (What every system keeps, round trip and tamper rejection
included, is in test_systems_contract.py.)"""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from recallbench.systems import get_system
from recallbench.systems.base import SnapshotRejected, StoreRecord
from recallbench.systems.bm25 import tokenize

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
    store = get_system("bm25").open_store(tmp_path / "s")
    assert store.ingest(DOCS) == 3
    avgdl = (2 + 3 + 1) / 3
    hits = store.search("cherry", 3)
    assert hits[0].memory_id == "m1"
    assert hits[0].score == pytest.approx(round(lucene_bm25(2, 1, 3, 3, avgdl), 4), abs=1e-4)
    # "apple" is in m1 and m2; m2 is shorter so it scores higher; m3 scores 0 and comes last.
    apple = store.search("apple", 3)
    assert [h.memory_id for h in apple] == ["m2", "m1", "m3"]
    assert apple[0].score == pytest.approx(round(lucene_bm25(1, 2, 3, 2, avgdl), 4), abs=1e-4)
    assert apple[1].score == pytest.approx(round(lucene_bm25(1, 2, 3, 3, avgdl), 4), abs=1e-4)
    assert apple[2].score == 0.0
    # No term matches: every score is 0, so the order is memory id ascending.
    assert [h.memory_id for h in store.search("zebra", 3)] == ["m1", "m2", "m3"]
    assert [h.identifier for h in store.search("durian", 1)] == ["q"]


def test_tokens_are_lowercase_word_runs() -> None:
    assert tokenize("Apple-pie, CHERRY_tart 42!") == ["apple", "pie", "cherry_tart", "42"]
    assert tokenize("Résumé café") == ["résumé", "café"]
    assert tokenize("  ...  ") == []


def test_lexical_matches_are_records_sharing_a_token(tmp_path: Path) -> None:
    store = get_system("bm25").open_store(tmp_path / "s")
    assert store.lexical_matches("apple") == ("BM25", [])  # an empty store matches nothing
    store.ingest(DOCS)
    assert store.lexical_matches("Apple pie") == ("BM25", ["m1", "m2"])  # case-insensitive
    assert store.lexical_matches("durian cherry") == ("BM25", ["m1", "m3"])
    assert store.lexical_matches("zebra") == ("BM25", [])


def test_duplicate_ids_are_refused_by_name(tmp_path: Path) -> None:
    store = get_system("bm25").open_store(tmp_path / "s")
    with pytest.raises(SnapshotRejected, match="duplicate memory id 'm2'"):
        store.ingest([DOCS[0], DOCS[0]])
    store.ingest(DOCS[:1])
    with pytest.raises(SnapshotRejected, match="duplicate memory id 'm2'"):
        store.ingest(DOCS[:1])
    assert store.count() == 1


def test_verify_names_what_is_wrong_with_a_package(tmp_path: Path) -> None:
    system = get_system("bm25")
    store = system.open_store(tmp_path / "s")
    store.ingest(DOCS)
    info = system.clone.snapshot(store, tmp_path / "pkg")
    assert info.records == 3 and info.size_bytes > 0
    assert system.clone.verify(tmp_path / "pkg", tmp_path / "w") == 3

    def rejected(package: Path) -> str:
        with pytest.raises(SnapshotRejected) as exc:
            system.clone.verify(package, tmp_path / "w")
        return exc.value.reason

    # a flipped byte in the records: the manifest's sha256 no longer matches
    flipped = tmp_path / "flipped"
    system.clone.snapshot(store, flipped)
    raw = bytearray((flipped / "records.jsonl").read_bytes())
    raw[5] ^= 0x01
    (flipped / "records.jsonl").write_bytes(bytes(raw))
    assert rejected(flipped) == "checksum_mismatch"
    # an intact file under a manifest that claims another record count
    miscounted = tmp_path / "miscounted"
    system.clone.snapshot(store, miscounted)
    manifest = orjson.loads((miscounted / "manifest.json").read_bytes())
    (miscounted / "manifest.json").write_bytes(orjson.dumps({**manifest, "record_count": 4}))
    assert rejected(miscounted) == "record_count_mismatch"
    # another system's package
    other = tmp_path / "other"
    system.clone.snapshot(store, other)
    (other / "manifest.json").write_bytes(orjson.dumps({**manifest, "format": "something-else"}))
    assert rejected(other) == "format"
    # the record file is gone
    missing = tmp_path / "missing"
    system.clone.snapshot(store, missing)
    (missing / "records.jsonl").unlink()
    assert rejected(missing) == "missing_file"


def test_a_query_without_a_word_token_has_no_hits(tmp_path: Path) -> None:
    """`???` or an empty question raised IndexError inside bm25s."""
    store = get_system("bm25").open_store(tmp_path / "s")
    store.ingest(DOCS)
    for query in ("???", "", "  ", "!?-"):
        assert store.search(query, 3) == []
        assert store.lexical_matches(query) == ("BM25", [])


def test_memories_without_a_word_token_do_not_break_the_store(tmp_path: Path) -> None:
    """A scope whose memories have no token raised ValueError at ingest; now every record
    scores 0 (ties by id), and token-less memories beside others score 0."""
    bare = get_system("bm25").open_store(tmp_path / "bare")
    assert bare.ingest([StoreRecord("m2", "p", "???"), StoreRecord("m1", "p", "!!")]) == 2
    assert [(h.memory_id, h.score) for h in bare.search("apple", 5)] == [("m1", 0.0), ("m2", 0.0)]
    assert bare.lexical_matches("apple") == ("BM25", [])
    assert bare.search("???", 5) == []
    mixed = get_system("bm25").open_store(tmp_path / "mixed")
    mixed.ingest([*DOCS, StoreRecord("m0", "p", "...")])
    assert [h.memory_id for h in mixed.search("durian", 4)] == ["m3", "m0", "m1", "m2"]
    reopened = get_system("bm25").attach(tmp_path / "bare")
    assert reopened.count() == 2 and len(reopened.search("x", 5)) == 2


def test_the_fixture_suite_runs_bm25_with_a_token_less_query(tmp_path: Path) -> None:
    """End to end: a fixture query `???` (which the fixture reader accepts) is searched
    with no hits and scored as a miss, instead of a traceback."""
    from click.testing import CliRunner

    from recallbench.cli.main import main

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "retrieval"
    lines = (root / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    first = orjson.loads(lines[0])
    first["query"] = "???"
    lines[0] = orjson.dumps(first).decode()
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build = tmp_path / "build"
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(build), "-q", "run", "--corpus", str(root / "corpus.jsonl")]
        + ["--queries", str(queries), "--system", "bm25"],
    )
    assert result.exit_code == 0, result.output
    runs = orjson.loads((build / "runs.json").read_bytes())["data"]["queries"]
    row = next(q for q in runs if q["query_id"] == first["query_id"])
    assert row["hits"] == []
