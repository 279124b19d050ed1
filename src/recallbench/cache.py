"""The prep phase's vector cache: every distinct text embedded once per embedder.

Layout of a cache directory (one dataset source with its options, one embedder)::

    manifest.json   format, embedder identity, dimension, dtype, count, the source it was
                    made for (dataset, files' sha256, reader options such as the unit),
                    sizes and sha256 of the two files
    keys.bin        count x 32 bytes: sha256(text as UTF-8), in row order
    vectors.bin     count x dimension float32 (native byte order, recorded in the manifest)

Vectors are stored as float32 because HotMem stores and compares packed float32
(``hotmem.embed.pack_embedding``): a float64 vector and its float32 round trip pack to
the same bytes, so scores with cached vectors equal inline-embedding scores exactly.

`VectorCache.open` refuses a cache made for another embedder, source or reader options,
or whose files do not match the manifest, with one line naming the fix; a text with
no vector raises `MissingVector`. The manifest is written last, so an interrupted prep
leaves no usable-looking cache.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.artifacts import atomic_write_bytes, dumps, file_sha256
from recallbench.errors import RecallbenchError
from recallbench.systems.base import MissingVector

FORMAT = "recallbench-vectors"
FORMAT_VERSION = 2
PREP_HINT = "run `recallbench prep --cache DIR` (after `recallbench validate`)"
MANIFEST = "manifest.json"
KEYS = "keys.bin"
VECTORS = "vectors.bin"
KEY_BYTES = 32


def text_key(text: str) -> bytes:
    """The cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def pack_vectors(vectors: Sequence[Sequence[float]]) -> bytes:
    """float32 bytes of the vectors, row after row."""
    out = array("f")
    for vector in vectors:
        out.extend(vector)
    return out.tobytes()


class CacheWriter:
    """Append (key, vector) rows; `finish` renames the files into place and writes the manifest."""

    def __init__(self, directory: Path, embedder_identity: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / MANIFEST).unlink(missing_ok=True)  # no stale cache while writing
        self.embedder_identity = embedder_identity
        self.dimension: int | None = None
        self.count = 0
        self._keys = open(self.directory / f".{KEYS}.tmp", "wb")  # noqa: SIM115
        self._vectors = open(self.directory / f".{VECTORS}.tmp", "wb")  # noqa: SIM115

    def add(self, keys: Sequence[bytes], blob: bytes, dimension: int) -> None:
        if self.dimension is None:
            self.dimension = dimension
        elif dimension != self.dimension:
            raise RecallbenchError(
                f"embedder returned {dimension}-dim vectors after {self.dimension}-dim ones"
            )
        if len(blob) != len(keys) * dimension * 4:
            raise RecallbenchError("embedder returned a vector batch of the wrong size")
        self._keys.write(b"".join(keys))
        self._vectors.write(blob)
        self.count += len(keys)

    def finish(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        self._keys.close()
        self._vectors.close()
        files = {}
        for name in (KEYS, VECTORS):
            final = self.directory / name
            os.replace(self.directory / f".{name}.tmp", final)
            files[name] = {"size_bytes": final.stat().st_size, "sha256": file_sha256(final)}
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "embedder_identity": self.embedder_identity,
            "dimension": self.dimension or 0,
            "dtype": "float32",
            "byteorder": sys.byteorder,
            "count": self.count,
            "files": files,
            **fields,
        }
        atomic_write_bytes(self.directory / MANIFEST, dumps(manifest))
        return manifest

    def abort(self) -> None:
        for handle in (self._keys, self._vectors):
            handle.close()
        for name in (KEYS, VECTORS):
            (self.directory / f".{name}.tmp").unlink(missing_ok=True)


def read_manifest(directory: Path) -> dict[str, Any]:
    directory = Path(directory)
    path = directory / MANIFEST
    hint = f"run `recallbench prep --cache {directory}`"
    if not path.is_file():
        raise RecallbenchError(f"{directory}: no vector cache here ({MANIFEST} missing); {hint}")
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise RecallbenchError(f"{path}: not valid JSON; {hint}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RecallbenchError(f"{path}: not a recallbench vector cache; {hint}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise RecallbenchError(
            f"{path}: cache format version {manifest.get('format_version')} is not "
            f"{FORMAT_VERSION}; {hint}"
        )
    return manifest


def check_manifest(
    directory: Path,
    manifest: Mapping[str, Any],
    *,
    embedder_identity: str,
    source: Mapping[str, Any],
    verify_files: bool = True,
) -> None:
    """Refuse a cache made for another embedder or another source (files and options)."""
    directory = Path(directory)
    hint = f"run `recallbench prep --cache {directory}` again"
    if manifest.get("embedder_identity") != embedder_identity:
        raise RecallbenchError(
            f"{directory}: vectors were made by embedder {manifest.get('embedder_identity')!r}, "
            f"this run embeds with {embedder_identity!r}; {hint}"
        )
    made_for = manifest.get("source") or {}
    if made_for.get("files") != source.get("files"):
        raise RecallbenchError(
            f"{directory}: vectors were made from other data files than suite.json names; {hint}"
        )
    if made_for.get("options") != source.get("options"):
        raise RecallbenchError(
            f"{directory}: vectors were made with reader options {made_for.get('options')}, "
            f"this run uses {source.get('options')}; {hint}"
        )
    if manifest.get("byteorder") != sys.byteorder or manifest.get("dtype") != "float32":
        raise RecallbenchError(
            f"{directory}: vectors were written on a machine of another byte order; {hint}"
        )
    count, dim = manifest.get("count", -1), manifest.get("dimension", -1)
    expected = {KEYS: count * KEY_BYTES, VECTORS: count * dim * 4}
    for name, size in expected.items():
        path = directory / name
        recorded = manifest.get("files", {}).get(name, {})
        if not path.is_file() or path.stat().st_size != size or recorded.get("size_bytes") != size:
            raise RecallbenchError(f"{path}: missing or not the size its manifest says; {hint}")
        if verify_files and file_sha256(path) != recorded.get("sha256"):
            raise RecallbenchError(f"{path}: content does not match its manifest's sha256; {hint}")


class VectorCache:
    """Read side: text -> float32 vector, for a store opened with a vector lookup."""

    def __init__(self, directory: Path, manifest: Mapping[str, Any]) -> None:
        self.directory = Path(directory)
        self.dimension = int(manifest["dimension"])
        self.count = int(manifest["count"])
        raw = (self.directory / KEYS).read_bytes()
        self._rows = {
            raw[i : i + KEY_BYTES]: n for n, i in enumerate(range(0, len(raw), KEY_BYTES))
        }
        self._file = open(self.directory / VECTORS, "rb")  # noqa: SIM115
        if self.count and self.dimension:
            self._map: mmap.mmap | None = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self._floats = memoryview(self._map).cast("f")
        else:
            self._map = None
            self._floats = memoryview(b"").cast("f")
        self.hits = 0

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        embedder_identity: str,
        source: Mapping[str, Any],
        verify_files: bool = True,
    ) -> VectorCache:
        manifest = read_manifest(directory)
        check_manifest(
            directory,
            manifest,
            embedder_identity=embedder_identity,
            source=source,
            verify_files=verify_files,
        )
        return cls(directory, manifest)

    def __contains__(self, text: str) -> bool:
        return text_key(text) in self._rows

    def lookup(self, text: str) -> list[float]:
        """The cached vector of `text`; MissingVector when prep never embedded it."""
        key = text_key(text)
        row = self._rows.get(key)
        if row is None:
            raise MissingVector(
                f"{self.directory}: no cached vector for a text (sha256 {key.hex()[:12]}...); "
                "the cache does not cover this data: run `recallbench prep --cache DIR` again"
            )
        self.hits += 1
        start = row * self.dimension
        return self._floats[start : start + self.dimension].tolist()

    def close(self) -> None:
        self._floats.release()
        if self._map is not None:
            self._map.close()
        self._file.close()
