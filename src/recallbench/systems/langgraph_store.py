"""`langgraph` and `langmem`: LangGraph's long-term memory store (`SqliteStore`, from
`langgraph-checkpoint-sqlite`) and LangMem's memory tools over it (optional extra
`langgraph`).

* `langgraph`: `SqliteStore(conn, index={"dims": 384, "embed": fn, "fields": ["text"],
  "text_fields": ["text"]})` on `<store dir>/store.sqlite`; `put(("memories",), memory id,
  {"text", "identifier"})`; search `store.search(("memories",), query=q, limit=limit)`
  in LangGraph's order and score (cosine similarity). `SqliteStore` reads `text_fields`,
  not `fields` (the documented key of `BaseStore`'s index config), and without it embeds the
  whole JSON value: both are given so the memory text alone is embedded.
* `langmem`: LangMem's own tools over the same kind of store: `create_manage_memory_tool`
  (the value is `{"content": text}`; `action="update"` with the n-th uuid as the id, since
  `action="create"` makes a random uuid4 key and exact ties would then come back in a
  random order run after run; its reply names the key) and `create_search_memory_tool` (its JSON reply: key, value, score,
  in its order). LangMem's documented setup gives the store no `fields`, so the JSON value
  `{"content": ...}` would be embedded, a different ranking and texts no vector cache holds;
  here the index embeds `content` alone (`fields` / `text_fields` = ["content"]), so the
  cache feeds it like every other system. Our memory ids are kept beside the database
  (`keys.json`: LangMem key -> memory id, written after every ingest).

`embed` is a function over recallbench's vectors (the pipeline's vector cache, else the
`minilm` embedder): LangGraph's index accepts any `list[str] -> list[list[float]]`.
Digest: every item read back with `store.search` (no query), paged. Clone: the database
file (`adapters.DirectoryClone`).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes
from recallbench.core.errors import RecallbenchError
from recallbench.systems.adapters import (
    DirectoryStoreSystem,
    ReadsBack,
    VectorSource,
    package_version,
)
from recallbench.systems.base import Hit, StoreRecord, VectorLookup
from recallbench.systems.packaging import check_new_ids
from recallbench.systems.registry import register

DB = "store.sqlite"
KEYS = "keys.json"
NAMESPACE = ("memories",)
PAGE = 1000
DIMENSION = 384


def _connect(path: Path) -> Any:
    """A connection SqliteStore can use (its vector index loads the sqlite-vec extension:
    the stdlib sqlite3 may be built without extension loading; pysqlite3 then serves)."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    if hasattr(conn, "enable_load_extension"):
        return conn
    conn.close()
    try:
        import pysqlite3  # type: ignore[import-not-found]
    except ImportError:
        raise RecallbenchError(
            "langgraph: this Python's sqlite3 cannot load extensions; install pysqlite3-binary"
        ) from None
    return pysqlite3.connect(str(path), check_same_thread=False, isolation_level=None)


class LangGraphStore(ReadsBack):
    def __init__(self, system: LangGraphSystem, directory: Path, lookup: VectorLookup | None):
        from langgraph.store.sqlite import SqliteStore

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._keys: dict[str, str] = {}  # LangMem key -> memory id
        self._identifiers: dict[str, str] = {}  # memory id -> identifier
        if system.langmem and (directory / KEYS).exists():
            saved = orjson.loads((directory / KEYS).read_bytes())
            self._keys, self._identifiers = saved["keys"], saved["identifiers"]
        with system._inside():
            self._conn = _connect(directory / DB)
            self._store = SqliteStore(self._conn, index=system.index_config(self._source))
            self._store.setup()
            if system.langmem:
                from langmem import create_manage_memory_tool, create_search_memory_tool

                self._manage = create_manage_memory_tool(namespace=NAMESPACE, store=self._store)
                self._search = create_search_memory_tool(namespace=NAMESPACE, store=self._store)

    # ------------------------------------------------------------------ reading back

    def _items(self) -> list[Any]:
        out: list[Any] = []
        offset = 0
        while True:
            page = self._store.search(NAMESPACE, limit=PAGE, offset=offset)
            out.extend(page)
            if len(page) < PAGE:
                return out
            offset += PAGE

    def _pairs(self) -> list[tuple[str, str]]:
        """(memory id, text) of every item, read back through the store."""
        field = self._system.text_field
        if not self._system.langmem:
            return [(item.key, item.value[field]) for item in self._items()]
        return [(self._keys.get(item.key, item.key), item.value[field]) for item in self._items()]

    # ------------------------------------------------------------------ the seam

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        with self._system._inside():
            check_new_ids((mid for mid, _ in self._pairs()), records)
            if self._system.langmem:
                for r in records:
                    # LangMem's `create` keys a memory with a random uuid4, so exact ties would
                    # come back in a random order; its `update` with the id we give stores
                    # the same value ({"content": text}) under the n-th uuid instead
                    key = uuid.UUID(int=len(self._keys) + 1)
                    reply = self._manage.invoke(
                        {"content": r.text, "action": "update", "id": str(key)}
                    )
                    self._keys[_stored_key(reply)] = r.memory_id
                    self._identifiers[r.memory_id] = r.identifier
                self.flush()
            else:
                for r in records:
                    self._store.put(
                        NAMESPACE, r.memory_id, {"text": r.text, "identifier": r.identifier}
                    )
            return len(self._items())

    def search(self, query: str, limit: int) -> list[Hit]:
        self._source.check(query)
        with self._system._inside():
            if limit <= 0 or not self._store.search(NAMESPACE, limit=1):
                return []
            if self._system.langmem:
                rows = json.loads(self._search.invoke({"query": query, "limit": limit}))
                found = [(r["key"], r["score"]) for r in rows]
            else:
                items = self._store.search(NAMESPACE, query=query, limit=limit)
                found = [(i.key, i.score) for i in items]
                identifiers = {i.key: i.value["identifier"] for i in items}
        hits = []
        for key, score in found:
            if self._system.langmem:
                memory_id = self._keys[key]
                identifier = self._identifiers[memory_id]
            else:
                memory_id, identifier = key, identifiers[key]
            hits.append(Hit(memory_id, round(float(score), 6), str(identifier)))
        return hits

    def _count(self) -> int:
        return len(self._items())

    def delete_smallest(self) -> None:
        with self._system._inside():
            by_id = {self._keys.get(i.key, i.key): i.key for i in self._items()}
            self._store.delete(NAMESPACE, by_id[min(by_id)])

    def flush(self) -> None:
        if self._system.langmem:
            saved = {"keys": self._keys, "identifiers": self._identifiers}
            atomic_write_bytes(
                self.directory / KEYS, orjson.dumps(saved, option=orjson.OPT_SORT_KEYS)
            )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._store = None


def _stored_key(reply: Any) -> str:
    """The key in LangMem's manage-tool reply ("updated memory <uuid>")."""
    text = reply if isinstance(reply, str) else getattr(reply, "content", str(reply))
    words = str(text).split()
    if len(words) < 3 or words[0] not in ("created", "updated"):
        raise RecallbenchError(f"langmem: unexpected reply from its manage tool: {text!r}")
    return words[-1]


class LangGraphSystem(DirectoryStoreSystem):
    """LangGraph SqliteStore with a semantic index (or LangMem's tools over it)."""

    def __init__(self, name: str, *, langmem: bool) -> None:
        super().__init__(name, f"recallbench-{name}-dir-v1")
        self.langmem = langmem
        self.text_field = "content" if langmem else "text"

    def index_config(self, source: VectorSource) -> dict[str, Any]:
        return {
            "dims": DIMENSION,
            "embed": source,
            "fields": [self.text_field],
            "text_fields": [self.text_field],
        }

    def configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "implementation": "langgraph",
            "implementation_version": package_version("langgraph"),
            "backend": "langgraph.store.sqlite.SqliteStore (langgraph-checkpoint-sqlite "
            f"{package_version('langgraph-checkpoint-sqlite')}), one database per store",
            "index": {
                "dims": DIMENSION,
                "embed": "a function over the pipeline's vector cache, else the minilm embedder",
                "fields": [self.text_field],
                "text_fields": [self.text_field],
            },
            "embedder": self.embedder.identity(),
            "namespace": list(NAMESPACE),
            "clone_format": f"recallbench-{self.name}-dir-v1",
        }
        if self.langmem:
            config["memory_layer"] = {
                "implementation": "langmem",
                "implementation_version": package_version("langmem"),
                "add": "create_manage_memory_tool(namespace, store).invoke(action='update', "
                "id=UUID(int=n)): value {'content': text} under the n-th uuid (create's "
                "random uuid4 keys would order exact ties at random)",
                "search": "create_search_memory_tool(namespace, store).invoke(query, limit): "
                "its order and score",
                "note": "index fields = ['content'] (LangMem's documented setup has none and "
                "embeds the JSON value)",
            }
        else:
            config["search"] = "store.search(namespace, query=q, limit=top_k): its order and score"
        return config

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> LangGraphStore:
        return LangGraphStore(self, directory, vectors)


@register(
    "langgraph",
    description="LangGraph's SqliteStore with a semantic index (cosine) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="langgraph",
)
def langgraph_system() -> LangGraphSystem:
    return LangGraphSystem("langgraph", langmem=False)


@register(
    "langmem",
    description="LangMem's manage and search memory tools over LangGraph's SqliteStore (all-MiniLM-L6-v2)",
    capabilities=("clone", "embedder"),
    extra="langgraph",
)
def langmem_system() -> LangGraphSystem:
    return LangGraphSystem("langmem", langmem=True)
