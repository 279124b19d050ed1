"""`llamaindex`: LlamaIndex (`llama-index-core`) `VectorStoreIndex`, through its public API
(optional extra `llamaindex`).

Store: a `VectorStoreIndex` over `TextNode(id_=memory id, text, metadata={"identifier"})`
with the default in-memory `SimpleVectorStore`, persisted after every ingest with
`storage_context.persist(<store dir>/index)` and reopened with `load_index_from_storage`.
The identifier is excluded from the embedded (and LLM) text (`excluded_embed_metadata_keys`:
LlamaIndex otherwise embeds metadata with the text). Embedding: a `BaseEmbedding` subclass
(LlamaIndex's own extension point) that takes every vector from the pipeline's vector cache,
or from the `minilm` embedder capability: LlamaIndex never loads a model of its own, and no
LLM is used. Search: `index.as_retriever(similarity_top_k=limit).retrieve(query)` in
LlamaIndex's order (exact cosine over every node; its score). Digest: (node id, text) of
the docstore. Clone: the persisted directory (`adapters.DirectoryClone`).
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

SUBDIR = "index"
PACKAGE_FORMAT = "recallbench-llamaindex-dir-v1"
METADATA_KEY = "identifier"


def _embedding_class() -> type:
    """A LlamaIndex `BaseEmbedding` over a `VectorSource` (defined on first use: the module
    imports LlamaIndex only when the system is built)."""
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class SourceEmbedding(BaseEmbedding):
        """Vectors from recallbench: the vector cache, else the minilm embedder."""

        _source: Any = PrivateAttr()

        def __init__(self, source: VectorSource, model_name: str) -> None:
            super().__init__(model_name=model_name)
            self._source = source

        @classmethod
        def class_name(cls) -> str:
            return "RecallbenchSourceEmbedding"

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._source.one(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._source.one(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._source.one(text)

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._source(texts)

    return SourceEmbedding


def text_nodes(records: Sequence[StoreRecord], mark: dict[str, str] | None = None) -> list[Any]:
    """A `TextNode` per record: id = memory id, its text, the identifier (and `mark`) in
    its metadata, kept out of the embedded and LLM text."""
    from llama_index.core.schema import TextNode

    mark = mark or {}
    keys = [METADATA_KEY, *mark]
    return [
        TextNode(
            id_=r.memory_id,
            text=r.text,
            metadata={METADATA_KEY: r.identifier, **mark},
            excluded_embed_metadata_keys=list(keys),
            excluded_llm_metadata_keys=list(keys),
        )
        for r in records
    ]


def node_hits(found: Sequence[Any]) -> list[Hit]:
    """A retriever's nodes as hits, in LlamaIndex's order and score."""
    return [
        Hit(n.node.node_id, round(float(n.score), 6), str(n.node.metadata[METADATA_KEY]))
        for n in found
    ]


class LlamaIndexStore(ReadsBack):
    def __init__(
        self, system: LlamaIndexSystem, directory: Path, lookup: VectorLookup | None, load: bool
    ) -> None:
        from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._embed_model = system.embedding_class(self._source, system.embedder.identity())
        with system._inside():
            if load:
                storage = StorageContext.from_defaults(persist_dir=str(directory / SUBDIR))
                self._index = load_index_from_storage(
                    storage, embed_model=self._embed_model, show_progress=False
                )
            else:
                self._index = VectorStoreIndex(nodes=[], embed_model=self._embed_model)

    def _docs(self) -> dict[str, Any]:
        return self._index.docstore.docs

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        with self._system._inside():
            check_new_ids(self._docs(), records)
            nodes = text_nodes(records)
            if nodes:
                self._index.insert_nodes(nodes)
            self.flush()
            return len(self._docs())

    def search(self, query: str, limit: int) -> list[Hit]:
        self._source.check(query)
        with self._system._inside():
            if not self._docs() or limit <= 0:
                return []
            found = self._index.as_retriever(similarity_top_k=limit).retrieve(query)
        return node_hits(found)

    def _count(self) -> int:
        return len(self._docs())

    def _pairs(self) -> list[tuple[str, str]]:
        return [(node_id, node.text) for node_id, node in self._docs().items()]

    def delete_smallest(self) -> None:
        with self._system._inside():
            self._index.delete_nodes([min(self._docs())], delete_from_docstore=True)

    def flush(self) -> None:
        self._index.storage_context.persist(persist_dir=str(self.directory / SUBDIR))

    def close(self) -> None:
        self._index = None


class LlamaIndexSystem(DirectoryStoreSystem):
    """LlamaIndex VectorStoreIndex (SimpleVectorStore) over MiniLM vectors."""

    def __init__(self) -> None:
        super().__init__("llamaindex", PACKAGE_FORMAT)
        self.embedding_class = _embedding_class()

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "llama-index-core",
            "implementation_version": package_version("llama-index-core"),
            "backend": "VectorStoreIndex over the default SimpleVectorStore, persisted with "
            "storage_context.persist / load_index_from_storage",
            "nodes": "TextNode(id_=memory id, text, metadata={identifier}); the identifier "
            "excluded from the embedded and LLM text",
            "embed_model": "a BaseEmbedding subclass over the pipeline's vector cache, else the "
            "minilm embedder",
            "embedder": self.embedder.identity(),
            "llm": None,
            "search": "index.as_retriever(similarity_top_k=top_k).retrieve(query): exact cosine, "
            "LlamaIndex's order and score",
            "clone_format": PACKAGE_FORMAT,
        }

    def _store(
        self, directory: Path, vectors: VectorLookup | None, *, load: bool
    ) -> LlamaIndexStore:
        return LlamaIndexStore(self, directory, vectors, load=load)


@register(
    "llamaindex",
    description="LlamaIndex VectorStoreIndex (SimpleVectorStore, exact cosine) over all-MiniLM-L6-v2 vectors",
    capabilities=("clone", "embedder"),
    extra="llamaindex",
)
def llamaindex_system() -> LlamaIndexSystem:
    return LlamaIndexSystem()
