"""HotMem (PyPI `hotmem`) behind the system seam, through its production code only.

Ingest: `MemoryDB.insert_many_ignore` (the path every HotMem hydration uses) with the
fixture ids, a fixed `created_at`, no TTL and vectors from HotMem's own embedder.
Search: `hotmem.search.search_memories`. Digest: (id, fact_text) of every row, read back
with `MemoryDB.iter_rows`. Capabilities: a clone path, the `hotmem-interchange-v1` package
(`write_package` -> `verify_package` -> `hydrate_package` into a fresh database) with its
own corruptions (a flipped gzip byte; a record edited and re-compressed under the old
manifest, which HotMem rejects as `decompressed_digest_mismatch`); the embedder (the hash
embedder, or MiniLM for `hotmem-minilm`); lexical diagnostics (its FTS5 leg).
HotMem's JSON tracing on stderr is silenced and its temp spool kept in our work dir.
Registers `hotmem`, `hotmem-mmr` and `hotmem-minilm`.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import struct
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hotmem
from hotmem import search as hm_search
from hotmem.db import MemoryDB, MemoryRecord
from hotmem.embed import DEFAULT_EMBEDDER, EmbeddingDescriptor, pack_embedding
from hotmem.interchange.canonical import canonical_line, compute_content_hash
from hotmem.interchange.hydrate import PackageError, hydrate_package, verify_package
from hotmem.interchange.package import PAYLOAD_GZ, write_package
from hotmem.rerank import MMRReranker

from recallbench.systems.base import (
    Corruption,
    Hit,
    PackageInfo,
    SnapshotRejected,
    StoreRecord,
    TimedCalls,
    VectorLookup,
)
from recallbench.systems.packaging import (
    copy_package,
    edit_text,
    package_size,
    raw_byte_corruption,
    records_digest,
)
from recallbench.systems.registry import register

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

    def search(self, query: str, limit: int) -> list[Hit]:
        with self._system._inside():
            rows = hm_search.search_memories(
                self.db,
                query,
                top_k=limit,
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
        with self._system._inside():
            return self.db.count()

    def digest(self) -> str:
        """Over (id, fact_text) of every row, read back with `MemoryDB.iter_rows` (the
        reading is HotMem's time, the hashing ours)."""
        with self._system._inside():
            pairs = [(r["id"], r["fact_text"]) for r in self.db.iter_rows(include_embedding=False)]
        return records_digest(pairs)

    def close(self) -> None:
        with self._system._inside():
            self.db.close()


class HotMemEmbedder:
    """The embedder capability: HotMem's own embedder (hash or learned), batched when it can."""

    def __init__(self, system: HotMemSystem, inner: Any) -> None:
        self._system = system
        self.inner = inner  # a hotmem.embed.Embedder
        #: the hash embedder reads every trigram (no limit); a learned one says its limit
        self.max_tokens: int | None = getattr(inner, "max_tokens", None)
        #: one text at a time (the hash embedder) never depends on the batch; a learned
        #: embedder says whether it does (see `recallbench.core.embedding`)
        self.batch_invariant: bool = getattr(
            inner, "batch_invariant", not hasattr(inner, "embed_batch")
        )

    def identity(self) -> str:
        d = self.inner.descriptor
        return f"{d.key}@{d.dimension}"

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        with self._system._inside():
            if hasattr(self.inner, "embed_batch"):  # learned embedders batch far faster
                return self.inner.embed_batch(texts)
            return [list(self.inner.embed(t)) for t in texts]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        if hasattr(self.inner, "token_counts"):
            return self.inner.token_counts(texts)
        # hotmem-hash-v1 hashes every character trigram of the lowercased text
        return [max(1, len(t) - 2) for t in texts]


class HotMemClone:
    """HotMem's interchange package (`hotmem-interchange-v1`, gzip payload)."""

    def __init__(self, system: HotMemSystem) -> None:
        self._system = system

    def snapshot(self, store: HotMemStore, package_dir: Path) -> PackageInfo:
        with self._system._inside():
            result = write_package(store.db, package_dir, gz=True)
        return PackageInfo(records=result.exported, size_bytes=package_size(package_dir))

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        with _spool_in(Path(work_dir)), self._system._inside():
            try:
                verified = verify_package(package_dir)
            except PackageError as exc:
                raise SnapshotRejected(exc.reason, f"HotMem rejected the package: {exc}") from None
            verified.cleanup()
        return verified.record_count

    def restore(self, package_dir: Path, directory: Path) -> HotMemStore:
        system = self._system
        store = system._open(directory, None)
        with _spool_in(Path(directory) / "spool"), system._inside():
            try:
                hydrate_package(store.db, package_dir, embedder=system.embedder.inner)
            except PackageError as exc:
                store.close()
                raise SnapshotRejected(exc.reason, f"HotMem rejected the package: {exc}") from None
        return store

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        return [raw_byte_corruption(package_dir, work_dir), _stale_manifest(package_dir, work_dir)]


class _GzipWithPrefix:
    """Gzip members of `prefix + tail` for many tails: the prefix is compressed once and the
    compressor copied per tail (gzip header with mtime 0, level 9, as `write_package`)."""

    def __init__(self, prefix: bytes) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._head = self._deflate.compress(prefix)
        self._crc = zlib.crc32(prefix)
        self._size = len(prefix)

    def member(self, tail: bytes) -> bytes:
        deflate = self._deflate.copy()
        body = self._head + deflate.compress(tail) + deflate.flush()
        crc = zlib.crc32(tail, self._crc)
        size = (self._size + len(tail)) & 0xFFFFFFFF
        header = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x02\xff"
        return header + body + struct.pack("<II", crc, size)


def _stale_manifest(package_dir: Path, work_dir: Path) -> Corruption:
    """`stale_manifest`: one record's `fact_text` edited and the payload re-compressed validly
    (HotMem's canonical JSON, gzip mtime 0), `manifest.json` kept.

    The last record is edited: one character replaced, tried at successive positions until
    the re-compressed payload keeps the size the manifest records, so HotMem's size check
    passes and its decompressed sha256 (`decompressed_digest_mismatch`) is what must catch
    the change. The unchanged records are compressed once, whatever the store's size. When
    no such edit is found, the text is extended and the size check catches it.
    """
    dest = copy_package(package_dir, work_dir, "stale_manifest")
    payload = dest / PAYLOAD_GZ
    original = payload.read_bytes()
    lines = gzip.decompress(original).splitlines(keepends=True)
    record = json.loads(lines[-1])
    text = record["fact_text"]
    packer = _GzipWithPrefix(b"".join(lines[:-1]))

    def rewritten(new_text: str) -> bytes:
        edited = dict(record, fact_text=new_text)
        return packer.member(canonical_line(edited).encode())  # ends with its newline

    how, blob = "extended", rewritten(edit_text(text))
    for i in range(min(len(text), 200)):
        for repl in "xqzj":
            if text[i] == repl:
                continue
            candidate = rewritten(text[:i] + repl + text[i + 1 :])
            if len(candidate) == len(original):
                how, blob = f"character {i} replaced", candidate
                break
        else:
            continue
        break
    payload.write_bytes(blob)
    return Corruption(
        "stale_manifest",
        f"{PAYLOAD_GZ}: record {record.get('id')!r} fact_text {how}, re-compressed; "
        "manifest.json kept",
        dest,
    )


class HotMemSystem(TimedCalls):
    """HotMem with a given embedder (default: hotmem-hash-v1) and optional reranker."""

    lexical = True
    #: the distribution whose code this system measures (its source goes beside the result)
    distribution = "hotmem"

    def __init__(self, name: str = "hotmem", *, reranker: Any = None, embedder: Any = None) -> None:
        self.name = name
        self.reranker = reranker
        self.embedder = HotMemEmbedder(self, embedder if embedder is not None else DEFAULT_EMBEDDER)
        self.clone = HotMemClone(self)
        silence_hotmem_tracing()

    def configuration(self) -> dict[str, Any]:
        d = self.embedder.inner.descriptor
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

    def _store(self, db: MemoryDB, vectors: VectorLookup | None) -> HotMemStore:
        """A store over an open database, embedding with HotMem's embedder or `vectors`."""
        silence_hotmem_tracing()
        inner = self.embedder.inner
        embedder = inner if vectors is None else _CachedEmbedder(inner.descriptor, vectors)
        return HotMemStore(self, db, embedder)

    def _open(self, directory: Path, vectors: VectorLookup | None) -> HotMemStore:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / DB_NAME
        if path.exists():
            raise FileExistsError(f"{path}: a store already exists here")
        with self._inside():
            db = MemoryDB(path)  # its ingest ends the transaction opening leaves open
        return self._store(db, vectors)

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> HotMemStore:
        return self._open(directory, vectors)

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> HotMemStore:
        path = Path(directory) / DB_NAME
        if not path.exists():
            raise FileNotFoundError(f"{path}: no HotMem store here")
        with self._inside():
            db = MemoryDB(path)
            # opening rebuilds the FTS index in a transaction HotMem leaves open: end it, or
            # the write lock stays held and other workers opening the same store time out
            db.commit()
        return self._store(db, vectors)


_HOTMEM = "HotMem's own search (cosine + FTS5 + importance fusion)"


@register(
    "hotmem",
    description=f"{_HOTMEM} with its default hash embedder (hotmem-hash-v1)",
    capabilities=("clone", "embedder", "lexical"),
)
def hotmem_system() -> HotMemSystem:
    return HotMemSystem("hotmem")


@register(
    "hotmem-mmr",
    description=f"{_HOTMEM}, hash embedder, then its MMR reranker (lambda 0.5, pool 50)",
    capabilities=("clone", "embedder", "lexical"),
)
def hotmem_mmr_system() -> HotMemSystem:
    return HotMemSystem("hotmem-mmr", reranker=MMRReranker())


@register(
    "hotmem-minilm",
    description=f"{_HOTMEM} with all-MiniLM-L6-v2 vectors in place of the hash embedder",
    capabilities=("clone", "embedder", "lexical"),
    extra="semantic",
)
def hotmem_minilm_system() -> HotMemSystem:
    from recallbench.systems.semantic import shared_embedder

    return HotMemSystem("hotmem-minilm", embedder=shared_embedder())
