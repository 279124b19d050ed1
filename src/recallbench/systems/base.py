"""The seam between stages and a system under test.

A stage never imports a memory system directly: it asks a `System` for a fresh `Store` in a
directory, ingests `StoreRecord`s, searches, and round-trips the store through the system's
snapshot -> verify -> restore path. HotMem is the first implementation; later systems
(other configurations, BM25, hybrids) implement the same two protocols.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from recallbench.errors import RecallbenchError


@dataclass(frozen=True)
class StoreRecord:
    """One memory as the system sees it. `memory_id` must be opaque to the system."""

    memory_id: str
    identifier: str
    text: str
    importance: float = 0.5
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    """One ranked search result, in the order the system returned it."""

    memory_id: str
    score: float
    identifier: str


@dataclass(frozen=True)
class PackageInfo:
    """What a snapshot produced: records exported and package size in bytes."""

    records: int
    size_bytes: int


class SnapshotRejected(RecallbenchError):
    """The system's verification refused a package; `reason` is the system's own code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class MissingVector(RecallbenchError):
    """A store opened with a vector cache was asked to embed a text that is not cached."""


#: text -> vector; a store opened with one embeds nothing itself.
VectorLookup = Callable[[str], Sequence[float]]


class TimedCalls:
    """Mixin for systems: `_inside()` times a block as the system's own work.

    `seconds_inside()` is this instance's total; `process_seconds_inside` (per class) adds
    up every instance in the process, for overhead figures in benchmarks.
    """

    process_seconds_inside: float = 0.0
    _seconds_inside: float = 0.0

    @contextlib.contextmanager
    def _inside(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self._seconds_inside += elapsed
            type(self).process_seconds_inside += elapsed

    def seconds_inside(self) -> float:
        return self._seconds_inside


class Store(Protocol):
    def ingest(self, records: Sequence[StoreRecord]) -> int:
        """Store all records; return how many the store now holds."""

    def search(self, query: str, top_k: int) -> list[Hit]:
        """The system's production search, results in its own order."""

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """(name of the system's lexical matcher, ids it matches for `query`), through the
        system's own code. Diagnostic only: explains misses, never used for scoring."""

    def count(self) -> int: ...

    def close(self) -> None: ...


class System(Protocol):
    #: short, stable name used in artifacts, e.g. "hotmem" or "hotmem-mmr"
    name: str

    def configuration(self) -> dict[str, Any]:
        """The configuration actually in use, read from the system (never retyped)."""

    def embedder_identity(self) -> str:
        """A key that changes whenever stored or query vectors would change."""

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts with the system's own embedder (prep phase of cached lanes)."""

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> Store:
        """A fresh, empty store inside `directory` (which must not hold one already)."""

    def attach(self, directory: Path) -> Store:
        """Reopen the store a previous `open_store` left in `directory`."""

    def snapshot(self, store: Store, package_dir: Path) -> PackageInfo: ...

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        """Verify a package; return its record count or raise SnapshotRejected."""

    def restore(self, package_dir: Path, directory: Path) -> Store:
        """Verify and hydrate the package into a fresh store in `directory`."""

    def seconds_inside(self) -> float:
        """Wall time spent inside the system's own calls so far (for overhead figures)."""
