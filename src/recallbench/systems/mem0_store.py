"""`mem0` and `mem0-qdrant`: mem0's open-source `Memory` (`mem0ai`), through its public API
(optional extra `mem0`). Everything below is `mem0`'s; `mem0-qdrant` is the same on mem0's
Qdrant store in local mode (last paragraph).

Store: `Memory.from_config` with mem0's `faiss` vector store in the store directory
(`path=<store dir>/faiss`, `distance_strategy="euclidean"`, `normalize_L2=True`: an exact
`IndexFlatL2` over L2-normalised vectors, saved by mem0 on every insert; mem0 scores a hit
1 / (1 + squared distance) = 1 / (3 - 2 cos), in [0.2, 1], in cosine order), its history
database beside it (`history_db_path=<store dir>/history.db`), mem0's `langchain` embedder
provider over a LangChain `Embeddings` that hands out recallbench's vectors (the pipeline's
vector cache, else the `minilm` embedder), and an `openai` LLM with a placeholder key: mem0's
constructor builds an LLM client, but `add(..., infer=False)` stores the text as given and
never calls it.

Add: `memory.add(text, user_id=..., metadata={"memory_id", "identifier"}, infer=False)`, one
call per memory; mem0 gives each its own uuid4 id, ours ride in the metadata. Search:
`memory.search(query, filters={"user_id": ...}, top_k=limit, threshold=0)` (its default
threshold 0.1 drops hits) in mem0's order and score: its dense candidates (max(4 x limit, 60)
of them), scored additively with its BM25 half and its entity boosts where these are active.
Neither is, here: mem0's faiss store has no keyword search (mem0 logs so and scores the
semantic half alone), and its entity extraction needs spaCy and a model download (spaCy is
not installed, so no entities). The configuration records both.

Why L2 and not mem0's "cosine" strategy (`IndexFlatIP`, score = the cosine): mem0 drops a
candidate whose semantic score is below the threshold before it ranks, and its `search`
refuses a threshold outside [0, 1] (None means 0.1), so under "cosine" a memory of negative
cosine is never returned (a store of k memories gave fewer than k hits). Under L2 every
score is positive and threshold 0 keeps every candidate.

The text contract: `search` strips the query before embedding it
(`_validate_and_trim_search_query`); `add(infer=False)` embeds the text as given. The
embedder capability declares it (`text_transform = {"query": "strip"}`), so prep embeds each
query stripped too and the up-front check looks up the stripped form.

Why faiss: mem0 orders equal scores (two memories with the same text) stably over the vector
store's candidate order. faiss's flat index gives the same order run after run and after a
reload; Qdrant local gives one order in the process that added the memories and another
after a reload (it reads its points back newest first), so a cloned or reopened store would
rank ties differently. Duplicate texts: with `infer=False` mem0 keeps every copy (its md5
de-duplication is on the `infer=True` path only); a text it did not store would show as a
lower count, which the boundary reports as lost memories.

mem0 reads two environment variables once, when it is first imported: `MEM0_TELEMETRY`
(set to `False` here before the import) and `MEM0_DIR` (its home, `~/.mem0` by default: set
here, unless the user set it, to `.store-cache/mem0` beside the first store this process
opens, inside the build directory). Import mem0 only through `_mem0()` so both are in place.

Digest: (memory id, text) read back with `memory.get_all`. Clone: the store directory
(`adapters.DirectoryClone`), verified by mem0's own load (`Memory.from_config` on a copy).

`mem0-qdrant` (`Mem0QdrantSystem`): the same `Memory` on mem0's `qdrant` vector store in
local mode (a `path` in the store directory: qdrant-client compares every vector by cosine,
no HNSW). Since Qdrant local ranks ties in the order it loads its points, which differs
after a reload, the store is reopened after every ingest, so every search (hydrate's, a
reopened store's, a restored clone's) runs on the loaded order; one process holds a store
at a time (Qdrant local locks its path). Its keyword half needs fastembed, which is not
installed; the configuration records whether it is active.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recallbench.systems.adapters import (
    DirectoryStoreSystem,
    ReadsBack,
    VectorSource,
    package_version,
)
from recallbench.systems.base import Hit, StoreRecord, VectorLookup
from recallbench.systems.packaging import check_new_ids
from recallbench.systems.registry import register

SUBDIR = "faiss"
HISTORY = "history.db"
PACKAGE_FORMAT = "recallbench-mem0-dir-v2"  # v1: the cosine index (other scores)
COLLECTION = "memories"
#: One mem0 user per store: every memory is added, listed and searched under it.
USER = "recallbench"
DIMS = 384
#: mem0's constructor builds an LLM client; with infer=False it is never called.
PLACEHOLDER_KEY = "recallbench-placeholder-never-used"
#: mem0's get_all lists at most top_k memories.
LIST_ALL = 10**9
#: Every knob given to mem0 that is not its default (paths and the embedder object aside).
VECTOR_STORE = {
    "provider": "faiss",
    "config": {
        "collection_name": COLLECTION,
        # L2 over unit vectors: mem0 scores 1 / (1 + squared distance) = 1 / (3 - 2 cos),
        # in [0.2, 1], so threshold 0 keeps every candidate (under "cosine" a hit of
        # negative cosine fails mem0's threshold, and no threshold below 0 is accepted)
        "distance_strategy": "euclidean",
        "normalize_L2": True,
        "embedding_model_dims": DIMS,
    },
}
ADD = {"infer": False}
#: mem0's BM25 half: its faiss store has no keyword search (checked when a store opens).
BM25_ACTIVE = False
SEARCH = {"threshold": 0}
#: What mem0 does to a text before embedding it: `search` strips the query
#: (`_validate_and_trim_search_query`); `add(infer=False)` embeds the text as given.
TEXT_TRANSFORM = {"query": "strip"}


def _mem0(directory: Path) -> Any:
    """`mem0.Memory`, imported with telemetry off and its home inside the build directory
    (see the module docstring: mem0 reads both once, at its first import)."""
    if "mem0" not in sys.modules:
        os.environ["MEM0_TELEMETRY"] = "False"
        home = Path(directory).resolve().parent / ".store-cache" / "mem0"
        os.environ.setdefault("MEM0_DIR", str(home))
    from mem0 import Memory

    # its warnings that the BM25 half and spaCy are missing: the configuration records both
    logging.getLogger("mem0").setLevel(logging.ERROR)
    return Memory


def _bm25_active(memory: Any) -> bool:
    """Whether mem0's vector store has a keyword search of its own (its BM25 half)."""
    from mem0.vector_stores.base import VectorStoreBase

    own = getattr(type(memory.vector_store), "keyword_search", None)
    return own is not None and own is not VectorStoreBase.keyword_search


def _entities_active() -> bool:
    """mem0's entity boosts need spaCy (and its model, which mem0 would download)."""
    import importlib.util

    return importlib.util.find_spec("spacy") is not None


class Mem0Store(ReadsBack):
    def __init__(self, system: Mem0System, directory: Path, lookup: VectorLookup | None):
        memory_class = _mem0(directory)
        from langchain_core.embeddings import Embeddings

        self._system = system
        self.directory = directory
        self._vectors = VectorSource(system.embedder, lookup)
        source = self._vectors

        class RecallbenchVectors(Embeddings):
            """recallbench's vectors for mem0's `langchain` embedder provider."""

            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return source(texts)

            def embed_query(self, text: str) -> list[float]:
                return source.one(text)

        self._config = {
            "vector_store": self._vector_store(system, directory),
            "embedder": {
                "provider": "langchain",
                "config": {"model": RecallbenchVectors(), "embedding_dims": DIMS},
            },
            "llm": {"provider": "openai", "config": {"api_key": PLACEHOLDER_KEY}},
            "history_db_path": str(directory / HISTORY),
        }
        self._memory = None
        self._open(memory_class)

    def _open(self, memory_class: Any) -> None:
        system = self._system
        with system._inside():
            self._memory = memory_class.from_config(self._config)
        if _bm25_active(self._memory) != system.bm25_active:  # (another mem0 than tested)
            self.close()
            raise RuntimeError(
                f"mem0 {package_version('mem0ai')}: {system.name}'s vector store's keyword "
                f"search is {'missing' if system.bm25_active else 'present'}"
            )

    def _vector_store(self, system: Mem0System, directory: Path) -> dict[str, Any]:
        """mem0's `vector_store` configuration for this store (the system's)."""
        return system.vector_store(directory)

    def _all(self) -> list[dict[str, Any]]:
        return self._memory.get_all(filters={"user_id": USER}, top_k=LIST_ALL)["results"]

    def _pairs(self) -> list[tuple[str, str]]:
        return [(m["metadata"]["memory_id"], m["memory"]) for m in self._all()]

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        for r in records:
            self._vectors.check(r.text, role="memory")
        with self._system._inside():
            check_new_ids((i for i, _ in self._pairs()), records)
            for r in records:
                self._memory.add(
                    r.text,
                    user_id=USER,
                    metadata={"memory_id": r.memory_id, "identifier": r.identifier},
                    **ADD,
                )
        if records and self._system.reopen_after_ingest:
            self.close()
            self._open(_mem0(self.directory))
        with self._system._inside():
            return len(self._all())

    def search(self, query: str, limit: int) -> list[Hit]:
        self._vectors.check(query)
        with self._system._inside():
            if limit <= 0:
                return []
            found = self._memory.search(query, filters={"user_id": USER}, top_k=limit, **SEARCH)[
                "results"
            ]
        return [
            Hit(
                str(m["metadata"]["memory_id"]),
                round(float(m["score"]), 6),
                str(m["metadata"]["identifier"]),
            )
            for m in found
        ]

    def _count(self) -> int:
        return len(self._all())

    def delete_smallest(self) -> None:
        with self._system._inside():
            smallest = min(self._all(), key=lambda m: m["metadata"]["memory_id"])
            self._memory.delete(smallest["id"])

    def flush(self) -> None:
        """mem0's faiss store saves its index and docstore on every insert and delete, and
        its history database commits every write: nothing to flush."""

    def close(self) -> None:
        """mem0's `close` (its history database) and the vector store's client, which
        mem0 leaves open (Qdrant local holds a lock on its path until it is closed)."""
        if self._memory is not None:
            self._memory.close()
            client = getattr(self._memory.vector_store, "client", None)
            if callable(getattr(client, "close", None)):
                client.close()
        self._memory = None


class Mem0System(DirectoryStoreSystem):
    """mem0 Memory (open source): faiss (exact L2 over unit vectors, cosine order) over
    MiniLM vectors, infer=False."""

    #: whether mem0's vector store has a keyword search (its BM25 half), checked at open
    bm25_active = BM25_ACTIVE
    #: reopen mem0 after every ingest, so a search runs on the store as loaded from its files
    reopen_after_ingest = False

    def __init__(self, name: str = "mem0", package_format: str = PACKAGE_FORMAT) -> None:
        super().__init__(name, package_format)
        self.embedder.text_transform = TEXT_TRANSFORM

    def vector_store(self, directory: Path) -> dict[str, Any]:
        """mem0's `vector_store` configuration for a store in `directory`."""
        return {
            "provider": VECTOR_STORE["provider"],
            "config": {**VECTOR_STORE["config"], "path": str(directory / SUBDIR)},
        }

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "mem0ai",
            "implementation_version": package_version("mem0ai"),
            "backend": f"mem0's faiss vector store: IndexFlatL2 over L2-normalised vectors "
            f"(exact, cosine order; faiss-cpu {package_version('faiss-cpu')}) and its SQLite "
            "history database, in the store directory",
            "vector_store": VECTOR_STORE,
            "embedder": self.embedder.identity(),
            "text_transform": dict(TEXT_TRANSFORM),
            "embedder_provider": "langchain: recallbench's vectors (the pipeline's vector "
            "cache, else the minilm embedder)",
            "llm": "openai with a placeholder key, never called (add with infer=False)",
            "add": dict(ADD),
            "search": "memory.search(query, filters={'user_id'}, top_k=k, threshold=0): "
            "mem0's order and score",
            "score": "1 / (1 + squared L2 distance of unit vectors) = 1 / (3 - 2 cosine)",
            "search_knobs": dict(SEARCH),
            "bm25_half_active": BM25_ACTIVE,
            "bm25_half": "none: mem0's faiss store has no keyword search",
            "entity_boosts_active": _entities_active(),
            "telemetry": "off (MEM0_TELEMETRY=False)",
            "clone_format": PACKAGE_FORMAT,
        }

    def _store(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> Mem0Store:
        return Mem0Store(self, directory, vectors)


@register(
    "mem0",
    description="mem0 Memory (open source, infer=False) on its faiss store: exact L2 (cosine order) "
    "over all-MiniLM-L6-v2 vectors (its BM25 half off: faiss has no keyword search)",
    capabilities=("clone", "embedder"),
    extra="mem0",
)
def mem0_system() -> Mem0System:
    return Mem0System()


# --------------------------------------------------------------------------- mem0-qdrant

QDRANT_SUBDIR = "qdrant"
QDRANT_PACKAGE_FORMAT = "recallbench-mem0-qdrant-dir-v1"
#: mem0's Qdrant store in local mode (a `path`, no host or url): qdrant-client's local mode
QDRANT_STORE = {
    "provider": "qdrant",
    "config": {
        "collection_name": COLLECTION,
        "embedding_model_dims": DIMS,
        # mem0's persistence knob ("vectors kept on disk"); local mode persists to its path
        "on_disk": True,
    },
}


def _fastembed_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("fastembed") is not None


class Mem0QdrantSystem(Mem0System):
    """mem0 Memory (open source) on its Qdrant store in local mode (qdrant-client, exact
    cosine over every vector) over MiniLM vectors, infer=False."""

    #: mem0's Qdrant store has a keyword search (through fastembed; see `configuration`)
    bm25_active = True
    # Qdrant local ranks with np.argsort (not stable) over its points in memory, which it
    # loads from its files newest first: ties come back in one order in the process that
    # added the points and another after a reload. Reopened after every ingest, every
    # search (hydrate's, a reopened store's, a restored clone's) runs on the loaded order.
    reopen_after_ingest = True
    #: Qdrant local locks its path to one client (one process)
    one_process_per_store = True

    def __init__(self) -> None:
        super().__init__("mem0-qdrant", QDRANT_PACKAGE_FORMAT)

    def vector_store(self, directory: Path) -> dict[str, Any]:
        return {
            "provider": QDRANT_STORE["provider"],
            "config": {**QDRANT_STORE["config"], "path": str(directory / QDRANT_SUBDIR)},
        }

    def configuration(self) -> dict[str, Any]:
        return {
            **super().configuration(),
            "backend": f"mem0's Qdrant vector store in local mode (qdrant-client "
            f"{package_version('qdrant-client')}, `path` in the store directory): every vector "
            "compared by cosine in numpy (exact; local mode builds no HNSW index), and its SQLite "
            "history database, in the store directory",
            "vector_store": QDRANT_STORE,
            "index": "none: qdrant-client's local mode scans every point; a Qdrant server's HNSW "
            "(m 16, ef_construct 100) is not used, so it has no index parameter to set",
            "score": "Qdrant's cosine similarity (mem0 keeps a hit only when it is at least the "
            "threshold, 0: a memory of negative cosine is not returned)",
            "bm25_half_active": _fastembed_installed(),
            "bm25_half": "none: mem0's Qdrant store encodes keywords with fastembed's hub model "
            "Qdrant/bm25 (it returns nothing without fastembed, which is not installed, and "
            "the model could not be fetched)",
            "tie_order": "the order Qdrant local loads its points (newest first) through "
            "np.argsort: the store is reopened after every ingest, so every search runs on it",
            "clone_format": QDRANT_PACKAGE_FORMAT,
        }


@register(
    "mem0-qdrant",
    description="mem0 Memory (open source, infer=False) on its Qdrant store in local mode: exact "
    "cosine over all-MiniLM-L6-v2 vectors (no HNSW in local mode; its BM25 half off)",
    capabilities=("clone", "embedder"),
    extra="mem0",
)
def mem0_qdrant_system() -> Mem0QdrantSystem:
    return Mem0QdrantSystem()
