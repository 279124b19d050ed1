"""dory-memory as a recallbench system: its memory graph (SQLite, FTS5) and its retrieval,
FTS5 seeds spread through the graph's edges (`dory.activation`), through its own API.

A store is one dory graph in `<store dir>/dory.db`. Ingest is `DoryMemory.observe`'s path:
`dory.session.observe` (dory's sanitizer, then a node auto-linked to the nodes its FTS5
index finds related) and `Graph.save` after each memory, so the next memory links to it.
Our memory id and identifier live in the node's metadata (never in its text or tags, which
dory indexes).

Search follows `dory.session.query` up to its ranking: `activation.find_seeds` (FTS5 BM25
over OR'ed key terms), `activation.spread` from the first 8 seeds, then dory's
supplementary FTS5 sweep (`activation._fts_query(query, n=6)`, 50 matches). The ranking is
the activated nodes by activation level, then the sweep's other matches in FTS5 order; ties
by memory id. dory's own context block orders by (level, salience), and gives the sweep's
nodes their salience, which decays with wall-clock time; this adapter leaves salience out
so that a search gives the same order whenever it runs (the contract's). Nothing is saved
after a search (dory counts activations in memory only).

dory keeps 1,000 characters of a memory (`dory.sanitize.MAX_NODE_CONTENT_LEN`, plus "…"):
declared as the system's `input_limit`, so runs report the share of memories it cannot
have seen whole. dory caches one SQLite connection per thread and path
(`dory.store._connect`): `close()` closes this thread's, so a store opened later where this
one was deleted starts fresh. Without sqlite-vec and Ollama (neither is a dependency) dory
has no vector leg and runs offline; the configuration records whether it has one.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from recallbench.plugin import Hit, InputLimit, RecallbenchError, TimedCalls, records_digest

DB = "dory.db"
#: the node metadata keys holding our memory id and identifier
ID_KEY = "recallbench_id"
IDENTIFIER_KEY = "recallbench_identifier"
#: what this adapter passes to dory's retrieval, as `dory.session.query` does
SEEDS = 8
SWEEP_TERMS = 6
SWEEP_LIMIT = 50


class DoryStore:
    """One dory graph, its nodes standing for our memories."""

    def __init__(self, system: DorySystem, path: Path) -> None:
        from dory.graph import Graph

        self.system = system
        self.path = path
        with system._inside():
            self.graph = Graph(path=path)
        self.by_node = {
            node.id: node.metadata[ID_KEY]
            for node in self.graph.all_nodes(zone=None)
            if ID_KEY in (node.metadata or {})
        }

    def ingest(self, records: Any) -> int:
        from dory import session
        from dory.schema import NodeType

        held = set(self.by_node.values())
        for r in records:
            if r.memory_id in held:
                raise RecallbenchError(f"duplicate memory id {r.memory_id!r}")
            held.add(r.memory_id)
        with self.system._inside():
            for r in records:
                node_id = session.observe(r.text, NodeType.CONCEPT, self.graph)
                node = self.graph.get_node(node_id)
                node.metadata = {**(node.metadata or {}), ID_KEY: r.memory_id}
                node.metadata[IDENTIFIER_KEY] = r.identifier
                self.graph.save()  # as DoryMemory.observe: the next memory links to this one
                self.by_node[node_id] = r.memory_id
        return self.count()

    def search(self, query: str, limit: int) -> list[Hit]:
        from dory import activation
        from dory import store as dory_store

        with self.system._inside():
            seeds = activation.find_seeds(query, self.graph)
            levels = activation.spread(seeds[:SEEDS], self.graph) if seeds else {}
            terms = activation._fts_query(query, n=SWEEP_TERMS)
            sweep = dory_store.search_fts(terms, self.path, limit=SWEEP_LIMIT) if terms else []
        ranked = sorted(
            ((-level, self.by_node[n], n) for n, level in levels.items() if n in self.by_node),
        )
        hits = [(memory_id, -negative, node) for negative, memory_id, node in ranked]
        seen = set(levels)
        for node in sweep:
            if node not in seen and node in self.by_node and self._active(node):
                seen.add(node)
                hits.append((self.by_node[node], 0.0, node))
        return [
            Hit(memory_id, float(score), self._identifier(node))
            for memory_id, score, node in hits[:limit]
        ]

    def _active(self, node_id: str) -> bool:
        node = self.graph.get_node(node_id)
        return node is not None and node.zone == "active"

    def _identifier(self, node_id: str) -> str:
        return str(self.graph.get_node(node_id).metadata.get(IDENTIFIER_KEY, ""))

    def count(self) -> int:
        return len(self.by_node)

    def texts(self) -> list[tuple[str, str]]:
        """(memory id, node content) of every node, read back from dory's graph."""
        with self.system._inside():
            nodes = self.graph.all_nodes(zone=None)
        return [(node.metadata[ID_KEY], node.content) for node in nodes if node.id in self.by_node]

    def digest(self) -> str:
        return records_digest(self.texts())

    def close(self) -> None:
        from dory import store as dory_store

        dory_store.close_connection(self.path)  # dory keeps one per thread and path


class DorySystem(TimedCalls):
    """dory-memory: FTS5 seeds spread through its memory graph (keeps 1,000 characters)."""

    description = (
        "dory-memory's retrieval: FTS5 seeds spread through its memory graph, then its "
        "FTS5 sweep (keeps 1,000 characters of a memory)"
    )
    clone = None
    embedder = None
    lexical = False

    def __init__(self) -> None:
        from dory.sanitize import MAX_NODE_CONTENT_LEN

        self.name = "dory"
        self.input_limit = InputLimit(chars=MAX_NODE_CONTENT_LEN)

    def configuration(self) -> dict[str, Any]:
        from dory import vector
        from dory.sanitize import MAX_NODE_CONTENT_LEN

        return {
            "dory_memory_version": importlib.metadata.version("dory-memory"),
            "ingest": "dory.session.observe (sanitize, node, auto-link), Graph.save each",
            "search": "activation.find_seeds -> activation.spread(first seeds) -> FTS5 sweep",
            "seeds": SEEDS,
            "sweep_terms": SWEEP_TERMS,
            "sweep_limit": SWEEP_LIMIT,
            "ranking": "activation level, then the sweep in FTS5 order; ties by memory id",
            "max_node_content_len": MAX_NODE_CONTENT_LEN,
            "vector_leg": vector.available(),  # sqlite-vec and Ollama both present
        }

    def open_store(self, directory: Path, *, vectors: Any = None) -> DoryStore:
        path = Path(directory) / DB
        if path.exists():
            raise FileExistsError(f"{path}: a store already exists here")
        path.parent.mkdir(parents=True, exist_ok=True)
        return DoryStore(self, path)

    def attach(self, directory: Path, *, vectors: Any = None) -> DoryStore:
        path = Path(directory) / DB
        if not path.exists():
            raise FileNotFoundError(f"{path}: no store here")
        return DoryStore(self, path)


def make_system() -> DorySystem:
    return DorySystem()
