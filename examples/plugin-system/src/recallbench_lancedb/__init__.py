"""LanceDB (embedded, no server) as a recallbench system, found through an entry point.

Three systems, one per LanceDB search path, each LanceDB's own code:

* `lancedb`: hybrid search (`query_type="hybrid"`: the vector leg and the full-text leg
  fused by LanceDB's `RRFReranker`, K = 60);
* `lancedb-fts`: full-text search alone (LanceDB's native inverted index, `FTS()` with its
  defaults: simple tokenizer, lowercase, English stemming and stop words, BM25 scoring);
* `lancedb-vector`: vector search alone (exact flat scan, cosine distance; no ANN index).

Vectors come from recallbench's embedder capability: the embedder of a recallbench system,
by default `hotmem`'s (HotMem's 64-dimension character-trigram hash, `hotmem-hash-v1`: no
torch, no model). Pass `embedder_system="minilm"` to `LanceDBSystem` for all-MiniLM-L6-v2
vectors (recallbench's `semantic` extra). Because the capability is shared, recallbench's
prep cache (`open_store(vectors=...)`) feeds this store too.

Order: LanceDB's score for the search path (`_relevance_score`, `_score`, or 1 - cosine
distance), descending; ties by memory id ascending. To make that tie-break exact, every
search asks LanceDB for as many results as the table holds and cuts to `limit` after
sorting. The store is a LanceDB database in `<store dir>/lance` (one table, `memories`)
plus a small marker file; its memory ids are stored as given and never interpreted.
No clone path: the stages report "n/a" for the round trip.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import lancedb
import orjson
import pyarrow as pa
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker

from recallbench.plugin import Hit, SnapshotRejected, StoreRecord, get_system, records_digest

MARKER = "recallbench-lancedb.json"
TABLE = "memories"
RRF_K = 60
MODES = ("hybrid", "fts", "vector")


class BorrowedEmbedder:
    """A recallbench system's embedder capability, timed as this system's own work."""

    def __init__(self, system: LanceDBSystem, inner: Any) -> None:
        self._system = system
        self.inner = inner
        self.max_tokens = inner.max_tokens

    def identity(self) -> str:
        return self.inner.identity()

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        with self._system._inside():
            return self.inner.embed_texts(texts)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self.inner.token_counts(texts)


class LanceDBStore:
    """One LanceDB table of memories: id, identifier, text, importance, tags, vector."""

    def __init__(self, system: LanceDBSystem, directory: Path, lookup: Any = None) -> None:
        self._system = system
        self.directory = directory
        self._lookup = lookup
        with system._inside():
            self._db = lancedb.connect(str(directory / "lance"))
            tables = self._db.list_tables().tables
            self._table = self._db.open_table(TABLE) if TABLE in tables else None

    def _vectors(self, texts: Sequence[str]) -> list[list[float]]:
        if self._lookup is not None:
            return [list(self._lookup(t)) for t in texts]
        return self._system.embedder.embed_texts(texts)

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        (ids,) = self._columns("memory_id")
        held = set(ids)
        for r in records:
            if r.memory_id in held:
                raise SnapshotRejected("ingest_dropped", f"duplicate memory id {r.memory_id!r}")
            held.add(r.memory_id)
        if not records:
            return self.count()
        rows: dict[str, list[Any]] = {
            "memory_id": [r.memory_id for r in records],
            "identifier": [r.identifier for r in records],
            "text": [r.text for r in records],
            "importance": [float(r.importance) for r in records],
            "tags": [list(r.tags) for r in records],
        }
        if self._system.embedder is not None:
            rows["vector"] = self._vectors(rows["text"])
        with self._system._inside():
            if self._table is None:
                self._table = self._db.create_table(TABLE, data=self._arrow(rows))
            else:
                self._table.add(self._arrow(rows))
            # LanceDB's native full-text index, rebuilt over every row after each ingest
            self._table.create_index("text", config=FTS(), replace=True)
        return self.count()

    @staticmethod
    def _arrow(rows: dict[str, list[Any]]) -> pa.Table:
        fields = [
            pa.field("memory_id", pa.string()),
            pa.field("identifier", pa.string()),
            pa.field("text", pa.string()),
            pa.field("importance", pa.float64()),
            pa.field("tags", pa.list_(pa.string())),
        ]
        if "vector" in rows:
            dim = len(rows["vector"][0])
            fields.append(pa.field("vector", pa.list_(pa.float32(), dim)))
        return pa.Table.from_pydict(rows, schema=pa.schema(fields))

    def _columns(self, *names: str) -> list[list[Any]]:
        """The named columns of the whole table, read once."""
        if self._table is None:
            return [[] for _ in names]
        table = self._table.to_arrow()
        return [table.column(name).to_pylist() for name in names]

    def search(self, query: str, limit: int) -> list[Hit]:
        n = self.count()
        if n == 0 or limit <= 0:
            return []
        mode = self._system.mode
        vector = self._vectors([query])[0] if mode != "fts" else None
        with self._system._inside():
            if mode == "fts":
                builder = self._table.search(query, query_type="fts")
                key, sign = "_score", 1.0
            elif mode == "vector":
                builder = self._table.search(vector, query_type="vector").distance_type("cosine")
                key, sign = "_distance", -1.0
            else:
                builder = (
                    self._table.search(query_type="hybrid")
                    .vector(vector)
                    .text(query)
                    .distance_type("cosine")
                    .rerank(RRFReranker(K=RRF_K))
                )
                key, sign = "_relevance_score", 1.0
            if mode != "hybrid":  # (a hybrid query cannot select its legs' score columns)
                builder = builder.select(["memory_id", "identifier", key])
            table = builder.limit(n).to_arrow().select(["memory_id", "identifier", key])
            rows = table.to_pylist()
        ranked = sorted(rows, key=lambda r: (-sign * r[key], r["memory_id"]))[:limit]
        return [
            Hit(
                r["memory_id"],
                round(1.0 - r[key] if mode == "vector" else float(r[key]), 6),
                r["identifier"],
            )
            for r in ranked
        ]

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """Rows LanceDB's full-text index matches for the query."""
        n = self.count()
        if n == 0:
            return "LanceDB FTS", []
        with self._system._inside():
            rows = (
                self._table.search(query, query_type="fts")
                .select(["memory_id", "_score"])
                .limit(n)
                .to_arrow()
                .to_pylist()
            )
        return "LanceDB FTS", sorted(r["memory_id"] for r in rows)

    def count(self) -> int:
        if self._table is None:
            return 0
        with self._system._inside():
            return self._table.count_rows()

    def digest(self) -> str:
        """Over (memory id, text) of every row, read back from the table."""
        with self._system._inside():
            pairs = list(zip(*self._columns("memory_id", "text"), strict=True))
        return records_digest(pairs)

    def close(self) -> None:
        self._table = None
        self._db = None


class LanceDBSystem:
    """LanceDB embedded: hybrid, full-text or vector search."""

    clone = None  # no clone path: the round trip is reported "n/a"
    lexical = True

    def __init__(
        self, name: str = "lancedb", *, mode: str = "hybrid", embedder_system: str = "hotmem"
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.name = name
        self.mode = mode
        self.embedder_system = embedder_system if mode != "fts" else None
        self.description = {
            "hybrid": "LanceDB embedded, hybrid search (vector + full-text, its RRFReranker K 60)",
            "fts": "LanceDB embedded, its native full-text search (BM25, stemming, stop words)",
            "vector": "LanceDB embedded, exact vector search (cosine)",
        }[mode] + (
            "" if mode == "fts" else f"; vectors from recallbench's {embedder_system} embedder"
        )
        self.embedder = None
        if self.embedder_system is not None:
            self.embedder = BorrowedEmbedder(self, get_system(self.embedder_system).embedder)
        self._seconds = 0.0

    @contextlib.contextmanager
    def _inside(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds += time.perf_counter() - start

    def seconds_inside(self) -> float:
        return self._seconds

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "lancedb",
            "implementation_version": version("lancedb"),
            "search": {
                "hybrid": f"query_type='hybrid', RRFReranker(K={RRF_K}), cosine vector leg",
                "fts": "query_type='fts' over a native FTS() index on text (defaults)",
                "vector": "query_type='vector', cosine distance, flat (no ANN index)",
            }[self.mode],
            "embedder": self.embedder.identity() if self.embedder is not None else None,
            "embedder_from": self.embedder_system,
            "ties": "memory id ascending",
        }

    def open_store(self, directory: Path, *, vectors: Any = None) -> LanceDBStore:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / MARKER).exists():
            raise FileExistsError(f"{directory / MARKER}: a store already exists here")
        (directory / MARKER).write_bytes(orjson.dumps({"system": self.name}))
        return LanceDBStore(self, directory, vectors if self.embedder is not None else None)

    def attach(self, directory: Path, *, vectors: Any = None) -> LanceDBStore:
        directory = Path(directory)
        if not (directory / MARKER).exists():
            raise FileNotFoundError(f"{directory / MARKER}: no LanceDB store here")
        return LanceDBStore(self, directory, vectors if self.embedder is not None else None)


# Entry points (see pyproject.toml): each is called with no arguments, returns a System.


def hybrid_system() -> LanceDBSystem:
    return LanceDBSystem("lancedb", mode="hybrid")


def fts_system() -> LanceDBSystem:
    return LanceDBSystem("lancedb-fts", mode="fts")


def vector_system() -> LanceDBSystem:
    return LanceDBSystem("lancedb-vector", mode="vector")
