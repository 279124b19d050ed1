"""The serial engine: every task in this process, in input order (``--executor local
--workers 1``; the contract: `recallbench.engine.executor`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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
