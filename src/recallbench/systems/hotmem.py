"""HotMem (PyPI `hotmem`) behind the system seam, through its production code only.

Ingest: `MemoryDB.insert_many_ignore` (the path every HotMem hydration uses) with the
fixture ids, a fixed `created_at`, no TTL and vectors from HotMem's own embedder.
Search: `hotmem.search.search_memories`. Clone: the `hotmem-interchange-v1` package
(`write_package` -> `verify_package` -> `hydrate_package` into a fresh database).
HotMem's JSON tracing on stderr is silenced and its temp spool kept in our work dir.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hotmem
from hotmem import search as hm_search
from hotmem.db import MemoryDB, MemoryRecord
from hotmem.embed import DEFAULT_EMBEDDER, EmbeddingDescriptor, pack_embedding
from hotmem.interchange.canonical import compute_content_hash
from hotmem.interchange.hydrate import PackageError, hydrate_package, verify_package
from hotmem.interchange.package import write_package
from hotmem.rerank import MMRReranker

from recallbench.systems.base import (
    Hit,
    PackageInfo,
    SnapshotRejected,
    StoreRecord,
    TimedCalls,
    VectorLookup,
)

#: Every stored record gets this creation time, so nothing depends on the wall clock.
FIXED_CREATED_AT = "2025-01-01T00:00:00Z"
DB_NAME = "hotmem.sqlite"


_loggers_seen = -1


def silence_hotmem_tracing() -> None:
    """Raise every `hotmem.*` logger to WARNING (they print a JSON line per call).

    Cheap to call often: the walk only runs when new loggers have appeared since the last.
    """
    global _loggers_seen
    if len(logging.root.manager.loggerDict) == _loggers_seen:
        return
    for name in list(logging.root.manager.loggerDict):
        if name == "hotmem" or name.startswith("hotmem."):
            logging.getLogger(name).setLevel(logging.WARNING)
    _loggers_seen = len(logging.root.manager.loggerDict)


@contextlib.contextmanager
def _spool_in(directory: Path) -> Iterator[None]:
    """Point `tempfile` (HotMem's gz verification spool) inside `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    previous = tempfile.tempdir
    tempfile.tempdir = str(directory)
    try:
        yield
    finally:
        tempfile.tempdir = previous


class _CachedEmbedder:
    """HotMem's `Embedder` protocol over precomputed vectors: embeds nothing itself."""

    def __init__(self, descriptor: EmbeddingDescriptor, lookup: VectorLookup) -> None:
        self._descriptor = descriptor
        self._lookup = lookup

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self._descriptor

    def embed(self, text: str) -> list[float]:
        return list(self._lookup(text))


class HotMemStore:
    """One HotMem SQLite database in a directory."""

    def __init__(self, system: HotMemSystem, db: MemoryDB, embedder: Any) -> None:
        self._system = system
        self.db = db
        self._embedder = embedder

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        descriptor = self._embedder.descriptor
        rows = []
        with self._system._inside():
            for r in records:
                rows.append(
                    MemoryRecord(
                        id=r.memory_id,
                        identifier=r.identifier,
                        fact_text=r.text,
                        embedding=pack_embedding(self._embedder.embed(r.text)),
                        embedding_dim=descriptor.dimension,
                        embedding_model=descriptor.key,
                        importance=r.importance,
                        tags=json.dumps(list(r.tags)),
                        content_hash=compute_content_hash(r.identifier, r.text),
                        created_at=FIXED_CREATED_AT,
                    )
                )
            before = self.db.count()
            inserted = self.db.insert_many_ignore(rows)
            total = self.db.count()
        if inserted != len(rows) or total != before + len(rows):
            raise SnapshotRejected(
                "ingest_dropped",
                f"HotMem kept {total - before} of {len(rows)} records "
                "(duplicate id or identifier+text): ids must be unique",
            )
        return total

    def search(self, query: str, top_k: int) -> list[Hit]:
        with self._system._inside():
            rows = hm_search.search_memories(
                self.db,
                query,
                top_k=top_k,
                embedder=self._embedder,
                reranker=self._system.reranker,
            )
        return [Hit(r["memory_id"], float(r["score"]), r["identifier"]) for r in rows]

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """The rows HotMem's FTS5 leg matches (`MemoryDB.fts_search`, the query HotMem's
        search runs: an implicit AND of prefix terms)."""
        with self._system._inside():
            rows = self.db.fts_search(query)
        return "FTS5", sorted(r["id"] for r in rows)

    def count(self) -> int:
        return self.db.count()

    def close(self) -> None:
        with self._system._inside():
            self.db.close()


class HotMemSystem(TimedCalls):
    """HotMem with a given embedder (default: hotmem-hash-v1) and optional reranker."""

    def __init__(self, name: str = "hotmem", *, reranker: Any = None, embedder: Any = None) -> None:
        self.name = name
        self.reranker = reranker
        self.embedder = embedder if embedder is not None else DEFAULT_EMBEDDER
        silence_hotmem_tracing()

    def configuration(self) -> dict[str, Any]:
        d = self.embedder.descriptor
        return {
            "hotmem_version": hotmem.__version__,
            "embedding_model": d.key,
            "embedding_dimension": d.dimension,
            "scoring_weights": {
                "cosine": hm_search.W_COSINE,
                "fts_bm25": hm_search.W_FTS,
                "importance": hm_search.W_IMPORTANCE,
            },
            "reranker": self.reranker.descriptor.key if self.reranker is not None else "none",
            "search_function": "hotmem.search.search_memories",
            "ingest_function": "hotmem.db.MemoryDB.insert_many_ignore",
            "clone_format": "hotmem-interchange-v1",
        }

    def embedder_identity(self) -> str:
        d = self.embedder.descriptor
        return f"{d.key}@{d.dimension}"

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        with self._inside():
            if hasattr(self.embedder, "embed_batch"):  # learned embedders batch far faster
                return self.embedder.embed_batch(texts)
            return [list(self.embedder.embed(t)) for t in texts]

    def _open(self, directory: Path, vectors: VectorLookup | None) -> HotMemStore:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / DB_NAME
        if path.exists():
            raise FileExistsError(f"{path}: a store already exists here")
        embedder = (
            self.embedder if vectors is None else _CachedEmbedder(self.embedder.descriptor, vectors)
        )
        with self._inside():
            db = MemoryDB(path)
        silence_hotmem_tracing()
        return HotMemStore(self, db, embedder)

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> HotMemStore:
        return self._open(directory, vectors)

    def attach(self, directory: Path) -> HotMemStore:
        path = Path(directory) / DB_NAME
        if not path.exists():
            raise FileNotFoundError(f"{path}: no HotMem store here")
        with self._inside():
            db = MemoryDB(path)
        silence_hotmem_tracing()
        return HotMemStore(self, db, self.embedder)

    def snapshot(self, store: HotMemStore, package_dir: Path) -> PackageInfo:
        with self._inside():
            result = write_package(store.db, package_dir, gz=True)
        size = sum(p.stat().st_size for p in Path(package_dir).rglob("*") if p.is_file())
        return PackageInfo(records=result.exported, size_bytes=size)

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        with _spool_in(Path(work_dir)), self._inside():
            try:
                verified = verify_package(package_dir)
            except PackageError as exc:
                raise SnapshotRejected(exc.reason, f"HotMem rejected the package: {exc}") from None
            verified.cleanup()
        return verified.record_count

    def restore(self, package_dir: Path, directory: Path) -> HotMemStore:
        store = self._open(directory, None)
        with _spool_in(Path(directory) / "spool"), self._inside():
            try:
                hydrate_package(store.db, package_dir, embedder=self.embedder)
            except PackageError as exc:
                store.close()
                raise SnapshotRejected(exc.reason, f"HotMem rejected the package: {exc}") from None
        return store


def build_system(name: str) -> HotMemSystem:
    """The named HotMem configuration."""
    if name == "hotmem":
        return HotMemSystem("hotmem")
    if name == "hotmem-mmr":
        return HotMemSystem("hotmem-mmr", reranker=MMRReranker())
    if name == "hotmem-minilm":
        from recallbench.systems.semantic import shared_embedder

        return HotMemSystem("hotmem-minilm", embedder=shared_embedder())
    raise KeyError(name)
