"""The stores on PostgreSQL + pgvector (optional extra `postgres`), each through its own
public API, on a PostgreSQL 16 server recallbench starts for each store
(`postgres_server.PostgresServer`: the pgserver wheel's binaries, the data directory in
`<store dir>/pg`, a Unix socket only, stopped on every exit path), one database per store.

* `langgraph-postgres`: LangGraph's `PostgresStore` (langgraph-checkpoint-postgres) with its
  pgvector index: `PostgresStore(conn, index={"dims": 384, "embed": fn, "fields": ["text"],
  "distance_type": "cosine", "ann_index_config": ...})`, `setup()`; put and search as for
  `langgraph`. Its index is LangGraph's default, HNSW (pgvector's m 16, ef_construction 64);
  `kind=ivfflat` (lists, probes) or `kind=flat` (no index: exact) as options.
* `llamaindex-pgvector`: LlamaIndex's `PGVectorStore` (llama-index-vector-stores-postgres)
  under a `VectorStoreIndex`, as LlamaIndex ships it: no ANN index, so an exact cosine scan.
  `llamaindex-pgvector-hnsw`: the same with `hnsw_kwargs` (HNSW, cosine ops; LlamaIndex has
  no defaults for them: pgvector's are used).
* `mem0-pgvector`: mem0's `Memory` on its `pgvector` vector store (mem0's defaults: an HNSW
  index with pgvector's parameters, cosine, its keyword search over PostgreSQL full text,
  which makes mem0's BM25 half active), infer=False, as for `mem0`.

Index options (`adapters.index_options`: `RECALLBENCH_INDEX_<SYSTEM>=key=value,...`), the
stores' and pgvector's defaults otherwise, all recorded in the configuration and in each
store's marker (a store reopened under other options is refused, as Milvus's are). The
index is read back from the database's catalog when a store opens (`check_index`: access
method, operator class, build options): one pgvector refused (LlamaIndex only logs that)
or one the marker does not describe is one line, never an exact scan recorded as HNSW.
pgvector 0.6.2's HNSW scan returns at most `hnsw.ef_search` rows, so a search for more
than `ef_search` results sets the session's `hnsw.ef_search` to the search's limit, at
most pgvector's limit of 1000 (recorded as `ef_search_for_search`, `ef_search_limit` and
`search_depth_limit`: a search deeper than 1000 gets at most 1000 hits from the index, and
the report says so when top-k passes it), else a query of k would get about 40 hits from a
store of k. An `ef_search` option above 1000 is refused in one line.

Clone (`DumpClone`): snapshot = `pg_dump --format=custom` of the store's database plus a
manifest (sha256, record count, digest, embedder, index options); verify = the manifest,
then `pg_restore` into a fresh database on a fresh server and the store's own count and
digest read back through its API; restore = the same into the new store directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.systems.adapters import (
    MiniLMCapability,
    OpensDirectories,
    PackageClone,
    ReadsBack,
    VectorSource,
    index_options,
    index_options_variable,
    package_version,
)
from recallbench.systems.base import (
    Hit,
    SnapshotRejected,
    StoreRecord,
    TimedCalls,
    VectorLookup,
)
from recallbench.systems.langgraph_store import NAMESPACE, LangGraphStore, LangGraphSystem
from recallbench.systems.llamaindex_store import _embedding_class, node_hits, text_nodes
from recallbench.systems.mem0_store import COLLECTION, DIMS, Mem0Store, Mem0System
from recallbench.systems.packaging import check_new_ids
from recallbench.systems.postgres_server import PostgresServer, severe_line, versions
from recallbench.systems.registry import register

SERVER_DIR = "pg"
DUMP = "database.dump"
DIMENSION = 384
#: pgvector 0.6.2's defaults (its HNSW `m`, `ef_construction`, session `hnsw.ef_search`;
#: IVFFlat `lists` and session `ivfflat.probes`)
PGVECTOR_HNSW = {"m": 16, "ef_construction": 64, "ef_search": 40}
PGVECTOR_IVFFLAT = {"lists": 100, "probes": 1}
#: pgvector's bound on the session's `hnsw.ef_search` (it refuses a larger value): an HNSW
#: scan returns at most this many rows, whatever a search's limit
EF_SEARCH_LIMIT = 1000
EF_SEARCH_RULE = (
    f"min(max(ef_search, top_k), {EF_SEARCH_LIMIT}) for each search (pgvector 0.6 returns at "
    f"most ef_search rows, and takes ef_search up to {EF_SEARCH_LIMIT}: a search for more "
    f"than {EF_SEARCH_LIMIT} gets at most {EF_SEARCH_LIMIT} hits from the index)"
)
#: the operator class of every vector index here (cosine distance)
COSINE_OPS = "vector_cosine_ops"


def ef_search_for(options: dict[str, Any], limit: int) -> int:
    """The session's `hnsw.ef_search` for a search of at most `limit` hits: the option
    raised to the limit (pgvector 0.6 returns at most ef_search rows), at most pgvector's
    `EF_SEARCH_LIMIT`. (The configuration's rule says `top_k` for the limit: recorded in
    every result, it keeps its words.)"""
    return min(max(int(options.get("ef_search", PGVECTOR_HNSW["ef_search"])), limit),
               EF_SEARCH_LIMIT)  # fmt: skip


def hnsw_search_limits() -> dict[str, Any]:
    """What a configuration records of an HNSW store's searches: the ef_search rule and the
    depth past which its index returns nothing (`search_depth_limit`, which the report
    names when top-k passes it)."""
    return {
        "ef_search_for_search": EF_SEARCH_RULE,
        "ef_search_limit": EF_SEARCH_LIMIT,
        "search_depth_limit": EF_SEARCH_LIMIT,
    }


def checked_ef_search(system: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options`, refused in one line when their ef_search passes pgvector's limit."""
    if options.get("ef_search", 0) > EF_SEARCH_LIMIT:
        raise RecallbenchError(
            f"{index_options_variable(system)}: ef_search={options['ef_search']} is above "
            f"pgvector's limit of {EF_SEARCH_LIMIT} (hnsw.ef_search)"
        )
    return options


# --------------------------------------------------------------------------- read back

READ_BACK = (
    "the index read back from the database's catalog (pg_index) when a store opens: "
    "access method, operator class and build options must be the ones recorded"
)

#: every pgvector index on a table (public schema): its access method, operator class,
#: the options it was built with and whether it is valid
_VECTOR_INDEXES = """
SELECT am.amname, opc.opcname, c.reloptions, i.indisvalid
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_am am ON am.oid = c.relam
JOIN pg_opclass opc ON opc.oid = i.indclass[0]
WHERE t.relname = %s AND t.relnamespace = 'public'::regnamespace
  AND am.amname IN ('hnsw', 'ivfflat')
ORDER BY c.relname
"""
#: pgvector's build defaults, for an option an index was built without
_BUILD_DEFAULTS = {
    "hnsw": {"m": PGVECTOR_HNSW["m"], "ef_construction": PGVECTOR_HNSW["ef_construction"]},
    "ivfflat": {"lists": PGVECTOR_IVFFLAT["lists"]},
}


def vector_index(method: str, **options: int) -> dict[str, Any]:
    """A pgvector index as the configuration records it and `held_indexes` reads it."""
    return {"method": method, "opclass": COSINE_OPS, "options": dict(options), "valid": True}


def held_indexes(server: PostgresServer, table: str) -> list[dict[str, Any]]:
    """The pgvector indexes the database holds on `table`, read from its catalog (options
    it was built without at pgvector's defaults)."""
    import psycopg

    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        rows = conn.execute(_VECTOR_INDEXES, (table,)).fetchall()
    out = []
    for method, opclass, reloptions, valid in rows:
        options = dict(_BUILD_DEFAULTS.get(method, {}))
        for item in reloptions or ():
            key, _, value = item.partition("=")
            options[key] = int(value) if value.isdigit() else value
        out.append({"method": method, "opclass": opclass, "options": options, "valid": valid})
    return out


def _describe(indexes: list[dict[str, Any]]) -> str:
    if not indexes:
        return "no vector index (an exact scan)"
    return "; ".join(
        f"{i['method']} ({i['opclass']}"
        + "".join(f", {k} {v}" for k, v in sorted(i["options"].items()))
        + ("" if i["valid"] else ", not valid")
        + ")"
        for i in indexes
    )


def check_index(server: PostgresServer, system: Any, table: str) -> None:
    """Refuse (one line) a store whose database does not hold the index its system's
    configuration records (`system.vector_index()`: one index, or None for an exact scan):
    pgvector refused it (LlamaIndex only logs that), or the store was built under other
    options. The line names what the database holds, what was recorded, and what
    PostgreSQL said when it refused (its log's ERROR line since the server started)."""
    wanted = system.vector_index()
    expected = [] if wanted is None else [wanted]
    held = held_indexes(server, table)
    if held == expected:
        return
    said = severe_line(server.log_since_start())
    raise RecallbenchError(
        f"{system.name}: the database holds {_describe(held)} on {table}, not the "
        f"{_describe(expected)} its configuration records ({index_options_variable(system.name)})"
        + (f"; PostgreSQL said: {said}" if said else "")
    )


def server_description() -> str:
    found = versions()
    return (
        f"PostgreSQL {found['postgresql']} + pgvector {found['pgvector']} (the binaries of "
        f"pgserver {package_version('pgserver')}, started by recallbench: one server and "
        "database per store, Unix socket only, in a user namespace as root)"
    )


def _set_session(execute: Any, options: dict[str, Any], limit: int) -> int:
    """The session's pgvector search settings for a search of at most `limit` hits (see the
    module docstring); returns the ef_search used."""
    ef_search = ef_search_for(options, limit)
    execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
    if "probes" in options:
        execute("SELECT set_config('ivfflat.probes', %s, false)", (str(options["probes"]),))
    return ef_search


# --------------------------------------------------------------------------- clone path


class DumpClone(PackageClone):
    """pg_dump / pg_restore clone path of a store on its own server (module docstring).

    pg_restore builds an index anew; for pgvector's HNSW, whose node levels are random
    (a fresh random state per backend), the restored graph is another graph: the system
    says so (`clone_rebuilds_index`), and a restored store may order equal scores, or at
    scale a near neighbour, differently (docs/stores.md).

    The store has `server` (its running `PostgresServer`) and `delete_smallest`, which
    deletes the record with the smallest memory id through the store's own API."""

    payload = DUMP

    def _write(self, store: Any, path: Path) -> None:
        store.server.dump(path)

    def _extra(self) -> dict[str, Any]:
        return {"index": self._system.options}

    def _check(self, manifest: dict[str, Any]) -> None:
        if manifest.get("index") != self._system.options:
            raise SnapshotRejected(
                "index_mismatch",
                f"made with index options {manifest.get('index')}, this system has "
                f"{self._system.options} ({index_options_variable(self._system.name)})",
            )

    def _open(self, payload: Path, directory: Path) -> Any:
        """A fresh store in `directory` from the dump (pg_restore into a fresh database)."""
        self._system.claim(directory)
        with PostgresServer(Path(directory) / SERVER_DIR) as server:
            server.restore(payload)
        return self._system.attach(directory)

    def _delete_smallest(self, payload: Path, scratch: Path) -> None:
        store = self._open(payload, scratch)
        try:
            store.delete_smallest()
            payload.unlink()
            store.server.dump(payload)
        finally:
            store.close()


class ServerBacked:
    """What a store here adds: its `server`, started on open and stopped on close, and the
    check that the database holds the index the configuration records (`_check_index`,
    once the store's own setup has made its table)."""

    server: PostgresServer | None = None
    _system: Any

    def _start_server(self, directory: Path) -> PostgresServer:
        self.server = PostgresServer(Path(directory) / SERVER_DIR).start()
        self.server.ensure_database()
        return self.server

    def _check_index(self) -> None:
        assert self.server is not None
        check_index(self.server, self._system, self._system.vector_table)

    def _stop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()


# --------------------------------------------------------------------------- langgraph


class PostgresLangGraphStore(ServerBacked, LangGraphStore):
    """`LangGraphStore`'s seam over a `PostgresStore` on its own server."""

    def __init__(self, system: PostgresLangGraphSystem, directory: Path, lookup: Any) -> None:
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._keys: dict[str, str] = {}
        self._identifiers: dict[str, str] = {}
        self._conn = None
        try:
            with system._inside():
                server = self._start_server(directory)
                self._conn = psycopg.connect(
                    server.conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
                )
                self._store = PostgresStore(self._conn, index=system.index_config(self._source))
                self._store.setup()
            self._check_index()
        except BaseException:
            self.close()
            raise

    def search(self, query: str, limit: int) -> list[Hit]:
        if self._conn is not None and limit > 0:
            with self._system._inside():
                _set_session(self._conn.execute, self._system.options, limit)
        return super().search(query, limit)

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
            self._stop_server()


class PostgresLangGraphSystem(LangGraphSystem):
    """LangGraph PostgresStore with its pgvector index, on a server in the store directory."""

    #: LangGraph's table of vectors (its index is on `embedding`)
    vector_table = "store_vectors"

    def __init__(self) -> None:
        super().__init__("langgraph-postgres", langmem=False)
        self.options = index_options(
            self.name, {"kind": "hnsw", **PGVECTOR_HNSW, **PGVECTOR_IVFFLAT}
        )
        if self.options["kind"] not in ("hnsw", "ivfflat", "flat"):
            raise RecallbenchError(
                f"{index_options_variable(self.name)}: kind={self.options['kind']!r} is not "
                "hnsw, ivfflat or flat"
            )
        checked_ef_search(self.name, self.options)
        self.marker_options = self.options
        self.clone = DumpClone(self, "recallbench-langgraph-postgres-dump-v1")
        self.clone_rebuilds_index = self.options["kind"] != "flat"

    def vector_index(self) -> dict[str, Any] | None:
        """The index the database must hold (None: no index, an exact scan)."""
        kind, options = self.options["kind"], self.options
        if kind == "hnsw":
            return vector_index("hnsw", m=options["m"], ef_construction=options["ef_construction"])
        if kind == "ivfflat":
            return vector_index("ivfflat", lists=options["lists"])
        return None

    def ann_index_config(self) -> dict[str, Any]:
        kind = self.options["kind"]
        if kind == "hnsw":
            return {"kind": "hnsw", "m": self.options["m"],
                    "ef_construction": self.options["ef_construction"]}  # fmt: skip
        if kind == "ivfflat":
            return {"kind": "ivfflat", "nlist": self.options["lists"]}
        return {"kind": "flat"}

    def index_config(self, source: VectorSource) -> dict[str, Any]:
        return {
            "dims": DIMENSION,
            "embed": source,
            "fields": [self.text_field],
            "distance_type": "cosine",
            "ann_index_config": self.ann_index_config(),
        }

    def configuration(self) -> dict[str, Any]:
        kind = self.options["kind"]
        return {
            "implementation": "langgraph",
            "implementation_version": package_version("langgraph"),
            "backend": "langgraph.store.postgres.PostgresStore (langgraph-checkpoint-postgres "
            f"{package_version('langgraph-checkpoint-postgres')}) on {server_description()}",
            "index": {
                "dims": DIMENSION,
                "embed": "a function over the pipeline's vector cache, else the minilm embedder",
                "fields": [self.text_field],
                "distance_type": "cosine",
                "ann_index_config": self.ann_index_config(),
            },
            "index_options": dict(self.options),
            "index_options_variable": index_options_variable(self.name),
            **(
                hnsw_search_limits() if kind == "hnsw" else {"ef_search_for_search": None}
            ),  # fmt: skip
            "index_read_back": READ_BACK,
            "exact": "yes: no index, a scan" if kind == "flat" else f"no: pgvector {kind}",
            "embedder": self.embedder.identity(),
            "namespace": list(NAMESPACE),
            "search": "store.search(namespace, query=q, limit=top_k): its order and score",
            "clone_format": "recallbench-langgraph-postgres-dump-v1 (pg_dump / pg_restore)",
        }

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> PostgresLangGraphStore:
        return PostgresLangGraphStore(self, directory, vectors)


# --------------------------------------------------------------------------- llamaindex


class PGVectorLlamaStore(ServerBacked, ReadsBack):
    """A `VectorStoreIndex` over LlamaIndex's `PGVectorStore` on its own server."""

    def __init__(self, system: PGVectorLlamaSystem, directory: Path, lookup: Any) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.vector_stores.postgres import PGVectorStore

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._vector_store = None
        try:
            with system._inside():
                server = self._start_server(directory)
                self._vector_store = PGVectorStore(
                    connection_string=server.sqlalchemy_url("psycopg2"),
                    async_connection_string=server.sqlalchemy_url("asyncpg"),
                    table_name=TABLE,
                    embed_dim=DIMENSION,
                    hnsw_kwargs=system.hnsw_kwargs(),
                    perform_setup=True,
                )
                embed = _embedding_class()(self._source, system.embedder.identity())
                self._index = VectorStoreIndex.from_vector_store(
                    self._vector_store, embed_model=embed
                )
                self._set_up()
            self._check_index()
        except BaseException:
            self.close()
            raise

    def _set_up(self) -> None:
        """PGVectorStore makes its table and index on its first call (`perform_setup`): a
        listing that matches no node makes them now, so that they are read back before
        anything is added. An index PostgreSQL refuses, PGVectorStore only logs (a warning
        of several lines, silenced here): `_check_index` refuses the store in one line."""
        import logging

        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

        # (the value goes into PGVectorStore's SQL unquoted: a plain word)
        nothing = MetadataFilter(key=next(iter(MARK)), value="none")
        setup_log = logging.getLogger("llama_index.vector_stores.postgres.base")
        level = setup_log.level
        setup_log.setLevel(logging.ERROR)
        try:
            self._vector_store.get_nodes(filters=MetadataFilters(filters=[nothing]))
        finally:
            setup_log.setLevel(level)

    def _nodes(self) -> list[Any]:
        """Every node: PGVectorStore lists nodes by id or by filter only, so every node
        carries `MARK` in its metadata (kept out of the embedded and LLM text)."""
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

        key, value = next(iter(MARK.items()))
        return self._vector_store.get_nodes(
            filters=MetadataFilters(filters=[MetadataFilter(key=key, value=value)])
        )

    def _pairs(self) -> list[tuple[str, str]]:
        return [(n.node_id, n.text) for n in self._nodes()]

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        with self._system._inside():
            check_new_ids((i for i, _ in self._pairs()), records)
            nodes = text_nodes(records, MARK)
            if nodes:
                self._index.insert_nodes(nodes)
            return len(self._nodes())

    def search(self, query: str, limit: int) -> list[Hit]:
        self._source.check(query)
        with self._system._inside():
            if limit <= 0:
                return []
            kwargs: dict[str, Any] = {}
            if self._system.hnsw:
                kwargs["hnsw_ef_search"] = ef_search_for(self._system.options, limit)
            retriever = self._index.as_retriever(similarity_top_k=limit, vector_store_kwargs=kwargs)
            found = retriever.retrieve(query)
        return node_hits(found)

    def _count(self) -> int:
        return len(self._nodes())

    def delete_smallest(self) -> None:
        with self._system._inside():
            self._vector_store.delete_nodes(node_ids=[min(i for i, _ in self._pairs())])

    def flush(self) -> None:
        """PGVectorStore commits every insert: nothing to flush."""

    def close(self) -> None:
        try:
            engine = getattr(self._vector_store, "client", None)
            if engine is not None:
                engine.dispose()
        finally:
            self._vector_store = None
            self._index = None
            self._stop_server()


TABLE = "memories"
#: metadata every node carries, so that `get_nodes` can list them all
MARK = {"recallbench": "memory"}


class PGVectorLlamaSystem(OpensDirectories, TimedCalls):
    """LlamaIndex VectorStoreIndex on PGVectorStore: exact, or with its HNSW index."""

    lexical = False

    #: PGVectorStore's table for `table_name=TABLE` (it prefixes `data_`)
    vector_table = f"data_{TABLE}"

    def __init__(self, name: str, *, hnsw: bool) -> None:
        self.name = name
        self.hnsw = hnsw
        self.embedder = MiniLMCapability(self)
        self.options = (
            checked_ef_search(name, index_options(name, dict(PGVECTOR_HNSW))) if hnsw else {}
        )
        self.marker_options = self.options
        self.clone = DumpClone(self, f"recallbench-{name}-dump-v1")
        self.clone_rebuilds_index = hnsw

    def vector_index(self) -> dict[str, Any] | None:
        """The index the database must hold (None: no index, an exact scan)."""
        if not self.hnsw:
            return None
        return vector_index(
            "hnsw", m=self.options["m"], ef_construction=self.options["ef_construction"]
        )

    def hnsw_kwargs(self) -> dict[str, Any] | None:
        if not self.hnsw:
            return None
        return {
            "hnsw_m": self.options["m"],
            "hnsw_ef_construction": self.options["ef_construction"],
            "hnsw_ef_search": self.options["ef_search"],
            "hnsw_dist_method": "vector_cosine_ops",
        }

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "llama-index-core",
            "implementation_version": package_version("llama-index-core"),
            "backend": "llama_index.vector_stores.postgres.PGVectorStore "
            f"(llama-index-vector-stores-postgres "
            f"{package_version('llama-index-vector-stores-postgres')}, SQLAlchemy over "
            f"psycopg2) on {server_description()}",
            "vector_store": {
                "table_name": TABLE,
                "embed_dim": DIMENSION,
                "hnsw_kwargs": self.hnsw_kwargs(),
                "hybrid_search": False,
            },
            "index_options": dict(self.options),
            "index_options_variable": index_options_variable(self.name) if self.hnsw else None,
            **(hnsw_search_limits() if self.hnsw else {"ef_search_for_search": None}),
            "index_read_back": READ_BACK,
            "exact": "no: pgvector HNSW (cosine)" if self.hnsw else "yes: no index, a scan",
            "nodes": "TextNode(id_=memory id, text, metadata={identifier, recallbench: "
            "'memory'}); both kept out of the embedded and LLM text (the second lists every "
            "node: get_nodes takes ids or filters only)",
            "embed_model": "a BaseEmbedding subclass over the pipeline's vector cache, else the "
            "minilm embedder",
            "embedder": self.embedder.identity(),
            "llm": None,
            "search": "index.as_retriever(similarity_top_k=top_k).retrieve(query): "
            "LlamaIndex's order and score (1 - cosine distance)",
            "clone_format": f"recallbench-{self.name}-dump-v1 (pg_dump / pg_restore)",
        }

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> PGVectorLlamaStore:
        return PGVectorLlamaStore(self, directory, vectors)


# --------------------------------------------------------------------------- mem0


class Mem0PgvectorStore(ServerBacked, Mem0Store):
    """mem0's Memory on its pgvector store, over a one-connection pool on its own server
    (one connection, so the session's ef_search set before a search is the search's)."""

    def __init__(self, system: Mem0PgvectorSystem, directory: Path, lookup: Any) -> None:
        from psycopg_pool import ConnectionPool

        self._pool = None
        self._memory = None
        try:
            server = self._start_server(directory)
            self._pool = ConnectionPool(server.conninfo(), min_size=1, max_size=1, open=True)
            super().__init__(system, directory, lookup)
        except BaseException:
            self.close()
            raise

    def _vector_store(self, system: Mem0System, directory: Path) -> dict[str, Any]:
        return {
            "provider": "pgvector",
            "config": {**system.vector_store_config(), "connection_pool": self._pool},
        }

    def _open(self, memory_class: Any) -> None:
        """mem0's Memory, its table and index made now (`create_col`, what mem0 runs before
        its first insert or search), and the index read back."""
        super()._open(memory_class)
        with self._system._inside():
            self._memory.vector_store.create_col()
        self._check_index()

    def search(self, query: str, limit: int) -> list[Hit]:
        if self._pool is not None and self._system.options["hnsw"] and limit > 0:
            with self._system._inside(), self._pool.connection() as conn:
                _set_session(conn.execute, self._system.options, limit)
        return super().search(query, limit)

    def close(self) -> None:
        try:
            if self._memory is not None:
                Mem0Store.close(self)
        finally:
            self._memory = None
            pool, self._pool = self._pool, None
            try:
                if pool is not None:
                    pool.close()
            finally:
                self._stop_server()


class Mem0PgvectorSystem(Mem0System):
    """mem0 Memory on its pgvector store (mem0's defaults: HNSW, cosine, its keyword
    search over PostgreSQL full text active), infer=False."""

    bm25_active = True

    def __init__(self) -> None:
        super().__init__()
        self.name = "mem0-pgvector"
        self.options = checked_ef_search(
            self.name, index_options(self.name, {"hnsw": True, "ef_search": 40})
        )
        self.marker_options = self.options
        self.clone = DumpClone(self, "recallbench-mem0-pgvector-dump-v1")
        self.clone_rebuilds_index = self.options["hnsw"]

    #: mem0's table: its collection
    vector_table = COLLECTION

    def vector_index(self) -> dict[str, Any] | None:
        """mem0's HNSW index (pgvector's defaults: mem0 sets none), or None (a scan)."""
        return vector_index("hnsw", **_BUILD_DEFAULTS["hnsw"]) if self.options["hnsw"] else None

    def vector_store_config(self) -> dict[str, Any]:
        """mem0's pgvector configuration (every knob not at its default, the pool aside)."""
        return {
            "collection_name": COLLECTION,
            "embedding_model_dims": DIMS,
            "hnsw": self.options["hnsw"],
            "diskann": False,
        }

    def vector_store(self, directory: Path) -> dict[str, Any]:
        return {"provider": "pgvector", "config": self.vector_store_config()}

    def configuration(self) -> dict[str, Any]:
        config = super().configuration()
        hnsw = self.options["hnsw"]
        config.update(
            {
                "backend": f"mem0's pgvector vector store on {server_description()}, over a "
                "one-connection psycopg pool, and its SQLite history database in the store "
                "directory",
                "vector_store": {"provider": "pgvector", "config": self.vector_store_config()},
                "index": "HNSW (vector_cosine_ops), pgvector's m 16 and ef_construction 64 "
                "(mem0 sets none)"
                if hnsw
                else "none: an exact scan",
                "index_options": dict(self.options),
                "index_options_variable": index_options_variable(self.name),
                **(hnsw_search_limits() if hnsw else {"ef_search_for_search": None}),
                "index_read_back": READ_BACK,
                "exact": "no: pgvector HNSW, and mem0's BM25 half on top"
                if hnsw
                else "an exact scan, with mem0's BM25 half on top",
                "score": "mem0's hybrid: semantic max(0, 1 - cosine distance), plus its BM25 "
                "half over PostgreSQL full text (ts_rank_cd, 'simple'), normalised",
                "bm25_half_active": True,
                "bm25_half": "mem0's pgvector keyword_search: to_tsvector('simple', text) over "
                "its lemmatised text (spaCy absent: the text itself)",
                "clone_format": "recallbench-mem0-pgvector-dump-v1 (pg_dump / pg_restore; the "
                "history database is not part of it)",
            }
        )
        return config

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> Mem0PgvectorStore:
        return Mem0PgvectorStore(self, directory, vectors)


# --------------------------------------------------------------------------- registry


@register(
    "langgraph-postgres",
    description="LangGraph's PostgresStore with its pgvector HNSW index (cosine) on PostgreSQL 16 "
    "(started by recallbench, Unix socket in the build dir) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="postgres",
)
def langgraph_postgres_system() -> PostgresLangGraphSystem:
    return PostgresLangGraphSystem()


@register(
    "llamaindex-pgvector",
    description="LlamaIndex VectorStoreIndex on PGVectorStore (PostgreSQL 16 + pgvector, no ANN "
    "index: exact cosine) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="postgres",
)
def llamaindex_pgvector_system() -> PGVectorLlamaSystem:
    return PGVectorLlamaSystem("llamaindex-pgvector", hnsw=False)


@register(
    "llamaindex-pgvector-hnsw",
    description="LlamaIndex VectorStoreIndex on PGVectorStore with its HNSW index (pgvector m 16, "
    "ef_construction 64, ef_search 40) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="postgres",
)
def llamaindex_pgvector_hnsw_system() -> PGVectorLlamaSystem:
    return PGVectorLlamaSystem("llamaindex-pgvector-hnsw", hnsw=True)


@register(
    "mem0-pgvector",
    description="mem0 Memory (open source, infer=False) on its pgvector store (PostgreSQL 16, "
    "HNSW cosine, its BM25 half over full text) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="postgres",
)
def mem0_pgvector_system() -> Mem0PgvectorSystem:
    return Mem0PgvectorSystem()
