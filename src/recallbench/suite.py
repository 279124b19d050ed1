"""The internal model of an evaluation suite: memories, graded queries, categories.

Readers (the JSONL fixtures, generators) produce a `Suite`; every stage after validate
works on this model only, whatever dataset it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

#: The eight query categories of the fixture lane, in report order.
CATEGORIES: tuple[str, ...] = (
    "exact_lexical",
    "semantic_paraphrase",
    "identifier_or_entity_name",
    "temporal_or_revision",
    "near_duplicate_diversity",
    "negative_or_no_answer",
    "cross_project_isolation",
    "snapshot_hydration_equivalence",
)
NEGATIVE_CATEGORY = "negative_or_no_answer"
DUPLICATE_CATEGORY = "near_duplicate_diversity"
MIN_QUERIES_PER_CATEGORY = 5
#: A memory graded at least this high counts as relevant for recall and MRR.
RELEVANT_GRADE = 2
MAX_GRADE = 3


@dataclass(frozen=True)
class Memory:
    """One record to store. `identifier` is its project/organisation scope."""

    memory_id: str
    identifier: str
    fact: str
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    duplicate_group: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "identifier": self.identifier,
            "fact": self.fact,
            "importance": self.importance,
            "tags": list(self.tags),
            "duplicate_group": self.duplicate_group,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Memory:
        return cls(
            memory_id=raw["memory_id"],
            identifier=raw["identifier"],
            fact=raw["fact"],
            importance=raw["importance"],
            tags=tuple(raw["tags"]),
            duplicate_group=raw.get("duplicate_group"),
        )


@dataclass(frozen=True)
class Query:
    """One graded query. `relevance` maps memory ids to grades 0-3 (0/omitted: irrelevant)."""

    query_id: str
    category: str
    query: str
    relevance: dict[str, int] = field(default_factory=dict)
    notes: str = ""

    @property
    def relevant_ids(self) -> frozenset[str]:
        """Memories graded 2 or 3."""
        return frozenset(m for m, g in self.relevance.items() if g >= RELEVANT_GRADE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "category": self.category,
            "query": self.query,
            "relevance": dict(self.relevance),
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Query:
        return cls(
            query_id=raw["query_id"],
            category=raw["category"],
            query=raw["query"],
            relevance=dict(raw["relevance"]),
            notes=raw.get("notes", ""),
        )


@dataclass(frozen=True)
class Suite:
    """Memories and queries, in fixture order."""

    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]
    categories: tuple[str, ...] = CATEGORIES

    @cached_property
    def duplicate_groups(self) -> dict[str, str]:
        """memory id -> duplicate group, for memories that declare one."""
        return {m.memory_id: m.duplicate_group for m in self.memories if m.duplicate_group}

    @cached_property
    def memory_by_id(self) -> dict[str, Memory]:
        """memory id -> Memory."""
        return {m.memory_id: m for m in self.memories}

    def queries_in(self, category: str) -> list[Query]:
        return [q for q in self.queries if q.category == category]

    def to_dict(self) -> dict[str, Any]:
        return {
            "categories": list(self.categories),
            "memories": [m.to_dict() for m in self.memories],
            "queries": [q.to_dict() for q in self.queries],
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Suite:
        return cls(
            memories=tuple(Memory.from_dict(m) for m in raw["memories"]),
            queries=tuple(Query.from_dict(q) for q in raw["queries"]),
            categories=tuple(raw["categories"]),
        )
