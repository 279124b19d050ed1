"""The one boundary around every call into a system under test.

A system is code recallbench does not control (a plugin, a store from another project), so
every call into it goes through `Boundary.call`, in process and in workers alike:

* anything it raises becomes one `SystemCallFailed` line naming the system, the call and
  where (scope, query), exit 1: an `Exception`, and also `SystemExit` (a store that calls
  `sys.exit(0)` must never end a run with exit 0, nor `sys.exit(3)` look like a failed
  baseline gate) and any other `BaseException` except `KeyboardInterrupt`, which stays an
  interrupt (Ctrl-C, or SIGTERM through `recallbench.core.signals.Terminated`);
* with a time limit (`--call-timeout SECONDS`, off by default), a call that has not
  returned by then is abandoned and reported the same way;
* the working directory is the caller's again after every call: a system that calls
  `os.chdir` cannot move where the harness writes (`kept_cwd`);
* what it returns is checked here (`hits`, `ingested`, `whole_number`, `text`,
  `lexical`, `vectors`): types (a list of `Hit`), ids that were stored in this scope, each
  with the identifier it was stored with, scores that are real numbers (`int`, `float`, a
  numpy real scalar) with a finite float value, recorded as that float (NaN, infinity,
  `10**400`, strings and other types are refused), no id twice, no more hits than asked
  for, and an ingest that keeps every record.

Errors the harness defines (`RecallbenchError`: a package the system's verifier refused, a
missing vector) pass through unchanged, as do the exceptions a caller names in
`passthrough` (an `attach` of a directory with no store raises FileNotFoundError, which the
stage turns into its own message).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import numbers
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from recallbench.core.errors import RecallbenchError


class SystemCallFailed(RecallbenchError):
    """A call into a system raised, exited, hung or returned something it must not."""


class CallTimedOut(BaseException):
    """Raised inside a call that outlived `--call-timeout` (a BaseException, so a system's
    own `except Exception` does not swallow it)."""


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def describe_exception(exc: BaseException) -> str:
    """What a call raised, in a few words (one line)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r}); a system must not exit the harness"
    message = _first_line(str(exc))
    return f"raised {type(exc).__name__}" + (f": {message}" if message else "")


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise `CallTimedOut` inside the block once it has run `seconds` (None: no limit).

    In the main thread (the CLI, a local worker process) a real-time timer's SIGALRM
    interrupts even a blocking system call; in another thread (a Ray actor may run tasks
    there) a timer thread raises the exception asynchronously in the calling thread, at its
    next Python instruction.
    """
    if not seconds:
        yield
        return
    if threading.current_thread() is threading.main_thread():

        def on_alarm(signum: int, frame: Any) -> None:
            raise CallTimedOut()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    target = threading.get_ident()
    done = threading.Event()

    def expire() -> None:
        if not done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(target), ctypes.py_object(CallTimedOut)
            )

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.cancel()


@contextlib.contextmanager
def kept_cwd() -> Iterator[None]:
    """Put the working directory back after the block when the block changed it (a system
    that calls `os.chdir`). A working directory that is already gone is left alone."""
    try:
        before = os.getcwd()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        try:
            moved = os.getcwd() != before
        except OSError:  # moved into a directory since removed
            moved = True
        if moved:
            os.chdir(before)


def system_boundary(
    system: Any, call_timeout: float | None = None, *, subject: str | None = None
) -> Boundary:
    """The boundary around the calls into `system` (a system object, or its name): the one
    place a `Boundary` is built, so every call into a system, in the parent and in every
    worker, has the same time limit (`call_timeout` seconds, `--call-timeout`; None: no
    limit) and the same one-line failures. `subject` names code that is not a system (a
    plugin's decision rules)."""
    name = system if isinstance(system, str) else system.name
    return Boundary(name, call_timeout, subject=subject)


class Boundary:
    """Calls into one system: `call` runs one, the other methods check what it returned.
    Built by `system_boundary`.

    `where` arguments name the scope and query (e.g. "scope s1, query q-004"); messages read
    `system 'NAME': CALL (WHERE) PROBLEM`. `subject` replaces `system 'NAME'` for code that
    is not a system (a plugin's decision rules: `recallbench.systems.rules`).
    """

    def __init__(
        self, system_name: str, timeout: float | None = None, *, subject: str | None = None
    ) -> None:
        self.system_name = system_name
        self.timeout = timeout or None
        self.subject = subject or f"system '{system_name}'"

    def failure(self, what: str, where: str | None, problem: str) -> SystemCallFailed:
        place = f" ({where})" if where else ""
        return SystemCallFailed(f"{self.subject}: {what}{place} {problem}")

    def call(
        self,
        what: str,
        where: str | None,
        fn: Callable[..., Any],
        *args: Any,
        passthrough: tuple[type[BaseException], ...] = (),
        **kwargs: Any,
    ) -> Any:
        """`fn(*args, **kwargs)`, a call into the system named `what` (e.g. "search")."""
        try:
            with kept_cwd(), time_limit(self.timeout):
                return fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise  # Ctrl-C (or SIGTERM, see recallbench.core.signals) stays an interrupt
        except RecallbenchError:
            raise
        except CallTimedOut:
            raise self.failure(
                what, where, f"did not return within --call-timeout {self.timeout:g} s"
            ) from None
        except passthrough:
            raise
        except BaseException as exc:  # SystemExit, GeneratorExit and every Exception
            raise self.failure(what, where, describe_exception(exc)) from None

    # ------------------------------------------------------------------ returned values

    def hits(
        self,
        hits: Any,
        limit: int,
        stored: Mapping[str, Any],
        where: str,
        what: str = "search",
    ) -> list[Any]:
        """A search's result: a list of at most `limit` `Hit`s, each an id stored in this
        scope (once; `stored` maps it to its record), a real-number score with a finite
        float value and the identifier the record was stored with. Returned with every
        score as that float (`np.float32(6.0)` -> 6.0)."""
        from recallbench.systems.base import Hit

        if not isinstance(hits, list | tuple):
            raise self.failure(
                what, where, f"returned {kind_of(hits)}, not a list of recallbench Hit"
            )
        if len(hits) > limit:
            raise self.failure(
                what, where, f"returned {len(hits)} hits, more than the {limit} asked for"
            )
        seen: set[str] = set()
        checked = []
        for rank, h in enumerate(hits, 1):
            if not isinstance(h, Hit):
                raise self.failure(
                    what, where, f"returned {kind_of(h)} at rank {rank}, not a recallbench Hit"
                )
            memory_id, score = h.memory_id, h.score
            if not isinstance(memory_id, str) or memory_id not in stored:
                raise self.failure(
                    what,
                    where,
                    f"returned id {memory_id!r} at rank {rank}, which was never stored in this scope",
                )
            if memory_id in seen:
                raise self.failure(what, where, f"returned id {memory_id!r} twice")
            seen.add(memory_id)
            value = _score_value(score)
            if isinstance(value, str):
                raise self.failure(
                    what,
                    where,
                    f"returned the score {_shown(score)} for id {memory_id!r} at rank {rank}, "
                    f"{value}; scores must be finite numbers",
                )
            if not isinstance(h.identifier, str):
                raise self.failure(
                    what,
                    where,
                    f"returned the identifier {_shown(h.identifier)} for id {memory_id!r}; "
                    "identifiers must be strings",
                )
            given = getattr(stored[memory_id], "identifier", None)
            if given is not None and h.identifier != given:
                raise self.failure(
                    what,
                    where,
                    f"returned the identifier {_shown(h.identifier)} for id {memory_id!r} at "
                    f"rank {rank}, which was stored with the identifier {given!r}",
                )
            checked.append(h if type(score) is float else Hit(memory_id, value, h.identifier))
        return checked

    def ingested(self, stored: Any, expected: int, where: str) -> int:
        """An ingest's count: every record given, no more, no fewer."""
        count = self.whole_number(stored, "ingest", where)
        if count < expected:
            raise self.failure(
                "ingest",
                where,
                f"lost {expected - count} of {expected} memories: the store holds {count} "
                f"records after ingesting {expected} (the ids are unique)",
            )
        if count > expected:
            raise self.failure(
                "ingest",
                where,
                f"reports {count} records after ingesting {expected} into a fresh store",
            )
        return count

    def whole_number(self, value: Any, what: str, where: str | None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.failure(what, where, f"returned {kind_of(value)}, not a whole number")
        return int(value)

    def text(self, value: Any, what: str, where: str | None) -> str:
        if not isinstance(value, str):
            raise self.failure(what, where, f"returned {kind_of(value)}, not a string")
        return value

    def lexical(self, value: Any, stored: Mapping[str, Any], where: str) -> tuple[str, list[str]]:
        """`lexical_matches`: (matcher name, ids stored in this scope)."""
        what = "lexical_matches"
        if not (isinstance(value, list | tuple) and len(value) == 2):
            raise self.failure(what, where, f"returned {kind_of(value)}, not (matcher, ids)")
        matcher, ids = value
        if not isinstance(matcher, str) or not isinstance(ids, list | tuple):
            raise self.failure(what, where, "returned something other than (str, list of ids)")
        for memory_id in ids:
            if not isinstance(memory_id, str) or memory_id not in stored:
                raise self.failure(
                    what, where, f"returned id {memory_id!r}, which was never stored in this scope"
                )
        return matcher, list(ids)

    def vectors(self, value: Any, texts: Sequence[str], where: str | None) -> list[Any]:
        """`embed_texts`: one vector of finite numbers per text, all of one length."""
        what = "embed_texts"
        if not isinstance(value, list | tuple) or len(value) != len(texts):
            n = len(value) if isinstance(value, list | tuple) else None
            raise self.failure(
                what,
                where,
                f"returned {kind_of(value) if n is None else n} vectors for {len(texts)} texts",
            )
        try:
            import numpy as np

            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise self.failure(
                what, where, "returned vectors that are not lists of numbers"
            ) from None
        if texts and (array.ndim != 2 or not np.isfinite(array).all()):
            raise self.failure(
                what, where, "returned vectors of unequal length or with NaN / infinite values"
            )
        return list(value)

    def configuration_of(self, system: Any) -> dict[str, Any]:
        """`system.configuration()`, called through this boundary and checked
        (`configuration`)."""
        return self.configuration(self.call("configuration", None, system.configuration))

    def configuration(self, value: Any) -> dict[str, Any]:
        """`configuration()`: a JSON object (it is written into every artifact)."""
        if not isinstance(value, dict):
            raise self.failure("configuration", None, f"returned {kind_of(value)}, not an object")
        try:
            orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise self.failure(
                "configuration", None, f"returned something that is not JSON ({exc})"
            ) from None
        return value

    def seconds(self, value: Any) -> float:
        """`seconds_inside()`: a finite number of seconds."""
        if not _finite_number(value):
            raise self.failure("seconds_inside", None, f"returned {value!r}, not a number")
        return float(value)


def _finite_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _score_value(score: Any) -> float | str:
    """A score's value as a float, or why it is not one: a real number (`int`, `float`, a
    numpy real scalar, any `numbers.Real`) whose float value is finite. A bool, a string, a
    list, a complex number is the wrong type; NaN, infinity and an int beyond the float
    range (`10**400`) are not finite."""
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        return f"{kind_of(score)}, not a number"
    try:
        value = float(score)
    except (OverflowError, ValueError, TypeError):
        return "beyond the range of a float"
    return value if math.isfinite(value) else "not finite"


def _shown(value: Any, limit: int = 60) -> str:
    """A returned value in a message: its `repr`, cut to `limit` characters; a wide int
    by its size (`10**400` has 401 digits)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # a plugin's own type whose repr fails
        text = kind_of(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    """What `value` is, for a message: "None", "a list", "an int"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
