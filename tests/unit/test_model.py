"""The model's scope serialization and its one level-ranking rule, and `search_scope`
using that rule on a real system (bm25) through the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.core.model import Memory, Query, Scope, level_firsts, level_ranking
from recallbench.engine import workerstate
from recallbench.stages.query import search_scope


def conversation() -> Scope:
    """Turns of two sessions; one stored memory stands for two identical turns."""
    memories = (
        Memory("t1", "the cat sat on the mat", {"turn": ("D1:1",), "session": ("D1",)}),
        Memory("t2", "dogs chase cats in the park", {"turn": ("D1:2",), "session": ("D1",)}),
        Memory("t3", "a cat and a dog share a mat", {"turn": ("D2:1", "D2:2"), "session": ("D2",)}),
        Memory("t4", "rain fell on the city all day", {"turn": ("D2:3",), "session": ("D2",)}),
    )
    queries = (
        Query("q1", "cat", "where did the cat sit on the mat", {"session": {"D2": 3}}),
        Query("q2", "rain", "rain in the city", {"turn": {"D2:3": 2}, "session": {"D2": 2}}),
        Query("q3", "miss", "rain over the city", {"turn": {"D1:2": 2}}),
    )
    return Scope("conv-1", memories, queries)


def test_a_scope_round_trips_through_plain_data_and_slices_its_queries() -> None:
    scope = conversation()
    raw = scope.to_dict()
    assert raw["scope_id"] == "conv-1" and [m["memory_id"] for m in raw["memories"]] == [
        "t1",
        "t2",
        "t3",
        "t4",
    ]
    assert Scope.from_dict(raw) == scope
    sliced = Scope.from_dict(raw, (1, 2))
    assert [q.query_id for q in sliced.queries] == ["q2"] and sliced.memories == scope.memories
    assert Scope.from_dict(raw, (0, 0)).queries == ()


def test_level_ranking_keeps_first_appearances_with_their_first_holder() -> None:
    memories = conversation().memory_by_id()
    ranked = ["t3", "t1", "t4", "t2"]
    assert level_firsts(ranked, memories, "session") == {"D2": 0, "D1": 1}
    assert level_firsts(ranked, memories, "turn") == {
        "D2:1": 0,
        "D2:2": 0,
        "D1:1": 1,
        "D2:3": 2,
        "D1:2": 3,
    }
    assert level_ranking(ranked, memories, "session") == ["D2", "D1"]
    assert level_ranking(ranked, memories, "memory") == []  # a level no memory holds
    assert level_ranking([], memories, "session") == []


@pytest.fixture
def bm25_worker():
    workerstate.init_worker({"system": "bm25", "cache": None})
    try:
        yield
    finally:
        workerstate.close_worker()


def test_search_scope_ranks_each_level_by_first_holder(bm25_worker, tmp_path: Path) -> None:
    """Each level's ranking is `level_ranking` of the hits, cut at top-k, each id with the
    score of the first hit that holds it; a missed relevant id is explained."""
    scope = conversation()
    store, _ = workerstate.build_store(scope, tmp_path / "store")
    try:
        rows, latencies = search_scope(store, scope, ["turn", "session"], 2, 1)
    finally:
        workerstate.close(store, "test")
    memories = scope.memory_by_id()
    assert [r["query_id"] for r in rows] == ["q1", "q2", "q3"]
    assert set(latencies) == {"q1", "q2", "q3"}
    for row in rows:
        ids = [h["memory_id"] for h in row["hits"]]
        scores = {h["memory_id"]: h["score"] for h in row["hits"]}
        for level in ("turn", "session"):
            firsts = level_firsts(ids, memories, level)
            ranking = row["levels"][level]["ranking"]
            assert ranking == level_ranking(ids, memories, level)[:2]
            assert len(ranking) == 2  # widened until each level has top-k ids
            assert row["levels"][level]["scores"] == [scores[ids[firsts[u]]] for u in ranking]
    assert rows[0]["levels"]["session"]["gold"] == {"D2": 3}
    assert "turn" not in rows[1]["missed"]  # q2's rain turn is ranked
    # q3 asks for rain; its gold turn is about dogs: missed, and explained
    (entry,) = rows[2]["missed"]["turn"]
    assert entry["id"] == "D1:2" and entry["grade"] == 2 and entry["identifier"] == "default"
    assert entry["id"] not in rows[2]["levels"]["turn"]["ranking"]
    assert entry["rank"] is None or entry["rank"] > 2
    assert entry["of"] >= 2
