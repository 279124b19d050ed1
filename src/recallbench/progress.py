"""Progress bars on stderr for long work: shown only on an interactive stderr, never with
`--quiet` (the CLI calls `configure`) or when NO_PROGRESS is set."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_QUIET = False


def configure(quiet: bool) -> None:
    """Turn every later bar off (`--quiet`) or back on."""
    global _QUIET
    _QUIET = quiet


def enabled() -> bool:
    return not _QUIET and sys.stderr.isatty() and not os.environ.get("NO_PROGRESS")


def say(message: str) -> None:
    """A notice on stderr, unless quiet."""
    if not _QUIET:
        print(message, file=sys.stderr, flush=True)


@contextmanager
def bar(total: int | None, desc: str, unit: str = "it", **extra: Any) -> Iterator[Any]:
    """A tqdm bar (a no-op object when progress is off); closed on exit."""
    if not enabled():
        yield _NoBar()
        return
    from tqdm import tqdm

    # no monitor thread: it would outlive the bar, and a parent running other threads
    # spawns its local workers instead of forking them (recallbench.executor.start_method)
    tqdm.monitor_interval = 0
    progress = tqdm(
        total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True, file=sys.stderr, **extra
    )
    try:
        yield progress
    finally:
        progress.close()


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass
