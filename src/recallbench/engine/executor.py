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

Engines (``kind``), one module each; this module holds only the contract, the `Executor`
protocol, `make_executor` and its one rule of which engine runs the tasks in this process
(`runs_here`):

``local``
    ``workers == 1``: `SerialExecutor` (`recallbench.engine.serial`), everything in this
    process (the reference implementation, and the debugger's friend). ``workers >= 2``:
    `ProcessExecutor` (`recallbench.engine.processes`), a
    `concurrent.futures.ProcessPoolExecutor` whose workers are *forked* when this process
    runs a single thread on Linux (they start in milliseconds, recallbench and the system
    already imported) and *spawned* otherwise (see `start_method`). The parent holds no
    store or other SQLite handle when it starts them, and a worker builds its own state.
``ray``
    `RayExecutor` (`recallbench.engine.ray_engine`): ``workers`` Ray actors, on a local Ray
    started for the run or on the cluster at ``ray_address``. Needs the optional extra
    ``pip install -e '.[ray]'``.

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
  `WorkerDied` line naming the worker and the task it was running (`task_label`; both in
  `recallbench.engine.workerfault`, which both engines share): each local worker writes
  the number of its current task into shared memory, so the parent knows which task a
  dead worker had. Workers killed by SIGTERM (a SIGTERM sent to the whole process group)
  are `Terminated`, like the parent.
* Ray faults (the bounds are `recallbench.engine.ray_engine`'s): a ``ray_address``
  (``host:port``) must accept a TCP connection within `RAY_ADDRESS_WAIT` seconds (Ray
  itself retries forever), else one line naming it; the live nodes' CPUs are checked
  before any actor starts (one line naming the dead nodes); the actors must be placed
  within `RAY_PLACE_TIMEOUT`, and every wait on Ray looks at the cluster's nodes every
  `RAY_WATCH_SECONDS`: a node or actor that dies is one `WorkerDied` line, never a hang.
  `ray.init` installs its own SIGTERM handlers: ours are put back after it
  (`recallbench.core.signals.handlers_kept`), so SIGTERM stays `Terminated`.
* Entering: the local pool starts all its workers in ``__enter__`` and the Ray engine
  all its actors, so an initializer's failure is raised there (the serial engine runs the
  initializer there too). Enter the executor from a thread that outlives it (normally the
  main thread): on Linux a worker is killed when the thread that started it exits.
* The parent killed with SIGKILL: each local worker process has
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux) and a watchdog thread that exits the
  worker within `PARENT_POLL_SECONDS` (`recallbench.engine.processes`) of its parent
  changing (any POSIX system), so no worker outlives the parent. The multiprocessing
  resource tracker the pool started then exits by itself: it reads a pipe whose write
  ends only the parent and the workers hold, and it stops at end-of-file (unlinking any
  leaked semaphores). A local Ray started by ``ray.init`` is Ray's to stop: its GCS
  server and raylet are started with PR_SET_PDEATHSIG and its actors exit once their
  raylet has, while Ray's own agents may outlive the parent a while (what was observed,
  with which Ray: docs/performance.md; only the local engine is tested). A remote
  cluster kills the actors when the driver's job dies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from recallbench.core.errors import RecallbenchError
from recallbench.engine.processes import ProcessExecutor
from recallbench.engine.ray_engine import RayExecutor
from recallbench.engine.serial import SerialExecutor

T = TypeVar("T")
R = TypeVar("R")

#: the engines `make_executor` knows, in the order the CLI lists them
EXECUTORS: tuple[str, ...] = ("local", "ray")


class Executor(Protocol):
    """What the stages see: a context manager whose `map` yields results in input order."""

    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """fn over items, lazily, results in input order."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def runs_here(kind: str, workers: int, own_process: bool = False) -> bool:
    """Whether `make_executor` runs the tasks in this process (the serial engine): one local
    worker that need not be a process of its own."""
    return kind == "local" and workers == 1 and not own_process


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
) -> Executor:
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
    if runs_here(kind, workers, own_process):
        return SerialExecutor(initializer, initargs, finalizer)
    return ProcessExecutor(workers, initializer, initargs, finalizer, max_in_flight=max_in_flight)
