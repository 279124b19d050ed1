"""A lexical baseline: Okapi BM25 (the `bm25s` library, Lucene variant) behind the seam.

It exists to put a plain, well-understood retriever beside the systems under test (and,
on LongMemEval, beside the paper's published BM25 figures). Text is tokenized as
lowercase `\\w+` runs, without stemming or stop words. Ranking: BM25 score descending,
ties by memory id ascending; every stored record is a candidate (like HotMem, no
abstention). The store is a JSONL file of records; the index is rebuilt in memory when the
store is opened. Its clone path is a package of that file plus a manifest with its sha256
and record count, checked on verify.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import orjson

from recallbench.artifacts import atomic_write_bytes
from recallbench.systems.base import (
    Hit,
    PackageInfo,
    SnapshotRejected,
    StoreRecord,
    TimedCalls,
    VectorLookup,
)

RECORDS = "records.jsonl"
MANIFEST = "manifest.json"
PACKAGE_FORMAT = "recallbench-bm25-v1"
_TOKEN = re.compile(r"\w+")
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens (`\\w+`), no stemming, no stop words."""
    return _TOKEN.findall(text.lower())


class BM25Store:
    """Records in `directory/records.jsonl`, indexed in memory."""

    def __init__(self, system: BM25System, directory: Path, records: list[StoreRecord]) -> None:
        self._system = system
        self.directory = directory
        self._records: list[StoreRecord] = []
        self._index: bm25s.BM25 | None = None
        self._add(records)

    def _add(self, records: Sequence[StoreRecord]) -> None:
        self._records.extend(records)
        with self._system._inside():
            self._ids = np.array([r.memory_id for r in self._records])
            if self._records:
                self._index = bm25s.BM25(k1=self._system.k1, b=self._system.b)
                self._index.index([tokenize(r.text) for r in self._records], show_progress=False)

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        ids = {r.memory_id for r in self._records}
        for r in records:
            if r.memory_id in ids:
                raise SnapshotRejected("ingest_dropped", f"duplicate memory id {r.memory_id!r}")
            ids.add(r.memory_id)
        self._add(list(records))
        payload = b"".join(orjson.dumps(_to_json(r)) + b"\n" for r in self._records)
        atomic_write_bytes(self.directory / RECORDS, payload)
        return len(self._records)

    def search(self, query: str, top_k: int) -> list[Hit]:
        if self._index is None:
            return []
        with self._system._inside():
            scores = np.asarray(self._index.get_scores(tokenize(query)), dtype=float)
            # score descending, then memory id ascending
            order = np.lexsort((self._ids, -scores))[:top_k]
        return [
            Hit(self._records[i].memory_id, round(float(scores[i]), 4), self._records[i].identifier)
            for i in order
        ]

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """Records sharing at least one token with the query (a BM25 score above 0)."""
        if self._index is None:
            return "BM25", []
        with self._system._inside():
            scores = np.asarray(self._index.get_scores(tokenize(query)), dtype=float)
        return "BM25", sorted(str(self._ids[i]) for i in np.flatnonzero(scores > 0))

    def count(self) -> int:
        return len(self._records)

    def close(self) -> None:
        self._index = None


def _to_json(r: StoreRecord) -> dict[str, Any]:
    return {
        "memory_id": r.memory_id,
        "identifier": r.identifier,
        "text": r.text,
        "importance": r.importance,
        "tags": list(r.tags),
    }


def _read_records(path: Path) -> list[StoreRecord]:
    out = []
    with open(path, "rb") as handle:
        for line in handle:
            raw = orjson.loads(line)
            out.append(
                StoreRecord(
                    raw["memory_id"],
                    raw["identifier"],
                    raw["text"],
                    raw["importance"],
                    tuple(raw["tags"]),
                )
            )
    return out


class BM25System(TimedCalls):
    """Okapi BM25 over the records' text; parameters k1 and b as in Lucene."""

    def __init__(self, name: str = "bm25", *, k1: float = 1.5, b: float = 0.75) -> None:
        self.name = name
        self.k1 = k1
        self.b = b

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "bm25s",
            "implementation_version": bm25s.__version__,
            "variant": "lucene",
            "k1": self.k1,
            "b": self.b,
            "tokenizer": "lowercase \\w+ tokens, no stemming, no stop words",
            "ties": "memory id ascending",
        }

    def display_rows(self) -> list[tuple[str, str]]:
        c = self.configuration()
        return [
            ("system", f"{self.name} (bm25s {c['implementation_version']}, {c['variant']} BM25)"),
            ("parameters", f"k1 {self.k1}, b {self.b}"),
            ("tokenizer", c["tokenizer"]),
            ("embedding", "none (lexical only)"),
        ]

    def embedder_identity(self) -> str:
        return "none"

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        return [[] for _ in texts]

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> BM25Store:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / RECORDS).exists():
            raise FileExistsError(f"{directory / RECORDS}: a store already exists here")
        return BM25Store(self, directory, [])

    def attach(self, directory: Path) -> BM25Store:
        path = Path(directory) / RECORDS
        if not path.exists():
            raise FileNotFoundError(f"{path}: no BM25 store here")
        return BM25Store(self, Path(directory), _read_records(path))

    def snapshot(self, store: BM25Store, package_dir: Path) -> PackageInfo:
        package_dir = Path(package_dir)
        package_dir.mkdir(parents=True, exist_ok=False)
        source = store.directory / RECORDS
        shutil.copyfile(source, package_dir / RECORDS)
        data = (package_dir / RECORDS).read_bytes()
        manifest = {
            "format": PACKAGE_FORMAT,
            "record_count": store.count(),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        atomic_write_bytes(
            package_dir / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)
        )
        size = sum(p.stat().st_size for p in package_dir.iterdir())
        return PackageInfo(records=store.count(), size_bytes=size)

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        package_dir = Path(package_dir)
        try:
            manifest = orjson.loads((package_dir / MANIFEST).read_bytes())
            data = (package_dir / RECORDS).read_bytes()
        except (OSError, orjson.JSONDecodeError) as exc:
            raise SnapshotRejected("unreadable", f"package unreadable: {exc}") from None
        if manifest.get("format") != PACKAGE_FORMAT:
            raise SnapshotRejected("format", f"not a {PACKAGE_FORMAT} package")
        if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
            raise SnapshotRejected("checksum_mismatch", "records.jsonl does not match its sha256")
        count = data.count(b"\n")
        if count != manifest.get("record_count"):
            raise SnapshotRejected(
                "record_count_mismatch",
                f"{count} records, manifest says {manifest.get('record_count')}",
            )
        return count

    def restore(self, package_dir: Path, directory: Path) -> BM25Store:
        self.verify(package_dir, directory)
        directory = Path(directory)
        store = self.open_store(directory)
        store.ingest(_read_records(Path(package_dir) / RECORDS))
        return store
