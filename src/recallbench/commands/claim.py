"""Claiming a build directory: what every command that writes into one does first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recallbench.builddir.lock import build_lock
from recallbench.builddir.paths import check_build_dir, check_build_entries, remove_leftover_work
from recallbench.report import MATPLOTLIB_CACHE, cache_matplotlib_in


@contextmanager
def claimed_build_dir(build_dir: Path, command: str) -> Iterator[Path]:
    """Check the directory (`paths.check_build_dir`), hold its lock (`lock.build_lock`,
    which claims it: nothing below it is written through a link) for the body, and yields
    the checked path. Once locked: the work directories a killed `compare` left are
    removed (`paths.remove_leftover_work`), and matplotlib's font list is kept in
    the build directory for a command that draws (`report.cache_matplotlib_in`). A link
    where recallbench writes is refused before any work (`paths.check_build_entries`)."""
    checked = check_build_dir(build_dir)
    with build_lock(checked, command):
        remove_leftover_work(checked)
        check_build_entries(checked)
        cache_matplotlib_in(checked / MATPLOTLIB_CACHE)
        yield checked
