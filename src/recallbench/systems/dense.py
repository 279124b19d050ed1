"""`minilm`: dense retrieval alone, the field's dense reference (optional `semantic` extra).

Vectors: all-MiniLM-L6-v2 from the packaged model (`semantic.shared_embedder`, the same
instance and vector space as `hotmem-minilm`), L2-normalised. Search: exact cosine top-k
with numpy over every stored vector (a dot product of unit vectors, in float64, row by row), score
descending, ties by memory id ascending; every record is a candidate (no abstention).
Texts longer than the model's 256-token window are truncated by the model: see
`base.truncation_report`.

The store is a directory: `records.jsonl` (one record per line) and `vectors.npy` (float32,
one row per record, same order). The clone path packages both files with a manifest (each
file's size and sha256, the record count and the embedder identity); restore reuses the
packaged vectors (like HotMem's, when the embedder identity matches) and refuses a package
made by another embedder.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recallbench.builddir.artifacts import publish
from recallbench.core.errors import RecallbenchError
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
    check_manifest,
    check_new_ids,
    check_record_count,
    jsonl_bytes,
    jsonl_records,
    package_size,
    raw_byte_corruption,
    records_digest,
    stale_jsonl_corruption,
    write_manifest,
)
from recallbench.systems.registry import register

RECORDS = "records.jsonl"
VECTORS = "vectors.npy"
PACKAGE_FORMAT = "recallbench-dense-v1"


def _npy_bytes(matrix: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, matrix, allow_pickle=False)
    return out.getvalue()


def _read_vectors(path: Path, rows: int, dimension: int) -> np.ndarray:
    matrix = np.load(path, allow_pickle=False)
    if matrix.dtype != np.float32 or matrix.shape != (rows, dimension):
        raise ValueError(
            f"{path}: shape {matrix.shape} {matrix.dtype}, expected ({rows}, {dimension}) float32"
        )
    return matrix


class DenseEmbedder:
    """The embedder capability over a learned embedder with `embed_batch` (MiniLM)."""

    def __init__(self, system: DenseSystem, inner: Any) -> None:
        self._system = system
        self.inner = inner

    @property
    def max_tokens(self) -> int | None:
        return getattr(self.inner, "max_tokens", None)

    @property
    def dimension(self) -> int:
        return int(self.inner.descriptor.dimension)

    def identity(self) -> str:
        d = self.inner.descriptor
        return f"{d.key}@{d.dimension}"

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Each distinct text embedded once, so equal texts get equal vectors."""
        if not texts:
            return []
        unique = list(dict.fromkeys(texts))
        with self._system._inside():
            vectors = dict(zip(unique, self.inner.embed_batch(unique), strict=True))
        return [vectors[t] for t in texts]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self.inner.token_counts(texts)


class DenseStore:
    """Records and their unit vectors, held in memory and written through on ingest."""

    def __init__(
        self,
        system: DenseSystem,
        directory: Path,
        records: list[StoreRecord],
        vectors: np.ndarray,
        lookup: VectorLookup | None,
    ) -> None:
        self._system = system
        self.directory = directory
        self._records = records
        self._vectors = vectors
        self._lookup = lookup
        self._ids = np.array([r.memory_id for r in records], dtype=object)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        dim = self._system.embedder.dimension
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        if self._lookup is not None:
            rows = [list(self._lookup(t)) for t in texts]
        else:
            rows = self._system.embedder.embed_texts(texts)
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.shape != (len(texts), dim):
            raise SnapshotRejected(
                "embedder_mismatch", f"vectors of shape {matrix.shape}, expected (n, {dim})"
            )
        return matrix

    def _add(self, records: Sequence[StoreRecord], vectors: np.ndarray) -> int:
        self._records.extend(records)
        self._vectors = np.vstack([self._vectors, vectors]) if len(records) else self._vectors
        self._ids = np.array([r.memory_id for r in self._records], dtype=object)
        publish(
            {
                self.directory / VECTORS: _npy_bytes(self._vectors),
                self.directory / RECORDS: jsonl_bytes(self._records),
            }
        )
        return len(self._records)

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        check_new_ids((r.memory_id for r in self._records), records)
        vectors = self._embed([r.text for r in records])
        return self._add(list(records), vectors)

    def search(self, query: str, limit: int) -> list[Hit]:
        if not self._records:
            return []
        q = self._embed([query])[0].astype(np.float64)
        with self._system._inside():
            # row by row, the same arithmetic for every row (a BLAS matrix-vector product
            # may not), so equal vectors score exactly equal and fall to the id order
            scores = np.sum(self._vectors.astype(np.float64) * q, axis=1)
            order = np.lexsort((self._ids, -scores))[:limit]  # score desc, then id asc
        return [
            Hit(self._records[i].memory_id, round(float(scores[i]), 6), self._records[i].identifier)
            for i in order
        ]

    def count(self) -> int:
        return len(self._records)

    def texts(self) -> list[tuple[str, str]]:
        """(memory id, text) of every record it holds (the content check's read-back)."""
        return [(r.memory_id, r.text) for r in self._records]

    def digest(self) -> str:
        return records_digest(self.texts())

    def close(self) -> None:
        self._records = []
        self._vectors = self._vectors[:0]


class DenseClone:
    """Package: `records.jsonl` + `vectors.npy` + manifest (sha256s, count, embedder)."""

    def __init__(self, system: DenseSystem) -> None:
        self._system = system

    def snapshot(self, store: DenseStore, package_dir: Path) -> PackageInfo:
        package_dir = Path(package_dir)
        package_dir.mkdir(parents=True, exist_ok=False)
        for name in (RECORDS, VECTORS):
            shutil.copyfile(store.directory / name, package_dir / name)
        write_manifest(
            package_dir,
            PACKAGE_FORMAT,
            store.count(),
            [RECORDS, VECTORS],
            embedder=self._system.embedder.identity(),
        )
        return PackageInfo(records=store.count(), size_bytes=package_size(package_dir))

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        package_dir = Path(package_dir)
        manifest = check_manifest(package_dir, PACKAGE_FORMAT)
        ours = self._system.embedder.identity()
        if manifest.get("embedder") != ours:
            raise SnapshotRejected(
                "embedder_mismatch",
                f"vectors made by {manifest.get('embedder')!r}, this system embeds with {ours!r}",
            )
        count = check_record_count(package_dir, manifest, RECORDS)
        try:
            _read_vectors(package_dir / VECTORS, count, self._system.embedder.dimension)
        except ValueError as exc:
            raise SnapshotRejected("vector_shape_mismatch", str(exc)) from None
        return count

    def restore(self, package_dir: Path, directory: Path) -> DenseStore:
        count = self.verify(package_dir, directory)
        store = self._system.open_store(directory)
        records = jsonl_records(Path(package_dir) / RECORDS)
        vectors = _read_vectors(Path(package_dir) / VECTORS, count, self._system.embedder.dimension)
        check_new_ids((), records)
        store._add(records, vectors)
        return store

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        return [
            raw_byte_corruption(package_dir, work_dir),
            stale_jsonl_corruption(package_dir, work_dir, RECORDS, "text"),
        ]


class DenseSystem(TimedCalls):
    """Exact cosine top-k over one embedder's vectors."""

    lexical = False

    def __init__(self, name: str, inner_embedder: Any) -> None:
        self.name = name
        self.embedder = DenseEmbedder(self, inner_embedder)
        self.clone = DenseClone(self)

    def configuration(self) -> dict[str, Any]:
        d = self.embedder.inner.descriptor
        return {
            "retrieval": "dense only: exact cosine top-k (numpy, float64 dot product of unit vectors)",
            "embedding_model": d.key,
            "embedding_dimension": d.dimension,
            "max_tokens": self.embedder.max_tokens,
            "ties": "memory id ascending",
            "clone_format": PACKAGE_FORMAT,
        }

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> DenseStore:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / RECORDS).exists():
            raise FileExistsError(f"{directory / RECORDS}: a store already exists here")
        store = DenseStore(
            self, directory, [], np.zeros((0, self.embedder.dimension), np.float32), vectors
        )
        store._add([], store._vectors)
        return store

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> DenseStore:
        directory = Path(directory)
        if not (directory / RECORDS).exists():
            raise FileNotFoundError(f"{directory / RECORDS}: no dense store here")
        records = jsonl_records(directory / RECORDS)
        try:
            stored = _read_vectors(directory / VECTORS, len(records), self.embedder.dimension)
        except (OSError, ValueError) as exc:
            raise RecallbenchError(f"{directory}: damaged dense store: {exc}") from None
        return DenseStore(self, directory, records, stored, vectors)


@register(
    "minilm",
    description="Dense retrieval alone: all-MiniLM-L6-v2 vectors, exact cosine top-k; the dense reference",
    capabilities=("clone", "embedder"),
    extra="semantic",
)
def minilm_system() -> DenseSystem:
    from recallbench.systems.semantic import shared_embedder

    return DenseSystem("minilm", shared_embedder())
