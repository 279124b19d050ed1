"""`chroma`: Chroma (`chromadb`) embedded, through its public client API (optional extra
`chroma`).

Store: `chromadb.PersistentClient(path=<store dir>/chroma, Settings(anonymized_telemetry=
False))`, one collection `memories` with cosine HNSW (`hnsw:space` = cosine, every other
HNSW parameter at Chroma's default, read back from Chroma into the configuration) and no
embedding function: Chroma's default one downloads a model, so vectors are passed in
(`add(embeddings=...)`, `query(query_embeddings=...)`), from the pipeline's vector cache or
from the `minilm` embedder capability. Memory ids are Chroma's ids as given; the identifier
rides in the metadata. Search: `collection.query(n_results=limit)` in Chroma's order
(distance ascending; the score is 1 - cosine distance). Digest: (id, document) read back with
`collection.get`. Clone: the persisted directory (`adapters.DirectoryClone`).

Approximate: Chroma 1.5.9's HNSW graph is not the same run after run. Two builds of the same
vectors added in the same order give different graphs, and no public setting fixes it
(`hnsw:num_threads` is not part of its local HNSW's configuration; raising
`hnsw:construction_ef`, `hnsw:batch_size` or `hnsw:sync_threshold` does not help; there is no
seed). Its search is exact, and so reproducible, while a store holds at most `ef_search`
(100) records: the beam then keeps every record it reaches. Above that, rankings may differ
between runs and from the exact ranking of the same vectors (`minilm`): docs/stores.md gives
the measured recall against it.
"""

from __future__ import annotations

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

COLLECTION = "memories"
SUBDIR = "chroma"
PACKAGE_FORMAT = "recallbench-chroma-dir-v1"
#: Chroma's HNSW settings: every one not at its default (the rest as Chroma ships them).
HNSW_METADATA = {"hnsw:space": "cosine"}
#: The HNSW parameters Chroma's local index reads (its collection's `configuration_json`).
HNSW_KEYS = (
    "space",
    "ef_construction",
    "ef_search",
    "max_neighbors",
    "resize_factor",
    "sync_threshold",
)


def hnsw_configuration() -> dict[str, Any]:
    """The HNSW parameters a collection made with `HNSW_METADATA` gets, by Chroma's own
    defaults (`populate_create_hnsw_defaults`); a store checks its collection has them."""
    from chromadb.api.collection_configuration import (
        create_collection_configuration_from_legacy_metadata_dict,
    )

    made = create_collection_configuration_from_legacy_metadata_dict(dict(HNSW_METADATA))
    return {key: made["hnsw"][key] for key in HNSW_KEYS}


GET_PAGE = 5000


class ChromaStore(ReadsBack):
    def __init__(self, system: ChromaSystem, directory: Path, lookup: VectorLookup | None):
        import chromadb
        from chromadb.config import Settings

        self._system = system
        self.directory = directory
        self._vectors = VectorSource(system.embedder, lookup)
        with system._inside():
            self._client = chromadb.PersistentClient(
                path=str(directory / SUBDIR),
                settings=Settings(anonymized_telemetry=False, allow_reset=False),
            )
            self._collection = self._client.get_or_create_collection(
                COLLECTION, metadata=dict(HNSW_METADATA), embedding_function=None
            )
            held = self._collection.configuration_json.get("hnsw") or {}
        expected = hnsw_configuration()
        if {key: held.get(key) for key in HNSW_KEYS} != expected:  # another Chroma than tested
            raise RuntimeError(
                f"chromadb {package_version('chromadb')}: HNSW {held}, not {expected}"
            )

    def _ids(self) -> list[str]:
        return [i for i, _ in self._pairs()]

    def _pairs(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        offset = 0
        while True:
            page = self._collection.get(include=["documents"], limit=GET_PAGE, offset=offset)
            out.extend(zip(page["ids"], page["documents"] or [], strict=True))
            if len(page["ids"]) < GET_PAGE:
                return out
            offset += GET_PAGE

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        with self._system._inside():
            check_new_ids(self._ids(), records)
            if records:
                texts = [r.text for r in records]
                self._collection.add(
                    ids=[r.memory_id for r in records],
                    documents=texts,
                    embeddings=self._vectors(texts),
                    metadatas=[{"identifier": r.identifier} for r in records],
                )
            return self._collection.count()

    def search(self, query: str, limit: int) -> list[Hit]:
        self._vectors.check(query)
        with self._system._inside():
            n = self._collection.count()
            if n == 0 or limit <= 0:
                return []
            result = self._collection.query(
                query_embeddings=[self._vectors.one(query)],
                n_results=min(limit, n),
                include=["distances", "metadatas"],
            )
        ids, distances, metas = result["ids"][0], result["distances"][0], result["metadatas"][0]
        return [
            Hit(i, round(1.0 - float(d), 6), str(m["identifier"]))
            for i, d, m in zip(ids, distances, metas, strict=True)
        ]

    def _count(self) -> int:
        return self._collection.count()

    def delete_smallest(self) -> None:
        with self._system._inside():
            self._collection.delete(ids=[min(self._ids())])

    def flush(self) -> None:
        """Chroma writes through on every call: nothing to flush."""

    def close(self) -> None:
        """`client.close()`: Chroma keeps one system per path in the process and releases it
        (its SQLite connections, the HNSW segment) when the last client of the path closes;
        a directory removed and made again must not meet the old one."""
        if self._client is not None:
            self._client.close()
        self._collection = None
        self._client = None


class ChromaSystem(DirectoryStoreSystem):
    """Chroma embedded: cosine HNSW (approximate) over MiniLM vectors passed in."""

    def __init__(self) -> None:
        super().__init__("chroma", PACKAGE_FORMAT)

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "chromadb",
            "implementation_version": package_version("chromadb"),
            "backend": "PersistentClient (embedded, SQLite + HNSW segment) in the store directory",
            "collection_metadata": dict(HNSW_METADATA),
            "hnsw": hnsw_configuration(),
            "exact": "no: HNSW, approximate; not reproducible run after run above ef_search "
            "records per store (Chroma fixes no seed or build order); exact up to ef_search",
            "settings": {"anonymized_telemetry": False},
            "embedding_function": None,
            "vectors": "passed in: the pipeline's vector cache, else the minilm embedder",
            "embedder": self.embedder.identity(),
            "search": "collection.query(query_embeddings, n_results=top_k): Chroma's order",
            "score": "1 - cosine distance",
            "clone_format": PACKAGE_FORMAT,
        }

    def _store(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> ChromaStore:
        return ChromaStore(self, directory, vectors)


@register(
    "chroma",
    description="Chroma embedded (chromadb PersistentClient): cosine HNSW (approximate) over "
    "all-MiniLM-L6-v2 vectors passed in",
    capabilities=("clone", "embedder"),
    extra="chroma",
)
def chroma_system() -> ChromaSystem:
    return ChromaSystem()
