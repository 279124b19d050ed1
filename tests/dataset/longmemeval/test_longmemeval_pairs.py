"""From a LongMemEval instance to a scope: abstention and no-gold drops, gold rules (incl.
the turn-level fallback), session texts, turn units, opaque ids and deduplicated texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.core.ids import opaque_id
from recallbench.core.model import Drop, Scope, level_ranking
from recallbench.datasets.longmemeval.generator import generate
from recallbench.datasets.longmemeval.pairs import (
    GOLD_FROM_SESSIONS,
    GOLD_FROM_TURNS,
    STORE_IDENTIFIER,
    classify,
    gold_of,
    make_scope,
    session_text,
)
from recallbench.datasets.longmemeval.reader import DataFile, open_source
from recallbench.datasets.longmemeval.records import Instance, Turn


def _inst(**over) -> Instance:
    base = dict(
        index=0,
        question_id="q1",
        question_type="multi-session",
        question="Where did I park?",
        question_date=None,
        session_ids=("s_1", "answer_a_1", "answer_a_2"),
        sessions=(
            (Turn("user", "hello there", None), Turn("assistant", "hi", None)),
            (Turn("user", "I parked on level 3", True), Turn("assistant", "noted", False)),
            (Turn("user", "moved the car", False), Turn("assistant", "it is at level 5", True)),
        ),
        dates=None,
        answer_session_ids=("answer_a_1", "answer_a_2"),
    )
    base.update(over)
    return Instance(**base)


def _scope(inst: Instance, mode: str = "user", unit: str = "session") -> Scope:
    made = make_scope(inst, mode, unit)
    assert not isinstance(made, Drop), made
    return made[0]


def test_session_text_modes() -> None:
    turns = (Turn("user", "one", None), Turn("assistant", "two", None), Turn("user", "three", None))
    assert session_text(turns, "user") == "one three"
    assert session_text(turns, "all") == "user: one\nassistant: two\nuser: three"
    with pytest.raises(ValueError):
        session_text(turns, "both")


def test_abstention_is_dropped() -> None:
    verdict = classify(_inst(question_id="q1_abs"))
    assert isinstance(verdict, Drop)
    assert verdict.reason == "abstention" and verdict.category == "multi-session"
    assert verdict.query_id == verdict.scope_id == "q1_abs"
    assert "'_abs' in question_id" in verdict.detail
    assert make_scope(_inst(question_id="q1_abs"), "user") == verdict


def test_abstention_kept_is_scored_with_its_answer_session_ids() -> None:
    """--abstention keep: the question is scored like any other (its answer_session_ids
    that are in its haystack are gold); a kept one without gold is still a no_gold drop."""
    inst = _inst(
        question_id="q1_abs",
        session_ids=("s_1", "answer_a_abs_1", "answer_a_abs_2"),
        answer_session_ids=("answer_a_abs_1", "answer_a_abs_2"),
    )
    made = make_scope(inst, "user", "session", abstention="keep")
    assert not isinstance(made, Drop), made
    scope = made[0]
    assert scope.queries[0].query_id == "q1_abs"
    assert scope.queries[0].relevance == {"session": {"answer_a_abs_1": 2, "answer_a_abs_2": 2}}
    assert isinstance(make_scope(inst, "user", "session"), Drop)  # the default drops it
    gone = _inst(question_id="q2_abs", answer_session_ids=("answer_zz",))
    verdict = classify(gone, abstention="keep")
    assert isinstance(verdict, Drop) and verdict.reason == "no_gold"


def test_the_reader_keeps_abstention_on_request(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    generate(path, shape="s", questions=20, seed=3, sessions_per_question=6, session_chars=200)
    dropped = open_source({"data": path}, {})
    kept = open_source({"data": path}, {"abstention": "keep"})
    by_default = [i for i in dropped.stream() if isinstance(i, Scope)]
    with_abs = [i for i in kept.stream() if isinstance(i, Scope)]
    abstention = [s.scope_id for s in with_abs if "_abs" in s.scope_id]
    assert abstention and len(with_abs) == len(by_default) + len(abstention)
    assert kept.summary()["abstention_questions_scored"] == len(abstention)
    assert "abstention_questions_scored" not in dropped.summary()
    assert kept.options == {"session_text": "user", "unit": "session", "abstention": "keep"}
    assert dropped.options == {"session_text": "user", "unit": "session"}
    assert any("--abstention keep" in note for note in kept.notes)
    from recallbench.core.errors import RecallbenchError

    with pytest.raises(RecallbenchError, match="--abstention must be one of drop, keep"):
        open_source({"data": path}, {"abstention": "maybe"})


def test_gold_from_answer_session_ids() -> None:
    info = classify(_inst())
    assert not isinstance(info, Drop)
    assert info.gold == ("answer_a_1", "answer_a_2") and info.source == GOLD_FROM_SESSIONS
    assert info.user_side_evidence is True
    query = _scope(_inst()).queries[0]
    assert query.relevance == {"session": {"answer_a_1": 2, "answer_a_2": 2}}
    assert query.relevant("session") == {"answer_a_1", "answer_a_2"}


@pytest.mark.parametrize("answer_ids", [None, ()])
def test_turn_level_fallback(answer_ids) -> None:
    info = classify(_inst(answer_session_ids=answer_ids))
    assert not isinstance(info, Drop)
    # any has_answer: true turn, user or assistant, makes the session gold
    assert info.gold == ("answer_a_1", "answer_a_2") and info.source == GOLD_FROM_TURNS


def test_no_gold_at_all_is_dropped_with_a_reason() -> None:
    plain = tuple(tuple(Turn(t.role, t.content, None) for t in s) for s in _inst().sessions)
    verdict = classify(_inst(answer_session_ids=None, sessions=plain))
    assert isinstance(verdict, Drop) and verdict.reason == "no_gold"
    assert "no has_answer turn" in verdict.detail
    verdict = classify(_inst(answer_session_ids=("elsewhere",)))
    assert isinstance(verdict, Drop) and verdict.reason == "no_gold"
    assert "in its haystack" in verdict.detail


def test_answer_ids_outside_the_haystack_are_counted_not_gold() -> None:
    info = classify(_inst(answer_session_ids=("answer_a_1", "ghost")))
    assert not isinstance(info, Drop)
    assert info.gold == ("answer_a_1",) and info.missing == ("ghost",)


def test_assistant_only_evidence_is_flagged() -> None:
    info = classify(_inst(answer_session_ids=("answer_a_2",)))
    assert not isinstance(info, Drop) and info.user_side_evidence is False
    unlabelled = tuple(tuple(Turn(t.role, t.content, None) for t in s) for s in _inst().sessions)
    assert gold_of(_inst(sessions=unlabelled)).user_side_evidence is None


def test_memories_are_opaque_and_duplicates_collapse() -> None:
    sessions = _inst().sessions + ((Turn("user", "hello there", None),),) * 2
    inst = _inst(session_ids=("s_1", "answer_a_1", "answer_a_2", "s_1", "s_2"), sessions=sessions)
    assert gold_of(inst).duplicate_ids == 1  # the repeated id s_1 is ignored
    scope = _scope(inst)
    assert scope.scope_id == "q1" and [q.query_id for q in scope.queries] == ["q1"]
    texts = [m.text for m in scope.memories]
    assert len(texts) == 3 and texts.count("hello there") == 1  # s_1 and s_2 share a text
    shared = next(m for m in scope.memories if m.text == "hello there")
    assert shared.units == {"session": ("s_1", "s_2")}
    for memory in scope.memories:
        assert memory.memory_id == opaque_id("q1", memory.units["session"][0])
        assert memory.identifier == STORE_IDENTIFIER
        assert all(sid not in memory.memory_id for sid in memory.units["session"])
        assert "q1" not in memory.memory_id
    # a hit on the shared memory stands for both sessions, in haystack order
    memories = scope.memory_by_id()
    assert level_ranking([shared.memory_id], memories, "session") == ["s_1", "s_2"]
    gold = next(m for m in scope.memories if m.units["session"] == ("answer_a_1",))
    assert level_ranking([shared.memory_id, gold.memory_id], memories, "session") == [
        "s_1",
        "s_2",
        "answer_a_1",
    ]


def test_opaque_ids_depend_on_question_and_session() -> None:
    ids = {opaque_id(q, s) for q in ("q1", "q2") for s in ("s_1", "s_2")}
    assert len(ids) == 4
    assert all(i.startswith("m") and len(i) == 21 for i in ids)


def test_turn_unit_ids_texts_and_gold() -> None:
    user = _scope(_inst(), "user", "turn")
    # user mode: user turns only, ids = session id + '_' + 1-based position among all turns
    assert [(m.text, m.units["turn"], m.units["session"]) for m in user.memories] == [
        ("hello there", ("s_1_1",), ("s_1",)),
        ("I parked on level 3", ("answer_a_1_1",), ("answer_a_1",)),
        ("moved the car", ("answer_a_2_1",), ("answer_a_2",)),
    ]
    # turn gold = indexed turns marked has_answer (the assistant's answer is not indexed here)
    assert user.queries[0].relevance == {
        "session": {"answer_a_1": 2, "answer_a_2": 2},
        "turn": {"answer_a_1_1": 2},
    }
    every = _scope(_inst(), "all", "turn")
    assert len(every.memories) == 6
    assert every.memories[5].text == "assistant: it is at level 5"
    assert every.memories[5].units == {"turn": ("answer_a_2_2",), "session": ("answer_a_2",)}
    assert every.queries[0].relevance["turn"] == {"answer_a_1_1": 2, "answer_a_2_2": 2}
    assert every.memories[0].memory_id == opaque_id("q1", "s_1_1")


def test_turn_unit_merges_identical_turn_texts() -> None:
    sessions = (
        (Turn("user", "thanks", None), Turn("user", "bye", None)),
        (Turn("user", "thanks", True),),
    )
    scope = _scope(_inst(session_ids=("s_1", "answer_a_1"), sessions=sessions), "user", "turn")
    merged = next(m for m in scope.memories if m.text == "thanks")
    assert merged.units == {"turn": ("s_1_1", "answer_a_1_1"), "session": ("s_1", "answer_a_1")}
    assert scope.queries[0].relevance["turn"] == {"answer_a_1_1": 2}


def test_generated_500_become_470(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    generate(path, shape="oracle", questions=500, seed=11, session_chars=40)
    verdicts = [classify(i) for i in DataFile(path).instances()]
    drops = [v for v in verdicts if isinstance(v, Drop)]
    assert len(verdicts) == 500 and len(drops) == 30
    assert all(d.reason == "abstention" and d.query_id.endswith("_abs") for d in drops)
    # the same through the dataset source: 470 scopes of one query each, 30 drops
    source = open_source({"data": path}, {})
    items = list(source.stream())
    scopes = [i for i in items if isinstance(i, Scope)]
    assert len(scopes) == 470 and len(items) == 500
    assert all(len(s.queries) == 1 and s.queries[0].query_id == s.scope_id for s in scopes)
    summary = source.summary()
    assert summary["records"] == 500
    assert summary["gold_from_answer_session_ids"] == 470


def test_generated_turn_labels_only_uses_the_fallback(tmp_path: Path) -> None:
    labelled, bare = tmp_path / "a.json", tmp_path / "b.json"
    for path, flag in ((labelled, False), (bare, True)):
        generate(
            path,
            shape="s",
            questions=15,
            seed=5,
            sessions_per_question=6,
            session_chars=60,
            turn_labels_only=flag,
        )
    a = [classify(i) for i in DataFile(labelled).instances()]
    b = [classify(i) for i in DataFile(bare).instances()]
    for x, y in zip(a, b, strict=True):
        if isinstance(x, Drop):
            continue
        assert x.source == GOLD_FROM_SESSIONS and y.source == GOLD_FROM_TURNS
        assert set(x.gold) == set(y.gold)
    source = open_source({"data": bare}, {})
    list(source.stream())
    summary = source.summary()
    assert summary["gold_from_has_answer_turns"] > 0 == summary["gold_from_answer_session_ids"]
    assert "caveat" in summary
