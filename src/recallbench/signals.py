"""SIGTERM and SIGHUP handled like Ctrl-C.

`timeout`, a CI cancel and `docker stop` send SIGTERM; a closed terminal or a dropped ssh
connection sends SIGHUP. `handle_sigterm()` (the CLI and the evaluation script call it
first) makes either raise `Terminated` (SIGHUP: its subclass `HungUp`) in the main thread,
a `KeyboardInterrupt`, so every path that cleans up after a Ctrl-C cleans up after it too:
the executor kills its workers, transient stores, work directories and temporary
directories are removed, the build lock is released, nothing is published. The CLI then
prints `recallbench <command>: terminated; nothing half-written` (SIGHUP: `hung up`) and
exits 143 (128 + SIGTERM) or 129 (128 + SIGHUP), as a shell reports a process ended by
that signal.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

#: the exit code of a run ended by SIGTERM
EXIT_TERMINATED = 128 + signal.SIGTERM
#: the exit code of a run ended by SIGHUP
EXIT_HUNG_UP = 128 + signal.SIGHUP

#: the signals handled, each with the exception it raises (set below)
_HANDLED = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: cleaned up like a Ctrl-C, reported as terminated (exit 143)."""

    #: how the one line names what happened, and the exit code
    word = "terminated"
    exit_code = EXIT_TERMINATED


class HungUp(Terminated):
    """SIGHUP arrived (the terminal closed): cleaned up like a Ctrl-C, exit 129."""

    word = "hung up"
    exit_code = EXIT_HUNG_UP


def _raise_terminated(signum: int, frame: Any) -> None:
    # once is enough: a second signal while cleaning up must not abandon the clean-up
    for handled in _HANDLED:
        signal.signal(handled, signal.SIG_IGN)
    raise HungUp() if signum == signal.SIGHUP else Terminated()


def handle_sigterm() -> None:
    """Make SIGTERM raise `Terminated` and SIGHUP `HungUp` in this (main) thread; a no-op
    in other threads."""
    if threading.current_thread() is threading.main_thread():
        for handled in _HANDLED:
            signal.signal(handled, _raise_terminated)
