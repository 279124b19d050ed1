"""From a LongMemEval instance to one scored pair (or a counted drop).

* One pair per question. Abstention questions (``_abs`` in the question id) are dropped
  and counted: they refer to events that never happened (LongMemEval's own retrieval
  evaluation skips them too). With ``abstention="keep"`` they are scored like the others,
  with their ``answer_session_ids`` (the sessions the question was written against), as
  claims over all 500 questions do.
* The haystack is the pair's own scope: a fresh store holds that question's sessions.
  One session = one memory. Its text is, by default, the user turns' contents joined by
  single spaces (as LongMemEval's ``run_retrieval.py`` indexes sessions); with
  ``session_text="all"`` every turn is kept as ``role: content``, one per line.
* Gold = ``answer_session_ids`` (restricted to ids present in the haystack). When a record
  has no (or an empty) ``answer_session_ids``, the scope document's fallback applies: the
  sessions holding at least one ``has_answer: true`` turn. Which rule made each pair's gold
  is recorded.
* No leakage: the store only sees a `Memory`'s `memory_id`, an opaque hash (`ids.opaque_id`),
  the fixed `STORE_IDENTIFIER` and the session text; the map back to dataset session ids
  stays on the harness side (the memory's `units`, which never reach the store).
  Sessions whose texts are identical are stored once (HotMem keeps one row per
  identifier + text) and a hit on that row stands for all of them, in haystack order.
* Structure (for a system that asks for it, `model.Turn`; written as plain data to
  `Scope.structure`): a session memory carries every turn of its session (both roles,
  whatever ``session_text``) and the session's ``haystack_dates`` entry; a turn memory
  carries its turn and its session's date; the query carries ``question_date``. Turn ids
  are positions in the session, never dataset ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recallbench.core.ids import opaque_id
from recallbench.core.model import Drop, Memory, Query, Scope, dated, memory_structure
from recallbench.datasets.base import UNITS as UNITS

if TYPE_CHECKING:
    from recallbench.datasets.longmemeval.records import Instance, Turn

SESSION_TEXT_MODES: tuple[str, ...] = ("user", "all")
#: the gold rules (`--gold`): the default, and the rule of LongMemEval's run_retrieval.py
GOLD_DEFAULT = "answer_session_ids"
GOLD_OFFICIAL = "official"
GOLD_RULES: tuple[str, ...] = (GOLD_DEFAULT, GOLD_OFFICIAL)
#: the abstention rules (`--abstention`): dropped (the default) or kept and scored
ABSTENTION_DROP = "drop"
ABSTENTION_KEEP = "keep"
ABSTENTION_RULES: tuple[str, ...] = (ABSTENTION_DROP, ABSTENTION_KEEP)
#: with --gold official, the level that keeps the default rule's gold beside the official one
DEFAULT_RULE_LEVEL = "answer_ids"

ABSTENTION_MARK = "_abs"
GOLD_FROM_SESSIONS = "answer_session_ids"
GOLD_FROM_TURNS = "has_answer_turns"
#: The identifier (HotMem's project/organisation scope) every stored session gets.
STORE_IDENTIFIER = "longmemeval"


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


def is_abstention(question_id: str) -> bool:
    return ABSTENTION_MARK in question_id


def session_text(turns: Sequence[Turn], mode: str) -> str:
    """The stored text of one session under `mode` ("user" or "all")."""
    if mode == "user":
        return " ".join(t.content for t in turns if t.role == "user")
    if mode == "all":
        return "\n".join(f"{t.role}: {t.content}" for t in turns)
    raise ValueError(f"session text mode must be one of {SESSION_TEXT_MODES}, not {mode!r}")


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


@dataclass(frozen=True)
class OfficialGold:
    """LongMemEval's official gold (run_retrieval.py), which may be empty (vacuous)."""

    #: sessions whose id contains 'answer' and that have a user turn marked has_answer
    sessions: tuple[str, ...]
    #: user turns marked has_answer of sessions whose id contains 'answer' (turn ids)
    turns: tuple[str, ...]


def is_official_session(session_id: str, turns: Sequence[Turn]) -> bool:
    """run_retrieval.py's session rule: the id contains 'answer' and some *user* turn is
    marked has_answer (otherwise the id is renamed 'noans...', so it is not gold). A turn
    without the key counts as not marked."""
    return "answer" in session_id and any(t.role == "user" and t.has_answer is True for t in turns)


def is_official_turn(session_id: str, turn: Turn) -> bool:
    """run_retrieval.py's turn rule: a user turn marked has_answer in a session whose id
    contains 'answer' (only user turns are indexed there)."""
    return "answer" in session_id and turn.role == "user" and turn.has_answer is True


def official_session_unit(session_id: str, turn: Turn) -> str:
    """The session a turn counts for in evaluate_retrieval_turn2session: its session id, or,
    for a turn of an 'answer' session that is not an official gold turn, the id with
    'answer' renamed 'noans' (run_retrieval.py renames the turn id; the suffix is dropped)."""
    if "answer" in session_id and not is_official_turn(session_id, turn):
        return session_id.replace("answer", "noans")
    return session_id


def official_gold(inst: Instance) -> OfficialGold:
    """The question's official gold over its haystack (first occurrence of each id)."""
    keep, _ = _unique_sessions(inst)
    sessions, turns = [], []
    for i in keep:
        sid = inst.session_ids[i]
        if is_official_session(sid, inst.sessions[i]):
            sessions.append(sid)
        turns += [
            f"{sid}_{t + 1}"
            for t, turn in enumerate(inst.sessions[i])
            if is_official_turn(sid, turn)
        ]
    return OfficialGold(tuple(sessions), tuple(turns))


def classify(
    inst: Instance, gold: str = GOLD_DEFAULT, abstention: str = ABSTENTION_DROP
) -> Drop | GoldInfo:
    """Drop (abstention, or no gold to find) or the question's gold sessions by the default
    rule. With gold "official" only abstention questions are dropped: a question without
    official gold is scored (vacuously), its default-rule gold may be empty. With abstention
    "keep" an abstention question is classified like any other."""
    if is_abstention(inst.question_id) and abstention != ABSTENTION_KEEP:
        return Drop(
            inst.question_id,
            inst.question_type,
            "abstention",
            "abstention question ('_abs' in question_id): no evidence location",
            inst.question_id,
        )
    info = gold_of(inst)
    if not info.gold and gold != GOLD_OFFICIAL:
        if info.source == GOLD_FROM_TURNS:
            detail = "no answer_session_ids and no has_answer turn: nothing to find"
        else:
            detail = "none of its answer_session_ids is in its haystack: nothing to find"
        return Drop(inst.question_id, inst.question_type, "no_gold", detail, inst.question_id)
    return info


def _structure_turns(turns: Sequence[Turn], first: int = 1) -> list[dict[str, str]]:
    """A session's turns (or one turn, at its 1-based position `first`) as a structured
    record carries them, as plain data (`model.Turn.to_dict`'s form, no `Turn` built): role
    and content; the turn id is the position, never the dataset's turn id (which holds the
    session id, and names gold sessions 'answer_...')."""
    return [
        {"text": turn.content, "role": turn.role, "turn_id": str(position)}
        for position, turn in enumerate(turns, first)
    ]


def _turn_units(inst: Instance, position: int, mode: str) -> list[tuple[str, str]]:
    """(turn id, text) of one session's indexed turns: ids as LongMemEval's run_retrieval.py
    makes them (session id + '_' + 1-based position among all turns); user turns only in
    mode "user" (their content), every turn as 'role: content' in mode "all"."""
    sid = inst.session_ids[position]
    out = []
    for i, turn in enumerate(inst.sessions[position]):
        if mode == "user" and turn.role != "user":
            continue
        text = turn.content if mode == "user" else f"{turn.role}: {turn.content}"
        out.append((f"{sid}_{i + 1}", text))
    return out


def make_scope(
    inst: Instance,
    mode: str,
    unit: str = "session",
    gold: str = GOLD_DEFAULT,
    abstention: str = ABSTENTION_DROP,
) -> tuple[Scope, GoldInfo] | Drop:
    """The question's scope (its haystack as memories, itself as the one query), or its drop.

    unit "session": one memory per distinct session text, standing for every session with
    that text. unit "turn": one memory per distinct indexed turn text; its units are the
    turn ids and their sessions. Turn-level gold = indexed turns marked has_answer.

    gold "official": the session and turn gold are `official_gold` (possibly empty); at unit
    "turn" a turn's session unit is `official_session_unit` (evaluate_retrieval_turn2session's
    'noans' renaming); the default rule's session gold is kept at the level
    `DEFAULT_RULE_LEVEL` (real session ids), so both sets of figures come from one ranking.
    abstention "keep": an abstention question is scored too (`classify`).
    """
    verdict = classify(inst, gold, abstention)
    if isinstance(verdict, Drop):
        return verdict
    official = gold == GOLD_OFFICIAL
    keep, _ = _unique_sessions(inst)
    by_text: dict[str, tuple[list[str], list[str], list[str]]] = {}
    #: each text's structure (plain data): the turns and the session date of its first holder
    structure: dict[str, dict[str, Any]] = {}
    turn_gold: dict[str, int] = {}
    for i in keep:
        sid = inst.session_ids[i]
        date = inst.dates[i] if inst.dates is not None else None
        if unit == "session":
            text = session_text(inst.sessions[i], mode)
            entry = by_text.setdefault(text, ([], [], []))
            if text not in structure:
                structure[text] = memory_structure(_structure_turns(inst.sessions[i]), date)
            entry[1].append(sid)
            entry[2].append(sid)
            continue
        turns = inst.sessions[i]
        for turn_id, text in _turn_units(inst, i, mode):
            position = int(turn_id.rsplit("_", 1)[1])
            turn = turns[position - 1]
            entry = by_text.setdefault(text, ([], [], []))
            if text not in structure:
                structure[text] = memory_structure(_structure_turns([turn], position), date)
            entry[0].append(turn_id)
            session_unit = official_session_unit(sid, turn) if official else sid
            if session_unit not in entry[1]:
                entry[1].append(session_unit)
            if sid not in entry[2]:
                entry[2].append(sid)
            if is_official_turn(sid, turn) if official else turn.has_answer is True:
                turn_gold[turn_id] = 2
    memories = []
    for text, (turn_ids, session_ids, real_ids) in by_text.items():
        first = turn_ids[0] if unit == "turn" else session_ids[0]
        units = {"session": tuple(session_ids)}
        if unit == "turn":
            units = {"turn": tuple(turn_ids), "session": tuple(session_ids)}
        if official:
            units[DEFAULT_RULE_LEVEL] = tuple(real_ids)
        memories.append(
            Memory(opaque_id(inst.question_id, first), text, units, identifier=STORE_IDENTIFIER)
        )
    if len({m.memory_id for m in memories}) != len(memories):  # pragma: no cover - sha256
        raise RuntimeError(f"opaque id collision in question {inst.question_id}")
    if official:
        relevance = {
            "session": {sid: 2 for sid in official_gold(inst).sessions},
            DEFAULT_RULE_LEVEL: {sid: 2 for sid in verdict.gold},
        }
    else:
        relevance = {"session": {sid: 2 for sid in verdict.gold}}
    if unit == "turn":
        relevance["turn"] = turn_gold
    query = Query(inst.question_id, inst.question_type, inst.question, relevance)
    structure = {
        "memories": [structure[text] for text in by_text],
        "queries": [dated(inst.question_date)],
    }
    return Scope(inst.question_id, tuple(memories), (query,), structure), verdict
