"""A worker's state and its stores' lifecycle, shared by the stages' per-scope tasks.

Worker-local state (the system under test, its boundary, the vector cache) is built once per
worker by `init_worker` (the executor's initializer, `recallbench.engine.executor`) and dropped by
`close_worker`. The tasks themselves live beside their stage (`stages.hydrate.hydrate_scope`,
`stages.query.query_scope`, `stages.roundtrip.roundtrip_scope` and `requery_clone`,
`vectorprep.embed_batches`): module-level functions of plain data, so any executor (in process,
local processes by fork or spawn, Ray) ships them by name and returns results in order.

Every call into the system goes through the worker's `recallbench.systems.boundary.Boundary`
(`guard()`): whatever it raises, hangs on or returns wrongly is one line naming the system,
the call and the scope or query.

The store lifecycle: a task's scope (`task_scope`), a fresh store (`build_store`), a kept one
reopened (`attach`) and checked (`check_store`), transient stores in two alternating
directories emptied on a removal thread (`transient_store`), a scope's store directory under
a root (`store_dir`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Query, Scope
from recallbench.systems.base import structured as base_structured
from recallbench.systems.boundary import Boundary, system_boundary
from recallbench.systems.registry import resolve_system

_STATE: dict[str, Any] = {}
if hasattr(os, "register_at_fork"):  # a forked worker builds its own state (init_worker)
    os.register_at_fork(after_in_child=_STATE.clear)
#: the systems whose `setup()` has run in this process, by id (weakly held): the serial
#: engine hands a stage's one object to each `init_worker` of the stage, set up once
_SET_UP: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


class StoreDamaged(RecallbenchError):
    """The store on disk is not the store the upstream artifact describes."""


def store_dir(root: Path, index: int) -> Path:
    """The store directory of scope `index` under `root`."""
    return Path(root) / f"{index:05d}"


def task_scope(item: Mapping[str, Any]) -> Scope:
    """A task's scope: given as plain data (item["scope"]) or read here from its line of the
    spool (item["ref"], see `recallbench.builddir.scopespool`); item["queries"], when there, is the
    (start, stop) slice of its queries the task searches. Its memories have turns and
    dates only when the stage asked for structure (a structured system's `stream_scopes` or
    `scope_refs`); for any other system no `Turn` is built."""
    if "ref" in item:
        from recallbench.builddir.scopespool import read_scope

        raw = read_scope(item["ref"])
    else:
        raw = item["scope"]
    by_position = _STATE.get("scope_lookup")
    if by_position is not None and "index" in item:  # the whole scope, in spool order
        by_position.use(
            item["index"],
            [q["text"] for q in raw["queries"]],
            [m["text"] for m in raw["memories"]],
        )
    return Scope.from_dict(raw, item.get("queries"))


def init_worker(config: Mapping[str, Any]) -> None:
    """Build this worker's system and open the vector cache when `config` names one.

    config: {"system": name, "instance": the parent's system object when this worker runs
    in the parent's process (the serial engine: it is used as it is, not resolved again),
    else None (a worker process resolves the name once, here: a system object need not
    pickle, and a plugin's entry point loads in spawned and Ray workers alike),
    "cache": None | {"directory", "embedder_identity", "source"},
    "device": where a learned embedder computes (auto, cpu, cuda),
    "call_timeout": None | seconds per call into the system,
    "preload": load the embedder's model now, on a thread of its own, while the worker's
    first tasks are read and tokenized (a worker that will embed: prep's; its tasks wait for
    the load with `embedder_ready`),
    "threads": None | BLAS / OpenMP / torch threads for the system (`recallbench.core.threads`),
    set before the system is built (a name resolved here) or, for a passed-in "instance"
    (built in the parent), before its `setup()` when that runs here; kept until
    `close_worker`}

    Then the system's optional `setup()` runs, once per system object, through the
    boundary: a plugin loads its model there (once per worker process) rather than in
    every `open_store`.
    """
    from recallbench.core.embedding import use_device
    from recallbench.core.threads import limit_threads

    close_worker()
    settings = contextlib.ExitStack()
    settings.enter_context(limit_threads(config.get("threads")))
    _STATE["settings"] = settings
    system = resolve_system(config["system"], config.get("instance"))
    guard = system_boundary(config["system"], config.get("call_timeout"))
    setup = getattr(system, "setup", None)
    if callable(setup) and _SET_UP.get(id(system)) is not system:
        guard.call("setup", None, setup)
        with contextlib.suppress(TypeError):  # no weak reference to it: set up each time
            _SET_UP[id(system)] = system
    loading = None
    if getattr(system, "embedder", None) is not None:
        use_device(system.embedder, config.get("device") or "auto")
        if config.get("preload"):
            loading = _Loading(guard, system.embedder)
    cache = scope_lookup = None
    if config.get("cache"):
        from recallbench.engine.vectorcache import ScopeLookup, VectorCache

        spec = config["cache"]
        # the parent verified the files' sha256 once; workers check sizes and identity
        cache = VectorCache.open(
            Path(spec["directory"]),
            embedder_identity=spec["embedder_identity"],
            source=spec["source"],
            verify_files=False,
        )
        scope_lookup = ScopeLookup(cache)
    from recallbench.systems.base import timed_lookup

    lookup = timed_lookup(scope_lookup) if scope_lookup is not None else None
    _STATE.update(
        system=system,
        guard=guard,
        cache=cache,
        scope_lookup=scope_lookup,
        lookup=lookup,
        progress=None,
        loading=loading,
    )


class _Loading:
    """The embedder's model loading on a daemon thread (`init_worker` with preload);
    `wait()` returns once it has loaded, or raises what the load raised."""

    def __init__(self, guard: Boundary, embedder: Any) -> None:
        import threading

        self._error: BaseException | None = None
        self.seconds: float | None = None  # how long the load took, once done
        self._thread = threading.Thread(
            target=self._run, args=(guard, embedder), name="recallbench-load", daemon=True
        )
        self._thread.start()

    def _run(self, guard: Boundary, embedder: Any) -> None:
        from recallbench.core.embedding import preload

        started = time.perf_counter()
        try:
            guard.call("load", "the embedder's model", preload, embedder)
        except BaseException as exc:  # raised in the task that waits for it
            self._error = exc
        self.seconds = time.perf_counter() - started

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def embedder_ready() -> float | None:
    """Wait for the model load `init_worker` started; the seconds it took (None when none
    was started)."""
    loading = _STATE.get("loading")
    if loading is None:
        return None
    loading.wait()
    return loading.seconds


def embedding_threads(count: int) -> Any:
    """This worker's pool of `count` threads, each embedding a batch of its own at once
    (prep's plan: one process, several batches at a time, each on one torch thread)."""
    size, pool = _STATE.get("embedding_threads", (0, None))
    if pool is None or size != count:
        from concurrent.futures import ThreadPoolExecutor

        if pool is not None:
            pool.shutdown(wait=True)
        pool = ThreadPoolExecutor(count, thread_name_prefix="recallbench-embed")
        _STATE["embedding_threads"] = (count, pool)
    return pool


def close_worker() -> None:
    loading, (_, pool) = _STATE.get("loading"), _STATE.get("embedding_threads", (0, None))
    if loading is not None:
        with contextlib.suppress(BaseException):  # its failure was raised by a task, if any
            loading.wait()
    if pool is not None:
        pool.shutdown(wait=True)
    finish_removals()
    cache = _STATE.get("cache")
    if cache is not None:
        cache.close()
    settings = _STATE.get("settings")
    _STATE.clear()
    if settings is not None:  # the thread settings of this process as they were
        settings.close()


def run_batch(batch: Mapping[str, Any]) -> list[Any]:
    """Several consecutive items as one task: batch["fn"] over batch["items"], in order."""
    fn = batch["fn"]
    return [fn(item) for item in batch["items"]]


def set_progress(callback: Callable[[int], Any] | None) -> None:
    """In-process executors only: called with 1 per query searched (a progress bar)."""
    _STATE["progress"] = callback


def progress() -> Callable[[int], Any] | None:
    """The in-process progress callback (`set_progress`), or None."""
    return _STATE.get("progress")


def system() -> Any:
    """This worker's system under test."""
    return _STATE["system"]


def guard() -> Boundary:
    """This worker's boundary: every call into the system goes through it."""
    return _STATE["guard"]


def inside() -> float:
    """The system's `seconds_inside()`, through the boundary."""
    boundary = guard()
    return boundary.seconds(boundary.call("seconds_inside", None, system().seconds_inside))


def close(store: Any, where: str) -> None:
    """Close a store through the boundary."""
    guard().call("close", where, store.close)


def close_quietly(store: Any, where: str) -> None:
    """Close a store on the way out of a failure (a second failure must not hide the first)."""
    with contextlib.suppress(Exception):
        close(store, where)


def vectors() -> Any:
    """The vector cache's lookup, timed as the harness's work (never the system's)."""
    return _STATE.get("lookup")


def attach(directory: Path, where: str) -> Any:
    """Reopen a kept store; queries take their vectors from the cache when there is one
    (FileNotFoundError when there is no store)."""
    lookup = vectors()
    kwargs = {} if lookup is None else {"vectors": lookup}
    return guard().call(
        "attach", where, system().attach, directory, passthrough=(FileNotFoundError,), **kwargs
    )


def remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def directory_bytes(directory: Path) -> int:
    """The bytes a store's directory holds on disk: the sizes of its regular files, links
    not followed (0 when it is gone). A local diagnostic: the cost table's store size."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def transient_dir(root: Path) -> Path:
    """This worker's directory for transient stores under `root` (its two store
    directories alternate there, see `transient_store`)."""
    slot = _STATE.get("slot")
    if slot is None:
        slot = _STATE["slot"] = f"worker-{os.getpid()}-{os.urandom(4).hex()}"
    return Path(root) / slot


def transient_store(root: Path) -> Path:
    """Where this worker builds its next transient store, once the previous one (closed by
    now) is handed to the worker's removal thread.

    Two directories alternate: while a store is built and searched in one, the other one's
    store is removed on the removal thread. Unlinking a store's files is kernel work that
    releases the GIL, so it overlaps the system's own work (it is handed over after the task
    has read its scope, so it overlaps the system's ingest, not the reading). A directory's
    removal has finished before it is used again.
    """
    pending = _STATE.pop("removing", None)
    if pending is not None:
        pending.result()
    previous = _STATE.pop("used", None)
    if previous is not None:
        remover = _STATE.get("remover")
        if remover is None:
            from concurrent.futures import ThreadPoolExecutor

            remover = _STATE["remover"] = ThreadPoolExecutor(1, thread_name_prefix="recallbench-rm")
        _STATE["removing"] = remover.submit(_empty_store_dir, previous)
    name = "b" if previous is not None and previous.name == "a" else "a"
    directory = _STATE["used"] = transient_dir(root) / name
    return directory


def _empty_store_dir(directory: Path) -> None:
    """Remove what a store directory holds, in as few system calls as it allows (each one
    hands the GIL back and forth with the worker's main thread): list it, unlink its files."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(directory, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:  # a subdirectory
            shutil.rmtree(path, ignore_errors=True)


def finish_removals() -> None:
    """Wait for the pending removal, remove the last store, stop the removal thread."""
    pending = _STATE.pop("removing", None)
    if pending is not None:
        pending.result()
    last = _STATE.pop("used", None)
    if last is not None:
        _empty_store_dir(last)
    remover = _STATE.pop("remover", None)
    if remover is not None:
        remover.shutdown(wait=True)


def store_facts(store: Any, where: str) -> dict[str, Any]:
    """What identifies a store's content, read through the system's own API."""
    boundary = guard()
    return {
        "records": boundary.whole_number(
            boundary.call("count", where, store.count), "count", where
        ),
        "digest": boundary.text(boundary.call("digest", where, store.digest), "digest", where),
    }


def check_store(
    store: Any, expect: Mapping[str, Any], where: Path, rerun: str, scope: str
) -> dict[str, Any]:
    """The store's facts; refuse a store whose record count or content digest differs
    from `expect` (the digest only when `expect` has one)."""
    facts = store_facts(store, scope)
    if facts["records"] != expect["records"]:
        raise StoreDamaged(
            f"{where}: store holds {facts['records']} records, hydrate.json says "
            f"{expect['records']}; run `{rerun}` again"
        )
    if expect.get("digest") is not None and facts["digest"] != expect["digest"]:
        raise StoreDamaged(
            f"{where}: store content differs from what hydrate recorded (digest); run `{rerun}` again"
        )
    return facts


def build_store(scope: Scope, directory: Path) -> tuple[Any, dict[str, Any]]:
    """A fresh store in `directory` holding every memory of the scope; (store, timing).

    Hydrate keeps it; query builds a transient one inside its task; a round trip rebuilds a
    transient source."""
    under_test, boundary = system(), guard()
    where = f"scope {scope.scope_id}"
    records = store_records(scope, base_structured(under_test))
    start = time.perf_counter()
    store = boundary.call("open_store", where, under_test.open_store, directory, vectors=vectors())
    try:
        stored = boundary.call("ingest", where, store.ingest, records)
        seconds = time.perf_counter() - start
        # validate made the ids unique: a shortfall is the store's
        stored = boundary.ingested(stored, len(records), where)
    except BaseException:
        close_quietly(store, where)
        raise
    return store, {"ingest_seconds": seconds, "records": stored}


def store_records(scope: Scope, with_structure: bool) -> list[Any]:
    """The scope's memories as the system receives them: `StoreRecord`s, with their turns
    and session date only for a system that asked for structure."""
    from recallbench.systems.base import StoreRecord

    if not with_structure:
        return [
            StoreRecord(m.memory_id, m.identifier, m.text, m.importance, m.tags)
            for m in scope.memories
        ]
    return [
        StoreRecord(m.memory_id, m.identifier, m.text, m.importance, m.tags, m.turns, m.date)
        for m in scope.memories
    ]


def search(store: Any, query: Query, limit: int, where: str) -> Any:
    """`store.search(query text, limit)` through the boundary (unchecked: the caller checks
    the hits), with `query_date=` for a system that asked for structure. `query` and
    `limit` go by position: a store may name the parameter `top_k` (`base.Store.search`)."""
    if base_structured(system()):
        return guard().call("search", where, store.search, query.text, limit, query_date=query.date)
    return guard().call("search", where, store.search, query.text, limit)
