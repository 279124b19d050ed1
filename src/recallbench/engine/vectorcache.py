"""The prep phase's vector cache: every distinct text embedded once per embedder.

Layout of a cache directory (one dataset source with its options, one embedder)::

    manifest.json   format, embedder identity and build (device, torch, CPU capability),
                    the batching, dimension, dtype, count, the source it was made for
                    (dataset, files' sha256, reader options such as the unit, the sha256 of
                    validate's scope spool), the row directory and its files' sizes and sha256
    rows-<id>/      the rows the manifest names:
      keys.bin      count x 32 bytes: sha256(text as UTF-8), in row order
      vectors.bin   count x dimension float32 (native byte order, recorded in the manifest)
      scopes.bin    for each scope of the spool, in order: the rows of its query texts,
                    then of its memory texts (uint32, native byte order)
      offsets.bin   scopes + 1 uint64: where each scope's rows start in scopes.bin
    .recallbench-cache  the marker: this directory is a vector cache recallbench made
    .recallbench.lock   held by the prep writing here (one at a time)

prep writes only into a new or empty directory, or one holding its marker (or, from a
release before the marker, its manifest): a directory of other files is refused in one
line, and so are the filesystem root, the home directory and their like
(`paths.check_build_dir`), as for ``--build-dir``. Nothing in the cache is written
through a link (the directory is claimed while prep holds its lock, see
`paths.make_dirs`).

A task looks its scope's vectors up by position (`ScopeLookup`, over
`VectorCache.scope_rows`): the texts it read from the spool line, each to its row, without
hashing them. The cache is bound to that exact spool (its sha256 is part of the source),
and every scope's row count and its query texts' keys are checked as it is used; `lookup`
finds any other text by its sha256.

Vectors are stored as float32 because HotMem stores and compares packed float32
(``hotmem.embed.pack_embedding``): a float64 vector and its float32 round trip pack to
the same bytes, so scores with cached vectors equal inline-embedding scores exactly for an
embedder whose vectors do not depend on their batch (the hash embedder).

Writing never touches the cache in place: `CacheWriter` holds the directory's lock, writes
a new `rows-<id>/` beside the current one, and publishes it by replacing `manifest.json`
in one rename; only then are the older row directories removed. An interrupted or failed
prep therefore leaves the previous cache exactly as it was (and its own rows are removed).

`VectorCache.open` refuses a cache made for another embedder, source or reader options,
or whose files do not match the manifest, with one line naming the fix; a text with
no vector raises `MissingVector`.

Vectors made elsewhere (`recallbench prep --import FILE`): a JSON-lines file, a header
naming the embedder, the dimension and whether the vectors are normalized, then one vector
per line named by its text's sha256, a memory id or a query id, read and checked whole
(`read_import`, `ImportedVectors`); `vectorprep.import_vector_cache` writes a cache from it.
`export_vectors` writes a cache's vectors in that format.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes, dumps, file_sha256
from recallbench.core.errors import RecallbenchError
from recallbench.systems.base import MissingVector

FORMAT = "recallbench-vectors"
FORMAT_VERSION = 4
PREP_HINT = "run `recallbench prep --cache DIR` (after `recallbench validate`)"
MANIFEST = "manifest.json"
#: the file that marks a directory as a vector cache recallbench made
MARKER = ".recallbench-cache"
KEYS = "keys.bin"
VECTORS = "vectors.bin"
SCOPES = "scopes.bin"
OFFSETS = "offsets.bin"
FILES = (KEYS, VECTORS, SCOPES, OFFSETS)
KEY_BYTES = 32
ROW_BYTES = 4  # uint32 in scopes.bin
OFFSET_BYTES = 8  # uint64 in offsets.bin
ROWS_PREFIX = "rows-"


def rows_dir(directory: Path, manifest: Mapping[str, Any]) -> Path:
    """The row directory `manifest` names inside `directory` (refused when it is not a plain
    `rows-<id>` name: a manifest never points outside its cache)."""
    name = manifest.get("rows")
    if not isinstance(name, str) or not name.startswith(ROWS_PREFIX) or "/" in name or ".." in name:
        raise RecallbenchError(
            f"{Path(directory) / MANIFEST}: names no row directory; "
            f"run `recallbench prep --cache {directory}` again"
        )
    return Path(directory) / name


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
    """Append (key, vector) rows into a new row directory; `finish` publishes it.

    Holds the cache directory's lock from construction to `finish` or `abort` (a second
    prep into the same directory is refused at once); refuses a directory that is not a
    cache it made (`MARKER`), and the root, home and current directories. The current cache, if any, stays
    valid and untouched until `finish` replaces its manifest.
    """

    def __init__(self, directory: Path, embedder_identity: str) -> None:
        from recallbench.builddir.lock import BuildLock
        from recallbench.builddir.paths import check_build_dir, check_tree, make_dirs

        self.directory = check_build_dir(directory, what="vector cache", option="--cache")
        self._lock = BuildLock(self.directory, "recallbench prep", option="--cache")
        self._owned = False
        self._files: list[Any] = []
        self._marked = False
        try:
            check_tree(self.directory)  # no link in it, before anything is written
            self._marked = _claim_cache_dir(self.directory)
            self.rows = self.directory / f"{ROWS_PREFIX}new-{os.getpid()}-{os.urandom(6).hex()}"
            make_dirs(self.directory)
            self.rows.mkdir()
            self._owned = True
            self._keys, self._vectors, self._scopes = (
                _new_file(self.rows / name) for name in (KEYS, VECTORS, SCOPES)
            )
        except BaseException:
            self._fail()
            raise
        self.embedder_identity = embedder_identity
        self.dimension: int | None = None
        self.count = 0
        self._offsets = array("Q", [0])  # where each scope's rows start, and the end

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

    def add_scope(self, rows: Sequence[int]) -> None:
        """The next scope's rows: its query texts', then its memory texts', in order."""
        self._scopes.write(array("I", rows).tobytes())
        self._offsets.append(self._offsets[-1] + len(rows))

    def finish(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Publish the new rows (one rename of the manifest), remove the older ones, unlock."""
        try:
            self._close_files()
            with _new_file(self.rows / OFFSETS) as handle:
                handle.write(self._offsets.tobytes())
            files = {}
            for name in FILES:
                path = self.rows / name
                files[name] = {"size_bytes": path.stat().st_size, "sha256": file_sha256(path)}
            self._name_by_content(files)
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "embedder_identity": self.embedder_identity,
                "dimension": self.dimension or 0,
                "dtype": "float32",
                "byteorder": sys.byteorder,
                "count": self.count,
                "scopes": len(self._offsets) - 1,
                "rows": self.rows.name,
                "files": files,
                **fields,
            }
            atomic_write_bytes(self.directory / MANIFEST, dumps(manifest))
        except BaseException:
            self.abort()
            raise
        try:
            remove_unused_rows(self.directory, keep=self.rows.name)
        finally:
            self._lock.release()
        return manifest

    def _name_by_content(self, files: Mapping[str, Any]) -> None:
        """Rename the new rows after their content (`rows-<digest of the files' sha256>`), so
        equal caches have equal manifests; rows already there under that name are the same
        rows, and are kept instead."""
        digest = hashlib.sha256("".join(files[n]["sha256"] for n in FILES).encode()).hexdigest()
        final = self.directory / f"{ROWS_PREFIX}{digest[:16]}"
        if final.is_dir():
            shutil.rmtree(self.rows, ignore_errors=True)
            self._owned = False  # the published rows: never removed by `abort`
        else:
            os.rename(self.rows, final)
        self.rows = final

    def _close_files(self) -> None:
        for name in ("_keys", "_vectors", "_scopes"):
            handle = getattr(self, name, None)
            if handle is not None:
                handle.close()

    def abort(self) -> None:
        """Remove this writer's rows (the previous cache stays as it was) and unlock."""
        self._fail()

    def _fail(self) -> None:
        """Close, remove this writer's rows (and the marker it placed in a directory that
        holds no cache), unlock as failed (`lock.BuildLock.release`)."""
        try:
            self._close_files()
            if self._owned:
                shutil.rmtree(self.rows, ignore_errors=True)
            if self._marked and not (self.directory / MANIFEST).exists():
                (self.directory / MARKER).unlink(missing_ok=True)
        finally:
            self._lock.release(failed=True)


def _new_file(path: Path) -> Any:
    """A new file at `path` for writing (never an existing one, never through a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o666), "wb")


def _claim_cache_dir(directory: Path) -> bool:
    """Refuse `directory` unless it is a vector cache recallbench made (its marker, or a
    manifest of this format from before the marker) or holds nothing but the lock; mark
    it. True when the marker was placed now."""
    from recallbench.builddir.artifacts import atomic_write_bytes
    from recallbench.builddir.lock import LOCK_NAME

    try:
        entries = sorted(e for e in os.listdir(directory) if e != LOCK_NAME)
    except OSError as exc:
        raise RecallbenchError(f"cannot list {directory}: {exc.strerror or exc}") from None
    if MARKER in entries:
        return False
    if entries and not _legacy_cache(directory):
        raise RecallbenchError(
            f"{directory} is not a vector cache recallbench made (no {MARKER} in it; it "
            f"holds {len(entries)} other entr{'y' if len(entries) == 1 else 'ies'}, e.g. "
            f"{entries[0]}); give --cache a new or empty directory"
        )
    atomic_write_bytes(
        directory / MARKER,
        dumps({"format": FORMAT, "note": "a vector cache made by `recallbench prep`"}),
    )
    return True


def _legacy_cache(directory: Path) -> bool:
    """True when `directory` holds a manifest of this format (made before the marker)."""
    path = directory / MANIFEST
    try:
        if path.is_symlink() or not path.is_file():
            return False
        manifest = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def remove_unused_rows(directory: Path, *, keep: str) -> None:
    """Remove every `rows-*` directory of the cache but `keep` (the published one): older
    generations, and the rows of preps that were killed before they could clean up."""
    for entry in os.scandir(directory):
        if (
            entry.name.startswith(ROWS_PREFIX)
            and entry.name != keep
            and entry.is_dir(follow_symlinks=False)
        ):
            shutil.rmtree(entry.path, ignore_errors=True)


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
    if made_for.get("spool_sha256") != source.get("spool_sha256"):
        raise RecallbenchError(
            f"{directory}: vectors were made for another validation of this data (its scope "
            f"spool differs from the one suite.json records); {hint}"
        )
    if manifest.get("byteorder") != sys.byteorder or manifest.get("dtype") != "float32":
        raise RecallbenchError(
            f"{directory}: vectors were written on a machine of another byte order; {hint}"
        )
    count, dim = manifest.get("count", -1), manifest.get("dimension", -1)
    scopes = manifest.get("scopes", -1)
    rows_at = rows_dir(directory, manifest)
    offsets = rows_at / OFFSETS
    rows = offsets.stat().st_size // OFFSET_BYTES if offsets.is_file() else 0
    if rows:  # the last offset: how many rows scopes.bin holds
        with open(offsets, "rb") as handle:
            handle.seek((rows - 1) * OFFSET_BYTES)
            rows = array("Q", handle.read(OFFSET_BYTES))[0]
    expected = {
        KEYS: count * KEY_BYTES,
        VECTORS: count * dim * 4,
        SCOPES: rows * ROW_BYTES,
        OFFSETS: (scopes + 1) * OFFSET_BYTES,
    }
    for name, size in expected.items():
        path = rows_at / name
        recorded = manifest.get("files", {}).get(name, {})
        if not path.is_file() or path.stat().st_size != size or recorded.get("size_bytes") != size:
            raise RecallbenchError(f"{path}: missing or not the size its manifest says; {hint}")
        if verify_files and file_sha256(path) != recorded.get("sha256"):
            raise RecallbenchError(f"{path}: content does not match its manifest's sha256; {hint}")


class VectorCache:
    """Read side: text -> float32 vector, for a store opened with a vector lookup."""

    def __init__(self, directory: Path, manifest: Mapping[str, Any]) -> None:
        self.directory = Path(directory)
        self._rows_at = rows_dir(self.directory, manifest)
        self.dimension = int(manifest["dimension"])
        self.count = int(manifest["count"])
        self._rows: dict[bytes, int] | None = None  # key -> row, made at the first `lookup`
        self._maps: list[mmap.mmap] = []
        self._floats = self._view(VECTORS, "f")
        self._keys = self._view(KEYS, "B")
        self._scope_rows = self._view(SCOPES, "I")
        self._offsets = self._view(OFFSETS, "Q")

    def _view(self, name: str, fmt: str) -> memoryview:
        hint = f"run `recallbench prep --cache {self.directory}` again"
        try:
            handle = open(self._rows_at / name, "rb")  # noqa: SIM115
        except FileNotFoundError:  # replaced by a prep since the manifest was read
            raise RecallbenchError(f"{self._rows_at / name}: missing; {hint}") from None
        with handle:
            if handle.seek(0, os.SEEK_END) == 0:
                return memoryview(b"").cast(fmt)
            self._maps.append(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
        return memoryview(self._maps[-1]).cast(fmt)

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

    def _key_rows(self) -> dict[bytes, int]:
        if self._rows is None:
            keys = self._keys.tobytes()
            self._rows = {
                keys[i : i + KEY_BYTES]: n for n, i in enumerate(range(0, len(keys), KEY_BYTES))
            }
        return self._rows

    def __contains__(self, text: str) -> bool:
        return text_key(text) in self._key_rows()

    def vector(self, row: int) -> list[float]:
        """Row `row`'s vector."""
        start = row * self.dimension
        return self._floats[start : start + self.dimension].tolist()

    def lookup(self, text: str) -> list[float]:
        """The cached vector of `text`; MissingVector when prep never embedded it."""
        key = text_key(text)
        row = self._key_rows().get(key)
        if row is None:
            raise MissingVector(
                f"{self.directory}: no cached vector for a text (sha256 {key.hex()[:12]}...); "
                "the cache does not cover this data: run `recallbench prep --cache DIR` again"
            )
        return self.vector(row)

    @property
    def scopes(self) -> int:
        """How many scopes the cache holds rows for."""
        return max(len(self._offsets) - 1, 0)

    def rows_of_scope(self, index: int) -> list[int]:
        """Scope `index`'s rows as scopes.bin holds them (unchecked: see `scope_rows`)."""
        return self._scope_rows[self._offsets[index] : self._offsets[index + 1]].tolist()

    def row_blocks(self, stop: int, size: int = 4096) -> Iterator[tuple[list[bytes], bytes]]:
        """Rows 0..stop-1 as (their keys, their float32 vectors' bytes), `size` rows at a
        time (what `CacheWriter.add` takes)."""
        for start in range(0, stop, size):
            end = min(start + size, stop)
            keys = self._keys[start * KEY_BYTES : end * KEY_BYTES].tobytes()
            vectors = self._floats[start * self.dimension : end * self.dimension].tobytes()
            yield [keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)], vectors

    def scope_rows(self, index: int, queries: Sequence[str], memories: Sequence[str]) -> list[int]:
        """The rows of scope `index` of the spool the cache was made from: one per text of
        `queries` then `memories` (the scope's texts in spool order, as prep recorded them
        in scopes.bin).

        Checked: the scope's row count, every row within the cache, and each query text's
        key (short texts, so a misplaced scope costs no more than a sha256 per query).
        """
        hint = f"run `recallbench prep --cache {self.directory}` again"
        if not 0 <= index < len(self._offsets) - 1:
            raise RecallbenchError(f"{self.directory}: no rows for scope {index}; {hint}")
        rows = self.rows_of_scope(index)
        if len(rows) != len(queries) + len(memories) or (rows and max(rows) >= self.count):
            raise RecallbenchError(
                f"{self.directory}: the rows of scope {index} do not fit its texts; {hint}"
            )
        for text, row in zip(queries, rows, strict=False):  # rows: queries, then memories
            if text_key(text) != self._keys[row * KEY_BYTES : (row + 1) * KEY_BYTES]:
                raise RecallbenchError(
                    f"{self.directory}: scope {index}'s rows are not its texts'; {hint}"
                )
        return rows

    def close(self) -> None:
        for view in (self._floats, self._keys, self._scope_rows, self._offsets):
            view.release()
        for mapped in self._maps:
            mapped.close()


class ScopeLookup:
    """The vector lookup a store gets: the texts of the scope in hand by their row (`use`),
    any other text by its sha256 (`VectorCache.lookup`).

    A scope's texts are recognised by identity: the very string objects the task read from
    the spool and handed to the system, each held here with its row, so nothing is hashed
    (a 4,000-character text costs as much to hash for a dict as to sha256). A copy of a
    text, equal but another object, takes the sha256 way and gets the same vector.
    """

    def __init__(self, cache: VectorCache) -> None:
        self.cache = cache
        self._by_id: dict[int, tuple[str, int]] = {}

    def use(self, index: int, queries: Sequence[str], memories: Sequence[str]) -> None:
        """From now on, scope `index`: its query and memory texts (the objects the system
        will be given), in spool order."""
        rows = self.cache.scope_rows(index, queries, memories)
        texts = (*queries, *memories)
        self._by_id = {id(text): (text, row) for text, row in zip(texts, rows, strict=True)}

    def __call__(self, text: str) -> list[float]:
        known = self._by_id.get(id(text))
        if known is not None and known[0] is text:
            return self.cache.vector(known[1])
        return self.cache.lookup(text)


# --------------------------------------------------------------------------- vectors from elsewhere

#: the format of a file of vectors made elsewhere (`recallbench prep --import FILE`)
IMPORT_FORMAT = "recallbench-vectors-import"
IMPORT_VERSION = 1
#: how far from 1 the length of a vector of a file that says `normalized` may be
NORM_TOLERANCE = 1e-3
#: the largest magnitude a float32 holds
FLOAT32_MAX = 3.4028234663852886e38
#: the keys a vector's line may name it by (exactly one of them)
IMPORT_KEYS = ("text_sha256", "memory_id", "query_id")


class ImportedVectors:
    """A file of vectors made elsewhere, read and checked whole (`read_import`): the header's
    `embedder`, `dimension` and `normalized`, and each vector (float32 bytes) by the text's
    sha256 (`by_key`), by memory id or by query id (`by_id[key name]`)."""

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.embedder: str = header["embedder"]
        self.dimension: int = header["dimension"]
        self.normalized: bool = header["normalized"]
        self.by_key: dict[bytes, bytes] = {}
        self.by_id: dict[str, dict[str, bytes]] = {"memory_id": {}, "query_id": {}}
        self.sha256 = ""
        self.count = 0


def _import_error(path: Path, line: int, where: str, reason: str) -> RecallbenchError:
    place = f" ({where})" if where else ""
    return RecallbenchError(f"{path}: line {line}{place}: {reason}")


def _check_header(path: Path, raw: bytes) -> dict[str, Any]:
    shape = (
        f'{{"format": "{IMPORT_FORMAT}", "version": {IMPORT_VERSION}, "embedder": NAME, '
        '"dimension": N, "normalized": true|false}'
    )
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != IMPORT_FORMAT:
        raise _import_error(path, 1, "", f"not a vectors header; the first line must be {shape}")
    if header.get("version") != IMPORT_VERSION:
        raise _import_error(
            path,
            1,
            "",
            f"version {header.get('version')!r} (this recallbench reads {IMPORT_VERSION})",
        )
    name, dimension = header.get("embedder"), header.get("dimension")
    if not isinstance(name, str) or not name.strip():
        raise _import_error(path, 1, "", "'embedder' must name the embedder (a non-empty string)")
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise _import_error(
            path, 1, "", f"'dimension' must be a whole number >= 1, not {dimension!r}"
        )
    if not isinstance(header.get("normalized"), bool):
        raise _import_error(path, 1, "", "'normalized' must be true or false")
    return header


def read_import(path: Path) -> ImportedVectors:
    """Read a vectors file (JSON lines: the header, then one object per vector naming it by
    exactly one of `IMPORT_KEYS` and giving its `vector`), checking every record: one line
    naming the file, the line and the record's key for the first problem."""
    import math

    path = Path(path)
    digest = hashlib.sha256()
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise RecallbenchError(f"{path}: not found") from None
    with handle:
        first = handle.readline()
        digest.update(first)
        if not first.strip():
            raise RecallbenchError(f"{path}: empty; the first line must be the vectors header")
        vectors = ImportedVectors(path, _check_header(path, first))
        seen: dict[tuple[str, str], int] = {}
        for number, line in enumerate(handle, 2):
            digest.update(line)
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise _import_error(path, number, "", f"not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise _import_error(path, number, "", "must be a JSON object")
            named = [k for k in IMPORT_KEYS if k in record]
            if len(named) != 1:
                raise _import_error(
                    path,
                    number,
                    "",
                    f"must name its text by exactly one of {', '.join(IMPORT_KEYS)}",
                )
            key_name = named[0]
            value = record[key_name]
            where = f"{key_name} {value!r}"
            if not isinstance(value, str) or not value:
                raise _import_error(path, number, where, f"{key_name} must be a non-empty string")
            if key_name == "text_sha256" and (len(value) != 64 or value.strip("0123456789abcdef")):
                raise _import_error(path, number, where, "not a sha256 (64 lowercase hex digits)")
            vector = record.get("vector")
            if not isinstance(vector, list) or len(vector) != vectors.dimension:
                size = f"{len(vector)} numbers" if isinstance(vector, list) else "no list"
                raise _import_error(
                    path, number, where,
                    f"vector has {size}, the header says {vectors.dimension}",
                )  # fmt: skip
            if not all(
                not isinstance(x, bool)
                and isinstance(x, int | float)
                and math.isfinite(x)
                and abs(x) <= FLOAT32_MAX
                for x in vector
            ):
                raise _import_error(
                    path, number, where, "vector holds a value that is not a finite number"
                )
            if vectors.normalized:
                norm = math.sqrt(sum(x * x for x in vector))
                if abs(norm - 1.0) > NORM_TOLERANCE:
                    raise _import_error(
                        path, number, where,
                        f"vector has length {norm:.6g}; the header says the vectors are normalized",
                    )  # fmt: skip
            if (key_name, value) in seen:
                raise _import_error(
                    path,
                    number,
                    where,
                    f"a second vector for it (the first on line {seen[key_name, value]})",
                )
            seen[key_name, value] = number
            blob = array("f", vector).tobytes()
            if key_name == "text_sha256":
                vectors.by_key[bytes.fromhex(value)] = blob
            else:
                vectors.by_id[key_name][value] = blob
            vectors.count += 1
    vectors.sha256 = digest.hexdigest()
    return vectors


def export_vectors(directory: Path, out: Path, embedder: str) -> dict[str, Any]:
    """Write the vectors of the cache in `directory` as a vectors file (`read_import`'s
    format) named `embedder`, each by its text's sha256; `normalized` is true when every
    vector's length is within `NORM_TOLERANCE` of 1. Returns the header written."""
    import math

    manifest = read_manifest(directory)
    cache = VectorCache(directory, manifest)
    try:
        keys = cache._keys.tobytes()
        rows = [cache.vector(row) for row in range(cache.count)]
    finally:
        cache.close()
    normalized = all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) <= NORM_TOLERANCE for v in rows)
    header = {
        "format": IMPORT_FORMAT,
        "version": IMPORT_VERSION,
        "embedder": embedder,
        "dimension": int(manifest["dimension"]),
        "normalized": normalized,
    }
    lines = [orjson.dumps(header)]
    for row, vector in enumerate(rows):
        key = keys[row * KEY_BYTES : (row + 1) * KEY_BYTES].hex()
        lines.append(orjson.dumps({"text_sha256": key, "vector": vector}))
    atomic_write_bytes(Path(out), b"\n".join(lines) + b"\n")
    return header
