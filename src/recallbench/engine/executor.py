"""Run one task per item, in this process, in local worker processes or on Ray; results
always come back in input order.

The contract the stages rely on, and all an engine has to honour::

    with make_executor("local", workers, initializer, initargs, finalizer) as ex:
        for result in ex.map(fn, items):   # same order as `items`
            ...

* ``items`` is consumed lazily: at most ``max_in_flight`` items (default ``2 * workers``)
  have been taken from it and not yet yielded, so the parent can stream a 2.7 GB file and
  never hold more than a few items. Workers never see the dataset, only their own item.
* ``fn(item)`` is a module-level function of its item and of worker-local state built
  once per worker by ``initializer(*initargs)`` (the system under test, the vector
  cache). ``fn``, ``initializer``, ``finalizer``, ``initargs``, items and results are
  module-level functions or plain picklable data: the same task runs unchanged in every
  engine.
* Results come back in input order whatever the engine and the number of workers, so the
  artifacts of ``--workers 1``, ``--workers N`` and ``--executor ray`` are byte-identical
  (as long as ``fn`` itself is deterministic). Which worker runs which item is not fixed.
* An exception raised by ``fn`` (or by the initializer) is re-raised in the parent with
  its own type and message where it pickles (a `RecallbenchError` stays a one-line
  `RecallbenchError`, never a Ray traceback); work not yet started is cancelled.

Engines (``kind``):

``local``
    ``workers == 1``: `SerialExecutor`, everything in this process (the reference
    implementation, and the debugger's friend). ``workers >= 2``: `ProcessExecutor`, a
    `concurrent.futures.ProcessPoolExecutor` whose workers are *forked* when this process
    runs a single thread on Linux (they start in milliseconds, recallbench and the system
    already imported) and *spawned* otherwise (see `start_method`). The parent holds no
    store or other SQLite handle when it starts them, and a worker builds its own state.
``ray``
    `RayExecutor`: ``workers`` Ray actors, on a local Ray started for the run or on the
    cluster at ``ray_address``. Needs the optional extra ``pip install -e '.[ray]'``.

Start and exit behaviour:

* Normal exit of the ``with`` block: workers finish, run ``finalizer()`` once each (the
  serial engine runs it in-process), and are shut down. A Ray started by the executor is
  shut down; a Ray that was already initialised (or a remote cluster) is left running,
  only our actors are killed.
* An exception in a task: items not yet started are cancelled, the ones running finish
  (so finalizers still run), and the exception propagates.
* Ctrl-C (`KeyboardInterrupt`, and SIGTERM as `recallbench.core.signals.Terminated`) or any
  other non-`Exception`: outstanding work is cancelled, local workers are killed (they
  ignore SIGINT themselves, so a Ctrl-C prints one traceback, the parent's), Ray actors
  are killed, nothing waits on a running task, and `KeyboardInterrupt` is re-raised.
  Finalizers do not run on this path.
* A worker that dies under a task (a local process killed, a Ray actor lost) is one
  `WorkerDied` line naming the worker and the task it was running (`task_label`): each
  local worker writes the number of its current task into shared memory, so the parent
  knows which task a dead worker had. Workers killed by SIGTERM (a SIGTERM sent to the
  whole process group) are `Terminated`, like the parent.
* Ray faults: a ``ray_address`` (``host:port``) must accept a TCP connection within
  `RAY_ADDRESS_WAIT` seconds (Ray itself retries forever), else one line naming it; the
  live nodes' CPUs are checked before any actor starts (one line naming the dead nodes);
  the actors must be placed within `RAY_PLACE_TIMEOUT`, and every wait on Ray looks at the
  cluster's nodes every `RAY_WATCH_SECONDS`: a node or actor that dies is one `WorkerDied`
  line, never a hang. `ray.init` installs its own SIGTERM handlers: ours are put back
  after it (`recallbench.core.signals.handlers_kept`), so SIGTERM stays `Terminated`.
* Entering: the local pool starts all its workers in ``__enter__`` and the Ray engine
  all its actors, so an initializer's failure is raised there (the serial engine runs the
  initializer there too). Enter the executor from a thread that outlives it (normally the
  main thread): on Linux a worker is killed when the thread that started it exits.
* The parent killed with SIGKILL: each local worker process has
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux) and a watchdog thread that exits the
  worker within `PARENT_POLL_SECONDS` of its parent changing (any POSIX system), so no
  worker outlives the parent. The multiprocessing resource tracker the pool started then
  exits by itself: it reads a pipe whose write ends only the parent and the workers hold,
  and it stops at end-of-file (unlinking any leaked semaphores). A local Ray started by
  ``ray.init`` is Ray's to stop: its GCS server and raylet are started with
  PR_SET_PDEATHSIG and its actors exit once their raylet has, while Ray's own agents may
  outlive the parent a while (what was observed, with which Ray: docs/performance.md; only
  the local engine is tested). A remote cluster kills the actors when the driver's job
  dies.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from recallbench.core.embedding import torch_cache_in_scratch
from recallbench.core.errors import RecallbenchError
from recallbench.core.exiting import close_files_opened_here
from recallbench.core.signals import die_with_parent

T = TypeVar("T")
R = TypeVar("R")

#: the engines `make_executor` knows, in the order the CLI lists them
EXECUTORS: tuple[str, ...] = ("local", "ray")

RAY_MISSING = "the ray executor needs the optional extra: pip install -e '.[ray]'"

#: how often a local worker's watchdog checks that its parent is still there (seconds)
PARENT_POLL_SECONDS = 0.5

#: how long a graceful shutdown waits for Ray actors to run their finalizers (seconds)
RAY_CLOSE_TIMEOUT = 60.0

#: how long `--ray-address` may take to accept a TCP connection before the run fails (seconds;
#: the environment variable RAY_ADDRESS_WAIT_VARIABLE sets another)
RAY_ADDRESS_WAIT = 30.0
RAY_ADDRESS_WAIT_VARIABLE = "RECALLBENCH_RAY_ADDRESS_WAIT"


def ray_address_wait() -> float:
    """Seconds `--ray-address` may take to answer: RECALLBENCH_RAY_ADDRESS_WAIT when set (a
    positive number), else RAY_ADDRESS_WAIT."""
    raw = os.environ.get(RAY_ADDRESS_WAIT_VARIABLE, "").strip()
    if not raw:
        return RAY_ADDRESS_WAIT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds <= 0:
        raise RecallbenchError(
            f"{RAY_ADDRESS_WAIT_VARIABLE}={raw!r}: expected a positive number of seconds"
        )
    return seconds


#: how long the Ray actors may take to be placed on a node and start (seconds); their
#: initializers then run for as long as they need, watched for dead nodes and actors
RAY_PLACE_TIMEOUT = 120.0

#: how often a wait on Ray checks the cluster's nodes (seconds)
RAY_WATCH_SECONDS = 2.0


class Executor(Protocol):
    """What the stages see: a context manager whose `map` yields results in input order."""

    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """fn over items, lazily, results in input order."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def make_executor(
    kind: str = "local",
    workers: int = 1,
    initializer: Callable[..., Any] | None = None,
    initargs: tuple = (),
    finalizer: Callable[[], Any] | None = None,
    *,
    ray_address: str | None = None,
    max_in_flight: int | None = None,
    own_process: bool = False,
) -> SerialExecutor | ProcessExecutor | RayExecutor:
    """The executor for ``--executor KIND --workers N [--ray-address ADDR]``.

    ``own_process``: a local worker is a process of its own even when there is one (prep's
    plan of one process embedding on several threads: this process only plans the batches,
    reads the data and writes the rows meanwhile, and never loads the model).

    ``initializer(*initargs)`` runs once in every worker before its first task and
    ``finalizer()`` once when it shuts down cleanly. ``max_in_flight`` bounds how many items
    are taken from the input and not yet yielded (default ``2 * workers``).
    """
    if kind not in EXECUTORS:
        raise RecallbenchError(f"unknown executor {kind!r}: choose one of {', '.join(EXECUTORS)}")
    if not isinstance(workers, int) or workers < 1:
        raise RecallbenchError(f"workers must be a whole number of at least 1, not {workers!r}")
    if max_in_flight is not None and max_in_flight < 1:
        raise RecallbenchError(f"max_in_flight must be at least 1, not {max_in_flight!r}")
    if kind == "ray":
        return RayExecutor(
            workers,
            initializer,
            initargs,
            finalizer,
            ray_address=ray_address,
            max_in_flight=max_in_flight,
        )
    if ray_address:
        raise RecallbenchError("--ray-address needs --executor ray")
    if workers == 1 and not own_process:
        return SerialExecutor(initializer, initargs, finalizer)
    return ProcessExecutor(workers, initializer, initargs, finalizer, max_in_flight=max_in_flight)


# --------------------------------------------------------------------------- serial


class SerialExecutor:
    """Everything in this process: the reference implementation (and the debugger's friend)."""

    workers = 1

    def __init__(
        self,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        finalizer: Callable[[], Any] | None = None,
    ) -> None:
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._finalizer = finalizer
        self.max_in_flight = 1

    def __enter__(self) -> SerialExecutor:
        if self._initializer is not None:
            self._initializer(*self._initargs)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


# --------------------------------------------------------------------------- local processes

# Worker-side state of a local process worker (each worker process has its own copy).
_INIT_ERROR: BaseException | None = None
#: shared with the parent: [pid, task number] per worker (`_claim_slot`), so the parent can
#: name the task a worker was running when it died
_CURRENT: Any = None
_SLOT: int | None = None


def task_label(fn: Callable[..., Any], item: Any) -> str:
    """The task `fn(item)` in a few words, for a message: the function and, when the item
    says, its scope (a stage task's items) and query slice."""
    name = getattr(fn, "__name__", repr(fn))
    if isinstance(item, dict) and "fn" in item and "items" in item:  # worker.run_batch
        inner = [task_label(item["fn"], i) for i in item["items"]]
        if len(inner) == 1:
            return inner[0]
        return f"{inner[0]} ... {inner[-1]} ({len(inner)} tasks in one batch)"
    if not isinstance(item, dict):
        return name
    scope = None
    for key in ("ref", "scope"):
        if isinstance(item.get(key), dict) and "scope_id" in item[key]:
            scope = item[key]["scope_id"]
    parts = []
    if scope is not None:
        parts.append(f"scope {scope!r}")
    elif "index" in item:
        parts.append(f"scope #{item['index']}")
    span = item.get("queries")
    if isinstance(span, list | tuple) and len(span) == 2:
        parts.append(f"queries {span[0] + 1}-{span[1]}")
    return name + (f" of {', '.join(parts)}" if parts else "")


class WorkerDied(RecallbenchError):
    """A worker process or Ray actor died under a task (killed, out of memory, a crash)."""


def _find_slot() -> int | None:
    """This worker's [pid, task] pair in `_CURRENT` (the parent writes the pids once every
    worker has started, before the first task)."""
    global _SLOT
    if _SLOT is None and _CURRENT is not None:
        pid = os.getpid()
        for slot in range(0, len(_CURRENT), 2):
            if _CURRENT[slot] == pid:
                _SLOT = slot
    return _SLOT


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker process exit when `parent_pid` is no longer its parent."""
    die_with_parent(parent_pid)  # where prctl is not available, the watchdog below covers it
    threading.Thread(
        target=_watch_parent, args=(parent_pid,), name="recallbench-parent-watchdog", daemon=True
    ).start()


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent_pid:
            os._exit(1)


def _init_process_worker(
    parent_pid: int,
    initializer: Callable[..., Any] | None,
    initargs: tuple,
    finalizer: Callable[[], Any] | None,
    current: Any = None,
    spawned: bool = False,
) -> None:
    """The pool's initializer: fate-share with the parent, ignore Ctrl-C, run the user's.
    A `spawned` worker ends, once its finalizers have run, without the interpreter's
    teardown (`_end_spawned_worker`)."""
    global _INIT_ERROR, _CURRENT
    _CURRENT = current
    # Ctrl-C reaches the whole foreground process group; only the parent handles it (by
    # terminating us), so a Ctrl-C prints one traceback instead of one per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # so does a closed terminal's SIGHUP: the parent hangs up (`recallbench.core.signals`) and
    # terminates us, instead of a worker dying first and the run reading as a crash
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # SIGTERM keeps its default (the pool's own clean-up terminates workers with it); a
    # forked worker must not inherit the parent's handler (`recallbench.core.signals`)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent_pid)
    from multiprocessing import util

    if finalizer is not None:
        # runs when the worker exits normally (the pool's shutdown), not on terminate
        util.Finalize(None, finalizer, exitpriority=10)
    if spawned:
        # the last of the exit's finalizers (multiprocessing's own run at -5 and above):
        # exit_process, which closes the files a system left open after atexit has run
        util.Finalize(None, _end_spawned_worker, exitpriority=-100)
        # before the initializer, which may start loading a model on a thread (tqdm made
        # there would take a named semaphore, see `_no_semaphore_in_tqdm`)
        _no_semaphore_in_tqdm(load=True)
    else:
        # a forked worker ends with os._exit after these finalizers: close the files a
        # system left open (a plugin's log), as no teardown will; never the files it was
        # born with (they are its parent's)
        util.Finalize(None, close_files_opened_here(), exitpriority=-50)
    if initializer is not None:
        try:
            initializer(*initargs)
        except Exception as exc:
            # Re-raised by every task, so the parent sees the initializer's own exception
            # instead of a BrokenProcessPool.
            _INIT_ERROR = exc
    _no_semaphore_in_tqdm()


def _end_spawned_worker() -> None:
    """A spawned worker's last finalizer: end the process now, as a forked one does.

    The pool's shutdown waits for each worker to exit. A forked worker ends with `os._exit`
    after its finalizers; a spawned one returns to `spawn_main`, whose `sys.exit` then tears
    the interpreter down: with torch imported 1.2-1.6 s in which nothing is written, and which
    the run waits for. This runs after the worker's own finalizer (`workerstate.close_worker`:
    its stores, cache and work directories) and multiprocessing's, at the end of the normal
    exit only (a killed or terminated worker never gets here): the rest of what the
    interpreter's exit does (threads, `atexit` handlers, closing open files, flushing stdout
    and stderr) and then `os._exit(0)`, the exit code of a pool worker that returned
    (`recallbench.core.exiting`)."""
    from recallbench.core.exiting import exit_process

    exit_process(0)


def start_method() -> str:
    """How local workers start: ``fork`` when this process runs one thread (Linux, counted
    in /proc/self/task, native threads included), so a worker starts in milliseconds with
    recallbench and the system already imported; ``spawn`` otherwise. A fork copies only
    the forking thread: a lock another thread held (a native thread pool's, a logging
    handler's) would stay held in the child forever, so a multi-threaded parent spawns."""
    if sys.platform.startswith("linux"):
        try:
            if len(os.listdir("/proc/self/task")) == 1:
                return "fork"
        except OSError:
            pass
    return "spawn"


def _ready(_: object) -> int:
    return os.getpid()


def _no_semaphore_in_tqdm(load: bool = False) -> None:
    """tqdm (which libraries import, and instantiate even with their bars disabled) makes a
    multiprocessing RLock per process: in a spawned worker (whose default start method is
    spawn) a named semaphore that a worker killed under a task never unlinks, so
    multiprocessing warns of a leaked semaphore at exit (a forked worker's are unlinked as
    they are made). Workers need no cross-process bar lock: give tqdm none (its thread lock
    stays). `load`: import tqdm now (a spawned worker, before a model loads on a thread:
    after a SIGTERM during prep's embedding the warning followed the promised line)."""
    global _TQDM_DONE
    if load and "tqdm.std" not in sys.modules:
        with contextlib.suppress(ImportError):
            import tqdm.std  # noqa: F401
    std = sys.modules.get("tqdm.std")
    if std is not None:
        lock = getattr(std, "TqdmDefaultWriteLock", None)
        if lock is not None and "mp_lock" not in vars(lock):
            lock.mp_lock = None
        _TQDM_DONE = True


_TQDM_DONE = False


def _run_in_process_worker(fn: Callable[[T], R], item: T, number: int = -1) -> R:
    if _INIT_ERROR is not None:
        raise _INIT_ERROR
    if not _TQDM_DONE:
        _no_semaphore_in_tqdm()
    slot = _find_slot() if number >= 0 else None
    if slot is None:
        return fn(item)
    _CURRENT[slot + 1] = number  # which task this worker runs, should it die under it
    try:
        return fn(item)
    finally:
        _CURRENT[slot + 1] = -1


#: how often a thread waiting for a task's result wakes (see `_result`)
WAKE_SECONDS = 0.25


def _result(future: Future) -> Any:
    """`future.result()`, waking every `WAKE_SECONDS` while the task runs. A signal another
    thread of this process took (a SIGTERM sent while the process was stopped goes to any
    of its threads when it continues) interrupts no wait of the main thread, and Python
    runs its handler in the main thread only: a wait without a timeout held the run's
    SIGTERM until the task ended (30 s, for a slow embedding batch). Now it is handled
    within `WAKE_SECONDS`."""
    while True:
        try:
            return future.result(timeout=WAKE_SECONDS)
        except TimeoutError:
            if future.done():  # the task itself raised TimeoutError
                raise


class ProcessExecutor:
    """A `concurrent.futures.ProcessPoolExecutor` with a bounded window; its workers start
    by `start_method` ("fork" or "spawn"; default: `start_method()` when entered)."""

    def __init__(
        self,
        workers: int,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        finalizer: Callable[[], Any] | None = None,
        *,
        max_in_flight: int | None = None,
        start_method: str | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("ProcessExecutor needs at least 1 worker")
        if start_method not in (None, "fork", "spawn"):
            raise ValueError(f"start_method must be 'fork' or 'spawn', not {start_method!r}")
        self.start_method = start_method
        self.workers = workers
        self.max_in_flight = max_in_flight or 2 * workers
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._finalizer = finalizer
        self._pool: ProcessPoolExecutor | None = None
        self._processes: dict[int, Any] = {}
        self._current: Any = None

    def __enter__(self) -> ProcessExecutor:
        # SIGHUP blocked while the pool starts its processes (the workers and
        # multiprocessing's resource tracker inherit the block): a closed terminal hangs up
        # the whole process group, and only this process must take it (it then stops
        # them); a hang-up meanwhile is delivered here once the pool is up
        hangup = {signal.SIGHUP} if hasattr(signal, "pthread_sigmask") else set()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, hangup) if hangup else None
        try:
            return self._start()
        finally:
            if previous is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _start(self) -> ProcessExecutor:
        # the workers inherit torch's compile cache directory of this process, which removes
        # it (a worker killed under a task never could)
        torch_cache_in_scratch()
        context = multiprocessing.get_context(self.start_method or start_method())
        # [pid, task number] per worker (shared memory, no lock: each worker writes only
        # its own pair), so `_died` can name a dead worker's task
        self._current = context.RawArray("q", 2 * self.workers)
        pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_init_process_worker,
            initargs=(
                os.getpid(),
                self._initializer,
                self._initargs,
                self._finalizer,
                self._current,
                context.get_start_method() == "spawn",
            ),
        )
        try:
            # Start every worker now, from this thread: the pool starts a process per
            # submit while none is idle (forked ones all at once), and PR_SET_PDEATHSIG
            # ties a worker to the thread that started it. An initializer's failure is
            # raised here, as with Ray.
            started = [
                pool.submit(_run_in_process_worker, _ready, None) for _ in range(self.workers)
            ]
            for future in started:
                future.result()
            self._processes = dict(getattr(pool, "_processes", None) or {})
            for slot, pid in enumerate(sorted(self._processes)[: self.workers]):
                self._current[2 * slot], self._current[2 * slot + 1] = pid, -1
        except BrokenProcessPool:
            processes = dict(getattr(pool, "_processes", None) or {})
            _kill_pool(pool)
            raise WorkerDied(
                f"a worker process {_how_it_died(processes)} while starting; nothing was run"
            ) from None
        except BaseException:
            _kill_pool(pool)
            raise
        self._pool = pool
        return self

    def _died(self, labels: dict[int, str]) -> BaseException:
        """The one line for a pool broken by a dead worker: which worker, how, and the
        task it was running."""
        raw = self._current if self._current is not None else []
        running = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2) if raw[i]}
        dead = [(pid, p) for pid, p in self._processes.items() if p.exitcode is not None]
        # the pool terminates (SIGTERM) the other workers once one has died: name the first
        dead.sort(key=lambda entry: entry[1].exitcode == -signal.SIGTERM)
        if dead and all(p.exitcode == -signal.SIGTERM for _, p in dead):
            from recallbench.core.signals import Terminated

            return Terminated()  # SIGTERM sent to the process group: the run is terminated
        for pid, process in dead:
            number = running.get(pid, -1)
            if number in labels:
                return WorkerDied(
                    f"worker process {pid} {_exit_text(process.exitcode)} while running "
                    f"{labels[number]}; the run is abandoned, nothing written"
                )
        who = (
            f"worker process {dead[0][0]} {_exit_text(dead[0][1].exitcode)}"
            if dead
            else "a worker process died"
        )
        pending = next(iter(labels.values()), None)
        return WorkerDied(
            f"{who} with {pending or 'tasks'} outstanding; the run is abandoned, nothing written"
        )

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if exc_type is not None and not issubclass(exc_type, Exception):
            _kill_pool(pool)  # Ctrl-C, SystemExit: do not wait for running tasks
            return
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:  # e.g. a second Ctrl-C while waiting
            _kill_pool(pool)
            raise

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        if self._pool is None:
            raise RuntimeError("use the executor as a context manager")
        pool = self._pool
        window: deque[tuple[int, Future]] = deque()
        labels: dict[int, str] = {}  # task number -> its label, while in the window
        try:
            for number, item in enumerate(items):
                labels[number] = task_label(fn, item)
                window.append((number, pool.submit(_run_in_process_worker, fn, item, number)))
                if len(window) >= self.max_in_flight:
                    done, future = window.popleft()
                    yield _result(future)
                    labels.pop(done, None)
            while window:
                done, future = window.popleft()
                yield _result(future)
                labels.pop(done, None)
        except BrokenProcessPool:
            # the pool's manager thread reaps the dead worker (and stops the others): once
            # it has finished, every worker's exit code is known
            manager = getattr(pool, "_executor_manager_thread", None)
            if manager is not None:
                manager.join(timeout=30)
            raise self._died(labels) from None
        finally:
            for _, future in window:
                future.cancel()


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def _how_it_died(processes: dict[int, Any]) -> str:
    for pid, process in processes.items():
        if process.exitcode is not None:
            return f"({pid}) {_exit_text(process.exitcode)}"
    return "died"


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what is queued, terminate the workers, reap them."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:
        kill()
        pool.shutdown(wait=True)
        return
    # shutdown() forgets the processes and the manager thread: take them first
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=10)
    # the pool's manager thread sees the dead workers, marks the pool broken and exits
    if manager is not None:
        manager.join(timeout=10)


# --------------------------------------------------------------------------- ray


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RecallbenchError(RAY_MISSING) from None
    return ray


def _ray_connect_failed(address: str, exc: BaseException) -> str:
    """One line for a ``ray.init(address=...)`` that could not connect: Ray's reason (the
    last line of the traceback it keeps as the cause) and, unless this process enabled it,
    the token authentication a cluster started by ``ray start --head`` usually requires."""
    message = f"cannot connect to the Ray cluster at {address}: {exc}"
    cause = str(exc.__cause__ or "").strip().splitlines()
    if cause:
        message += f": {cause[-1].strip()}"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        message += (
            " (a cluster with token authentication needs RAY_AUTH_MODE=token and its token"
            " in recallbench's environment too: see docs/executors.md)"
        )
    return message


#: the hosts Ray replaces by this machine's interface address (`local_ip`)
LOCALHOST = ("localhost", "127.0.0.1", "::1")


def wait_for_address(address: str, local_ip: str | None = None) -> None:
    """Wait until something accepts a TCP connection at `address` (``host:port``; other
    forms, such as ``auto``, are left to Ray), for at most `ray_address_wait()` seconds, else
    one line naming the address: Ray itself retries an address nobody answers forever.
    A LOCALHOST host is probed at `local_ip` when given, where Ray will connect."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    host = host.strip("[]")
    target = ""
    if host in LOCALHOST and local_ip:
        host, target = local_ip, f" (Ray connects to {local_ip}:{port} for it)"
    wait = ray_address_wait()
    deadline = time.monotonic() + wait
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                break
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            raise RecallbenchError(
                f"no Ray cluster answers at {address}{target}: nothing accepted a connection "
                f"there within {wait:g} s ({reason}); is `ray start --head` running "
                "there, on that port?"
            )
        time.sleep(1.0)
    wait_for_grpc(address, f"{host}:{port}", target, max(deadline - time.monotonic(), 5.0))


def wait_for_grpc(address: str, hostport: str, target: str, seconds: float) -> None:
    """Wait until the listener at `hostport` speaks gRPC (HTTP/2), as Ray's GCS and Ray
    Client servers do, for at most `seconds`, else one line naming `address`: a listener
    that is not a Ray server (a web server, another service) would otherwise keep Ray
    retrying for minutes."""
    import grpc

    channel = grpc.insecure_channel(hostport)
    try:
        grpc.channel_ready_future(channel).result(timeout=seconds)
    except grpc.FutureTimeoutError:
        raise RecallbenchError(
            f"no Ray cluster answers at {address}{target}: something accepts connections there "
            f"but did not answer as a gRPC server (Ray's GCS) within {seconds:.0f} s; is that "
            "the port `ray start --head` printed?"
        ) from None
    finally:
        channel.close()


def _node_name(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')} (node {str(node.get('NodeID', ''))[:12]})"


def check_ray_cluster(nodes: list[dict[str, Any]], workers: int, where: str = "") -> dict[str, str]:
    """The live nodes of `ray.nodes()` (node id -> name), or one line when their CPUs are
    fewer than `workers`, naming the nodes that are dead."""
    alive = {n["NodeID"]: _node_name(n) for n in nodes if n.get("Alive")}
    cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes if n.get("Alive"))
    if cpus < workers:
        dead = [_node_name(n) for n in nodes if not n.get("Alive")]
        raise RecallbenchError(
            f"the Ray cluster{where} has {cpus:g} CPUs on {len(alive)} live node(s), fewer than "
            f"--workers {workers}" + (f"; dead: {', '.join(dead)}" if dead else "")
        )
    return alive


def _dead_nodes_text(ray: Any, live: dict[str, str]) -> str:
    """``: node X died`` for the nodes of `live` that are no longer alive, else ''."""
    try:
        now = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    except Exception:  # the GCS itself is gone
        return ": the Ray cluster no longer answers"
    dead = [name for node_id, name in live.items() if node_id not in now]
    return f": node {', '.join(dead)} died" if dead else ""


def _as_raised(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """A SIGTERM's `Terminated` stays itself: Ray turns an exception raised by a signal
    handler during its calls (ray.wait, ray.get) into a plain KeyboardInterrupt."""
    from recallbench.core.signals import as_raised

    return as_raised(exc)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


class _RayWorker:
    """One Ray actor: the worker-local state of one worker (made a Ray actor class at run
    time, so this module imports without Ray)."""

    def __init__(
        self,
        initializer: Callable[..., Any] | None,
        initargs: tuple,
        finalizer: Callable[[], Any] | None,
    ) -> None:
        self._initializer: Callable[..., Any] | None = initializer
        self._initargs = initargs
        self._finalizer = finalizer
        self._error: BaseException | None = None

    def ping(self) -> str:
        """Placed and started: the id of the node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def ready(self) -> None:
        """Run the initializer (once); its exception is re-raised as is."""
        initializer, self._initializer = self._initializer, None
        if initializer is not None:
            try:
                initializer(*self._initargs)
            except Exception as exc:
                self._error = exc  # re-raised by every call, so the parent sees it as is
        if self._error is not None:
            raise self._error

    def run(self, fn: Callable[[T], R], item: T) -> R:
        if self._error is not None:
            raise self._error
        return fn(item)

    def close(self) -> None:
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None and self._error is None:
            finalizer()


def _ray_get(ray: Any, ref: Any, timeout: float | None = None) -> Any:
    """`ray.get`, with a task's exception re-raised as itself instead of a RayTaskError."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException) and not isinstance(cause, ray.exceptions.RayError):
            raise cause from None
        raise


class RayExecutor:
    """``workers`` Ray actors, fed in input order from a bounded window.

    Each actor runs one task at a time and gets the next item as soon as it is free (so a
    slow item does not hold up the other actors); results are yielded strictly in input
    order. Ray is initialised here only when it is not already; then it is also shut down
    here.
    """

    def __init__(
        self,
        workers: int,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        finalizer: Callable[[], Any] | None = None,
        *,
        ray_address: str | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self.workers = workers
        self.max_in_flight = max(max_in_flight or 2 * workers, 1)
        self.ray_address = ray_address or None
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._finalizer = finalizer
        self._ray: Any = None
        self._started_ray = False
        self._actors: list[Any] = []
        self._where = ""  # " at ADDRESS" when connected to a cluster
        self._live_nodes: dict[str, str] = {}  # node id -> its address, when the run began
        self._nodes: set[str] = set()  # the nodes our actors run on

    def _await_actors(self, method: str, timeout: float | None) -> list[Any]:
        """Call `method` on every actor and wait for all of them; their results in actor
        order. A dead actor, or a node that died meanwhile (any live node while `timeout` is
        set, the actors are being placed; else an actor's node), is one `WorkerDied` line,
        and so is a wait beyond `timeout` (None: no bound): never a hang, never a traceback."""
        ray = self._ray
        pending = {getattr(actor, method).remote(): n for n, actor in enumerate(self._actors)}
        results: list[Any] = [None] * len(self._actors)
        watched = self._live_nodes if timeout is not None else self._actor_nodes()
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=RAY_WATCH_SECONDS)
            for ref in ready:
                number = pending.pop(ref)
                try:
                    results[number] = _ray_get(ray, ref)
                except ray.exceptions.RayActorError as exc:
                    raise WorkerDied(
                        f"Ray actor {number + 1} of {len(self._actors)} died before it was "
                        f"ready ({type(exc).__name__}: {_first_line(exc)})"
                        f"{_dead_nodes_text(ray, self._live_nodes)}; nothing was run"
                    ) from None
            if not pending:
                break
            dead = _dead_nodes_text(ray, watched)
            if dead:
                raise WorkerDied(
                    f"{len(pending)} of {len(self._actors)} Ray actors not ready{dead}; "
                    "nothing was run"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise WorkerDied(
                    f"{len(pending)} of {len(self._actors)} Ray actors were not placed on a "
                    f"node of the Ray cluster{self._where} within {timeout:g} s (its free CPUs "
                    f"now: {ray.available_resources().get('CPU', 0):g}); nothing was run"
                )
        return results

    def _actor_nodes(self) -> dict[str, str]:
        """The nodes our actors run on (node id -> name)."""
        return {node: self._live_nodes.get(node, node[:12]) for node in self._nodes}

    def __enter__(self) -> RayExecutor:
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            connecting = (
                self.ray_address not in (None, "local")
                if self.ray_address
                else bool(os.environ.get("RAY_ADDRESS"))
            )
            options: dict[str, Any] = {
                "address": self.ray_address,
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if not connecting:
                options["num_cpus"] = self.workers
            address = self.ray_address or os.environ.get("RAY_ADDRESS", "")
            if connecting:
                wait_for_address(address, ray.util.get_node_ip_address())
            from recallbench.core.signals import Terminated, handlers_kept

            # ray.init installs its own SIGTERM handlers (and its core worker a C++ one):
            # ours (SIGTERM as `Terminated`) are put back as soon as it returns
            try:
                with handlers_kept():
                    ray.init(**options)
            except ConnectionError as exc:
                if not connecting:
                    raise
                raise RecallbenchError(_ray_connect_failed(address, exc)) from None
            except SystemExit as exc:
                # Ray's handler (`sys.exit(SIGTERM)`) ran: a SIGTERM during ray.init itself
                if exc.code == signal.SIGTERM:
                    with contextlib.suppress(Exception):
                        ray.shutdown()
                    raise Terminated() from None
                raise
            self._started_ray = True
            self._where = f" at {address}" if connecting else ""
        try:
            self._live_nodes = check_ray_cluster(ray.nodes(), self.workers, self._where)
            actor_class = ray.remote(num_cpus=1, max_restarts=0)(_RayWorker)
            self._actors = [
                actor_class.remote(self._initializer, self._initargs, self._finalizer)
                for _ in range(self.workers)
            ]
            self._nodes = set(self._await_actors("ping", RAY_PLACE_TIMEOUT))
            self._await_actors("ready", None)
        except KeyboardInterrupt as exc:
            self._shutdown(graceful=False)
            raise _as_raised(exc) from None
        except BaseException:
            self._shutdown(graceful=False)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._shutdown(graceful=exc_type is None or issubclass(exc_type, Exception))

    def _shutdown(self, graceful: bool) -> None:
        ray = self._ray
        if ray is None:
            return
        try:
            if graceful and self._actors:
                # a finalizer's failure must not hide the run's own outcome
                with contextlib.suppress(Exception):
                    ray.get(
                        [actor.close.remote() for actor in self._actors],
                        timeout=RAY_CLOSE_TIMEOUT,
                    )
            for actor in self._actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            self._actors = []
        finally:
            if self._started_ray:
                self._started_ray = False
                ray.shutdown()
            self._ray = None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        if self._ray is None or not self._actors:
            raise RuntimeError("use the executor as a context manager")
        ray = self._ray
        iterator = iter(items)
        # window: one slot per item taken and not yet yielded, in input order:
        # [item, ref]; ref is None until the item is handed to an actor
        window: deque[list[Any]] = deque()
        waiting: deque[list[Any]] = deque()  # slots not yet handed out, in input order
        idle: deque[Any] = deque(self._actors)
        running: dict[Any, Any] = {}  # ref -> its actor
        done: set[Any] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(window) < self.max_in_flight:
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                    slot = [item, None, task_label(fn, item)]
                    window.append(slot)
                    waiting.append(slot)
                while idle and waiting:
                    slot = waiting.popleft()
                    actor = idle.popleft()
                    ref = actor.run.remote(fn, slot[0])
                    slot[0], slot[1] = None, ref
                    running[ref] = actor
                if not window:
                    return
                head = window[0][1]
                if head is not None and head in done:
                    label = window.popleft()[2]
                    done.discard(head)
                    try:
                        result = _ray_get(ray, head)
                    except ray.exceptions.RayActorError as exc:  # ActorDiedError and kin
                        reason = (str(exc).strip().splitlines() or [""])[0]
                        raise WorkerDied(
                            f"a Ray actor died while running {label} "
                            f"({type(exc).__name__}: {reason[:200]}); the run is abandoned, "
                            "nothing written"
                        ) from None
                    yield result
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=RAY_WATCH_SECONDS)
                if not ready:
                    dead = _dead_nodes_text(ray, self._actor_nodes())
                    if dead:
                        label = next(slot[2] for slot in window if slot[1] in running)
                        raise WorkerDied(
                            f"a Ray actor's node died while running {label}{dead}; the run "
                            "is abandoned, nothing written"
                        )
                for ref in ready:
                    idle.append(running.pop(ref))
                    done.add(ref)
        except KeyboardInterrupt as exc:
            raise _as_raised(exc) from None
        finally:
            # Items not yet handed to an actor are simply dropped; the few running ones
            # (one per actor) finish. Nothing waits in an actor's queue, so nothing is
            # ray.cancel-led: with Ray 2.60, cancelling an actor task that had already
            # started held the actor's next task (our close) back for ~30 s.
            window.clear()
            waiting.clear()
