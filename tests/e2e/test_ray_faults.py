"""`--executor ray` under faults: SIGTERM, an address nobody answers, a dead node.

Each case runs recallbench as a real process. SIGTERM is sent once a task has started
(the store marks it in a directory: an event, not a delay); every wait is bounded and
generous, and no test asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"
CORPUS, QUERIES = FIXTURES / "corpus.jsonl", FIXTURES / "queries.jsonl"
#: generous bound for one recallbench process (a Ray start takes 5-30 s on a loaded machine)
COMMAND_TIMEOUT = 300

PLUGIN = '''
"""BM25 whose searches mark their start in $RAY_FAULTS_MARKS and then take a minute."""
import os
import time
from pathlib import Path

from recallbench.systems.bm25 import BM25System


class Store:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def search(self, query, top_k):
        Path(os.environ["RAY_FAULTS_MARKS"], f"search-{os.getpid()}").touch()
        time.sleep(60)
        return self._inner.search(query, top_k)


class System(BM25System):
    def __init__(self):
        super().__init__("ray-slow")

    def open_store(self, directory, *, vectors=None):
        return Store(super().open_store(directory, vectors=vectors))

    def attach(self, directory, *, vectors=None):
        return Store(super().attach(directory, vectors=vectors))


def make():
    return System()
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plugin")
    (root / "ray_faults_rb.py").write_text(PLUGIN)
    info = root / "ray_faults_rb-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ray-faults-rb\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[recallbench.systems]\nray-slow = ray_faults_rb:make\n")
    return root


def environment(plugin_path: Path, marks: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(NO_PROGRESS="1", PYTHONDONTWRITEBYTECODE="1", RAY_USAGE_STATS_ENABLED="0")
    env["RAY_FAULTS_MARKS"] = str(marks)
    env.pop("RECALLBENCH_BUILD_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin_path), env.get("PYTHONPATH")]))
    return env


def recallbench(build: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build), *args]


def session_processes(session: int) -> list[str]:
    """The processes still running in `session` (the recallbench process led it)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == session:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                    left.append(f"{entry.name}: {cmdline[:160]}")
        except (OSError, ProcessLookupError):
            continue
    return left


def kill_session(session: int) -> None:
    for line in session_processes(session):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sigterm_under_ray_is_one_line_exit_143_and_stops_its_ray(
    plugin_path: Path, tmp_path: Path
) -> None:
    """ray.init put its own SIGTERM handlers over ours: exit 15 with no line, or an abort
    after a C++ stack dump. Now: our one line, exit 143, and the Ray it started is gone."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = environment(plugin_path, marks)
    build = tmp_path / "build"
    corpus = ["--corpus", str(CORPUS), "--queries", str(QUERIES)]
    process = subprocess.Popen(
        recallbench(build, "run", *corpus, "--system", "ray-slow", "--executor", "ray")
        + ["--workers", "1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # Ray's processes join its session: found after it exits
    )
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not any(marks.iterdir()):  # a Ray actor is inside a search
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"no search started (exit {process.poll()}): {process.communicate()}")
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=COMMAND_TIMEOUT)
        deadline = time.monotonic() + 60
        while session_processes(process.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = session_processes(process.pid)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        kill_session(process.pid)
    assert process.returncode == 143, err
    ours = [line for line in err.splitlines() if line.startswith("recallbench")]
    assert ours == ["recallbench run: terminated; nothing half-written"], err
    assert "Traceback" not in err and "SIGTERM received" not in err, err
    assert not left, f"Ray processes left running: {left}"
    assert not (build / "results.json").exists()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_address_nobody_answers_fails_in_one_line(plugin_path: Path, tmp_path: Path) -> None:
    """Ray retried `--ray-address 127.0.0.1:PORT` with no server forever, printing only its
    own warnings; now one line naming the address, exit 1, after a bounded wait (30 s, here
    set to 3 s through RECALLBENCH_RAY_ADDRESS_WAIT)."""
    env = {**environment(plugin_path, tmp_path), "RECALLBENCH_RAY_ADDRESS_WAIT": "3"}
    build = tmp_path / "build"
    done = subprocess.run(
        recallbench(build, "validate", "--corpus", str(CORPUS), "--queries", str(QUERIES)),
        capture_output=True,
        text=True,
        env=env,
        timeout=COMMAND_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    address = f"127.0.0.1:{free_port()}"
    try:
        done = subprocess.run(
            recallbench(build, "hydrate", "--system", "bm25", "--executor", "ray")
            + ["--workers", "1", "--ray-address", address],
            capture_output=True,
            text=True,
            env=env,
            timeout=COMMAND_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"--ray-address {address} still waiting after {COMMAND_TIMEOUT} s: {exc}")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"recallbench hydrate: error: no Ray cluster answers at {address}")
    assert "within 3 s" in lines[0]
