"""`milvus` and `milvus-flat`: Milvus Lite through pymilvus's `MilvusClient` (optional extra
`milvus`).

Store: `MilvusClient("<store dir>/milvus.db")`. pymilvus hands a `.db` path to Milvus Lite
(`milvus-lite`, which ships Milvus's own server binary): it starts that server as a child
process on a Unix socket in the temporary directory (no TCP port), its data in the one file
`milvus.db` and a lock file `.milvus.db.lock` beside it. The server holds no file of its
own open past its parent: it stops when the lock its parent holds is released, which the
kernel does when the parent exits however it exits (a crash or SIGKILL included). A store
stops its server on `close` (`server_manager_instance.release_server`).

One collection `memories`: `id` (VARCHAR primary key: the memory id as given), `identifier`
and `text` (VARCHAR), `vector` (FLOAT_VECTOR, 384), dynamic fields off; its index on
`vector` with metric COSINE. `milvus`: Milvus's default index, AUTOINDEX (what
`MilvusClient.create_collection(name, dimension=...)` makes; Milvus Lite reports it as
`M` 18, `efConstruction` 240); `milvus-flat`: FLAT (every vector compared). Milvus Lite
accepts FLAT, IVF_FLAT and AUTOINDEX only (HNSW is refused in its local mode). Add:
`client.insert(rows)`; search: `client.search([vector], limit=limit,
output_fields=["identifier"], search_params=...)` in Milvus's order; the score is Milvus's
COSINE "distance", the cosine similarity.

Options (`adapters.system_options`, the variable `RECALLBENCH_INDEX_MILVUS` or
`RECALLBENCH_INDEX_MILVUS_FLAT`): `index_type` (FLAT, IVF_FLAT, AUTOINDEX), and for
IVF_FLAT `nlist` (its build parameter, Milvus's default 128) and `nprobe` (its search
parameter, Milvus's default 8). They are recorded in the configuration and in each store's
marker; a store built under other options is refused when reopened or restored.

Limits Milvus sets, checked before anything is added (one line naming the memory): a
memory id, identifier and text are at most 65,535 bytes of UTF-8 each (VARCHAR's limit).

Digest: (id, text) read back with `client.query` in pages (a store holds at most 16,384
memories: Milvus's bound on a query's offset + limit). Clone: the store directory with
its `milvus.db` (`adapters.DirectoryClone`), verified by Milvus's own load of a copy; the
lock file is left out and never opened (POSIX drops a process's lock on a file when it
closes any descriptor of it, and the server would stop).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.systems.adapters import (
    DirectoryStoreSystem,
    ReadsBack,
    VectorSource,
    fits_unix_socket,
    options_variable,
    package_version,
    system_options,
)
from recallbench.systems.base import Hit, StoreRecord, VectorLookup
from recallbench.systems.packaging import check_new_ids
from recallbench.systems.registry import register

DB_FILE = "milvus.db"
#: Milvus Lite's lock beside its file: held by the process that started the server, which
#: stops when it is released
LOCK_FILE = f".{DB_FILE}.lock"
COLLECTION = "memories"
DIMS = 384
METRIC = "COSINE"
PACKAGE_FORMAT = "recallbench-milvus-dir-v1"
#: VARCHAR's maximum length in Milvus (bytes)
MAX_VARCHAR = 65_535
#: the index types Milvus Lite's local mode accepts
INDEX_TYPES = ("FLAT", "IVF_FLAT", "AUTOINDEX")
#: Milvus's defaults for IVF_FLAT: nlist (build) and nprobe (search)
IVF_DEFAULTS = {"nlist": 128, "nprobe": 8}
PAGE = 4096
#: Milvus bounds a query's offset + limit (and a search's limit) by 16,384: a store holds at
#: most this many memories here, refused at ingest beyond it (its digest could not be read)
MAX_RECORDS = 16_384


def _index_type(value: str) -> str:
    if value.upper() not in INDEX_TYPES:
        raise ValueError(f"one of {', '.join(INDEX_TYPES)} (Milvus Lite's local mode)")
    return value.upper()


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError("a whole number") from None
    if not 1 <= number <= 65_536:
        raise ValueError("between 1 and 65536")
    return number


PARSERS = {"index_type": _index_type, "nlist": _positive_int, "nprobe": _positive_int}


def milvus_options(system: str, index_type: str) -> dict[str, Any]:
    """The options of a Milvus system: its index type, and for IVF_FLAT nlist and nprobe
    (Milvus's defaults unless set); `nlist`/`nprobe` for another type are refused."""
    given = system_options(system, {"index_type": index_type}, PARSERS)
    if given["index_type"] == "IVF_FLAT":
        return {**IVF_DEFAULTS, **given}
    extra = sorted(set(given) - {"index_type"})
    if extra:
        raise RecallbenchError(
            f"{options_variable(system)}: {', '.join(extra)} applies to IVF_FLAT only, "
            f"not {given['index_type']}"
        )
    return given


def build_params(options: dict[str, Any]) -> dict[str, Any]:
    return {"nlist": options["nlist"]} if options["index_type"] == "IVF_FLAT" else {}


def search_params(options: dict[str, Any]) -> dict[str, Any]:
    return {"nprobe": options["nprobe"]} if options["index_type"] == "IVF_FLAT" else {}


def held_index(described: dict[str, Any]) -> dict[str, Any]:
    """The index Milvus says a collection has (`describe_index`), in the terms of the
    configuration: its type, metric and build parameters (Milvus gives them as strings)."""
    out = {key: described.get(key) for key in ("index_type", "metric_type")}
    if out["index_type"] == "IVF_FLAT":
        raw = described.get("nlist")
        out["nlist"] = int(raw) if str(raw).isdigit() else raw
    return out


def format_index(index: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in index.items())


def _quiet() -> None:
    """pymilvus logs each failed call with its traceback before it raises (the store's
    error is the one line); milvus-lite's pkg_resources warning is silenced by
    `adapters.offline_environment`."""
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


def milvus_string(text: str) -> str:
    """`text` as a string literal of Milvus's filter expressions (double quotes, `\\` and
    `\"` escaped): Milvus Lite 2.5 takes no expression templates, and pymilvus's
    `delete(ids=...)` quotes ids without escaping them."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextlib.contextmanager
def server_home(directory: Path) -> Iterator[None]:
    """HOME pointed at `.store-cache/milvus-home` beside the store (inside the build
    directory) while the server starts: Milvus Lite's server creates `~/.cache/milvus` in
    the home it inherits."""
    home = Path(directory).resolve().parent / ".store-cache" / "milvus-home"
    home.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = previous


@contextlib.contextmanager
def short_socket_dir(db: Path) -> Iterator[None]:
    """Milvus Lite names its server's socket ``tempfile.mktemp() + "_" + db.name + ".sock"``:
    when that path would not fit a Unix socket (`adapters.fits_unix_socket`: a long TMPDIR), Python's temporary
    directory is the system's (``/tmp``) while the server starts, so the socket can be
    made. The socket is removed when the server stops."""
    import tempfile

    longest = os.path.join(tempfile.gettempdir(), "tmp" + "x" * 8) + f"_{db.name}.sock"
    if fits_unix_socket(longest) or not os.access("/tmp", os.W_OK):
        yield
        return
    previous = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        yield
    finally:
        tempfile.tempdir = previous


@contextlib.contextmanager
def milvus_lite_log(said: list[str]) -> Iterator[None]:
    """What milvus-lite logs while its server starts, into `said` (its first error: why it
    did not start) instead of the terminal: it logs through the root logger."""

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "milvus_lite" in record.pathname:
                said.append(record.getMessage().strip().splitlines()[0])

    root = logging.getLogger()
    handler = Keep(logging.ERROR)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _too_long(r: StoreRecord) -> str | None:
    for field, value in (("id", r.memory_id), ("identifier", r.identifier), ("text", r.text)):
        size = len(value.encode("utf-8"))
        if size > MAX_VARCHAR:
            return f"its {field} is {size:,} bytes, Milvus's VARCHAR takes at most {MAX_VARCHAR:,}"
    return None


class MilvusStore(ReadsBack):
    def __init__(
        self, system: MilvusSystem, directory: Path, lookup: VectorLookup | None, *, load: bool
    ):
        _quiet()
        from pymilvus import DataType, MilvusClient

        self._system = system
        self.directory = directory
        self._db = directory / DB_FILE
        self._vectors = VectorSource(system.embedder, lookup)
        self._client = None
        with system._inside():
            said: list[str] = []
            try:
                with server_home(directory), short_socket_dir(self._db), milvus_lite_log(said):
                    self._client = MilvusClient(str(self._db))
            except Exception as exc:  # pymilvus raises its own on a server that did not start
                self._stop_server()
                why = said[0] if said else str(exc).strip().splitlines()[-1]
                raise RecallbenchError(f"{self._db}: Milvus Lite did not start: {why}") from None
            try:
                if not load:
                    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
                    schema.add_field(
                        "id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR
                    )
                    schema.add_field("identifier", DataType.VARCHAR, max_length=MAX_VARCHAR)
                    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
                    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIMS)
                    index = MilvusClient.prepare_index_params()
                    index.add_index(
                        "vector",
                        index_type=system.options["index_type"],
                        metric_type=METRIC,
                        params=build_params(system.options),
                    )
                    self._client.create_collection(COLLECTION, schema=schema, index_params=index)
                held = self._client.describe_index(COLLECTION, "vector")
                self._client.load_collection(COLLECTION)
            except BaseException:
                self.close()
                raise
        built = held_index(held)
        wanted = {"index_type": system.options["index_type"], "metric_type": METRIC,
                  **build_params(system.options)}  # fmt: skip
        if built != wanted:  # the store's own index is not the one the configuration records
            self.close()
            raise RecallbenchError(
                f"{self._db}: Milvus holds the index {format_index(built)}, the configuration "
                f"records {format_index(wanted)} ({options_variable(system.name)}): run "
                f"`recallbench hydrate --system {system.name}` again"
            )

    def _stop_server(self) -> None:
        from milvus_lite.server_manager import server_manager_instance

        with milvus_lite_log([]):  # (its warning when the server is stopped already)
            server_manager_instance.release_server(str(self._db))

    def _pairs(self) -> list[tuple[str, str]]:
        """Every (id, text), read in pages of `client.query` (offset + limit at most
        `MAX_RECORDS`, Milvus's bound; pymilvus's `query_iterator` pages by an `id > "..."`
        filter it does not escape, which an id with a quote breaks)."""
        out: list[tuple[str, str]] = []
        while len(out) < MAX_RECORDS:
            page = self._client.query(
                COLLECTION,
                filter="",
                output_fields=["text"],
                limit=min(PAGE, MAX_RECORDS - len(out)),
                offset=len(out),
            )
            out.extend((row["id"], row["text"]) for row in page)
            if len(page) < PAGE:
                break
        return out

    def _count(self) -> int:
        rows = self._client.query(COLLECTION, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        for r in records:
            why = _too_long(r)
            if why is not None:
                raise RecallbenchError(f"memory {r.memory_id[:80]!r}: {why}")
        with self._system._inside():
            held = self._pairs()
            check_new_ids((i for i, _ in held), records)
            if len(held) + len(records) > MAX_RECORDS:
                raise RecallbenchError(
                    f"{self._system.name}: a store of {len(held) + len(records):,} memories; "
                    f"Milvus reads back at most {MAX_RECORDS:,} (offset + limit of a query)"
                )
            if records:
                vectors = self._vectors([r.text for r in records])
                self._client.insert(
                    COLLECTION,
                    [
                        {"id": r.memory_id, "identifier": r.identifier, "text": r.text, "vector": v}
                        for r, v in zip(records, vectors, strict=True)
                    ],
                )
            return self._count()

    def search(self, query: str, limit: int) -> list[Hit]:
        self._vectors.check(query)
        with self._system._inside():
            if limit <= 0 or self._count() == 0:
                return []
            found = self._client.search(
                COLLECTION,
                [self._vectors.one(query)],
                limit=limit,
                output_fields=["identifier"],
                search_params={
                    "metric_type": METRIC,
                    "params": search_params(self._system.options),
                },
            )[0]
        return [
            Hit(str(h["id"]), round(float(h["distance"]), 6), str(h["entity"]["identifier"]))
            for h in found
        ]

    def delete_smallest(self) -> None:
        with self._system._inside():
            smallest = min(i for i, _ in self._pairs())
            if "'" in smallest:  # measured: "near ...: syntax error" from its SQL, then retries
                raise RecallbenchError(
                    f"{self._system.name}: Milvus Lite {package_version('milvus-lite')} cannot "
                    f"delete the record {smallest[:80]!r}: its delete fails on an id with a "
                    "single quote"
                )
            self._client.delete(COLLECTION, filter=f"id == {milvus_string(smallest)}")

    def flush(self) -> None:
        """`client.flush`: Milvus seals what it holds in memory into `milvus.db`."""
        with self._system._inside():
            self._client.flush(COLLECTION)

    def close(self) -> None:
        """Close the client and stop this store's Milvus Lite server (its child process)."""
        if self._client is not None:
            self._client.close()
        self._client = None
        self._stop_server()


class MilvusSystem(DirectoryStoreSystem):
    """Milvus Lite (pymilvus MilvusClient on a local file): COSINE over MiniLM vectors."""

    #: Milvus Lite's server locks its file to the process that started it
    one_process_per_store = True

    def __init__(self, name: str, index_type: str) -> None:
        # the server's lock file is never read: closing a descriptor of it would release the
        # lock, and the server stops when its lock is released
        super().__init__(name, PACKAGE_FORMAT, exclude=(LOCK_FILE,))
        self.options = milvus_options(name, index_type)
        self.marker_options = self.options

    def configuration(self) -> dict[str, Any]:
        index_type = self.options["index_type"]
        exact = (
            "yes: FLAT compares every vector"
            if index_type == "FLAT"
            else f"{index_type} is approximate by its kind; Milvus Lite 2.5.1 was measured "
            "exhaustive at these sizes (see docs/stores.md): rankings are reported beside the "
            "exact one of the same vectors (minilm, milvus-flat)"
        )
        return {
            "implementation": "pymilvus",
            "implementation_version": package_version("pymilvus"),
            "server": f"milvus-lite {package_version('milvus-lite')}: Milvus's server binary, "
            "a child process on a Unix socket (no TCP), its data in <store>/milvus.db",
            "collection": {
                "fields": ["id (VARCHAR primary key)", "identifier", "text", f"vector ({DIMS})"],
                "dynamic_fields": False,
            },
            "index": {
                "field": "vector",
                "index_type": index_type,
                "metric_type": METRIC,
                "params": build_params(self.options),
            },
            "search_params": search_params(self.options),
            "options": dict(self.options),
            "options_variable": options_variable(self.name),
            "exact": exact,
            "vectors": "passed in: the pipeline's vector cache, else the minilm embedder",
            "embedder": self.embedder.identity(),
            "search": "client.search([vector], limit=top_k): Milvus's order",
            "score": "Milvus's COSINE distance: the cosine similarity",
            "clone_format": PACKAGE_FORMAT,
        }

    def _store(self, directory: Path, vectors: VectorLookup | None, *, load: bool) -> MilvusStore:
        return MilvusStore(self, directory, vectors, load=load)


@register(
    "milvus",
    description="Milvus Lite (pymilvus MilvusClient on a local file, Milvus's server binary): "
    "its default index AUTOINDEX, COSINE, over all-MiniLM-L6-v2 vectors passed in",
    capabilities=("clone", "embedder"),
    extra="milvus",
)
def milvus_system() -> MilvusSystem:
    return MilvusSystem("milvus", "AUTOINDEX")


@register(
    "milvus-flat",
    description="Milvus Lite (pymilvus MilvusClient on a local file): FLAT index (exact), "
    "COSINE, over all-MiniLM-L6-v2 vectors passed in",
    capabilities=("clone", "embedder"),
    extra="milvus",
)
def milvus_flat_system() -> MilvusSystem:
    return MilvusSystem("milvus-flat", "FLAT")
