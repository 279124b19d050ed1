"""LongMemEval's records, checked: `check_record` turns one raw question object into an
`Instance` (its sessions as `Turn`s), or stops with one line naming the file, the record
index, the question id and the field. The reader streams them; `pairs` turns them into
scopes (neither imports the other for these types).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from recallbench.core.errors import RecallbenchError
from recallbench.datasets.jsonstream import record_error
from recallbench.datasets.jsonstream import type_name as _type_name

ROLES = ("user", "assistant")


class Turn(NamedTuple):
    role: str
    content: str
    #: None when the turn has no ``has_answer`` key (non-evidence sessions in cleaned files)
    has_answer: bool | None


@dataclass(frozen=True)
class Instance:
    """One checked LongMemEval record. Session lists are parallel."""

    index: int
    question_id: str
    question_type: str
    question: str
    question_date: str | None
    session_ids: tuple[str, ...]
    sessions: tuple[tuple[Turn, ...], ...]
    dates: tuple[str, ...] | None
    #: None when the record has no ``answer_session_ids`` key
    answer_session_ids: tuple[str, ...] | None


def _fail(path: Path, index: int, qid: Any, message: str) -> RecallbenchError:
    return record_error(path, index, "question_id", qid, message)


def check_record(raw: Any, index: int, path: Path) -> Instance:
    """Check one raw record against the LongMemEval schema; return it as an `Instance`."""
    if not isinstance(raw, dict):
        raise _fail(path, index, None, f"must be an object, not {_type_name(raw)}")
    qid = raw.get("question_id")

    def need(name: str, kind: type | tuple[type, ...], what: str, *, optional: bool = False) -> Any:
        if name not in raw:
            if optional:
                return None
            raise _fail(path, index, qid, f"field '{name}' is missing")
        value = raw[name]
        if not isinstance(value, kind):
            raise _fail(path, index, qid, f"field '{name}' must be {what}, not {_type_name(value)}")
        return value

    question_id = need("question_id", str, "a string")
    if not question_id:
        raise _fail(path, index, qid, "field 'question_id' must not be empty")
    question_type = need("question_type", str, "a string")
    question = need("question", str, "a string")
    if not question.strip():  # as the fixture reader refuses an empty query
        raise _fail(path, index, qid, "field 'question' is empty")
    question_date = need("question_date", str, "a string", optional=True)
    if "answer" in raw and not isinstance(raw["answer"], str | int | float):  # no nesting
        raise _fail(
            path,
            index,
            qid,
            f"field 'answer' must be a string or a number, not {_type_name(raw['answer'])}",
        )
    session_ids = need("haystack_session_ids", list, "a list")
    sessions = need("haystack_sessions", list, "a list")
    dates = need("haystack_dates", list, "a list", optional=True)
    answer_ids = need("answer_session_ids", list, "a list", optional=True)

    for i, sid in enumerate(session_ids):
        if not isinstance(sid, str) or not sid:
            raise _fail(
                path, index, qid, f"field 'haystack_session_ids[{i}]' must be a non-empty string"
            )
    if len(sessions) != len(session_ids):
        raise _fail(
            path,
            index,
            qid,
            f"field 'haystack_sessions' has {len(sessions)} sessions but "
            f"'haystack_session_ids' has {len(session_ids)}",
        )
    if dates is not None:
        if len(dates) != len(session_ids):
            raise _fail(
                path,
                index,
                qid,
                f"field 'haystack_dates' has {len(dates)} dates but "
                f"'haystack_session_ids' has {len(session_ids)}",
            )
        for i, date in enumerate(dates):
            if not isinstance(date, str):
                raise _fail(path, index, qid, f"field 'haystack_dates[{i}]' must be a string")
    if answer_ids is not None:
        for i, sid in enumerate(answer_ids):
            if not isinstance(sid, str) or not sid:
                raise _fail(
                    path, index, qid, f"field 'answer_session_ids[{i}]' must be a non-empty string"
                )

    checked: list[tuple[Turn, ...]] = []
    for s, session in enumerate(sessions):
        if type(session) is not list:
            raise _fail(
                path,
                index,
                qid,
                f"field 'haystack_sessions[{s}]' must be a list of turns, not {_type_name(session)}",
            )
        turns = []
        for t, turn in enumerate(session):
            # fast path: a well-formed turn; anything else is diagnosed by _turn_problem
            if isinstance(turn, dict):
                role = turn.get("role")
                content = turn.get("content")
                has_answer = turn.get("has_answer")
                if (
                    (role == "user" or role == "assistant")
                    and type(content) is str
                    and (has_answer is None or type(has_answer) is bool)
                ):
                    turns.append(Turn(role, content, has_answer))
                    continue
            raise _fail(path, index, qid, _turn_problem(turn, f"haystack_sessions[{s}][{t}]"))
        checked.append(tuple(turns))

    return Instance(
        index=index,
        question_id=question_id,
        question_type=question_type,
        question=question,
        question_date=question_date,
        session_ids=tuple(session_ids),
        sessions=tuple(checked),
        dates=tuple(dates) if dates is not None else None,
        answer_session_ids=tuple(answer_ids) if answer_ids is not None else None,
    )


def _turn_problem(turn: Any, where: str) -> str:
    if not isinstance(turn, dict):
        return f"field '{where}' must be an object, not {_type_name(turn)}"
    role = turn.get("role")
    if role not in ROLES:
        return f"field '{where}.role' must be 'user' or 'assistant', not {role!r}"
    content = turn.get("content")
    if not isinstance(content, str):
        return f"field '{where}.content' must be a string, not {_type_name(content)}"
    has_answer = turn.get("has_answer")
    return f"field '{where}.has_answer' must be a boolean, not {_type_name(has_answer)}"
