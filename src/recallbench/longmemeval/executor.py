"""Run one task per question, serially or in worker processes, results in input order.

The contract the stages rely on, and all a replacement has to honour::

    with make_executor(workers, initializer, initargs) as ex:
        for result in ex.map_questions(fn, items):   # same order as `items`
            ...

* `items` is consumed lazily: at most ``max_in_flight`` items are submitted and not yet
  yielded, so the parent can stream a 2.7 GB file and never hold more than a few
  questions (workers never receive the dataset, only their own item).
* `fn(item)` is a module-level function of its item and of worker-local state built once
  per worker by ``initializer(*initargs)`` (the system under test, the vector cache).
  Items and results are plain picklable data.
* Results come back in input order whatever the number of workers, so the artifacts of
  ``--workers 1`` and ``--workers N`` are byte-identical.
* An exception in `fn` is re-raised in the parent; outstanding work is cancelled.

Replacing the engine: a Ray implementation would start ``workers`` actors whose
constructor calls ``initializer(*initargs)``, and feed them through
``ray.util.ActorPool(actors).map(lambda a, item: a.run.remote(item), items)``, which
already yields in order (bound the in-flight window by chunking `items`). With Dask:
``client.register_worker_plugin`` (or a ``WorkerPlugin.setup``) runs the initializer on
each worker, ``client.submit(fn, item)`` per item with a deque of at most
``max_in_flight`` futures, yielding ``deque.popleft().result()``. Neither touches the
stages or the scoring code, which only see the ordered result stream.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    workers: int

    def map_questions(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """fn over items, lazily, results in input order."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


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
        self._initargs = initargs
        self._finalizer = finalizer

    def __enter__(self) -> SerialExecutor:
        if self._initializer is not None:
            self._initializer(*self._initargs)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def map_questions(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


class ProcessExecutor:
    """A `concurrent.futures.ProcessPoolExecutor` (spawned workers) with a bounded window."""

    def __init__(
        self,
        workers: int,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        max_in_flight: int | None = None,
    ) -> None:
        if workers < 2:
            raise ValueError("ProcessExecutor needs at least 2 workers; use SerialExecutor")
        self.workers = workers
        self.max_in_flight = max_in_flight or 2 * workers
        self._initializer = initializer
        self._initargs = initargs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> ProcessExecutor:
        # spawn: workers start clean (no copy of the parent's parsed data, no inherited
        # threads or SQLite handles), so their memory is only what their items need.
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=self._initializer,
            initargs=self._initargs,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def map_questions(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        if self._pool is None:
            raise RuntimeError("use the executor as a context manager")
        window: deque[Future] = deque()
        try:
            for item in items:
                window.append(self._pool.submit(fn, item))
                if len(window) >= self.max_in_flight:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:
            for future in window:
                future.cancel()


def make_executor(
    workers: int,
    initializer: Callable[..., Any] | None = None,
    initargs: tuple = (),
    finalizer: Callable[[], Any] | None = None,
) -> SerialExecutor | ProcessExecutor:
    """Serial for 1 worker, a process pool otherwise. `finalizer` runs in-process (serial)."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if workers == 1:
        return SerialExecutor(initializer, initargs, finalizer)
    return ProcessExecutor(workers, initializer, initargs)


def map_questions(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    initializer: Callable[..., Any] | None = None,
    initargs: tuple = (),
) -> Iterator[R]:
    """One-call form: fn over items with `workers` workers, results in input order."""
    with make_executor(workers, initializer, initargs) as executor:
        yield from executor.map_questions(fn, items)
