"""What the built-in third-party stores share (Chroma, txtai, LlamaIndex, LangGraph, LangMem,
vipune): the MiniLM embedder capability, the vector source a store is fed from, the
offline environment, the marker file of a store directory and the directory clone path;
and the `records.jsonl` store of `bm25` and `bm25-okapi`.

* `MiniLMCapability`: the embedder capability of `minilm` (`dense.DenseEmbedder` over
  `semantic.shared_embedder()`): the same identity, so all of them share one prep cache.
* `VectorSource`: text -> vector for a store's own embedding hook. With the pipeline's
  lookup (`vectors=`), every vector comes from it; without, from the embedder capability.
  Never a model the store loads itself.
* `offline_environment()`: hubs offline, telemetry off; `caches_beside()`: the XDG cache
  directory inside the build directory while a store is opened.
* `DirectoryClone`: snapshot = the store's persisted directory as one tar file plus a
  manifest (sha256, record count, digest, embedder identity); verify = the manifest, then the
  store's own load of an extracted copy (its count and digest read back through its API);
  restore = verify, extract into a clean directory, load. Its corruptions: one byte flipped
  (`raw_byte`) and a record deleted through the store's own API under the old manifest
  (`stale_manifest`). Its base, `PackageClone`, serves postgres_store's pg_dump clone too.
* `RecordsStore` / `OpensRecords`: a store kept as `records.jsonl` (the package of
  `packaging.RecordsClone`) and indexed in memory: `bm25`, `bm25-okapi`.
* `system_options`: a system's user-settable options (index parameters), read from the
  environment variable `RECALLBENCH_INDEX_<NAME>` (`key=value,key=value`) over the
  defaults the store ships; a system records them in its configuration and its store
  marker, and `check_options` refuses a store built under other options. A marker names
  the system that made the store: `existing` refuses another system's store in one line.
* `fits_unix_socket`: whether a path fits a Unix socket, counted in bytes (the PostgreSQL
  server's socket and Milvus Lite's).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes
from recallbench.core.errors import RecallbenchError
from recallbench.systems.base import (
    Corruption,
    Hit,
    MissingVector,
    PackageInfo,
    SnapshotRejected,
    StoreRecord,
    TimedCalls,
    VectorLookup,
)
from recallbench.systems.packaging import (
    RECORDS_FILE,
    check_manifest,
    check_new_ids,
    copy_package,
    jsonl_bytes,
    jsonl_records,
    package_size,
    raw_byte_corruption,
    records_digest,
    write_manifest,
)
from recallbench.systems.registry import INDEX_OPTIONS_PREFIX as INDEX_OPTIONS_PREFIX
from recallbench.systems.registry import index_options_variable as index_options_variable

MARKER = "recallbench-store.json"
TARBALL = "store.tar"


def package_version(name: str) -> str | None:
    """The installed version of a distribution (None when it is not installed)."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


#: Environment every store here runs under: no hub, no telemetry, no progress bars.
OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    "ANONYMIZED_TELEMETRY": "False",  # chroma
    "DO_NOT_TRACK": "1",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
}


def offline_environment() -> None:
    """Set `OFFLINE_ENV`, without overriding what the user set. (None of these stores, set up
    as here, writes a home or cache directory: `tests/e2e/test_no_outside_writes.py` checks.)"""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    # milvus-lite 2.5 imports pkg_resources, which warns; txtai imports milvus-lite too
    warnings.filterwarnings(
        "ignore", message="pkg_resources is deprecated", category=UserWarning, module="milvus_lite"
    )


@contextlib.contextmanager
def caches_beside(directory: Path) -> Iterator[None]:
    """XDG_CACHE_HOME and TMPDIR pointed at `.store-cache` beside a store's directory (inside
    the build directory) while a store package is imported and opened: onnxruntime, which
    txtai imports, writes a device id under `$XDG_CACHE_HOME` (else `~/.cache`) and a
    session file `.ses` in the temporary directory when it loads. (Python's own `tempfile`
    directory is chosen before, from the user's TMPDIR, and kept.)"""
    cache = Path(directory).resolve().parent / ".store-cache"
    cache.mkdir(parents=True, exist_ok=True)
    # Python's temporary directory chosen now, from the user's TMPDIR: a process whose first
    # temporary file came later would otherwise keep this cache as its temporary directory
    tempfile.gettempdir()
    previous = {key: os.environ.get(key) for key in ("XDG_CACHE_HOME", "TMPDIR")}
    os.environ.update({key: str(cache) for key in previous})
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: the longest path of a Unix socket, in bytes: the kernel's `sun_path` is 108 bytes with its
#: terminating NUL (PostgreSQL's socket and Milvus Lite's both live under this bound)
SOCKET_PATH_LIMIT = 107


def fits_unix_socket(path: str | Path) -> bool:
    """Whether `path` is short enough for a Unix socket: its bytes in the file system's
    encoding, not its characters (an `é` is two)."""
    return len(os.fsencode(path)) <= SOCKET_PATH_LIMIT


def check_read_back(store: Any, manifest: dict[str, Any]) -> None:
    """A restored store holds what its manifest says: its record count and its records'
    digest; else it is closed and refused (`record_count_mismatch`, `digest_mismatch`)."""
    count, digest = store.count(), store.digest()
    if count != manifest.get("record_count"):
        store.close()
        raise SnapshotRejected(
            "record_count_mismatch",
            f"{count} records, manifest says {manifest.get('record_count')}",
        )
    if digest != manifest.get("digest"):
        store.close()
        raise SnapshotRejected(
            "digest_mismatch", "the records read back do not match the manifest's digest"
        )


class ReadsBack:
    """`count` and `digest` of a store here, read back through the store's own API inside
    its system's `_inside()`: `_count()` (how many records it holds) and `_pairs()`
    ((memory id, text) of each record)."""

    _system: Any

    def _count(self) -> int:
        raise NotImplementedError

    def _pairs(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def count(self) -> int:
        with self._system._inside():
            return self._count()

    def digest(self) -> str:
        with self._system._inside():
            pairs = self._pairs()
        return records_digest(pairs)


class MiniLMCapability:
    """The `minilm` embedder capability for a third-party system (`DenseEmbedder` over
    `semantic.shared_embedder()`): same identity, same vectors, one shared prep cache."""

    def __new__(cls, system: TimedCalls) -> Any:
        from recallbench.systems.dense import DenseEmbedder
        from recallbench.systems.semantic import shared_embedder

        return DenseEmbedder(system, shared_embedder())  # type: ignore[arg-type]


class VectorSource:
    """text -> vector (lists of floats) for a store's own embedding hook.

    With `lookup` (the pipeline's vector cache) every vector comes from it, else from the
    embedder capability's model (untimed here: the store's call that needs the vectors is
    already timed as the system's own work). `check` looks up a text in the form the store
    will ask for it: the embedder's `text_transform` for its role applied (mem0 strips its
    queries), the form `recallbench prep` embeds for such a store."""

    def __init__(self, embedder: Any, lookup: VectorLookup | None) -> None:
        from recallbench.core.embedding import text_transforms

        self._embedder = embedder
        self.lookup = lookup
        self.transforms = text_transforms(embedder)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        if self.lookup is not None:
            return [[float(x) for x in self.lookup(t)] for t in texts]
        unique = list(dict.fromkeys(texts))
        vectors = dict(zip(unique, self._embedder.inner.embed_batch(unique), strict=True))
        return [list(vectors[t]) for t in texts]

    def one(self, text: str) -> list[float]:
        return self([text])[0]

    def check(self, text: str, role: str = "query") -> None:
        """Raise MissingVector now when a lookup has no vector for `text` as the store will
        embed it in `role` (`memory` or `query`), before a store call that might wrap the
        exception in its own."""
        if self.lookup is None:
            return
        from recallbench.core.embedding import transformed

        form = transformed(self.transforms, role, text)
        try:
            self.lookup(form)
        except MissingVector as exc:
            if form == text:
                raise
            name = getattr(getattr(self._embedder, "_system", None), "name", "this system")
            raise MissingVector(
                f"{exc}; this store embeds its {role} texts transformed "
                f"({self.transforms[role]}), a form only `recallbench prep --system {name}` "
                "embeds"
            ) from None


# --------------------------------------------------------------------------- records.jsonl stores


class RecordsStore:
    """A store kept as `records.jsonl` in its directory and indexed in memory (`bm25`,
    `bm25-okapi`). A subclass's `_add` appends records to `_records` and rebuilds
    `_index`; ingest refuses a repeated id, adds the batch and rewrites the file."""

    def __init__(self, system: Any, directory: Path, records: list[StoreRecord]) -> None:
        self._system = system
        self.directory = directory
        self._records: list[StoreRecord] = []
        self._index: Any = None
        self._add(records)

    def _add(self, records: Sequence[StoreRecord]) -> None:
        raise NotImplementedError

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        check_new_ids((r.memory_id for r in self._records), records)
        self._add(list(records))
        atomic_write_bytes(self.directory / RECORDS_FILE, jsonl_bytes(self._records))
        return len(self._records)

    def _hits(self, scores: Any, order: Iterable[int]) -> list[Hit]:
        """The records at the positions `order`, scores rounded to 4 places."""
        return [
            Hit(self._records[i].memory_id, round(float(scores[i]), 4), self._records[i].identifier)
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
        self._index = None


class OpensRecords:
    """`open_store` and `attach` of a system whose stores are `RecordsStore`s
    (`store_class`)."""

    store_class: type[RecordsStore]

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> Any:
        """A fresh store; `vectors` is ignored (BM25 embeds nothing)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / RECORDS_FILE).exists():
            raise FileExistsError(f"{directory / RECORDS_FILE}: a store already exists here")
        atomic_write_bytes(directory / RECORDS_FILE, b"")
        return self.store_class(self, directory, [])

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> Any:
        path = Path(directory) / RECORDS_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path}: no BM25 store here")
        return self.store_class(self, Path(directory), jsonl_records(path))


# --------------------------------------------------------------------------- options


def options_variable(system: str) -> str:
    """The environment variable that sets a system's options: `index_options_variable`'s
    (`RECALLBENCH_INDEX_` and the name in capitals, `-` as `_`: `milvus-flat`:
    `RECALLBENCH_INDEX_MILVUS_FLAT`), one variable for every store's index."""
    return index_options_variable(system)


def system_options(
    system: str,
    defaults: dict[str, Any],
    parsers: dict[str, Callable[[str], Any]],
) -> dict[str, Any]:
    """`defaults` (the store's own, as it ships them) with the options the user set in
    `options_variable(system)` over them: `key=value` pairs, comma-separated; each value
    read by `parsers[key]` (which raises ValueError for a value it refuses). An unknown key,
    a pair without `=` or a refused value is one `RecallbenchError` line naming the
    variable, the pair and the keys it takes."""
    variable = options_variable(system)
    out = dict(defaults)
    given = os.environ.get(variable, "").strip()
    for pair in (p.strip() for p in given.split(",") if p.strip()) if given else ():
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in parsers:
            raise RecallbenchError(
                f"{variable}: {pair!r} is not KEY=VALUE with KEY one of {', '.join(parsers)}"
            )
        try:
            out[key] = parsers[key](value)
        except ValueError as exc:
            raise RecallbenchError(f"{variable}: {key}={value!r}: {exc}") from None
    return out


def check_options(directory: Path, system: str, options: dict[str, Any]) -> None:
    """Refuse (one line) a store whose marker records other options than `options`: its
    index was built, or its searches recorded, under those."""
    held = existing(directory, system).get("options")
    if held != options:
        raise RecallbenchError(
            f"{directory}: this {system} store was built with options {held}, "
            f"{options_variable(system)} now gives {options}: set it as it was, or run "
            "hydrate again"
        )


#: the configuration keys that hold a system's user-set options: `options` (Milvus's, through
#: `system_options`) and `index_options` (the PostgreSQL stores', through `index_options`)
OPTIONS_KEYS = ("options", "index_options")


def configured_options(configuration: Any) -> dict[str, Any]:
    """The user-set options a configuration records (`OPTIONS_KEYS`; empty when none): what
    every stage after hydrate compares with what hydrate recorded."""
    if not isinstance(configuration, dict):
        return {}
    return {key: configuration[key] for key in OPTIONS_KEYS if key in configuration}


# --------------------------------------------------------------------------- directories


def claim(directory: Path, system: str, **extra: Any) -> Path:
    """A fresh store directory with its marker (FileExistsError when one is there)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / MARKER
    if marker.exists():
        raise FileExistsError(f"{marker}: a store already exists here")
    marker.write_bytes(orjson.dumps({"system": system, **extra}, option=orjson.OPT_SORT_KEYS))
    return directory


def existing(directory: Path, system: str) -> dict[str, Any]:
    """The marker of a store `claim` made for `system` (FileNotFoundError when there is
    none); a store another system made, or a marker that is not one, is refused in one line
    naming the command that rebuilds it."""
    marker = Path(directory) / MARKER
    if not marker.exists():
        raise FileNotFoundError(f"{marker}: no {system} store here")
    try:
        held = orjson.loads(marker.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        held = {"system": f"(unreadable: {exc})"}
    made_by = held.get("system") if isinstance(held, dict) else "(not a marker)"
    if made_by != system:
        raise RecallbenchError(
            f"{marker}: this store was made by {made_by!r}, not {system!r}: run "
            f"`recallbench hydrate --system {system}` again"
        )
    return held


class OpensDirectories:
    """`open_store` and `attach` of the stores here, over one `_store(directory, vectors,
    load=...)`: the directory claimed (or found), the store's hub and telemetry off, its
    caches kept beside it while it opens; a new store is flushed once, so that `attach`
    finds it."""

    name: str
    #: options recorded in each store's marker and checked when a store is reopened or
    #: restored (`system_options`; None: nothing recorded or checked)
    marker_options: dict[str, Any] | None = None

    def _store(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> Any:
        raise NotImplementedError

    def _opened(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> Any:
        offline_environment()
        with caches_beside(directory):
            return self._store(Path(directory), vectors, load=load)

    def claim(self, directory: Path) -> Path:
        """A fresh store directory with this system's marker (and its options)."""
        marked = self.marker_options
        return claim(directory, self.name, **({} if marked is None else {"options": marked}))

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> Any:
        self.claim(directory)
        store = self._opened(directory, vectors, load=False)
        store.flush()
        return store

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> Any:
        existing(directory, self.name)
        if self.marker_options is not None:
            check_options(directory, self.name, self.marker_options)
        return self._opened(directory, vectors, load=True)


def tar_directory(directory: Path, exclude: Sequence[str] = ()) -> bytes:
    """The directory's files as a tar archive, entries sorted, owners and times zeroed;
    files named in `exclude` left out (never opened)."""
    out = io.BytesIO()
    root = Path(directory)
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
            if path.name in exclude:
                continue
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            elif path.is_dir():
                tar.addfile(info)
    return out.getvalue()


def untar(tarball: Path, directory: Path) -> None:
    """Extract a `tar_directory` archive into a new directory (regular files and dirs only)."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory}: not empty")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball, mode="r") as tar:
            tar.extractall(directory, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise SnapshotRejected("unreadable", f"{tarball}: {exc}") from None


class PackageClone:
    """A clone path whose package is one payload file plus a manifest (sha256, record
    count, digest, embedder identity, `_extra()`): `DirectoryClone` (a tar of the store's
    directory) and postgres_store's `DumpClone` (a pg_dump). verify = the manifest, then
    the store loaded from the payload (`_open`) and its count and digest read back;
    restore = the same into the new store's directory. A subclass names its `payload` file
    and says how it is written (`_write`), loaded (`_open`) and rewritten with its smallest
    record deleted (`_delete_smallest`, for the `stale_manifest` corruption)."""

    payload: str

    def __init__(self, system: Any, package_format: str) -> None:
        self._system = system
        self._format = package_format

    def _write(self, store: Any, path: Path) -> None:
        raise NotImplementedError

    def _extra(self) -> dict[str, Any]:
        """Further manifest fields."""
        return {}

    def _check(self, manifest: dict[str, Any]) -> None:
        """Further checks of a manifest, before the payload is loaded."""

    def _open(self, payload: Path, directory: Path) -> Any:
        raise NotImplementedError

    def _delete_smallest(self, payload: Path, scratch: Path) -> None:
        raise NotImplementedError

    def snapshot(self, store: Any, package_dir: Path) -> PackageInfo:
        package_dir = Path(package_dir)
        package_dir.mkdir(parents=True, exist_ok=False)
        count, digest = store.count(), store.digest()
        store.flush()
        self._write(store, package_dir / self.payload)
        write_manifest(
            package_dir,
            self._format,
            count,
            [self.payload],
            digest=digest,
            embedder=self._system.embedder.identity(),
            system=self._system.name,
            **self._extra(),
        )
        return PackageInfo(records=count, size_bytes=package_size(package_dir))

    def _load(self, package_dir: Path, directory: Path) -> tuple[Any, dict[str, Any]]:
        package_dir = Path(package_dir)
        manifest = check_manifest(package_dir, self._format)
        ours = self._system.embedder.identity()
        if manifest.get("embedder") != ours:
            raise SnapshotRejected(
                "embedder_mismatch",
                f"vectors made by {manifest.get('embedder')!r}, this system embeds with {ours!r}",
            )
        self._check(manifest)
        store = self._open(package_dir / self.payload, directory)
        check_read_back(store, manifest)
        return store, manifest

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        work = Path(work_dir) / "verify-load"
        if work.exists():
            shutil.rmtree(work)
        store, manifest = self._load(package_dir, work)
        store.close()
        shutil.rmtree(work, ignore_errors=True)
        return int(manifest["record_count"])

    def restore(self, package_dir: Path, directory: Path) -> Any:
        store, _ = self._load(package_dir, directory)
        return store

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        raw = raw_byte_corruption(package_dir, work_dir)
        stale = copy_package(package_dir, work_dir, "stale_manifest")
        scratch = Path(work_dir) / "stale_manifest.store"
        self._delete_smallest(stale / self.payload, scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        return [
            raw,
            Corruption(
                "stale_manifest",
                "the record with the smallest id deleted through the store's API, the manifest kept",
                stale,
            ),
        ]


class DirectoryClone(PackageClone):
    """The clone path of a store that persists to its directory (see the module docstring).

    `close` releases what the store holds on its files before they are read; `delete_one`
    deletes the record with the smallest memory id through the store's own API (for the
    `stale_manifest` corruption); `exclude`: names of files a package leaves out, never
    opened (a server's lock file: closing any descriptor of a file releases the process's
    POSIX lock on it, and Milvus Lite's server stops when its lock is released)."""

    payload = TARBALL

    def __init__(
        self,
        system: Any,
        package_format: str,
        delete_one: Callable[[Any], None],
        exclude: Sequence[str] = (),
    ) -> None:
        super().__init__(system, package_format)
        self._delete_one = delete_one
        self._exclude = tuple(exclude)

    def _write(self, store: Any, path: Path) -> None:
        path.write_bytes(tar_directory(store.directory, self._exclude))

    def _open(self, payload: Path, directory: Path) -> Any:
        untar(payload, directory)
        try:
            return self._system.attach(directory)
        except FileNotFoundError as exc:
            raise SnapshotRejected("missing_file", str(exc)) from None

    def _delete_smallest(self, payload: Path, scratch: Path) -> None:
        untar(payload, scratch)
        store = self._system.attach(scratch)
        self._delete_one(store)
        store.flush()
        store.close()
        payload.write_bytes(tar_directory(scratch, self._exclude))


class DirectoryStoreSystem(OpensDirectories, TimedCalls):
    """A system here over MiniLM vectors (`MiniLMCapability`) whose stores are cloned as
    their directory (`DirectoryClone`, the smallest record deleted by the store's
    `delete_smallest`; `exclude` as there)."""

    lexical = False

    def __init__(self, name: str, package_format: str, *, exclude: Sequence[str] = ()) -> None:
        self.name = name
        self.embedder = MiniLMCapability(self)
        self.clone = DirectoryClone(self, package_format, lambda s: s.delete_smallest(), exclude)


# --------------------------------------------------------------------------- index options

# `index_options_variable(system)`, the variable that sets a system's index options, is the
# registry's (imported above), which refuses it for a built-in that takes none


def index_options(system: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """`defaults` (the store's own, as it ships them) with the values the user set in
    `index_options_variable(system)`: `KEY=VALUE` pairs separated by commas, e.g.
    `m=32,ef_construction=128,ef_search=100`. A value takes its default's type (int, bool
    as true/false, str). An unknown key, a key given twice or a bad value is one
    `RecallbenchError` line naming the variable. The result goes into the system's
    configuration, so every result records the index it measured."""
    from recallbench.core.errors import RecallbenchError

    variable = index_options_variable(system)
    given = os.environ.get(variable, "").strip()
    out = dict(defaults)
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in given.split(","))):
        key, eq, raw = (s.strip() for s in item.partition("="))
        if not eq or key not in defaults or key in seen:
            why = "given twice" if key in seen else "not KEY=VALUE" if not eq else "unknown"
            raise RecallbenchError(
                f"{variable}: {item!r}: {why} (keys: {', '.join(sorted(defaults))})"
            )
        seen.add(key)
        default = defaults[key]
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false"):
                    raise ValueError(raw)
                out[key] = raw.lower() == "true"
            elif isinstance(default, int):
                out[key] = int(raw)
                if out[key] < 1:
                    raise ValueError(raw)
            else:
                out[key] = raw
        except ValueError:
            kind = "true or false" if isinstance(default, bool) else "a positive integer"
            raise RecallbenchError(f"{variable}: {key}={raw!r} is not {kind}") from None
    return out
