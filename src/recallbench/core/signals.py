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

A library that installs its own handlers (`ray.init` does: a Python SIGTERM handler, and its
core worker a C++ one) is called inside `handlers_kept()`, which puts ours back after it.

A child that must not outlive its parent (a local worker process, a store's server) asks
the kernel for SIGKILL when its parent dies (`die_with_parent`, `kill_me_with_parent`:
PR_SET_PDEATHSIG, Linux only; `prepare_parent_death_signal` first, in the parent).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
from collections.abc import Iterator
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


#: the exception a handler here raised last (see `as_raised`)
_raised: KeyboardInterrupt | None = None


def _raise_terminated(signum: int, frame: Any) -> None:
    global _raised
    # once is enough: a second signal while cleaning up must not abandon the clean-up
    for handled in _HANDLED:
        signal.signal(handled, signal.SIG_IGN)
    _raised = HungUp() if signum == signal.SIGHUP else Terminated()
    raise _raised


def as_raised(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """`exc`, or the `Terminated` (or `HungUp`) our handler raised when library code turned it
    into a plain `KeyboardInterrupt` (Ray does, for an exception raised by a handler inside
    its calls)."""
    if type(exc) is KeyboardInterrupt and _raised is not None:
        return _raised
    return exc


def handle_sigterm() -> None:
    """Make SIGTERM raise `Terminated` and SIGHUP `HungUp` in this (main) thread; a no-op
    in other threads."""
    if threading.current_thread() is threading.main_thread():
        for handled in _HANDLED:
            signal.signal(handled, _raise_terminated)


#: the signals whose handlers `handlers_kept` restores (those this platform has)
KEPT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Run the block, then re-install the handlers KEPT_SIGNALS had before it (re-installing
    also replaces a handler native code set behind Python's back). Main thread only; in
    other threads a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in KEPT_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:
                signal.signal(signum, handler)


#: prctl's option that sets the signal a process gets when its parent dies (Linux)
_PR_SET_PDEATHSIG = 1


@functools.cache
def loaded_libc() -> ctypes.CDLL | None:
    """The C library this process already has loaded (`CDLL(None)`: no search, no child
    process; `ctypes.util.find_library` runs `ldconfig` through a shell), or None."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def kill_me_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG, Linux);
    False where that is not available. Safe in a `preexec_fn` (between fork and exec): it
    starts nothing, once `prepare_parent_death_signal()` ran in the parent."""
    libc = loaded_libc() if sys.platform.startswith("linux") else None
    if libc is None or not hasattr(libc, "prctl"):
        return False
    return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0


def prepare_parent_death_signal() -> None:
    """Resolve the C library now, in the parent, so that a forked child's
    `kill_me_with_parent` only calls prctl."""
    if sys.platform.startswith("linux"):
        loaded_libc()


def die_with_parent(parent_pid: int) -> bool:
    """`kill_me_with_parent`, then exit at once when `parent_pid` is already gone (it died
    before prctl took effect). For a `preexec_fn` or a worker's initializer; returns whether
    the kernel will send the signal."""
    armed = kill_me_with_parent()
    if os.getppid() != parent_pid:
        os._exit(1)
    return armed
