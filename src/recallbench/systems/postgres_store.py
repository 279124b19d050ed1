"""`langgraph-postgres`: LangGraph's `PostgresStore` (`langgraph-checkpoint-postgres`) with
its pgvector index, on a PostgreSQL server recallbench starts (optional extra `postgres`).

Server: `pgserver.get_server(<store dir>/pg, cleanup_mode="stop")`, PostgreSQL 16 with the
pgvector extension shipped inside the `pgserver` package, its data directory and its Unix
socket in the store directory (no TCP port), one server and one database per store. The
store stops it when it closes (`cleanup()`), and on every other exit path of the process
pgserver's own `atexit` hook stops it. `CREATE EXTENSION vector`, then
`PostgresStore(conn, index={"dims": 384, "embed": fn, "fields": ["text"]})` and `setup()`:
LangGraph's defaults for the rest (cosine distance, an HNSW index, pgvector's m 16 and
ef_construction 64, its session `hnsw.ef_search` 40), recorded in the configuration.
`put(("memories",), memory id, {"text", "identifier"})`; search
`store.search(("memories",), query=q, limit=top_k)` in LangGraph's order and score.
`embed` is a function over recallbench's vectors (the pipeline's vector cache, else the
`minilm` embedder), as for `langgraph`. No clone path yet (a pg_dump / pg_restore one is to
come): the round trip reports n/a.

As root, pgserver creates a system user `pgserver` to run PostgreSQL as, and adds read and
traverse permission for everyone to every directory above the store directory and its own
binaries (docs/stores.md); stopping through `pg_ctl` may then fail and pgserver terminates
the server process instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recallbench.systems.base import VectorLookup
from recallbench.systems.langgraph_store import NAMESPACE, LangGraphStore, LangGraphSystem
from recallbench.systems.registry import register
from recallbench.systems.storekit import VectorSource, package_version

SERVER_DIR = "pg"
#: LangGraph's pgvector defaults, as its PostgresStore ships them (none is set here).
INDEX_DEFAULTS = {
    "distance_type": "cosine",
    "ann_index_config": {"kind": "hnsw", "vector_type": "vector"},
    "pgvector_hnsw": {"m": 16, "ef_construction": 64, "ef_search": 40},
}


class PostgresLangGraphStore(LangGraphStore):
    """`LangGraphStore`'s seam over a `PostgresStore` on its own pgserver."""

    def __init__(self, system: PostgresSystem, directory: Path, lookup: VectorLookup | None):
        import pgserver
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._keys: dict[str, str] = {}
        self._identifiers: dict[str, str] = {}
        self._server = None
        self._conn = None
        try:
            with system._inside():
                self._server = pgserver.get_server(directory / SERVER_DIR, cleanup_mode="stop")
                self._server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
                self._conn = psycopg.connect(
                    self._server.get_uri(),
                    autocommit=True,
                    prepare_threshold=0,
                    row_factory=dict_row,
                )
                self._store = PostgresStore(self._conn, index=system.index_config(self._source))
                self._store.setup()
        except BaseException:
            self.close()
            raise

    def flush(self) -> None:
        """PostgreSQL commits every `put` (autocommit): nothing to flush."""

    def close(self) -> None:
        """Close the connection, then stop the server."""
        try:
            if self._conn is not None:
                self._conn.close()
        finally:
            self._conn = None
            self._store = None
            server, self._server = self._server, None
            if server is not None:
                server.cleanup()


class PostgresSystem(LangGraphSystem):
    """LangGraph PostgresStore with its pgvector index, on a server in the store directory."""

    def __init__(self) -> None:
        super().__init__("langgraph-postgres", langmem=False)
        self.clone = None

    def index_config(self, source: VectorSource) -> dict[str, Any]:
        return {"dims": 384, "embed": source, "fields": [self.text_field]}

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "langgraph",
            "implementation_version": package_version("langgraph"),
            "backend": "langgraph.store.postgres.PostgresStore (langgraph-checkpoint-postgres "
            f"{package_version('langgraph-checkpoint-postgres')}) on PostgreSQL 16 + pgvector "
            f"from pgserver {package_version('pgserver')}: one server and database per store, "
            "Unix socket in the store directory",
            "index": {
                "dims": 384,
                "embed": "a function over the pipeline's vector cache, else the minilm embedder",
                "fields": [self.text_field],
                **INDEX_DEFAULTS,
            },
            "exact": "no: pgvector HNSW (approximate)",
            "embedder": self.embedder.identity(),
            "namespace": list(NAMESPACE),
            "search": "store.search(namespace, query=q, limit=top_k): its order and score",
        }

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> PostgresLangGraphStore:
        return PostgresLangGraphStore(self, directory, vectors)


@register(
    "langgraph-postgres",
    description="LangGraph's PostgresStore with its pgvector HNSW index (cosine) on PostgreSQL 16 "
    "(pgserver, Unix socket in the build dir) over all-MiniLM-L6-v2 vectors",
    capabilities=("embedder",),
    extra="postgres",
)
def langgraph_postgres_system() -> PostgresSystem:
    return PostgresSystem()
