"""The one internal model every dataset reader produces and every stage consumes.

* A `Memory` is one record to store. `memory_id` is what the system under test sees (the
  fixture id, or an opaque hash for public datasets, so no gold leaks through ids).
  `units` maps each scoring level to the dataset ids the memory stands for at that level:
  a fixture memory is ``{"memory": ("m-001",)}``; a LongMemEval session stored once for two
  identical sessions is ``{"session": ("s1", "s7")}``; a LoCoMo turn is
  ``{"turn": ("D3:4",), "session": ("D3",)}``.
* A `Query` is one graded question. `relevance[level]` maps dataset ids at that level to
  grades 0-3 (graded >= `RELEVANT_GRADE` counts as relevant).
* A `Scope` is the memories that share one store, with the queries asked of that store: the
  fixture suite is one scope, a LongMemEval question is one, a LoCoMo conversation is one.
* A `Drop` is a query the reader refused to score, with a reason code and a sentence.
* Structure (conversational datasets only): a memory's `turns` (`Turn`: text, role or
  speaker, turn id, timestamp) and session `date`, and a query's `date`, as the dataset has
  them. They reach only a system that declares `structured = True`; the fixtures have none.
  A reader hands them over as plain data (`Scope.structure`), which validate writes to a
  spool of its own (`recallbench.builddir.scopespool`); a scope read back for a structured system has
  them in its memories and queries, any other scope has none (no `Turn` is ever built).

Ranking at a level: walk the system's ranked memories, expand each to its ids at that level,
keep first appearances (`level_ranking`; `level_firsts` also gives where each one first
appears, so an id's score is its first holder's). So a turn-unit run yields a session
ranking in the order sessions first appear among the retrieved turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A memory graded at least this high counts as relevant for recall, success and MRR.
RELEVANT_GRADE = 2
MAX_GRADE = 3


def relevant_ids(grades: Mapping[str, int], threshold: int = RELEVANT_GRADE) -> frozenset[str]:
    """The one relevance rule: R = {id : grades[id] >= threshold}."""
    return frozenset(doc for doc, grade in grades.items() if grade >= threshold)


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation as the dataset has it (a structured record's part).

    `text` is the turn's own words (no speaker prefix; LoCoMo's image caption appended as in
    the stored text); `role` where the dataset has roles (LongMemEval: ``user``,
    ``assistant``), `speaker` where it names speakers (LoCoMo); `turn_id` is the turn's
    1-based position in its session (a string: never a dataset id, which could name gold);
    `timestamp` the turn's own time where the dataset has one (neither dataset does yet).
    """

    text: str
    role: str | None = None
    speaker: str | None = None
    turn_id: str | None = None
    timestamp: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The turn as plain data, without the fields it does not have."""
        out: dict[str, Any] = {"text": self.text}
        for name in ("role", "speaker", "turn_id", "timestamp"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Turn:
        return cls(
            raw["text"],
            raw.get("role"),
            raw.get("speaker"),
            raw.get("turn_id"),
            raw.get("timestamp"),
        )


def memory_structure(turns: list[dict[str, Any]], date: str | None) -> dict[str, Any]:
    """One memory's entry of `Scope.structure`: its turns (plain data, as `Turn.to_dict`
    gives them) and its session's date (left out when None)."""
    return {"turns": turns, "date": date} if date is not None else {"turns": turns}


def dated(date: str | None) -> dict[str, Any]:
    """One query's entry of `Scope.structure`: its date, or nothing when None."""
    return {"date": date} if date is not None else {}


@dataclass(frozen=True)
class Memory:
    """One record to store; `memory_id` is the only id the system under test sees.

    `turns` and `date` (the session's date, verbatim) are the memory's structure where the
    dataset has it (a memory standing for several identical texts carries its first one's),
    filled only in a scope read back for a structured system (see `Scope.structure`);
    `to_dict` leaves them out when empty."""

    memory_id: str
    text: str
    units: Mapping[str, tuple[str, ...]]
    identifier: str = "default"
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    duplicate_group: str | None = None
    turns: tuple[Turn, ...] = ()
    date: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "memory_id": self.memory_id,
            "text": self.text,
            "units": {level: list(ids) for level, ids in self.units.items()},
            "identifier": self.identifier,
            "importance": self.importance,
            "tags": list(self.tags),
            "duplicate_group": self.duplicate_group,
        }
        if self.turns:
            out["turns"] = [turn.to_dict() for turn in self.turns]
        if self.date is not None:
            out["date"] = self.date
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Memory:
        return cls(
            memory_id=raw["memory_id"],
            text=raw["text"],
            units={level: tuple(ids) for level, ids in raw["units"].items()},
            identifier=raw["identifier"],
            importance=raw["importance"],
            tags=tuple(raw["tags"]),
            duplicate_group=raw.get("duplicate_group"),
            # only a structured system's scopes have turns (`scopespool.add_structure`)
            turns=tuple(Turn.from_dict(t) for t in raw["turns"]) if "turns" in raw else (),
            date=raw.get("date"),
        )


@dataclass(frozen=True)
class Query:
    """One graded query; `relevance[level]` maps dataset ids to grades (omitted: 0).
    `date` is when it is asked, verbatim, where the dataset says (LongMemEval's
    ``question_date``); `to_dict` leaves it out when None."""

    query_id: str
    category: str
    text: str
    relevance: Mapping[str, Mapping[str, int]]
    notes: str = ""
    date: str | None = None

    def relevant(self, level: str) -> frozenset[str]:
        """Ids at `level` graded RELEVANT_GRADE or higher (`relevant_ids`)."""
        return relevant_ids(self.relevance.get(level, {}))

    def to_dict(self) -> dict[str, Any]:
        out = {
            "query_id": self.query_id,
            "category": self.category,
            "text": self.text,
            "relevance": {level: dict(g) for level, g in self.relevance.items()},
            "notes": self.notes,
        }
        if self.date is not None:
            out["date"] = self.date
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Query:
        return cls(
            query_id=raw["query_id"],
            category=raw["category"],
            text=raw["text"],
            relevance={level: dict(g) for level, g in raw["relevance"].items()},
            notes=raw.get("notes", ""),
            date=raw.get("date"),
        )


@dataclass(frozen=True)
class Scope:
    """The memories that share one store, and the queries asked of it (in dataset order).

    `structure`: a reader's scope's structure where the dataset has it, as plain data, one
    entry per memory and per query by position: ``{"memories": [{"turns": [turn as
    `Turn.to_dict` gives it, ...], "date": ...}, ...], "queries": [{"date": ...}, ...]}``
    (a key left out when the dataset has nothing for it). Validate writes it to the
    structure spool, not the scope's line (`to_dict` leaves it out); a stage reading the
    scope for a structured system puts it back into the memories' `turns` and `date` and
    the queries' `date` (`scopespool.add_structure`, then `from_dict`)."""

    scope_id: str
    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]
    structure: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def memory_by_id(self) -> dict[str, Memory]:
        return {m.memory_id: m for m in self.memories}

    def to_dict(self) -> dict[str, Any]:
        """The scope as plain JSON-able data (a line of validate's spool, a task's item)."""
        return {
            "scope_id": self.scope_id,
            "memories": [m.to_dict() for m in self.memories],
            "queries": [q.to_dict() for q in self.queries],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], span: Sequence[int] | None = None) -> Scope:
        """A scope from plain data; with `span` (start, stop), only those of its queries."""
        queries = raw["queries"] if span is None else raw["queries"][span[0] : span[1]]
        return cls(
            raw["scope_id"],
            tuple(Memory.from_dict(m) for m in raw["memories"]),
            tuple(Query.from_dict(q) for q in queries),
        )

    def holders(self, level: str) -> dict[str, list[Memory]]:
        """`level` id -> the memories that hold it, in memory order."""
        out: dict[str, list[Memory]] = {}
        for m in self.memories:
            for unit in m.units.get(level, ()):
                out.setdefault(unit, []).append(m)
        return out


@dataclass(frozen=True)
class Drop:
    """A query not scored: `reason` is a stable code, `detail` the sentence for people."""

    query_id: str
    category: str
    reason: str
    detail: str
    scope_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "category": self.category,
            "reason": self.reason,
            "detail": self.detail,
            "scope_id": self.scope_id,
        }


@dataclass(frozen=True)
class Level:
    """A scoring level: its name and the measures' prefix in metric names ('' or 'turn_')."""

    name: str
    prefix: str = ""
    description: str = ""


def level_firsts(
    ranked_memory_ids: Sequence[str], memories: Mapping[str, Memory], level: str
) -> dict[str, int]:
    """Dataset ids at `level` in order of first appearance among the ranked memories, each
    with the position (0-based) of the first ranked memory that holds it."""
    firsts: dict[str, int] = {}
    for position, memory_id in enumerate(ranked_memory_ids):
        for unit in memories[memory_id].units.get(level, ()):
            firsts.setdefault(unit, position)
    return firsts


def level_ranking(
    ranked_memory_ids: Sequence[str], memories: Mapping[str, Memory], level: str
) -> list[str]:
    """Dataset ids at `level` in order of first appearance among the ranked memories."""
    return list(level_firsts(ranked_memory_ids, memories, level))
