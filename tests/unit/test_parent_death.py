"""`signals.kill_me_with_parent`: the parent-death signal a child gets between fork and exec
(the PostgreSQL server, the executor's workers), set with no child process of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from recallbench.core.signals import kill_me_with_parent, prepare_parent_death_signal

#: the child reads its own parent-death signal back (prctl PR_GET_PDEATHSIG = 2)
READ_BACK = (
    "import ctypes; libc = ctypes.CDLL(None); v = ctypes.c_int(0); "
    "libc.prctl(2, ctypes.byref(v)); print(v.value)"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_gets_sigkill_as_its_parent_death_signal() -> None:
    prepare_parent_death_signal()
    with_it = subprocess.run(
        [sys.executable, "-c", READ_BACK],
        preexec_fn=kill_me_with_parent,
        capture_output=True,
        text=True,
        check=True,
    )
    without = subprocess.run(
        [sys.executable, "-c", READ_BACK], capture_output=True, text=True, check=True
    )
    assert (with_it.stdout.strip(), without.stdout.strip()) == ("9", "0")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_it_starts_no_process() -> None:
    """Between fork and exec a child must not start processes (`ctypes.util.find_library`
    runs `ldconfig` through a shell): the C library is the one the parent resolved."""
    prepare_parent_death_signal()
    pid = os.fork()
    if pid == 0:  # the child: any process started is a failure
        code = 1
        try:

            def refuse(*args, **kwargs):
                raise AssertionError("a process was started")

            subprocess.Popen = refuse  # type: ignore[misc]
            code = 0 if kill_me_with_parent() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
