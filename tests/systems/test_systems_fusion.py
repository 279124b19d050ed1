"""Reciprocal rank fusion: sums against hand-computed values, ties, depth, composition."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.systems import get_system
from recallbench.systems.base import Hit, StoreRecord, TimedCalls
from recallbench.systems.fusion import FusionSystem, rrf, rrf_system


def test_rrf_sums_match_hand_computed_values() -> None:
    # child 1 ranks a, b, c; child 2 ranks c, a, d; k = 25
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]], k=25)
    expected = {
        "a": Fraction(1, 26) + Fraction(1, 27),  # rank 1 and rank 2
        "b": Fraction(1, 27),  # rank 2 in child 1 only
        "c": Fraction(1, 28) + Fraction(1, 26),  # rank 3 and rank 1
        "d": Fraction(1, 28),  # rank 3 in child 2 only
    }
    assert [d for d, _ in fused] == ["a", "c", "b", "d"]
    for d, score in fused:
        assert score == pytest.approx(float(expected[d]), abs=1e-15)
    assert dict(fused)["a"] == pytest.approx(0.075498575498, abs=1e-12)


def test_equal_rank_patterns_tie_exactly_and_fall_to_the_id() -> None:
    # x: ranks 2, 1, 3; y: ranks 1, 3, 2; w: ranks 3, 2, 1 -> the same terms, other orders
    fused = rrf([["y", "x", "w"], ["x", "w", "y"], ["w", "y", "x"]], k=60)
    scores = dict(fused)
    assert scores["w"] == scores["x"] == scores["y"]  # bit-identical, not just close
    assert scores["x"] == pytest.approx(float(Fraction(1, 61) + Fraction(1, 62) + Fraction(1, 63)))
    assert [d for d, _ in fused] == ["w", "x", "y"]
    assert [d for d, _ in rrf([["b", "a"], ["a", "b"]], k=25)] == ["a", "b"]


class _Fixed(TimedCalls):
    """A stub child that returns a fixed ranking (ids only), recording the depth asked."""

    clone = None
    embedder = None
    lexical = False

    def __init__(self, name: str, ranking: list[str]) -> None:
        self.name = name
        self.ranking = ranking
        self.asked: list[int] = []

    def configuration(self) -> dict:
        return {"ranking": self.ranking}

    def open_store(self, directory: Path, *, vectors=None):
        Path(directory).mkdir(parents=True)
        return _FixedStore(self)

    def attach(self, directory: Path):
        return _FixedStore(self)


class _FixedStore:
    def __init__(self, system: _Fixed) -> None:
        self.system = system
        self.n = 0

    def ingest(self, records):
        self.n += len(records)
        return self.n

    def search(self, query: str, top_k: int) -> list[Hit]:
        self.system.asked.append(top_k)
        return [Hit(d, 0.0, "i") for d in self.system.ranking[:top_k]]

    def count(self) -> int:
        return self.n

    def digest(self) -> str:
        return "0" * 64

    def close(self) -> None:
        pass


def test_fusion_system_scores_depth_and_configuration(tmp_path: Path) -> None:
    one = _Fixed("one", ["a", "b", "c", "d"])
    two = _Fixed("two", ["d", "c", "e"])
    fusion = FusionSystem("f", [one, two], k=10, depth={"one": 2, "two": 3})
    store = fusion.open_store(tmp_path / "s")
    assert store.ingest([StoreRecord(x, "i", x) for x in "abcde"]) == 5
    hits = store.search("q", 2)
    assert one.asked == [2] and two.asked == [3]  # each child read to its depth
    # one: a@1 b@2; two: d@1 c@2 e@3 -> a = d = 1/11, b = c = 1/12, e = 1/13
    assert [(h.memory_id, h.score) for h in hits] == [("a", 1 / 11), ("d", 1 / 11)]
    # top_k 10 > depths: both children read to 10, so `one` now also ranks c@3 and d@4
    # d = 1/14 + 1/11, c = 1/13 + 1/12, a = 1/11, b = 1/12, e = 1/13
    assert [h.memory_id for h in store.search("q", 10)] == ["d", "c", "a", "b", "e"]
    assert one.asked[-1] == two.asked[-1] == 10  # never shallower than top_k
    config = fusion.configuration()
    assert config["k"] == 10
    assert config["depth"] == {"one": 2, "two": 3}
    assert config["children"] == {"one": {"ranking": one.ranking}, "two": {"ranking": two.ranking}}
    assert fusion.clone is None and fusion.embedder is None and fusion.lexical is False


def test_fusion_refuses_bad_children() -> None:
    with pytest.raises(RecallbenchError, match="two or more distinct"):
        FusionSystem("f", [_Fixed("one", []), _Fixed("one", [])])
    with pytest.raises(RecallbenchError, match="k must be positive"):
        FusionSystem("f", [_Fixed("one", []), _Fixed("two", [])], k=0)


def test_hybrid_rrf_is_bm25_plus_minilm_with_k_25() -> None:
    system = get_system("hybrid-rrf")
    config = system.configuration()
    assert config["k"] == 25
    assert list(config["children"]) == ["bm25", "minilm"]
    assert config["recency_weight"] == 0
    assert "not vipune" in config["recipe"] and "bm25 + minilm" in config["recipe"]
    assert system.embedder.identity() == get_system("minilm").embedder.identity()


def test_a_fusion_of_core_systems_composes_their_clone_paths(tmp_path: Path) -> None:
    system = rrf_system("hm-bm25", ["hotmem", "bm25"], k=60, depth=20)
    assert system.clone is not None and system.lexical
    assert system.embedder.identity() == "hotmem-hash-v1@64"
    store = system.open_store(tmp_path / "s")
    store.ingest([StoreRecord(f"m{i}", "d", f"note {i} about apples") for i in range(5)])
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["bm25", "fusion.json", "hotmem"]
    system.clone.snapshot(store, tmp_path / "pkg")
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == [
        "bm25",
        "hotmem",
        "manifest.json",
    ]
    names = [c.name for c in system.clone.corruptions(tmp_path / "pkg", tmp_path / "bad")]
    assert names == [
        "raw_byte:hotmem",
        "stale_manifest:hotmem",
        "raw_byte:bm25",
        "stale_manifest:bm25",
    ]
    matcher, matched = store.lexical_matches("apples")
    assert matcher == "FTS5 (hotmem) + BM25 (bm25)"
    assert matched == [f"m{i}" for i in range(5)]
