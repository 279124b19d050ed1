"""The portable rerun, as one test of the main pass: the tests marked `embedding` (the rule:
tests/conftest.py) again in a pytest process of their own, with torch's default ATen
kernels and MKL limited to AVX2 (`PORTABLE_KERNELS`, also `make test-portable`), so that
they cannot depend on which CPU kernels this machine's torch picks.

One test of the main pass rather than a pass after it: `make test`'s two workers then share
the rerun's minute and a half with the other files instead of running it alone at the end.
Its own outcome line must say that tests passed and none failed (no test run is a failure)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: the kernels of the rerun (the Makefile's PORTABLE_KERNELS)
PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
#: seconds for the whole rerun: a bound for a loaded 2-core machine, not a measure
RERUN_TIMEOUT = 1800


@pytest.mark.skipif(
    os.environ.get("ATEN_CPU_CAPABILITY") == "default",
    reason="this is the portable rerun itself (`make test-portable`)",
)
def test_the_embedding_tests_pass_under_the_portable_kernels(tmp_path: Path) -> None:
    env = {**os.environ, **PORTABLE_KERNELS}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_TESTRUNUID", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
         "-m", "embedding", "--basetemp", str(tmp_path / "rerun"), str(TESTS)],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=RERUN_TIMEOUT,
    )  # fmt: skip
    tail = (done.stdout[-6000:] + done.stderr[-2000:]).strip()
    assert done.returncode == 0, f"the portable rerun failed (exit {done.returncode}):\n{tail}"
    closing = done.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", closing)
    assert passed and int(passed.group(1)) > 0 and "failed" not in closing, tail
