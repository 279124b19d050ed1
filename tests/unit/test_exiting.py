"""The console command's exit: the interpreter's teardown skipped, nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recallbench.core.exiting import EXIT_FLUSH_FAILED, exit_status


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (2, 2), (143, 143), (256 + 3, 3), (-1, 255)]
)
def test_exit_status_is_what_sys_exit_gives(code: object, status: int) -> None:
    assert exit_status(code) == status


def test_a_message_exits_1_and_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status("bad things") == 1
    assert capsys.readouterr().err == "bad things\n"


# `recallbench stages` through `console_main`, in a process that also registers an atexit
# handler, starts a thread that is not a daemon (still sleeping when the command ends), and
# keeps an object whose finalizer would run only in the interpreter's teardown
SCRIPT = """
import atexit, os, sys, threading, time
from pathlib import Path
from recallbench.cli.main import console_main

out = Path(sys.argv[1])

class Teardown:  # the file opened and the function bound now: no module needed later
    def __init__(self, path):
        self.fd, self.write = os.open(path, os.O_WRONLY | os.O_CREAT), os.write

    def __del__(self):
        self.write(self.fd, b"ran")

kept = Teardown(out / "teardown")
atexit.register(lambda: (out / "atexit").write_text("ran"))
threading.Thread(target=lambda: (time.sleep(0.5), (out / "thread").write_text("ran"))).start()
sys.argv = ["recallbench", *sys.argv[2:]]
console_main()
"""


def run_console(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_waits_for_threads_runs_atexit_and_flushes_but_skips_teardown(
    tmp_path: Path,
) -> None:
    done = run_console(tmp_path, "stages")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["validate", *done.stdout.split()[1:]]
    assert "decide" in done.stdout.split()  # every line reached the pipe
    assert (tmp_path / "thread").read_text() == "ran"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "teardown").read_bytes() == b""  # the teardown is what is skipped


def test_the_command_keeps_its_exit_code(tmp_path: Path) -> None:
    usage = run_console(tmp_path, "no-such-command")
    assert usage.returncode == 2
    assert "no-such-command" in usage.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_output_that_cannot_be_flushed_fails_the_process() -> None:
    """stdout's reader gone before the buffered output is flushed: exit 120, as Python's own
    exit gives (the CLI's click.echo flushes as it writes, so a command sees the broken pipe
    earlier, as an error of its own)."""
    script = (
        "import sys, time\n"
        "from recallbench.core.exiting import exit_process\n"
        "sys.stdout.write('buffered, not flushed')\n"
        "time.sleep(1)\n"  # the reader closes its end meanwhile
        "exit_process(0)\n"
    )
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    writer = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=buffered,
    )
    assert writer.stdout is not None
    writer.stdout.close()
    assert writer.wait(timeout=60) == EXIT_FLUSH_FAILED


def python_c(script: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """`python -c SCRIPT ARGS...` in a process of its own; the finished process."""
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_files_left_open_are_closed_as_the_teardown_would(tmp_path: Path) -> None:
    """Issue 38: a file written and never closed (kept in a module, and in a cycle no one
    collected) lost what it had buffered, since the teardown that closes it is skipped.
    Every layer is flushed before the one under it is closed: a text file, a gzip file
    (complete only once closed: its trailer), a buffered writer; stdout still works."""
    script = (
        "import gc, gzip, sys\n"
        "from recallbench.core.exiting import exit_process\n"
        "gc.disable()\n"
        f"out = {str(tmp_path)!r}\n"
        "kept = [open(out + '/text.log', 'w'), gzip.open(out + '/log.gz', 'wt')]\n"
        "for f in kept:\n"
        "    f.write('line\\n' * 73)\n"
        "cycle = {'file': open(out + '/raw.bin', 'wb')}\n"
        "cycle['self'] = cycle\n"
        "cycle['file'].write(b'x' * 100)\n"
        "del cycle\n"
        "print('still printed')\n"
        "exit_process(0)\n"
    )
    done = python_c(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still printed\n"
    import gzip

    assert (tmp_path / "text.log").read_text() == "line\n" * 73
    assert gzip.decompress((tmp_path / "log.gz").read_bytes()).decode() == "line\n" * 73
    assert (tmp_path / "raw.bin").read_bytes() == b"x" * 100


# a process that pools workers which make torch's compile cache directory (as importing
# sentence-transformers does), then ends as the console command does
TORCH_CACHE_SCRIPT = """
import sys
import executor_tasks
from recallbench.engine.processes import ProcessExecutor
from recallbench.core.exiting import exit_process

with ProcessExecutor(2, start_method=sys.argv[1]) as pool:
    made = sorted(set(pool.map(executor_tasks.torch_cache, range(4))))
print(*made)
exit_process(0)
"""


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_torch_cache_directories_are_removed_with_the_process(
    tmp_path: Path, start_method: str
) -> None:
    """Issue 38: every process that loaded MiniLM left `$TMPDIR/torchinductor_<user>/`
    (made when sentence-transformers imports torch._dynamo). The process that starts the
    workers points torch's cache at a directory of its own, which its workers share and its
    exit removes; a directory the user set is theirs, left alone."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = python_c(TORCH_CACHE_SCRIPT, start_method, env=env)
    assert done.returncode == 0, done.stderr
    (made,) = done.stdout.split()
    assert Path(made).parent == tmp and Path(made).name.startswith("recallbench-torch-")
    assert list(tmp.iterdir()) == []
    mine = tmp_path / "mine"
    done = python_c(
        TORCH_CACHE_SCRIPT, start_method, env={**env, "TORCHINDUCTOR_CACHE_DIR": str(mine)}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(mine)] and len(list(mine.iterdir())) == 4
    assert list(tmp.iterdir()) == []


def test_files_left_open_are_closed_without_asking_an_object_its_class(tmp_path: Path) -> None:
    """The close pass finds files by their type alone: torch keeps an object whose
    `__class__` warns (`torch.distributed.reduce_op`), which `isinstance` asked, so a MiniLM
    run ended with a FutureWarning on stderr."""
    script = (
        "import warnings\n"
        "from recallbench.core.exiting import exit_process\n"
        "class Proxy:\n"
        "    @property\n"
        "    def __class__(self):\n"
        "        warnings.warn('asked', FutureWarning)\n"
        "        return Proxy\n"
        "kept = [Proxy() for _ in range(3)]\n"
        "exit_process(0)\n"
    )
    done = python_c(script)
    assert done.returncode == 0
    assert done.stderr == ""
