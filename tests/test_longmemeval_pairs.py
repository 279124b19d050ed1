"""Pairs: abstention filter, gold rules (incl. the turn-level fallback), texts, opaque ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.longmemeval.generator import generate
from recallbench.longmemeval.pairs import (
    GOLD_FROM_SESSIONS,
    GOLD_FROM_TURNS,
    Drop,
    Pair,
    classify,
    make_pair,
    opaque_id,
    session_text,
)
from recallbench.longmemeval.reader import DataFile, Instance, Turn


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


def test_session_text_modes() -> None:
    turns = (Turn("user", "one", None), Turn("assistant", "two", None), Turn("user", "three", None))
    assert session_text(turns, "user") == "one three"
    assert session_text(turns, "all") == "user: one\nassistant: two\nuser: three"
    with pytest.raises(ValueError):
        session_text(turns, "both")


def test_abstention_is_dropped() -> None:
    verdict = classify(_inst(question_id="q1_abs"))
    assert isinstance(verdict, Drop) and verdict.category == "abstention"


def test_gold_from_answer_session_ids() -> None:
    info = classify(_inst())
    assert not isinstance(info, Drop)
    assert info.gold == ("answer_a_1", "answer_a_2") and info.source == GOLD_FROM_SESSIONS
    assert info.user_side_evidence is True


@pytest.mark.parametrize("answer_ids", [None, ()])
def test_turn_level_fallback(answer_ids) -> None:
    info = classify(_inst(answer_session_ids=answer_ids))
    assert not isinstance(info, Drop)
    # any has_answer: true turn, user or assistant, makes the session gold
    assert info.gold == ("answer_a_1", "answer_a_2") and info.source == GOLD_FROM_TURNS


def test_no_gold_at_all_is_dropped_with_a_reason() -> None:
    plain = tuple(tuple(Turn(t.role, t.content, None) for t in s) for s in _inst().sessions)
    verdict = classify(_inst(answer_session_ids=None, sessions=plain))
    assert isinstance(verdict, Drop) and verdict.category == "other"
    assert "no has_answer turn" in verdict.reason
    verdict = classify(_inst(answer_session_ids=("elsewhere",)))
    assert isinstance(verdict, Drop) and "in its haystack" in verdict.reason


def test_answer_ids_outside_the_haystack_are_counted_not_gold() -> None:
    info = classify(_inst(answer_session_ids=("answer_a_1", "ghost")))
    assert not isinstance(info, Drop)
    assert info.gold == ("answer_a_1",) and info.missing == ("ghost",)


def test_assistant_only_evidence_is_flagged() -> None:
    info = classify(_inst(answer_session_ids=("answer_a_2",)))
    assert not isinstance(info, Drop) and info.user_side_evidence is False


def test_documents_are_opaque_and_duplicates_collapse() -> None:
    sessions = _inst().sessions + ((Turn("user", "hello there", None),),)
    pair = make_pair(
        _inst(
            session_ids=("s_1", "answer_a_1", "answer_a_2", "s_1", "s_2"),
            sessions=sessions + ((Turn("user", "hello there", None),),),
        ),
        "user",
    )
    assert isinstance(pair, Pair)
    assert pair.sessions == 4  # the repeated id s_1 is ignored
    texts = [d.text for d in pair.documents]
    assert texts.count("hello there") == 1  # s_1 and s_2 share a text: one memory
    shared = next(d for d in pair.documents if d.text == "hello there")
    assert shared.session_ids == ("s_1", "s_2")
    for doc in pair.documents:
        assert doc.memory_id == opaque_id("q1", doc.session_ids[0])
        assert all(sid not in doc.memory_id for sid in doc.session_ids)
    payload = pair.payload()
    assert set(payload) == {"index", "question", "documents"}
    assert "answer_a_1" not in repr(payload) and "q1" not in repr(payload["documents"])
    # a hit on the shared memory stands for both sessions, in haystack order
    assert pair.sessions_for([shared.memory_id], 10) == ["s_1", "s_2"]
    assert pair.sessions_for([shared.memory_id], 1) == ["s_1"]


def test_generated_500_become_470(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    generate(path, shape="oracle", questions=500, seed=11, session_chars=40)
    verdicts = [classify(i) for i in DataFile(path).instances()]
    drops = [v for v in verdicts if isinstance(v, Drop)]
    assert len(verdicts) == 500 and len(drops) == 30
    assert all(d.category == "abstention" and d.question_id.endswith("_abs") for d in drops)


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
