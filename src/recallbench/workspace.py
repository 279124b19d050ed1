"""Claiming a build directory: what every command that writes into one does first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recallbench.buildpaths import check_build_dir
from recallbench.lock import build_lock
from recallbench.report import MATPLOTLIB_CACHE, cache_matplotlib_in


@contextmanager
def claimed_build_dir(build_dir: Path, command: str) -> Iterator[Path]:
    """Check the directory (`buildpaths.check_build_dir`), keep matplotlib's font list in it
    for a command that draws (`report.cache_matplotlib_in`), and hold its lock
    (`lock.build_lock`) for the body; yields the checked path."""
    checked = check_build_dir(build_dir)
    cache_matplotlib_in(checked / MATPLOTLIB_CACHE)
    with build_lock(checked, command):
        yield checked
