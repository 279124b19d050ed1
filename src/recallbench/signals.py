"""SIGTERM handled like Ctrl-C.

`timeout`, a CI cancel and `docker stop` send SIGTERM. `handle_sigterm()` (the CLI and the
evaluation script call it first) makes SIGTERM raise `Terminated` in the main thread, a
`KeyboardInterrupt`, so every path that cleans up after a Ctrl-C cleans up after it too:
the executor kills its workers, transient stores, work directories and temporary
directories are removed, the build lock is released, nothing is published. The CLI then
prints `recallbench <command>: terminated; nothing half-written` and exits 143
(128 + SIGTERM), as a shell reports a process ended by SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

#: the exit code of a run ended by SIGTERM
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: cleaned up like a Ctrl-C, reported as terminated (exit 143)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    # once is enough: a second SIGTERM while cleaning up must not abandon the clean-up
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def handle_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in this (main) thread; a no-op in other threads."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
