"""The boundary around calls into a system, in process: what it turns into one line, what
it lets through, and the checks of returned values that the CLI tests do not reach
(diagnostics, vectors, a time limit outside the main thread)."""

from __future__ import annotations

import math
import sys
import threading
import time

import pytest

from recallbench.boundary import Boundary, SystemCallFailed
from recallbench.errors import RecallbenchError
from recallbench.signals import Terminated
from recallbench.systems.base import Hit, SnapshotRejected

STORED = {"m1": None, "m2": None}


def _busy(seconds: float) -> None:
    """A hung call in Python code (no sleep for a signal to interrupt)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_base_exceptions_are_failures_but_interrupts_stay_interrupts() -> None:
    guard = Boundary("mine")
    with pytest.raises(SystemCallFailed, match=r"^system 'mine': search \(scope s\) called"):
        guard.call("search", "scope s", sys.exit, 0)
    for interrupt in (KeyboardInterrupt, Terminated):
        with pytest.raises(interrupt):
            guard.call("search", "scope s", _raise, interrupt())
    # the harness's own errors (a verifier's refusal) and named exceptions pass through
    with pytest.raises(SnapshotRejected):
        guard.call("verify", "scope s", _raise, SnapshotRejected("format", "not a package"))
    with pytest.raises(FileNotFoundError):
        guard.call(
            "attach", "scope s", _raise, FileNotFoundError("x"), passthrough=(FileNotFoundError,)
        )
    with pytest.raises(SystemCallFailed, match="raised FileNotFoundError: x"):
        guard.call("attach", "scope s", _raise, FileNotFoundError("x"))


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_time_limit_holds_in_the_main_thread_and_in_others() -> None:
    guard = Boundary("mine", timeout=0.2)
    with pytest.raises(SystemCallFailed, match="did not return within --call-timeout 0.2 s"):
        guard.call("search", "scope s", time.sleep, 30)
    caught: list[BaseException] = []

    def in_a_thread() -> None:  # as a Ray actor may run a task
        try:
            guard.call("search", "scope s", _busy, 30)
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    assert [type(e) for e in caught] == [SystemCallFailed]
    assert Boundary("mine").call("search", None, lambda: 7) == 7  # no limit: untouched


@pytest.mark.parametrize(
    ("hits", "needle"),
    [
        ((Hit("m1", 1.0, "a"),), None),
        ([Hit("m1", math.nan, "a")], "score nan"),
        ([Hit("m1", True, "a")], "score True"),
        ([Hit("m1", 1.0, "a"), Hit("m2", 0.5, "b"), Hit("m1", 0.1, "a")], "more than the 2"),
        ([Hit("m1", 1.0, None)], "identifiers must be strings"),
        ([Hit(3, 1.0, "a")], "id 3 at rank 1"),
    ],
)
def test_hits_are_checked(hits, needle: str | None) -> None:
    guard = Boundary("mine")
    if needle is None:
        assert guard.hits(hits, 2, STORED, "q") == list(hits)
        return
    with pytest.raises(SystemCallFailed, match="system 'mine': search") as caught:
        guard.hits(hits, 2, STORED, "q")
    assert needle in str(caught.value)


def test_diagnostics_vectors_counts_and_configuration_are_checked() -> None:
    guard = Boundary("mine")
    assert guard.lexical(("BM25", ["m1"]), STORED, "q") == ("BM25", ["m1"])
    with pytest.raises(SystemCallFailed, match="lexical_matches .*'zz', which was never stored"):
        guard.lexical(("BM25", ["zz"]), STORED, "q")
    with pytest.raises(SystemCallFailed, match="not \\(matcher, ids\\)"):
        guard.lexical(["m1"], STORED, "q")
    assert guard.vectors([[0.0, 1.0]], ["t"], None) == [[0.0, 1.0]]
    for bad, texts in (
        ([[0.0, math.inf]], ["t"]),  # not finite
        ([[0.0], [1.0, 2.0]], ["t", "u"]),  # unequal lengths
        ([[1.0], [1.0]], ["t"]),  # two vectors for one text
        ("x", ["t"]),
    ):
        with pytest.raises(SystemCallFailed, match="embed_texts"):
            guard.vectors(bad, texts, None)
    for bad in (-1, 2.0, True, None):
        with pytest.raises(SystemCallFailed, match="count .*not a whole number"):
            guard.whole_number(bad, "count", "scope s")
    with pytest.raises(SystemCallFailed, match="lost 2 of 5 memories"):
        guard.ingested(3, 5, "scope s")
    with pytest.raises(SystemCallFailed, match="not JSON"):
        guard.configuration({"x": object()})
    assert isinstance(SystemCallFailed("x"), RecallbenchError)
