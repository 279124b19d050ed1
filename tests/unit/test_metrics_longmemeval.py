"""Official LongMemEval metrics re-implemented: hand calculations, quirks, no-gold cases, and
the conversational measures (recall, recall_any, recall_all, ndcg_any) built on them."""

from __future__ import annotations

import math

import pytest

from recallbench.core.model import Level
from recallbench.datasets.base import family_measures
from recallbench.datasets.longmemeval.reader import _levels as lme_levels
from recallbench.metrics import longmemeval as om
from recallbench.metrics.arithmetic import recall_at_k
from recallbench.metrics.measures import (
    NDCGAny,
    Recall,
    RecallAll,
    RecallAny,
    aggregate,
    conversational_measures,
    per_query_value,
)


def test_dcg_rank_one_and_two_are_both_undiscounted() -> None:
    assert om.dcg([1, 1], 2) == 2.0  # textbook DCG would give 1 + 1/log2(3)
    assert om.dcg([0, 1], 2) == 1.0  # rank 2 discount is log2(2) = 1
    assert om.dcg([0, 0, 1], 3) == pytest.approx(1 / math.log2(3))  # rank 3: log2(3)
    assert om.dcg([0, 0, 0, 1], 4) == pytest.approx(0.5)  # rank 4: log2(4)
    assert om.dcg([1, 1, 1], 2) == 2.0  # cut at k
    assert om.dcg([], 10) == 0.0


def test_ndcg_hand_calculation() -> None:
    corpus = ["x", "a", "y", "b", "z"]
    ranking = [0, 1, 2, 3, 4]  # x a y b z
    # rel = [0, 1, 0, 1]: DCG = 0 + 1/log2(2) + 0 + 1/log2(4) = 1.5; IDCG = 1 + 1 = 2
    assert om.ndcg(ranking, {"a", "b"}, corpus, k=4) == pytest.approx(0.75)
    # k = 2: DCG = 1, IDCG = 2
    assert om.ndcg(ranking, {"a", "b"}, corpus, k=2) == pytest.approx(0.5)
    # gold at rank 2 alone scores a perfect 1.0 at k=2 with the official discount
    assert om.ndcg([1, 0], {"a"}, corpus, k=2) == 1.0
    assert om.ndcg([0, 1], {"a"}, corpus, k=2) == 1.0  # rank 2 == rank 1: the quirk


def test_ideal_dcg_counts_only_gold_in_the_corpus() -> None:
    corpus = ["a", "x"]
    # "b" is gold but not in the corpus: IDCG = 1 (only "a"), so a at rank 1 is perfect
    assert om.ndcg([0, 1], {"a", "b"}, corpus, k=2) == 1.0


def test_recall_any_all_hand_calculation() -> None:
    corpus = ["x", "a", "y", "b"]
    assert om.evaluate_retrieval([0, 1, 2, 3], {"a", "b"}, corpus, k=1) == (0.0, 0.0, 0.0)
    any_, all_, ndcg = om.evaluate_retrieval([0, 1, 2, 3], {"a", "b"}, corpus, k=2)
    assert (any_, all_) == (1.0, 0.0) and ndcg == pytest.approx(0.5)
    any_, all_, _ = om.evaluate_retrieval([0, 1, 2, 3], {"a", "b"}, corpus, k=4)
    assert (any_, all_) == (1.0, 1.0)


def test_no_gold_behaviour_is_the_official_one() -> None:
    # any([]) = 0, all([]) = 1, IDCG = 0 -> nDCG 0
    assert om.evaluate_retrieval([0, 1], set(), ["x", "y"], k=2) == (0.0, 1.0, 0.0)
    assert om.evaluate_ids(["x", "y"], [], k=2) == (0.0, 1.0, 0.0)
    assert om.recall_fraction(["x"], [], 1) is None


def test_evaluate_ids_equals_index_form() -> None:
    corpus = ["s1", "s2", "s3", "s4", "s5"]
    ranked = ["s3", "s1", "s5", "s2", "s4"]
    gold = {"s1", "s4"}
    for k in (1, 2, 3, 5):
        by_index = om.evaluate_retrieval([corpus.index(s) for s in ranked], gold, corpus, k)
        assert om.evaluate_ids(ranked, gold, k, corpus=corpus) == by_index
        assert om.evaluate_ids(ranked, gold, k) == by_index  # corpus = ranked + gold
    with pytest.raises(ValueError, match="not in the corpus"):
        om.evaluate_ids(["zz"], gold, 1, corpus=corpus)


def test_fractional_recall_sits_between_any_and_all() -> None:
    ranked = ["a", "x", "y", "b", "c"]
    gold = ["a", "b", "c"]
    assert om.recall_fraction(ranked, gold, 1) == pytest.approx(1 / 3)
    assert om.recall_fraction(ranked, gold, 4) == pytest.approx(2 / 3)
    assert om.recall_fraction(ranked, gold, 5) == 1.0
    # same as the project's recall_at_k with gold graded relevant
    ratio = recall_at_k(ranked, {g: 2 for g in gold}, 4)
    assert ratio is not None and ratio.value == pytest.approx(2 / 3)


def test_measures_on_one_ranking() -> None:
    """What the score stage computes per query (the retired `longmemeval run` command's question_metrics row)."""
    ranking, grades = ["x", "a", "y", "b"], {"a": 2, "b": 2}
    recall5 = Recall("session", 5)(ranking, grades)
    assert recall5.value == 1.0 and recall5.numerator == 2  # both gold sessions found
    assert Recall("session", 1)(ranking, grades).value == 0.0
    assert RecallAny("session", 1)(ranking, grades) == 0.0
    assert RecallAny("session", 5)(ranking, grades) == 1.0
    assert RecallAll("session", 5)(ranking, grades) == 1.0
    assert RecallAll("session", 2)(ranking, grades) == 0.0
    assert NDCGAny("session", 5)(ranking, grades) == pytest.approx(0.75)
    for k in (1, 2, 3, 4):
        official = om.evaluate_ids(ranking, ["a", "b"], k)
        values = [m("session", k)(ranking, grades) for m in (RecallAny, RecallAll, NDCGAny)]
        assert tuple(values) == official
        assert Recall("session", k)(ranking, grades).value == om.recall_fraction(
            ranking, ["a", "b"], k
        )
    # no gold: not applicable (None), never the official 0 / 1 / 0
    assert [m("session", 5)(ranking, {}) for m in (Recall, RecallAny, RecallAll, NDCGAny)] == [
        None
    ] * 4


def test_conversational_measure_names_and_cutoffs() -> None:
    levels = [Level("session"), Level("turn", "turn_")]
    names = [m.name for m in conversational_measures(10, levels)]
    assert names[:4] == ["recall@1", "recall_any@1", "recall_all@1", "ndcg_any@1"]
    assert len(names) == 2 * 3 * 4 and names[12:16] == [
        "turn_recall@1",
        "turn_recall_any@1",
        "turn_recall_all@1",
        "turn_ndcg_any@1",
    ]
    assert {m.k for m in conversational_measures(5, levels)} == {1, 5}
    # the run's own top-k is always a cutoff too: nothing between 1 and top-k goes unscored
    assert {m.k for m in conversational_measures(3, levels)} == {1, 3}
    for unit, expected in (("session", names[:12]), ("turn", names)):
        levels = lme_levels(unit, "answer_session_ids")
        chosen = family_measures("longmemeval", levels, 10, None, {"unit": unit})
        assert [m.name for m in chosen] == expected


def test_aggregate_cells() -> None:
    ranking = ["x", "a", "y", "b"]
    per_query = [
        per_query_value(Recall("session", 1)(ranking, grades))
        for grades in ({"a": 2, "b": 2}, {"x": 2}, {"x": 2, "q": 2, "r": 2})
    ]
    cell = aggregate(Recall("session", 1), per_query + [None])
    # mean of (0, 1, 1/3) over 3 applicable queries; pooled: 2 of 6 gold ids found
    assert cell["value"] == pytest.approx(4 / 9)
    assert (cell["denominator"], cell["queries"], cell["not_applicable"]) == (3, 3, 1)
    assert cell["pooled"] == {"numerator": 2, "denominator": 6}
    any_cell = aggregate(RecallAny("session", 1), [0.0, 1.0, 1.0])
    assert any_cell["value"] == pytest.approx(2 / 3) and any_cell["pooled"] is None
