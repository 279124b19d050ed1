"""The build lock (`recallbench.builddir.lock`): a second process is refused naming the holder, a
killed holder's lock is taken over, nested use does not deadlock, problems are one line."""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recallbench.builddir.lock import LOCK_NAME, build_lock
from recallbench.core.errors import RecallbenchError

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


HOLDER = """
import sys
from pathlib import Path
from recallbench.builddir.lock import build_lock
with build_lock(Path(sys.argv[1]), "recallbench query"):
    print("locked", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills us)
"""

CONTENDER = """
import sys
from pathlib import Path
from recallbench.core.errors import RecallbenchError
from recallbench.builddir.lock import build_lock
try:
    with build_lock(Path(sys.argv[1]), "recallbench score"):
        print("acquired", flush=True)
except RecallbenchError as exc:
    print(exc, flush=True)
    sys.exit(exc.exit_code)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def start_holder(build: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(build)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "locked\n", line
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def contend(build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CONTENDER, str(build)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )


def test_second_process_is_refused_with_holder_pid(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = start_holder(build)
    try:
        refused = contend(build)
        assert refused.returncode == 1, refused
        message = refused.stdout.strip()
        assert "\n" not in message
        assert re.fullmatch(
            re.escape(f"{build} is in use by pid {holder.pid} (`recallbench query`, started ")
            + r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
            + re.escape("); wait for it to finish or use another --build-dir"),
            message,
        ), message
        # the same from inside this process
        with (
            pytest.raises(RecallbenchError, match=f"in use by pid {holder.pid} "),
            build_lock(build, "x"),
        ):
            pass
    finally:
        stop(holder)
    assert holder.returncode == 0
    assert contend(build).stdout == "acquired\n"


def test_lock_of_killed_holder_is_taken_over(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = start_holder(build)
    lock_file = build / LOCK_NAME
    assert json.loads(lock_file.read_text())["pid"] == holder.pid
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    # the dead holder's details are still in the file; the kernel dropped its flock
    assert json.loads(lock_file.read_text())["pid"] == holder.pid
    with build_lock(build, "recallbench report"):
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    stop(holder)


def test_lock_file_content(tmp_path: Path) -> None:
    build = tmp_path / "new" / "build"  # created on demand
    before = time.time()
    with build_lock(build, "recallbench query") as lock_file:
        assert lock_file == build / LOCK_NAME
        info = json.loads(lock_file.read_text())
        assert set(info) == {"pid", "command", "started"}
        assert info["pid"] == os.getpid()
        assert info["command"] == "recallbench query"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["started"])
        started = calendar.timegm(time.strptime(info["started"], "%Y-%m-%dT%H:%M:%SZ"))
        assert before - 2 <= started <= time.time() + 2
    assert lock_file.exists() and lock_file.read_text() == ""  # kept, emptied


def test_nested_use_in_one_process_does_not_deadlock(tmp_path: Path) -> None:
    build = tmp_path / "build"
    with build_lock(build, "outer"):
        with build_lock(build, "inner"), build_lock(Path(str(build) + "/"), "inner2"):
            pass
        # the outer lock is still held after the inner blocks end
        assert contend(build).returncode == 1
        assert json.loads((build / LOCK_NAME).read_text())["command"] == "outer"
    assert contend(build).stdout == "acquired\n"


def test_lock_released_on_exception(tmp_path: Path) -> None:
    build = tmp_path / "build"
    with pytest.raises(KeyError), build_lock(build, "x"):
        raise KeyError("boom")
    assert contend(build).stdout == "acquired\n"


def test_lock_filesystem_problems_are_user_errors(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with (
        pytest.raises(RecallbenchError, match="cannot create build directory"),
        build_lock(afile / "build", "x"),
    ):
        pass
    build = tmp_path / "build"
    build.mkdir()
    (build / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecallbenchError, match="is a symlink"), build_lock(build, "x"):
        pass
    assert not (tmp_path / "elsewhere").exists()


def test_a_hard_linked_lock_file_is_refused_and_its_other_name_kept(tmp_path: Path) -> None:
    """Issue 27: a lock file that is another file's second name was emptied (truncated on
    acquire and release)."""
    build = tmp_path / "build"
    build.mkdir()
    other = tmp_path / "notes.txt"
    other.write_bytes(b"someone's notes\n")
    os.link(other, build / LOCK_NAME)
    with (
        pytest.raises(RecallbenchError, match=r"\.recallbench\.lock is a hard link"),
        build_lock(build, "x"),
    ):
        pass
    assert other.read_bytes() == b"someone's notes\n"


def test_a_failed_holder_removes_the_lock_and_directories_it_created(tmp_path: Path) -> None:
    """Issue 26: a command that failed left `.recallbench.lock` in the directory it made."""
    build = tmp_path / "new" / "build"
    with pytest.raises(KeyError), build_lock(build, "x"):
        raise KeyError("boom")
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with build_lock(existing, "x"):
        pass
    with pytest.raises(KeyError), build_lock(existing, "x"):
        raise KeyError("boom")
    assert (existing / LOCK_NAME).read_bytes() == b""  # not ours to remove: it was there
