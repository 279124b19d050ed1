"""Signal a process at a moment the test has seen, whatever the machine's load.

A test that checks what a command does when interrupted inside its work must not send the
signal after the work has ended: on a loaded machine the command can finish between the
test's look and its signal. `signal_when(proc, ready, signum)` stops the process (SIGSTOP)
before each look, so what `ready(pid)` sees cannot change while it looks, sends the signal
while the process is still stopped, and only then lets it go on (SIGCONT): the signal is
pending at a point of its work the test saw. Linux (it reads /proc/PID/stat).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

#: seconds a command may take to become ready: a bound for a machine at load 15, not a measure
READY_TIMEOUT = 300.0


def default_signals() -> None:
    """`preexec_fn` for a process a test will signal: SIGINT and SIGTERM at their defaults and
    unblocked, as a shell gives them to a command. A pytest worker that ran other tests
    before can pass on an ignored or blocked SIGINT (seen in full runs: the Ctrl-C tests'
    commands then finished with exit 0), and a child keeps both across exec."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"  # gone


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process stopped for the duration of the block (then continued)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while _state(pid) not in ("T", "t", "Z", "X") and time.monotonic() < deadline:
            time.sleep(0.001)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def signal_when(
    proc: subprocess.Popen,
    ready: Callable[[int], bool],
    signum: int,
    timeout: float = READY_TIMEOUT,
) -> None:
    """Send `signum` to `proc` once `ready(pid)` holds, seen while it was stopped; fail the
    test if it exits first or is not ready within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"never became ready (exit {proc.returncode}): {err}")
        with stopped(proc.pid):
            if proc.poll() is None and ready(proc.pid):
                proc.send_signal(signum)
                return
        time.sleep(0.002)


def run_signalled(
    args: list[str],
    env: dict[str, str],
    ready: Callable[[int], bool],
    signum: int,
    timeout: float = READY_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run `args` with `env` (SIGINT and SIGTERM at their defaults), send `signum` once
    `ready(pid)` holds (`signal_when`) and return the finished process; one not ready, or
    still running, `timeout` seconds later fails the test (and is killed)."""
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_signals,
    )
    try:
        signal_when(proc, ready, signum, timeout)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
