"""The boundary around calls into a system, in process: what it turns into one line, what
it lets through, and the checks of returned values that the CLI tests do not reach
(diagnostics, vectors, a time limit outside the main thread)."""

from __future__ import annotations

import math
import sys
import threading
import time

import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.core.signals import Terminated
from recallbench.systems.base import Hit, SnapshotRejected, StoreRecord
from recallbench.systems.boundary import Boundary, SystemCallFailed

#: what a scope stored: id -> its record (the identifier a hit must carry back)
STORED = {"m1": StoreRecord("m1", "a", "one"), "m2": StoreRecord("m2", "b", "two")}


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
        # issue 38: an identifier the store was never given (report.md explained misses
        # with it: "another project's memory (another-project)")
        (
            [Hit("m1", 1.0, "a"), Hit("m2", 0.5, "another-project")],
            "returned the identifier 'another-project' for id 'm2' at rank 2, which was "
            "stored with the identifier 'b'",
        ),
        # issue 38: ints beyond a float (a 73-line OverflowError traceback) and wrong types
        ([Hit("m1", 10**400, "a")], "the score an int of 1329 bits for id 'm1' at rank 1, "),
        ([Hit("m1", [1.0], "a")], "the score [1.0] for id 'm1' at rank 1, a list, not a number"),
        ([Hit("m1", "0.5", "a")], "the score '0.5' for id 'm1' at rank 1, a str, not a number"),
        ([Hit("m1", complex(1, 0), "a")], "a complex, not a number"),
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


def test_real_number_scores_are_kept_as_floats() -> None:
    """Issue 38: `np.float32(6.0)` was refused as "scores must be finite numbers" and
    `2**70` ended the run with a 56-line orjson traceback (an int beyond 64 bits). A real
    number is recorded as its float value; a float is kept as it is."""
    import numpy as np

    guard = Boundary("mine")
    given = [Hit("m1", np.float32(6.0), "a"), Hit("m2", 2**70, "b")]
    checked = guard.hits(given, 2, STORED, "q")
    assert checked == [Hit("m1", 6.0, "a"), Hit("m2", float(2**70), "b")]
    assert [type(h.score) for h in checked] == [float, float]
    for value in (np.int64(3), np.float64(0.25), 7):
        (hit,) = guard.hits([Hit("m1", value, "a")], 1, STORED, "q")
        assert type(hit.score) is float and hit.score == float(value)
    same = [Hit("m1", 0.5, "a")]
    assert guard.hits(same, 1, STORED, "q")[0] is same[0]
    for bad in (np.float32("nan"), np.float64("inf"), np.bool_(True)):
        with pytest.raises(SystemCallFailed, match="scores must be finite numbers"):
            guard.hits([Hit("m1", bad, "a")], 1, STORED, "q")


def test_a_call_that_changes_the_working_directory_leaves_it_as_it_was(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: a plugin calling `os.chdir` in `search` moved every later relative write
    (`run --build-dir b` wrote into `<new cwd>/b/`). After every call, returned or raised,
    the working directory is the caller's again, also when the system moved into a
    directory it then removed."""
    import os

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    guard = Boundary("mine")

    def wander(then_raise: bool = False, remove: bool = False) -> str:
        os.chdir(elsewhere)
        if remove:
            gone = elsewhere / "gone"
            gone.mkdir()
            os.chdir(gone)
            gone.rmdir()
        if then_raise:
            raise ValueError("lost")
        return "found"

    assert guard.call("search", "q", wander) == "found"
    assert os.getcwd() == str(home)
    with pytest.raises(SystemCallFailed, match="raised ValueError: lost"):
        guard.call("search", "q", wander, then_raise=True)
    assert os.getcwd() == str(home)
    guard.call("search", "q", wander, remove=True)
    assert os.getcwd() == str(home)


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


def test_every_boundary_is_built_by_system_boundary() -> None:
    """One place builds a `Boundary` (`system_boundary`): the workers, the stages' own calls,
    vector prep and a plugin's decision rules get the same time limit and one-line errors."""
    from pathlib import Path

    import recallbench
    from recallbench.systems.boundary import system_boundary

    root = Path(recallbench.__file__).parent
    built = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if "Boundary(" in line and path.name != "boundary.py"
    ]
    assert built == []

    class Named:
        name = "mine"

    guard = system_boundary(Named(), 0.2)
    assert (guard.system_name, guard.timeout, guard.subject) == ("mine", 0.2, "system 'mine'")
    with pytest.raises(SystemCallFailed, match=r"^system 'mine': configuration did not return"):
        guard.call("configuration", None, time.sleep, 30)
    rules = system_boundary("mine", None, subject="rules of 'x'")
    assert (rules.timeout, rules.subject) == (None, "rules of 'x'")


SLOW_CONFIGURATION = """
import time


class SlowConfiguration(WordSystem):
    def configuration(self):
        time.sleep(5)
        return super().configuration()


def slow_configuration():
    return SlowConfiguration("slow-configuration")
"""


def test_a_stages_own_calls_into_its_system_take_the_time_limit(tmp_path, monkeypatch) -> None:
    """hydrate calls `configuration()` in the parent: under --call-timeout as the workers'
    calls are (before `system_boundary`, the parent's boundary had no limit)."""
    from conftest import CORPUS, QUERIES
    from plugintools import WORD_STORE, install_plugin

    from recallbench.builddir.scopespool import SPOOL
    from recallbench.engine.tasks import Execution
    from recallbench.stages.hydrate import run_hydrate
    from recallbench.stages.validate import publish_suite, run_validate

    suite = run_validate("fixtures", {"corpus": CORPUS, "queries": QUERIES}, spool=tmp_path / SPOOL)
    publish_suite(suite, tmp_path / "suite.json")
    source = WORD_STORE + SLOW_CONFIGURATION
    points = {"slow-configuration": "slow_configuration"}
    slow = r"^system 'slow-configuration': configuration did not return within --call-timeout"
    with (
        install_plugin(monkeypatch, tmp_path, "rb_slow_configuration", source, points),
        pytest.raises(SystemCallFailed, match=slow + r" 0.3 s$"),
    ):
        run_hydrate(suite, tmp_path, "slow-configuration", execution=Execution(call_timeout=0.3))
