"""Measures as named objects: each class by hand, the one aggregate cell shape, the measure
sets datasets declare, rankings at a level, and parity with trec_eval (pytrec_eval)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import pytrec_eval

from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Level, Memory, level_ranking
from recallbench.datasets.base import DATASETS, family_measures
from recallbench.datasets.fixtures import reader as fixtures
from recallbench.metrics.arithmetic import Ratio
from recallbench.metrics.measures import (
    FIXTURE_DUPLICATES,
    FIXTURE_NO_ANSWER,
    MEASURE_CLASSES,
    NDCG,
    DuplicateSlotRate,
    FalsePositiveRate,
    Measure,
    NDCGAny,
    NDCGAnyTurn2Session,
    Recall,
    RecallAll,
    RecallAny,
    ReciprocalRank,
    SessionsOfTopTurnsAll,
    SessionsOfTopTurnsAny,
    aggregate,
    conversational_measures,
    from_record,
    parse,
    per_query_value,
    preferred_measures,
    select,
    value_of,
)
from recallbench.report.trec import trec_files
from recallbench.stages.score import aggregate_rows, score_rows, suite_measures

# Relevant (grade >= 2): a, b, e -> |R| = 3; c (grade 1) is partially relevant only.
GRADES = {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2}
# rank:    1    2    3    4    5    6
RANKED = ["d", "c", "b", "x", "a", "e"]
LOG2_3 = math.log2(3)
L = "memory"


# --- names, stems, flags ------------------------------------------------------------------


def test_every_measure_class_is_listed_with_its_stem_and_definition() -> None:
    assert list(MEASURE_CLASSES) == [
        Recall,
        RecallAny,
        RecallAll,
        ReciprocalRank,
        NDCG,
        NDCGAny,
        SessionsOfTopTurnsAny,
        SessionsOfTopTurnsAll,
        FalsePositiveRate,
        DuplicateSlotRate,
    ]
    stems = [cls.stem for cls in MEASURE_CLASSES]
    assert stems == [
        "recall",
        "recall_any",
        "recall_all",
        "mrr",
        "ndcg",
        "ndcg_any",
        "sessions_any",
        "sessions_all",
        "fp_rate",
        "duplicate_slot_rate",
    ]
    assert [cls.pooled for cls in MEASURE_CLASSES] == [False] * 8 + [True] * 2
    for cls in MEASURE_CLASSES:
        assert cls.definition and "\n" not in cls.definition, cls
        assert cls.__doc__ and "@k" in cls.__doc__, cls  # the formula is in the docstring


def test_names_carry_the_level_prefix_and_the_cutoff() -> None:
    assert Recall("session", 5).name == "recall@5"
    assert Recall("turn", 10, "turn_").name == "turn_recall@10"
    assert NDCGAny("turn", 1, "turn_").name == "turn_ndcg_any@1"
    assert DuplicateSlotRate(L, 5).name == "duplicate_slot_rate@5"
    assert ReciprocalRank(L, 3).name == "mrr@3"


def test_the_base_class_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        Measure(L, 5)(["a"], {"a": 2})


# --- each measure by hand ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (1, Ratio(0, 3)),  # [d]
        (3, Ratio(1, 3)),  # [d, c, b]: b; c is grade 1, not relevant
        (5, Ratio(2, 3)),  # + a
        (6, Ratio(3, 3)),  # + e
        (50, Ratio(3, 3)),  # k beyond the list: what was returned
    ],
)
def test_recall(k: int, expected: Ratio) -> None:
    assert Recall(L, k)(RANKED, GRADES) == expected


@pytest.mark.parametrize(("k", "expected"), [(1, 0), (2, 0), (3, 1), (50, 1)])
def test_recall_any(k: int, expected: int) -> None:
    # the first relevant id (b) is at rank 3
    assert RecallAny(L, k)(RANKED, GRADES) == expected


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (5, 0.0), (6, 1.0), (50, 1.0)])
def test_recall_all(k: int, expected: float) -> None:
    # a, b and e are all in the top k only from k = 6 on (e is at rank 6)
    assert RecallAll(L, k)(RANKED, GRADES) == expected


def test_recall_all_is_one_when_every_relevant_id_is_in_and_grade_one_is_not_needed() -> None:
    # R = {a, b}; c (grade 1) is not in the top 2 and not required
    assert RecallAll(L, 2)(["b", "a", "c"], {"a": 3, "b": 2, "c": 1}) == 1.0
    assert RecallAll(L, 1)(["b", "a", "c"], {"a": 3, "b": 2, "c": 1}) == 0.0


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (2, 0.0), (3, 1 / 3), (50, 1 / 3)])
def test_reciprocal_rank(k: int, expected: float) -> None:
    assert ReciprocalRank(L, k)(RANKED, GRADES) == expected


def test_ndcg_hand_calculated() -> None:
    # top-3 grades [0, 1, 2]: DCG@3 = 0 + 1/log2(3) + 2/log2(4) = 1/log2(3) + 1
    # ideal over every graded id [3, 2, 2, 1] cut at 3: IDCG@3 = 3 + 2/log2(3) + 2/2
    expected = (1 / LOG2_3 + 1) / (4 + 2 / LOG2_3)
    assert NDCG(L, 3)(RANKED, GRADES) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.3099531, abs=1e-7)
    # the ideal counts an id that was never retrieved: b (2) alone at rank 1, a (3) exists
    assert NDCG(L, 1)(["b"], {"a": 3, "b": 2}) == pytest.approx(2 / 3, abs=1e-12)


def test_ndcg_any_ranks_one_and_two_are_both_undiscounted() -> None:
    """LongMemEval's eval_utils.py: DCG = rel[0] + sum_{i>=1} rel[i] / log2(i + 1)."""
    gold = {"a": 2}
    # gold at rank 2: official DCG = 0 + 1/log2(2) = 1 = IDCG -> a perfect 1.0 ...
    assert NDCGAny(L, 2)(["x", "a"], gold) == 1.0
    assert NDCGAny(L, 2)(["a", "x"], gold) == 1.0  # ... the same as at rank 1
    # ... where the textbook nDCG discounts rank 2 by 1/log2(3)
    assert NDCG(L, 2)(["x", "a"], gold) == pytest.approx(1 / LOG2_3, abs=1e-12)
    # rank 3 is discounted by 1/log2(3), rank 4 by 1/log2(4) = 1/2
    assert NDCGAny(L, 3)(["x", "y", "a"], gold) == pytest.approx(1 / LOG2_3, abs=1e-12)
    # two gold ids at ranks 3 and 4: DCG = 1/log2(3) + 1/2; IDCG = 1 + 1 = 2
    two = {"a": 3, "b": 2}
    assert NDCGAny(L, 4)(["x", "y", "a", "b"], two) == pytest.approx(
        (1 / LOG2_3 + 0.5) / 2, abs=1e-12
    )
    # cut at 2 with one of two gold ids inside: DCG = 0 + 1 = 1, IDCG = 2
    assert NDCGAny(L, 2)(["x", "a", "b"], two) == 0.5


def test_ndcg_any_is_binary_over_grade_two_and_up() -> None:
    # c (grade 1) is not gold for ndcg_any; a (3) counts as 1, not 3
    grades = {"a": 3, "c": 1}
    assert NDCGAny(L, 2)(["c", "a"], grades) == 1.0
    assert NDCGAny(L, 1)(["c", "a"], grades) == 0.0
    # the graded nDCG does count c: DCG@1 = 1, IDCG@1 = 3
    assert NDCG(L, 1)(["c", "a"], grades) == pytest.approx(1 / 3, abs=1e-12)


# Turn ids of sessions D1..D5; the gold turns D1:2 and D3:1 make the gold sessions {D1, D3}.
TURNS = ["D2:1", "D2:3", "D1:4", "D5:1", "D3:2", "D1:2"]
TURN_GOLD = {"D1:2": 2, "D3:1": 2, "D4:1": 1}  # D4:1 (grade 1) is not gold, nor D4


@pytest.mark.parametrize(
    ("k", "sessions", "any_gold", "all_gold"),
    [
        (1, {"D2"}, 0.0, 0.0),  # [D2:1]
        (2, {"D2"}, 0.0, 0.0),  # [D2:1, D2:3]: two turns, one session
        (3, {"D2", "D1"}, 1.0, 0.0),  # + D1:4: D1 is a gold session, though D1:4 is no gold turn
        (4, {"D2", "D1", "D5"}, 1.0, 0.0),
        (5, {"D2", "D1", "D5", "D3"}, 1.0, 1.0),  # + D3:2: D3 too
        (50, {"D2", "D1", "D5", "D3"}, 1.0, 1.0),  # k beyond the list: what was returned
    ],
)
def test_sessions_of_the_top_k_turns(k: int, sessions: set, any_gold: float, all_gold: float):
    """k counts turns: the sessions of the top k turns (hand-listed in `sessions`)."""
    from recallbench.metrics.arithmetic import sessions_of_top_turns

    assert sessions_of_top_turns(TURNS, TURN_GOLD, k) == ({"D1", "D3"}, sessions)
    assert SessionsOfTopTurnsAny("turn", k, "turn_")(TURNS, TURN_GOLD) == any_gold
    assert SessionsOfTopTurnsAll("turn", k, "turn_")(TURNS, TURN_GOLD) == all_gold


def test_sessions_of_top_turns_count_turns_where_recall_any_counts_sessions() -> None:
    """The same turn ranking at k = 2: two turns hold one session (no gold one); the first
    two distinct sessions (the session ranking a turn run yields) hold D1."""
    from recallbench.core.model import level_ranking

    memories = {t: Memory(t, t, {"turn": (t,), "session": (t.split(":")[0],)}) for t in TURNS}
    session_ranking = level_ranking(TURNS, memories, "session")
    assert session_ranking == ["D2", "D1", "D5", "D3"]
    assert RecallAny("session", 2)(session_ranking, {"D1": 2, "D3": 2}) == 1
    assert SessionsOfTopTurnsAny("turn", 2, "turn_")(TURNS, TURN_GOLD) == 0.0
    # the turns themselves: no gold turn in the top 5 (turn_recall_any), a gold session in 3
    assert RecallAny("turn", 5, "turn_")(TURNS, TURN_GOLD) == 0
    assert SessionsOfTopTurnsAny("turn", 3, "turn_")(TURNS, TURN_GOLD) == 1.0


def test_sessions_of_top_turns_read_longmemeval_turn_ids_and_refuse_session_ids() -> None:
    from recallbench.core.errors import RecallbenchError
    from recallbench.metrics.arithmetic import turn_session

    assert turn_session("D12:30") == "D12"
    assert turn_session("answer_bf633415_abs_2_5") == "answer_bf633415_abs_2"
    assert turn_session("sharegpt_x1_3_11") == "sharegpt_x1_3"
    ranking = ["s1_3", "answer_ab_2_1", "s2_1"]
    gold = {"answer_ab_1_1": 2, "answer_ab_2_3": 2}  # sessions answer_ab_1, answer_ab_2
    assert SessionsOfTopTurnsAny("turn", 2, "turn_")(ranking, gold) == 1.0
    assert SessionsOfTopTurnsAll("turn", 3, "turn_")(ranking, gold) == 0.0
    assert SessionsOfTopTurnsAny("turn", 5, "turn_")(ranking, {}) is None  # no gold turn
    assert SessionsOfTopTurnsAll("turn", 5, "turn_")(ranking, {"s1_3": 1}) is None
    with pytest.raises(RecallbenchError, match=r"turn_sessions_any@5 reads a turn ranking: 'D3'"):
        SessionsOfTopTurnsAny("turn", 5, "turn_")(["D3", "D1"], {"D1:1": 2})
    # a session level's ids are no turns: a LongMemEval session id read as a turn of a
    # shorter one gave 1.0 where recall_any@1 gives 0; the measure is refused there
    for stem in ("sessions_any", "sessions_all"):
        with pytest.raises(RecallbenchError, match=f"measure {stem} reads a turn ranking"):
            parse(f"{stem}@1", [Level("session", "")])


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (1, Ratio(1, 1)),  # [d]: grade 0
        (2, Ratio(1, 2)),  # [d, c]: c is grade 1, not a false positive
        (4, Ratio(2, 4)),  # [d, c, b, x]: d and x (unjudged = 0)
        (50, Ratio(2, 6)),  # denominator: the returned slots, not k
    ],
)
def test_false_positive_rate(k: int, expected: Ratio) -> None:
    assert FalsePositiveRate(L, k)(RANKED, GRADES) == expected


def test_duplicate_slot_rate() -> None:
    groups = {"a": "g1", "b": "g1", "e": "g1", "c": "g2", "d": "g2"}
    ranked = ["a", "b", "x", "c", "e", "d", "y"]
    # b and e repeat g1; x is its own group; c is the first of g2
    assert DuplicateSlotRate(L, 5)(ranked, {}, groups) == Ratio(2, 5)
    assert DuplicateSlotRate(L, 7)(ranked, {}, groups) == Ratio(3, 7)  # + d repeats g2
    # without groups every id is its own group
    assert DuplicateSlotRate(L, 7)(ranked, {}) == Ratio(0, 7)
    assert DuplicateSlotRate(L, 7)(ranked, {}, None) == Ratio(0, 7)


@pytest.mark.parametrize("grades", [{}, {"d": 0}, {"c": 1}])
def test_nothing_relevant_is_not_applicable(grades: dict[str, int]) -> None:
    ranked = ["c", "d"]
    for cls in (Recall, RecallAny, RecallAll, ReciprocalRank, NDCGAny):
        assert cls(L, 5)(ranked, grades) is None, cls
    # the graded nDCG is applicable once anything is graded above 0
    assert (NDCG(L, 5)(ranked, grades) is None) == (not any(grades.values()))
    # slot rates are defined for every query
    assert FalsePositiveRate(L, 5)(ranked, grades).denominator == 2
    assert DuplicateSlotRate(L, 5)(ranked, grades) == Ratio(0, 2)


def test_nothing_returned() -> None:
    assert Recall(L, 5)([], GRADES) == Ratio(0, 3)
    assert RecallAny(L, 5)([], GRADES) == 0
    assert RecallAll(L, 5)([], GRADES) == 0.0
    assert ReciprocalRank(L, 5)([], GRADES) == 0.0
    assert NDCG(L, 5)([], GRADES) == 0.0
    assert NDCGAny(L, 5)([], GRADES) == 0.0
    assert FalsePositiveRate(L, 5)([], GRADES) == Ratio(0, 0)


# --- category restriction -------------------------------------------------------------------


def test_applies_to_restricts_by_category() -> None:
    fp = FalsePositiveRate(L, 5, categories=frozenset({"negative"}))
    assert fp.applies_to("negative")
    assert not fp.applies_to("exact")
    assert Recall(L, 5).applies_to("anything")


def _row(qid: str, category: str, ranking: list[str], gold: dict[str, int], groups=None) -> dict:
    groups = groups or {}
    return {
        "query_id": qid,
        "scope_id": "s",
        "category": category,
        "hits": [{"memory_id": m, "group": groups.get(m)} for m in ranking],
        "levels": {L: {"ranking": ranking, "scores": [1.0] * len(ranking), "gold": gold}},
        "missed": {L: [{"id": m} for m in sorted(set(gold) - set(ranking)) if gold[m] >= 2]},
    }


def test_score_rows_gives_none_outside_a_measures_categories_and_levels() -> None:
    measures = [
        Recall(L, 2),
        FalsePositiveRate(L, 2),  # by default over negative_or_no_answer
        DuplicateSlotRate(L, 2),  # by default over near_duplicate_diversity
        Recall("turn", 2, "turn_"),  # no row has the turn level
    ]
    rows = [
        _row("q1", "exact", ["a", "x"], {"a": 3, "b": 2}),
        _row("q2", "negative_or_no_answer", ["x", "y"], {}),
        _row("q3", "near_duplicate_diversity", ["a", "b"], {"a": 2, "b": 2}, {"a": "g", "b": "g"}),
    ]
    scored = score_rows(rows, measures)
    assert [r["metrics"] for r in scored] == [
        {
            "recall@2": {"numerator": 1, "denominator": 2, "value": 0.5},
            "fp_rate@2": None,  # would be 1/2 if it applied to exact queries
            "duplicate_slot_rate@2": None,
            "turn_recall@2": None,
        },
        {
            "recall@2": None,  # nothing relevant
            "fp_rate@2": {"numerator": 2, "denominator": 2, "value": 1.0},
            "duplicate_slot_rate@2": None,
            "turn_recall@2": None,
        },
        {
            "recall@2": {"numerator": 2, "denominator": 2, "value": 1.0},
            "fp_rate@2": None,
            "duplicate_slot_rate@2": {"numerator": 1, "denominator": 2, "value": 0.5},
            "turn_recall@2": None,
        },
    ]
    assert [r["missed"] for r in scored] == [["b"], [], []]
    cells = aggregate_rows(scored, measures)
    # recall: mean of 0.5 and 1.0 over the 2 queries it applies to; q2 not applicable
    assert cells["recall@2"] == {
        "value": 0.75,
        "numerator": 1.5,
        "denominator": 2,
        "queries": 2,
        "not_applicable": 1,
        "pooled": {"numerator": 3, "denominator": 4},
    }
    assert cells["fp_rate@2"]["queries"] == 1 and cells["fp_rate@2"]["not_applicable"] == 2
    assert cells["turn_recall@2"]["value"] is None and cells["turn_recall@2"]["queries"] == 0


# --- aggregate --------------------------------------------------------------------------


def test_per_query_values_keep_ratio_counts() -> None:
    assert per_query_value(Ratio(1, 4)) == {"numerator": 1, "denominator": 4, "value": 0.25}
    assert per_query_value(0.5) == 0.5
    assert per_query_value(None) is None
    assert value_of({"numerator": 1, "denominator": 4, "value": 0.25}) == 0.25
    assert value_of(0.5) == 0.5
    assert value_of(None) is None


def test_aggregate_a_mean_measure() -> None:
    # RR values 1, 1/2, 0, 1/3 and one not applicable: sum 11/6 over 4 queries = 11/24
    cell = aggregate(ReciprocalRank(L, 5), [1.0, None, 0.5, 0.0, 1 / 3])
    assert cell == {
        "value": pytest.approx(11 / 24),
        "numerator": pytest.approx(11 / 6),
        "denominator": 4,
        "queries": 4,
        "not_applicable": 1,
        "pooled": None,
    }
    assert cell["value"] == cell["numerator"] / cell["denominator"]
    # recall_any holds 0/1 integers: the mean is the hit rate, with no pooled counts
    assert aggregate(RecallAny(L, 5), [1, 0, 1, None]) == {
        "value": pytest.approx(2 / 3),
        "numerator": 2.0,
        "denominator": 3,
        "queries": 3,
        "not_applicable": 1,
        "pooled": None,
    }


def test_aggregate_recall_is_a_mean_with_the_pooled_counts_beside_it() -> None:
    values = [per_query_value(r) for r in (Ratio(1, 2), Ratio(2, 3), Ratio(0, 1), None)]
    cell = aggregate(Recall(L, 5), values)
    # mean of 1/2, 2/3, 0 = (7/6) / 3 = 7/18 ~ 0.389; pooled 3/6 = 0.5 is not the mean
    assert cell == {
        "value": pytest.approx(7 / 18),
        "numerator": pytest.approx(7 / 6),
        "denominator": 3,
        "queries": 3,
        "not_applicable": 1,
        "pooled": {"numerator": 3, "denominator": 6},
    }


def test_aggregate_a_pooled_measure_sums_slot_counts() -> None:
    values = [per_query_value(r) for r in (Ratio(2, 5), Ratio(0, 3), None, Ratio(1, 1))]
    cell = aggregate(FalsePositiveRate(L, 5), values)
    # (2 + 0 + 1) / (5 + 3 + 1) = 3/9, not the mean of ratios (0.4 + 0 + 1) / 3
    assert cell == {
        "value": 1 / 3,
        "numerator": 3,
        "denominator": 9,
        "queries": 3,
        "not_applicable": 1,
        "pooled": None,
    }


def test_aggregate_with_nothing_to_average() -> None:
    assert aggregate(NDCG(L, 5), [None, None]) == {
        "value": None,
        "numerator": 0.0,
        "denominator": 0,
        "queries": 0,
        "not_applicable": 2,
        "pooled": None,
    }
    assert aggregate(Recall(L, 5), []) == {
        "value": None,
        "numerator": 0.0,
        "denominator": 0,
        "queries": 0,
        "not_applicable": 0,
        "pooled": {"numerator": 0, "denominator": 0},
    }
    # a pooled measure whose queries returned nothing: 0 slots, value n/a, still 1 query
    empty = aggregate(DuplicateSlotRate(L, 5), [per_query_value(Ratio(0, 0))])
    assert (empty["value"], empty["numerator"], empty["denominator"], empty["queries"]) == (
        None,
        0,
        0,
        1,
    )


# --- the measure sets datasets declare ------------------------------------------------------


CONVERSATIONAL_STEMS = ("recall", "recall_any", "recall_all", "ndcg_any")


def _names(prefix: str, ks: tuple[int, ...]) -> list[str]:
    return [f"{prefix}{stem}@{k}" for k in ks for stem in CONVERSATIONAL_STEMS]


def test_conversational_measures_session_only() -> None:
    session = [Level("session")]
    at5 = conversational_measures(5, session)
    assert [m.name for m in at5] == [
        "recall@1",
        "recall_any@1",
        "recall_all@1",
        "ndcg_any@1",
        "recall@5",
        "recall_any@5",
        "recall_all@5",
        "ndcg_any@5",
    ]
    assert {m.level for m in at5} == {"session"}
    at10 = conversational_measures(10, session)
    assert [m.name for m in at10] == _names("", (1, 5, 10))
    assert [m.k for m in at10] == [1] * 4 + [5] * 4 + [10] * 4
    # cutoffs above the run's top-k are left out; the run's top-k itself is always one
    assert [m.name for m in conversational_measures(3, session)] == _names("", (1, 3))
    assert [m.name for m in conversational_measures(50, session)] == _names("", (1, 5, 10, 50))


def test_conversational_measures_session_and_turn() -> None:
    levels = [Level("session"), Level("turn", "turn_")]
    at5 = conversational_measures(5, levels)
    assert [m.name for m in at5] == _names("", (1, 5)) + _names("turn_", (1, 5))
    at10 = conversational_measures(10, levels)
    assert [m.name for m in at10] == _names("", (1, 5, 10)) + _names("turn_", (1, 5, 10))
    assert [m.level for m in at10] == ["session"] * 12 + ["turn"] * 12
    assert not any(m.pooled or m.categories for m in at10)


def fixture_measures(top_k: int) -> list[Measure]:
    """The fixture family at the fixture suite's level."""
    return family_measures("fixtures", fixtures.LEVELS, top_k)


def test_fixture_measures() -> None:
    names = [m.name for m in fixture_measures(5)]
    assert names == [
        "recall@1",
        "recall@5",
        "mrr@5",
        "ndcg@5",
        "fp_rate@5",
        "duplicate_slot_rate@5",
    ]
    # recall@1 once when k is 1
    assert [m.name for m in fixture_measures(1)] == [
        "recall@1",
        "mrr@1",
        "ndcg@1",
        "fp_rate@1",
        "duplicate_slot_rate@1",
    ]
    by_name = {m.name: m for m in fixture_measures(5)}
    assert by_name["fp_rate@5"].categories == {"negative_or_no_answer"}
    assert by_name["duplicate_slot_rate@5"].categories == {"near_duplicate_diversity"}
    assert by_name["recall@5"].categories is None


# --- a ranking at a level -------------------------------------------------------------------


def test_a_turn_ranking_yields_sessions_in_order_of_first_appearance() -> None:
    def turn(mid: str, turn_id: str) -> Memory:
        return Memory(mid, "text", {"turn": (turn_id,), "session": (turn_id.split(":")[0],)})

    memories = {
        m.memory_id: m
        for m in (
            turn("t1", "D1:1"),
            turn("t2", "D2:3"),
            turn("t3", "D1:5"),
            turn("t4", "D3:1"),
            turn("t5", "D2:4"),
        )
    }
    ranked = ["t2", "t1", "t3", "t5", "t4"]
    assert level_ranking(ranked, memories, "turn") == ["D2:3", "D1:1", "D1:5", "D2:4", "D3:1"]
    # D2 first (t2), D1 next (t1; t3 adds nothing new), D2 again is skipped (t5), then D3
    assert level_ranking(ranked, memories, "session") == ["D2", "D1", "D3"]
    # so D3, the fifth turn, is the third session: in the session top 3, not the turn top 3
    assert Recall("session", 3)(level_ranking(ranked, memories, "session"), {"D3": 2}) == Ratio(
        1, 1
    )
    assert Recall("turn", 3, "turn_")(
        level_ranking(ranked, memories, "turn"), {"D3:1": 2}
    ) == Ratio(0, 1)


def test_a_memory_standing_for_several_units_expands_to_all_of_them() -> None:
    # LongMemEval stores two identical sessions once: the memory stands for both ids
    memories = {
        "m1": Memory("m1", "same text", {"session": ("s1", "s7")}),
        "m2": Memory("m2", "other", {"session": ("s2",)}),
        "m3": Memory("m3", "no units at this level", {"memory": ("m3",)}),
    }
    assert level_ranking(["m2", "m3", "m1"], memories, "session") == ["s2", "s1", "s7"]
    assert level_ranking([], memories, "session") == []


# --- parity with trec_eval ------------------------------------------------------------------


def _random_runs(seed: int) -> dict:
    """A `runs` artifact's data at one level: random graded qrels, and rankings whose scores
    tie and even increase (only the order is meaningful)."""
    rng = random.Random(seed)
    docs = [f"m{i:03d}" for i in range(40)]
    queries = []
    for q in range(60):
        judged = rng.sample(docs, rng.randint(0, 12))
        gold = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in judged}
        pool = judged + rng.sample(docs, 6)
        ranking = list(dict.fromkeys(rng.sample(pool, min(len(pool), rng.randint(0, 12)))))
        scores = [rng.choice([0.9, 0.5, 0.5, 0.1, -0.2]) for _ in ranking]
        queries.append(
            {
                "query_id": f"s{seed}-q{q:02d}",
                "levels": {L: {"ranking": ranking, "scores": scores, "gold": gold}},
            }
        )
    return {"queries": queries}


def _trec_eval(tmp_path: Path, runs: dict, measures: set[str], name: str) -> dict:
    """Export with `trec_files`, read the files back as trec_eval would, evaluate."""
    run_path, qrels_path = tmp_path / f"{name}.run", tmp_path / f"{name}.qrels"
    files = trec_files(runs, L, "recallbench", run_path, qrels_path)
    qrels: dict[str, dict[str, int]] = {}
    for line in files[qrels_path].decode().splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for line in files[run_path].decode().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    return pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=2).evaluate(run)


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_recall_ndcg_rr_and_recall_any_equal_trec_eval(tmp_path: Path, seed: int, k: int) -> None:
    runs = _random_runs(seed)
    full = _trec_eval(tmp_path, runs, {f"recall.{k}", f"ndcg_cut.{k}", f"success.{k}"}, "full")
    # recip_rank has no cutoff in trec_eval: evaluate it on the run cut to k
    cut = {
        "queries": [
            {
                "query_id": q["query_id"],
                "levels": {
                    L: {
                        "ranking": q["levels"][L]["ranking"][:k],
                        "scores": q["levels"][L]["scores"][:k],
                        "gold": q["levels"][L]["gold"],
                    }
                },
            }
            for q in runs["queries"]
        ]
    }
    rr = _trec_eval(tmp_path, cut, {"recip_rank"}, "cut")
    compared = compared_ndcg = 0
    for q in runs["queries"]:
        qid, level = q["query_id"], q["levels"][L]
        ranking, gold = level["ranking"], level["gold"]
        ndcg = NDCG(L, k)(ranking, gold)
        recall = Recall(L, k)(ranking, gold)
        # trec_eval scores a query only when it has a positive judgement and a returned id
        if not ranking or ndcg is None:
            assert qid not in full
            continue
        assert ndcg == pytest.approx(full[qid][f"ndcg_cut_{k}"], abs=1e-9), qid
        compared_ndcg += 1
        if recall is None:  # only grade-1 ids: trec_eval says 0/0 = 0, ours not applicable
            assert full[qid][f"recall_{k}"] == 0.0
            continue
        assert recall.value == pytest.approx(full[qid][f"recall_{k}"], abs=1e-9), qid
        assert RecallAny(L, k)(ranking, gold) == full[qid][f"success_{k}"], qid
        assert ReciprocalRank(L, k)(ranking, gold) == pytest.approx(
            rr[qid]["recip_rank"], abs=1e-9
        ), qid
        compared += 1
    assert compared >= 20  # the comparison is not vacuous
    assert compared_ndcg > compared


# --- measures as values: parameters, parse, families, selection by fields -----------------


def every_produced_measure() -> list[tuple[str, list[Level], Measure]]:
    """Every measure the project produces today: each dataset's measure family for each of
    its options, top-k and cutoffs, and each preset's own, with the levels it scores."""
    from recallbench.datasets.longmemeval import reader as lme

    out = []
    for top_k in (1, 5, 10, 50):
        for m in fixture_measures(top_k):
            out.append(("fixtures", list(fixtures.LEVELS), m))
        for ks in (None, (1, 3, 5, 10, 30, 50)):
            ks = [k for k in ks if k <= top_k] if ks else None
            for unit in ("session", "turn"):
                levels = [Level("session")] + ([Level("turn", "turn_")] if unit == "turn" else [])
                for m in family_measures("locomo", levels, top_k, ks, {"unit": unit}):
                    out.append(("locomo", levels, m))
                for gold in ("answer_session_ids", "official"):
                    options = {"unit": unit, "gold": gold}
                    levels = list(lme._levels(unit, gold))
                    for m in family_measures("longmemeval", levels, top_k, ks, options):
                        out.append(("longmemeval", levels, m))
    # the presets' own measures, parsed against the levels of the suite they read
    from recallbench.commands.presets import PRESETS

    for preset in PRESETS.values():
        unit = preset.reader.get("unit", "session")
        levels = [Level("session")] + ([Level("turn", "turn_")] if unit == "turn" else [])
        for name in preset.measure_names():
            out.append((preset.dataset, levels, parse(name, levels)))
    return out


def test_every_produced_measure_round_trips_through_parse() -> None:
    produced = every_produced_measure()
    stems = {m.stem for _, _, m in produced}
    assert stems == {cls.stem for cls in MEASURE_CLASSES}  # every class is produced somewhere
    assert any(isinstance(m, NDCGAnyTurn2Session) for _, _, m in produced)
    assert any(m.empty_gold is not None for _, _, m in produced)
    assert any(m.categories for _, _, m in produced)
    for _, levels, m in produced:
        assert parse(m.spec) == m, m.spec
        assert parse(str(m)) == m
        assert from_record(m.record()) == m
        bare = parse(m.name, levels)  # a bare name: the level from its prefix
        assert (bare.name, bare.stem, bare.k, bare.prefix, bare.level, bare.rel) == (
            m.name,
            m.stem,
            m.k,
            m.prefix,
            m.level,
            m.rel,
        )


def test_names_and_specs_carry_the_parameters() -> None:
    assert Recall("session", 10, rel=3).name == "recall(rel=3)@10"
    assert Recall("session", 10, rel=3).spec == "recall(rel=3)@10"
    assert Recall("session", 10).spec == "recall@10"
    assert Recall("turn", 5, "turn_").spec == "turn_recall@5"
    m = FalsePositiveRate(L, 5, categories=frozenset({"negative_or_no_answer"}))
    assert m == FalsePositiveRate(L, 5)  # the slot rates' default categories
    assert m.name == "fp_rate@5"
    assert m.spec == "fp_rate(level=memory)@5"
    assert FalsePositiveRate(L, 5, categories=None).name == "fp_rate(categories=*)@5"
    assert RecallAll("session", 1, empty_gold=1.0).spec == "recall_all(empty_gold=1.0)@1"
    assert parse("recall(rel=3)@10") == Recall("session", 10, rel=3)
    assert parse("turn_ndcg_any@5") == NDCGAny("turn", 5, "turn_")
    assert parse("answer_ids_recall_any@1") == RecallAny("answer_ids", 1, "answer_ids_")
    assert parse(" mrr@3 ") == ReciprocalRank("session", 3)
    assert parse("recall@5", [Level("memory")]) == Recall(L, 5)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("recal@5", "is not a measure name"),
        ("recall", "is not a measure name"),
        ("recall@", "is not a measure name"),
        ("xrecall@5", "is not a measure name"),
        ("recall@0", "k must be a positive integer"),
        ("recall(rell=3)@5", "unknown parameter 'rell'"),
        ("recall(rel=three)@5", "rel='three' is not valid"),
        ("ndcg(rel=3)@5", "takes no rel"),
        ("recall(depth=5)@5", "only ndcg_any takes reads/depth"),
    ],
)
def test_a_bad_name_is_one_line_naming_it(text: str, says: str) -> None:
    from recallbench.core.errors import RecallbenchError

    with pytest.raises(RecallbenchError) as info:
        parse(text)
    message = str(info.value)
    assert says in message and "\n" not in message
    if "is not a measure name" in says:
        assert "stems: recall, recall_any, recall_all, mrr, ndcg, ndcg_any" in message


def test_a_bare_name_needs_a_level_with_its_prefix() -> None:
    from recallbench.core.errors import RecallbenchError

    with pytest.raises(RecallbenchError, match="no level with the prefix 'turn_'"):
        parse("turn_recall@5", [Level("session")])


def test_the_relevance_threshold_by_hand() -> None:
    """Grades 1, 2, 3 in one ranking: rel moves which ids are relevant, by hand."""
    grades = {"a": 3, "b": 2, "c": 1, "d": 3}
    ranking = ["c", "b", "a", "x", "d"]  # ranks 1..5; x is ungraded
    # rel=3: R = {a, d}; top 3 = c, b, a -> 1 of 2
    assert parse("recall(rel=3)@3")(ranking, grades) == Ratio(1, 2)
    # rel=2 (the default): R = {a, b, d}; top 3 holds b and a -> 2 of 3
    assert Recall("session", 3)(ranking, grades) == Ratio(2, 3)
    # rel=1: R = {a, b, c, d}; top 1 = c -> 1 of 4
    assert Recall("session", 1, rel=1)(ranking, grades) == Ratio(1, 4)
    # rel=3 at k=5: a (rank 3) and d (rank 5) -> 2 of 2
    assert Recall("session", 5, rel=3)(ranking, grades) == Ratio(2, 2)
    assert RecallAny("session", 2, rel=3)(ranking, grades) == 0  # c, b: grades 1 and 2
    assert RecallAll("session", 3, rel=3)(ranking, grades) == 0.0  # d is at rank 5
    assert RecallAll("session", 5, rel=3)(ranking, grades) == 1.0
    assert ReciprocalRank("session", 5, rel=3)(ranking, grades) == pytest.approx(1 / 3)
    assert ReciprocalRank("session", 5, rel=1)(ranking, grades) == 1.0  # c at rank 1
    # ndcg_any(rel=3)@3: binary gains [0, 0, 1], official DCG = 0 + 0/log2(2) + 1/log2(3);
    # ideal [1, 1] -> 1 + 1/log2(2) = 2
    assert NDCGAny("session", 3, rel=3)(ranking, grades) == pytest.approx((1 / LOG2_3) / 2)
    # nobody at rel=4: not applicable
    assert Recall("session", 5, rel=4)(ranking, grades) is None


def test_aggregation_is_the_measures_own() -> None:
    """Recall keeps its pooled counts beside the mean; a slot rate pools; other means do not."""
    cells = [Ratio(1, 2).to_dict(), None, Ratio(2, 3).to_dict()]
    assert Recall(L, 5).aggregate(cells)["pooled"] == {"numerator": 3, "denominator": 5}
    assert Recall(L, 5, rel=3).aggregate(cells) == aggregate(Recall(L, 5, rel=3), cells)
    assert RecallAny(L, 5).aggregate([1, 0, None])["pooled"] is None
    pooled = DuplicateSlotRate(L, 5).aggregate(cells)
    assert (pooled["numerator"], pooled["denominator"], pooled["queries"]) == (3, 5, 2)


def test_each_dataset_declares_its_family_in_its_own_package() -> None:
    """A dataset's measure family is `family` in its package's measures module (the spec
    names it); the slot rates' default categories are the fixture suite's own."""
    from recallbench.datasets.fixtures import measures as fixture_family

    assert fixture_family.NEGATIVE_CATEGORY == FIXTURE_NO_ANSWER
    assert fixture_family.DUPLICATE_CATEGORY == FIXTURE_DUPLICATES
    assert fixtures.NEGATIVE_CATEGORY == fixture_family.NEGATIVE_CATEGORY
    for name, spec in DATASETS.items():
        assert spec.measures == f"recallbench.datasets.{name}.measures:family"


def test_families_rebuild_from_the_suite_alone() -> None:
    """A family over suite.json's level records gives the measures of its Level values; the
    suite's `measure_family` names the family, else its dataset; an unknown one is one line."""
    records = [
        {"name": lv.name, "prefix": lv.prefix, "description": lv.description}
        for lv in fixtures.LEVELS
    ]
    assert family_measures("fixtures", records, 5) == fixture_measures(5)
    suite = {"dataset": "not-a-reader", "measure_family": "locomo", "options": {"unit": "turn"}}
    suite["levels"] = [{"name": "session", "prefix": ""}, {"name": "turn", "prefix": "turn_"}]
    turn = [Level("session"), Level("turn", "turn_")]
    assert suite_measures(suite, 10) == family_measures("locomo", turn, 10, None, {"unit": "turn"})
    assert [m.name for m in suite_measures(suite, 10, names=["turn_recall(rel=3)@5"])] == [
        "turn_recall(rel=3)@5"
    ]
    known = ", ".join(DATASETS)
    with pytest.raises(RecallbenchError, match=rf"^no measure family 'nope' \(known: {known}\)$"):
        suite_measures({**suite, "measure_family": "nope"}, 10)
    with pytest.raises(RecallbenchError, match="^no measure family 'not-a-reader'"):
        suite_measures({**suite, "measure_family": None}, 10)


def test_measures_imports_no_dataset_module() -> None:
    import ast

    import recallbench.metrics.measures as ms

    tree = ast.parse(Path(ms.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported and not [name for name in imported if "datasets" in (name or "")]


def test_consumers_select_by_fields() -> None:
    records = [
        m.record()
        for m in family_measures("longmemeval", [Level("session"), Level("turn", "turn_")], 10)
    ]
    records.append(Recall("session", 10, rel=3).record())
    assert select(records, stem="recall", k=10, level="session") == [
        "recall@10",
        "recall(rel=3)@10",
    ]
    assert select(records, stem="recall", k=10, level="session", rel=2) == ["recall@10"]
    assert select(records, stem="recall_any", level="turn") == [
        "turn_recall_any@1",
        "turn_recall_any@5",
        "turn_recall_any@10",
    ]
    assert select(records, stem=("ndcg", "ndcg_any"), k=1) == ["ndcg_any@1", "turn_ndcg_any@1"]
    # a results.json record (no stem/spec fields) and bare names select the same way
    old = [{k: v for k, v in r.items() if k in ("name", "level", "k", "pooled")} for r in records]
    assert select(old, stem="recall", k=10, level="session") == ["recall@10", "recall(rel=3)@10"]
    assert select([r["name"] for r in records], stem="recall", prefix="turn_", k=5) == [
        "turn_recall@5"
    ]
    assert preferred_measures(["recall@5", "ndcg@5", "turn_ndcg@5"], 5) == ["ndcg@5", "recall@5"]
    scores_record = Recall("turn", 5, "turn_").record()
    assert {k: scores_record[k] for k in ("stem", "level", "k", "prefix")} == {
        "stem": "recall",
        "level": "turn",
        "k": 5,
        "prefix": "turn_",
    }
    assert scores_record["params"] == {"categories": None, "empty_gold": None, "rel": 2}


def test_the_docs_table_of_stems_is_the_generated_one() -> None:
    from recallbench.metrics.measures import measure_table

    docs = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text("utf-8")
    assert measure_table() in docs
    assert measure_table().count("\n") == len(MEASURE_CLASSES) + 2


# --- round three: every name carries every non-default parameter ------------------------

#: the values each parameter is tried at (defaults included), per the stem's parameters
_PREFIXES = ("", "turn_", "answer_ids_")
_CATEGORIES = (None, frozenset({"exact_lexical"}), frozenset({"b-c", "a.d"}))


def _levels_of(prefix: str) -> tuple[str, ...]:
    """A level the prefix names by default, and one it does not (fixtures' memory)."""
    return (prefix[:-1] if prefix else "session", "memory")


def every_measure() -> list[Measure]:
    """Every measure over stems x prefixes x levels x k x each parameter's values (defaults,
    None and two sets of categories, rel 1-3, empty_gold 0 / 0.25 / 1, reads and depth);
    the combinations a constructor refuses (rel on nDCG, ...) are left out."""
    import itertools

    from recallbench.core.errors import RecallbenchError

    classes = (*MEASURE_CLASSES, NDCGAnyTurn2Session)
    out = []
    for cls, prefix, k in itertools.product(classes, _PREFIXES, (1, 5, 37)):
        extra = [{}]
        if cls is NDCGAnyTurn2Session:
            extra = [{"reads": r, "depth": d} for r in ("turn", "session") for d in (0, 50)]
        for level, rel, categories, empty, more in itertools.product(
            _levels_of(prefix),
            (1, 2, 3),
            (*_CATEGORIES, cls.__dataclass_fields__["categories"].default),
            (None, 0.0, 0.25, 1.0),
            extra,
        ):
            try:
                out.append(cls(level, k, prefix, categories, empty_gold=empty, rel=rel, **more))
            except RecallbenchError:
                assert (
                    (rel != 2 and not cls.takes_rel)
                    or (empty is not None and not cls.takes_empty_gold)
                    or (issubclass(cls, SessionsOfTopTurnsAny) and level != "turn")
                )
    return list(dict.fromkeys(out))


def test_every_measure_reads_back_from_its_name_and_its_spec() -> None:
    """parse(m.spec) == m, and parse(m.name, levels) == m with the suite's level for the
    prefix, for every generated measure (ndcg(categories=...) was reported as ndcg@5)."""
    measures = every_measure()
    assert len(measures) > 1000
    for m in measures:
        assert parse(m.spec) == m, m.spec
        assert parse(m.name, [Level(m.level, m.prefix)]) == m, m.name
        assert from_record(m.record()) == m, m.spec
        for field in m.params():  # every non-default parameter is named
            default = type(m).__dataclass_fields__[field].default
            if field != "reads" and getattr(m, field) != default:
                assert f"{field}=" in m.name, (m.name, field)


def test_two_distinct_measures_never_share_a_name() -> None:
    """Within one suite a prefix names one level: the name is then a key for the measure."""
    by_key: dict[tuple[str, str, str], Measure] = {}
    for m in every_measure():
        key = (m.prefix, m.level, m.name)
        assert by_key.setdefault(key, m) == m, (m.spec, by_key[key].spec)
    assert parse("ndcg(categories=exact_lexical)@5").name == "ndcg(categories=exact_lexical)@5"
    assert parse("recall_any(empty_gold=1)@5").name == "recall_any(empty_gold=1.0)@5"
    assert parse("fp_rate(categories=*)@5").name == "fp_rate(categories=*)@5"
    # spellings of one measure give one name
    same = ["recall(rel=3,categories=b|a)@5", " recall( categories=a|b , rel=3 )@5"]
    assert {parse(text).name for text in same} == {"recall(categories=a|b,rel=3)@5"}


def test_distinct_keeps_equal_measures_once_and_refuses_a_shared_name() -> None:
    from recallbench.core.errors import RecallbenchError
    from recallbench.metrics.measures import distinct

    ndcg, restricted = NDCG(L, 5), NDCG(L, 5, categories=frozenset({"exact_lexical"}))
    assert distinct([ndcg, restricted, NDCG(L, 5)]) == [ndcg, restricted]
    with pytest.raises(RecallbenchError, match="would share the key recall@5") as info:
        distinct([Recall("session", 5), Recall("turn", 5)])  # a level its prefix does not name
    assert "\n" not in str(info.value)


def test_a_name_given_with_levels_takes_the_levels_prefix() -> None:
    from recallbench.core.errors import RecallbenchError

    levels = [Level("session"), Level("turn", "turn_")]
    assert parse("recall(level=turn)@5", levels) == parse("turn_recall@5", levels)
    assert parse("recall(level=turn)@5", levels).name == "turn_recall@5"
    with pytest.raises(RecallbenchError, match="the prefix 'turn_' is not level 'session'"):
        parse("turn_recall(level=session)@5", levels)


def test_the_score_stage_keeps_both_measures_of_a_former_collision() -> None:
    """`--measure 'ndcg(categories=exact_lexical)@5' --measure ndcg@5`: two keys, two values
    (the restricted one was reported as ndcg@5 and the other dropped)."""
    from recallbench.stages.score import suite_measures

    suite = {"levels": [{"name": L, "prefix": ""}], "dataset": "fixtures", "options": {}}
    chosen = suite_measures(suite, 5, names=["ndcg(categories=exact_lexical)@5", "ndcg@5"])
    assert [m.name for m in chosen] == ["ndcg(categories=exact_lexical)@5", "ndcg@5"]
    assert chosen[0].categories == {"exact_lexical"} and chosen[1].categories is None
    assert [m.name for m in suite_measures(suite, 5, names=["fp_rate@5"])] == ["fp_rate@5"]
    family = {m.name: m for m in suite_measures(suite, 5)}
    assert suite_measures(suite, 5, names=["fp_rate@5"])[0] == family["fp_rate@5"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("recall(rel=2,rel=3)@5", "parameter 'rel' is given twice"),
        ("recall(rel=3,rel=3)@5", "parameter 'rel' is given twice"),
        ("ndcg(categories=a,categories=b)@5", "parameter 'categories' is given twice"),
        ("ndcg_any(reads=turn,depth=5,depth=6)@5", "parameter 'depth' is given twice"),
        ("fp_rate(level=memory, level=memory)@5", "parameter 'level' is given twice"),
        ("recall(categories=a|a)@5", "is not valid"),
        ("recall(categories=)@5", "parameter 'categories' has no value"),
        ("recall(categories=a||b)@5", "must be non-empty"),
        ("recall(rel=3,)@5", "an empty parameter"),
        ("recall(rel=0)@5", "rel must be a positive integer"),
        ("recall(empty_gold=1)@5", "takes no empty_gold"),
        ("recall_any(empty_gold=2)@5", "is not in [0, 1]"),
        ("recall_any(empty_gold=nan)@5", "is not in [0, 1]"),
    ],
)
def test_a_repeated_or_empty_parameter_is_refused_in_one_line(text: str, says: str) -> None:
    from recallbench.core.errors import RecallbenchError

    with pytest.raises(RecallbenchError) as info:
        parse(text)
    assert says in str(info.value) and "\n" not in str(info.value)
