"""The local process engine: `ProcessExecutor`, worker processes started by `start_method`
(``--executor local --workers N``; the contract: `recallbench.engine.executor`). Each worker
fate-shares with its parent (PR_SET_PDEATHSIG and a watchdog thread), ignores Ctrl-C and
writes the number of its current task into shared memory, so a dead worker's task is named."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from recallbench.core.embedding import torch_cache_in_scratch
from recallbench.core.exiting import close_files_opened_here
from recallbench.core.signals import die_with_parent
from recallbench.engine.workerfault import WorkerDied, task_label

T = TypeVar("T")
R = TypeVar("R")

#: how often a local worker's watchdog checks that its parent is still there (seconds)
PARENT_POLL_SECONDS = 0.5

# Worker-side state of a local process worker (each worker process has its own copy).
_INIT_ERROR: BaseException | None = None
#: shared with the parent: [pid, task number] per worker (`_find_slot`), so the parent can
#: name the task a worker was running when it died
_CURRENT: Any = None
_SLOT: int | None = None


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
