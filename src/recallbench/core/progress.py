"""Progress of long work on stderr: a tqdm bar on an interactive stderr; otherwise (CI logs,
`| tee`, a file) a plain line at most every `interval()` seconds (30 by default,
$RECALLBENCH_PROGRESS_INTERVAL to change it) naming the step, done/total, the rate and the
time left. Neither with `--quiet` (the CLI calls `configure`) or when NO_PROGRESS is set.

A plain line is printed when the work advances (`update`) and the interval has passed since
the step began or since the last line, so a step shorter than the interval prints nothing;
a step that printed a line ends with one saying it is done. No thread: a parent that runs
one forks its local workers instead of spawning them (`recallbench.engine.processes.start_method`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_QUIET = False
#: the environment variable that sets the seconds between two plain progress lines
INTERVAL_ENV = "RECALLBENCH_PROGRESS_INTERVAL"
#: the seconds between two plain progress lines by default
DEFAULT_INTERVAL = 30.0


def configure(quiet: bool) -> None:
    """Turn every later bar and line off (`--quiet`) or back on."""
    global _QUIET
    _QUIET = quiet


def _off() -> bool:
    """Whether progress is off: quiet (`configure`) or NO_PROGRESS set."""
    return _QUIET or bool(os.environ.get("NO_PROGRESS"))


def enabled() -> bool:
    """Whether progress shows as a bar: an interactive stderr, and progress not off."""
    return not _off() and sys.stderr.isatty()


def interval() -> float:
    """The seconds between two plain progress lines: $RECALLBENCH_PROGRESS_INTERVAL when
    set (a number of seconds above 0; one-line error otherwise), else `DEFAULT_INTERVAL`."""
    value = os.environ.get(INTERVAL_ENV, "").strip()
    if not value:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        from recallbench.core.errors import RecallbenchError

        raise RecallbenchError(f"${INTERVAL_ENV}: a number of seconds above 0, not {value!r}")
    return seconds


def say(message: str) -> None:
    """A notice on stderr, unless quiet."""
    if not _QUIET:
        print(message, file=sys.stderr, flush=True)


@contextmanager
def bar(total: int | None, desc: str, unit: str = "it", **extra: Any) -> Iterator[Any]:
    """A tqdm bar on a terminal, plain lines (`Lines`) otherwise, a no-op object when
    progress is off; closed on exit. `extra`: tqdm's options (`unit_scale=True` with unit
    "B" shows bytes in the lines too)."""
    if not enabled():
        if _off():
            yield _NoBar()
            return
        # a CI log, `| tee`, a file: a plain line now and then
        lines = Lines(total, desc, unit, every=interval(), scaled=bool(extra.get("unit_scale")))
        try:
            yield lines
        finally:
            lines.close()
        return
    from tqdm import tqdm

    # no monitor thread: it would outlive the bar, and a parent running other threads
    # spawns its local workers instead of forking them (recallbench.engine.processes.start_method)
    tqdm.monitor_interval = 0
    progress = tqdm(
        total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True, file=sys.stderr, **extra
    )
    try:
        yield progress
    finally:
        progress.close()


class Lines:
    """Progress as plain lines on stderr, at most one every `every` seconds:
    ``query bm25: 1,200/4,545 query (26%), 41.2 query/s, about 1 min 21 s left``."""

    def __init__(
        self, total: int | None, desc: str, unit: str, *, every: float, scaled: bool = False
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.every = every
        self.scaled = scaled
        self.done = 0
        self.started = self._last = time.monotonic()
        self.printed = 0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._print(self.line(now - self.started))

    def line(self, seconds: float) -> str:
        """The line after `seconds` of work: done/total, share, rate, time left."""
        rate = self.done / seconds if seconds > 0 else 0.0
        if self.total:
            head = f"{self._amount(self.done, unit=False)}/{self._amount(self.total)}"
            head += f" ({100 * self.done / self.total:.0f}%)"
        else:
            head = self._amount(self.done)
        parts = [f"{self.desc}: {head}", f"{self._amount(rate, rate=True)}/s"]
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"about {duration((self.total - self.done) / rate)} left")
        return ", ".join(parts)

    def close(self) -> None:
        """The closing line of a step that printed one: what it did, in how long."""
        if self.printed:
            seconds = time.monotonic() - self.started
            self._print(f"{self.desc}: done, {self._amount(self.done)} in {duration(seconds)}")

    def _print(self, line: str) -> None:
        self.printed += 1
        print(line, file=sys.stderr, flush=True)

    def _amount(self, value: float, *, unit: bool = True, rate: bool = False) -> str:
        """`value` with its unit: `1,200 query`, `41.2 query` (a rate), `12.3 MiB`."""
        if self.scaled and self.unit == "B":
            from recallbench.core.inputfiles import human_bytes

            return human_bytes(int(value))
        number = f"{value:,.1f}" if rate else f"{int(value):,}"
        return f"{number} {self.unit}" if unit else number


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass
