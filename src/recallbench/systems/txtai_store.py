"""`txtai`: txtai's `Embeddings` database, hybrid (its own BM25 + dense fusion), through its
public API (optional extra `txtai`).

Store: `Embeddings(method="external", transform=fn, content=True, hybrid=True)`, saved with
`embeddings.save(<store dir>/index)` after every ingest and reopened with `load`. txtai's
default model is a hub download; its `external` vectors method takes a transform function,
here one over recallbench's vectors (the pipeline's vector cache, else the `minilm`
embedder). Documents are `(memory id, text, None)`; `hybrid=True` adds txtai's own BM25
keyword index and fuses its scores with the dense ones (txtai's defaults). Search:
`embeddings.search(query, limit=limit)` in txtai's order and score. The identifier of each
memory is kept beside the index (`identifiers.json`), as txtai's search returns ids and
text. Digest: (id, text) read back with txtai's SQL (`select id, text from txtai`). Clone:
the saved directory (`adapters.DirectoryClone`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes
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
IDENTIFIERS = "identifiers.json"
PACKAGE_FORMAT = "recallbench-txtai-dir-v1"
#: Every knob given to `Embeddings` (the transform function aside).
CONFIG: dict[str, Any] = {"method": "external", "content": True, "hybrid": True}


class TxtaiStore(ReadsBack):
    def __init__(self, system: TxtaiSystem, directory: Path, lookup: VectorLookup | None, load):
        from txtai import Embeddings

        self._system = system
        self.directory = directory
        self._source = VectorSource(system.embedder, lookup)
        self._identifiers: dict[str, str] = {}
        source = self._source

        def transform(texts: Sequence[str]) -> Any:  # txtai wants a plain function
            import numpy as np

            return np.asarray(source(list(texts)), dtype=np.float32)

        with system._inside():
            self._embeddings = Embeddings(**CONFIG, transform=transform)
            if load and (directory / SUBDIR).exists():  # (an empty store saves no index)
                self._embeddings.load(
                    str(directory / SUBDIR), config={**CONFIG, "transform": transform}
                )
        if load:
            self._identifiers = orjson.loads((directory / IDENTIFIERS).read_bytes())

    def _pairs(self) -> list[tuple[str, str]]:
        n = self._embeddings.count()
        if not n:
            return []
        rows = self._embeddings.search(f"select id, text from txtai limit {n}")
        return [(r["id"], r["text"]) for r in rows]

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        with self._system._inside():
            check_new_ids((i for i, _ in self._pairs()), records)
            if records:
                self._embeddings.upsert([(r.memory_id, r.text, None) for r in records])
                self._identifiers.update({r.memory_id: r.identifier for r in records})
            self.flush()
            return self._embeddings.count()

    def search(self, query: str, limit: int) -> list[Hit]:
        self._source.check(query)
        with self._system._inside():
            if limit <= 0 or not self._embeddings.count():
                return []
            rows = self._embeddings.search(query, limit=limit)
        return [Hit(r["id"], round(float(r["score"]), 6), self._identifiers[r["id"]]) for r in rows]

    def _count(self) -> int:
        return self._embeddings.count()

    def delete_smallest(self) -> None:
        with self._system._inside():
            self._embeddings.delete([min(i for i, _ in self._pairs())])

    def flush(self) -> None:
        if self._embeddings.count():
            self._embeddings.save(str(self.directory / SUBDIR))
        atomic_write_bytes(
            self.directory / IDENTIFIERS,
            orjson.dumps(self._identifiers, option=orjson.OPT_SORT_KEYS),
        )

    def close(self) -> None:
        if self._embeddings is not None:
            self._embeddings.close()
        self._embeddings = None


class TxtaiSystem(DirectoryStoreSystem):
    """txtai Embeddings, hybrid: its BM25 and dense scores fused by txtai."""

    def __init__(self) -> None:
        super().__init__("txtai", PACKAGE_FORMAT)

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "txtai",
            "implementation_version": package_version("txtai"),
            "embeddings": {
                **CONFIG,
                "transform": "recallbench's vectors (the pipeline's vector "
                "cache, else the minilm embedder)",
            },
            "backend": "txtai's defaults: faiss ANN index, SQLite content store, BM25 "
            f"keyword index (faiss-cpu {package_version('faiss-cpu')})",
            "embedder": self.embedder.identity(),
            "search": "embeddings.search(query, limit=top_k): txtai's hybrid order and score",
            "clone_format": PACKAGE_FORMAT,
        }

    def _store(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> TxtaiStore:
        return TxtaiStore(self, directory, vectors, load=load)


@register(
    "txtai",
    description="txtai Embeddings, hybrid: its own BM25 fused with all-MiniLM-L6-v2 dense scores",
    capabilities=("clone", "embedder"),
    extra="txtai",
)
def txtai_system() -> TxtaiSystem:
    return TxtaiSystem()
