"""From a LongMemEval instance to one scored pair (or a counted drop).

* One pair per question. Abstention questions (``_abs`` in the question id) are dropped
  and counted: they refer to events that never happened, so they have no evidence
  location (LongMemEval's own retrieval evaluation skips them too).
* The haystack is the pair's own scope: a fresh store holds that question's sessions.
  One session = one memory. Its text is, by default, the user turns' contents joined by
  single spaces (as LongMemEval's ``run_retrieval.py`` indexes sessions); with
  ``session_text="all"`` every turn is kept as ``role: content``, one per line.
* Gold = ``answer_session_ids`` (restricted to ids present in the haystack). When a record
  has no (or an empty) ``answer_session_ids``, the scope document's fallback applies: the
  sessions holding at least one ``has_answer: true`` turn. Which rule made each pair's gold
  is recorded.
* No leakage: the store only sees `Document.memory_id`, an opaque hash, and the session
  text; the map back to dataset session ids stays on the harness side (`Pair`).
  Sessions whose texts are identical are stored once (HotMem keeps one row per
  identifier + text) and a hit on that row stands for all of them, in haystack order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from recallbench.longmemeval import SESSION_TEXT_MODES
from recallbench.longmemeval.reader import Instance, Turn

ABSTENTION_MARK = "_abs"
GOLD_FROM_SESSIONS = "answer_session_ids"
GOLD_FROM_TURNS = "has_answer_turns"
#: The identifier (HotMem's project/organisation scope) every stored session gets.
STORE_IDENTIFIER = "longmemeval"


class Document(NamedTuple):
    """One stored memory: an opaque id, its text and the dataset sessions it stands for."""

    memory_id: str
    text: str
    session_ids: tuple[str, ...]


@dataclass(frozen=True)
class GoldInfo:
    gold: tuple[str, ...]
    source: str
    #: answer_session_ids entries that are not in the haystack (not counted as gold)
    missing: tuple[str, ...]
    #: haystack session ids that repeat an earlier one (the later copies are ignored)
    duplicate_ids: int
    #: whether some gold session has a user turn marked has_answer (None: no labels at all);
    #: LongMemEval's run_retrieval.py skips questions where this is False
    user_side_evidence: bool | None


@dataclass(frozen=True)
class Drop:
    index: int
    question_id: str
    question_type: str
    category: str  # "abstention" | "other"
    reason: str


@dataclass(frozen=True)
class Pair:
    index: int
    question_id: str
    question_type: str
    question: str
    gold: tuple[str, ...]
    gold_source: str
    documents: tuple[Document, ...]
    sessions: int

    def payload(self) -> dict:
        """What a worker needs: no question id, no dataset session ids, no gold."""
        return {
            "index": self.index,
            "question": self.question,
            "documents": [(d.memory_id, d.text) for d in self.documents],
        }

    def sessions_for(self, memory_ids: Sequence[str], limit: int) -> list[str]:
        """Map ranked memory ids back to dataset session ids (first `limit`)."""
        by_id = {d.memory_id: d.session_ids for d in self.documents}
        ranked: list[str] = []
        for memory_id in memory_ids:
            ranked.extend(by_id[memory_id])
            if len(ranked) >= limit:
                break
        return ranked[:limit]


def is_abstention(question_id: str) -> bool:
    return ABSTENTION_MARK in question_id


def session_text(turns: Sequence[Turn], mode: str) -> str:
    """The stored text of one session under `mode` ("user" or "all")."""
    if mode == "user":
        return " ".join(t.content for t in turns if t.role == "user")
    if mode == "all":
        return "\n".join(f"{t.role}: {t.content}" for t in turns)
    raise ValueError(f"session text mode must be one of {SESSION_TEXT_MODES}, not {mode!r}")


def opaque_id(question_id: str, session_id: str) -> str:
    """The id the store sees for a session: a hash that reveals neither id nor position."""
    digest = hashlib.sha256(f"{question_id}\x1f{session_id}".encode()).hexdigest()
    return "m" + digest[:20]


def _unique_sessions(inst: Instance) -> tuple[list[int], int]:
    """Positions of first occurrences of each session id, and how many repeats were skipped."""
    seen: set[str] = set()
    keep: list[int] = []
    for i, sid in enumerate(inst.session_ids):
        if sid not in seen:
            seen.add(sid)
            keep.append(i)
    return keep, len(inst.session_ids) - len(keep)


def gold_of(inst: Instance) -> GoldInfo:
    """The pair's gold sessions, by answer_session_ids or the turn-level fallback."""
    keep, duplicates = _unique_sessions(inst)
    haystack = [inst.session_ids[i] for i in keep]
    in_haystack = set(haystack)
    if inst.answer_session_ids:  # present and non-empty
        wanted = list(dict.fromkeys(inst.answer_session_ids))
        gold = tuple(sid for sid in wanted if sid in in_haystack)
        missing = tuple(sid for sid in wanted if sid not in in_haystack)
        source = GOLD_FROM_SESSIONS
    else:
        gold = tuple(
            inst.session_ids[i] for i in keep if any(t.has_answer is True for t in inst.sessions[i])
        )
        missing = ()
        source = GOLD_FROM_TURNS
    position = {sid: i for i, sid in zip(keep, haystack, strict=True)}
    labelled = False
    user_side = False
    for sid in gold:
        for turn in inst.sessions[position[sid]]:
            if turn.has_answer is not None:
                labelled = True
            if turn.role == "user" and turn.has_answer is True:
                user_side = True
    return GoldInfo(
        gold=gold,
        source=source,
        missing=missing,
        duplicate_ids=duplicates,
        user_side_evidence=user_side if labelled else None,
    )


def classify(inst: Instance) -> Drop | GoldInfo:
    """Drop (abstention, or no gold to find) or the pair's gold."""
    if is_abstention(inst.question_id):
        return Drop(
            inst.index,
            inst.question_id,
            inst.question_type,
            "abstention",
            "abstention question ('_abs' in question_id): no evidence location",
        )
    info = gold_of(inst)
    if not info.gold:
        if info.source == GOLD_FROM_TURNS:
            reason = "no answer_session_ids and no has_answer turn: nothing to find"
        else:
            reason = "none of its answer_session_ids is in its haystack: nothing to find"
        return Drop(inst.index, inst.question_id, inst.question_type, "other", reason)
    return info


def make_pair(inst: Instance, mode: str) -> Pair | Drop:
    """The scored pair of one instance, or why it is dropped."""
    verdict = classify(inst)
    if isinstance(verdict, Drop):
        return verdict
    keep, _ = _unique_sessions(inst)
    by_text: dict[str, list[str]] = {}
    for i in keep:
        by_text.setdefault(session_text(inst.sessions[i], mode), []).append(inst.session_ids[i])
    documents = tuple(
        Document(opaque_id(inst.question_id, sids[0]), text, tuple(sids))
        for text, sids in by_text.items()
    )
    if len({d.memory_id for d in documents}) != len(documents):  # pragma: no cover - sha256
        raise RuntimeError(f"opaque id collision in question {inst.question_id}")
    return Pair(
        index=inst.index,
        question_id=inst.question_id,
        question_type=inst.question_type,
        question=inst.question,
        gold=verdict.gold,
        gold_source=verdict.source,
        documents=documents,
        sessions=len(keep),
    )
