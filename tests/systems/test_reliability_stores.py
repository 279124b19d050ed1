"""A misbehaving store, a killed worker, a hung call and SIGTERM never mislead.

The misbehaving systems are real plugins: a module and an installed distribution (its
dist-info directory, as pip writes it) on the PYTHONPATH of a `recallbench` process, found
through the `recallbench.systems` entry points like any third-party system. Each wraps the
built-in BM25 store and breaks one promise (exits, raises, returns the wrong type, a NaN
score, loses a memory, hangs, kills its own worker, is slow enough to be stopped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from plugindist import (
    CORPUS,
    QUERIES,
    ROOT,
    assert_nothing_published,
    install_distribution,
    one_error_line,
    plugin_env,
    run_recallbench,
)
from plugindist import run_args as _run_args
from signalling import default_signals, run_signalled, signal_when

SCRIPT = ROOT / "scripts" / "retrieval_eval.py"

PLUGIN = '''
"""Misbehaving systems for recallbench's reliability tests: BM25 with one fault each."""
import math
import os
import signal
import sys
import time
from pathlib import Path

from recallbench.systems.base import Hit
from wrapped_bm25 import Store as Wrapped, System as WrappedSystem, makers


class Store(Wrapped):
    def ingest(self, records):
        mode = self._mode
        if mode == "ingest-keyerror":
            raise KeyError("memory_id")
        if mode == "lose-memory":
            return self._inner.ingest(list(records)[:-1])
        return self._inner.ingest(records)

    def search(self, query, top_k):
        mode = self._mode
        if mode == "slow":
            searching = os.environ.get("EVIL_SEARCHING")
            if searching:  # tells the test that a search has begun: an event, not a guess
                Path(searching, f"search-{os.getpid()}").touch()
            time.sleep(0.2)
        if mode == "exit0":
            sys.exit(0)
        if mode == "exit3":
            sys.exit(3)
        if mode == "raise":
            raise ValueError("the index is corrupt")
        if mode == "interrupt":
            raise KeyboardInterrupt
        if mode == "hang":
            time.sleep(600)
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "none":
            return None
        hits = self._inner.search(query, top_k)
        if mode == "tuples":
            return [(h.memory_id, h.score) for h in hits]
        if mode in ("nan", "inf", "str") and hits:
            bad = {"nan": math.nan, "inf": math.inf, "str": "0.5"}[mode]
            return [Hit(hits[0].memory_id, bad, hits[0].identifier), *hits[1:]]
        if mode == "foreign-id" and hits:
            return [Hit("never-stored", 1.0, "x"), *hits[1:]]
        if mode == "duplicate-id" and len(hits) > 1:
            return [hits[0], hits[0], *hits[2:]]
        return hits


class System(WrappedSystem):
    def __init__(self, mode):
        super().__init__(f"evil-{mode}", mode, Store)

    def configuration(self):
        if self.mode == "not-json":
            return {"threshold": {1, 2}}
        return super().configuration()


def make(mode):
    return System(mode)


MODES = (
    "exit0", "exit3", "raise", "interrupt", "hang", "die", "none", "tuples", "nan", "inf",
    "str", "foreign-id", "duplicate-id", "ingest-keyerror", "lose-memory", "not-json", "slow",
    "calm",
)
globals().update(makers(MODES, make))
'''

MODES = [
    "exit0",
    "exit3",
    "raise",
    "interrupt",
    "hang",
    "die",
    "none",
    "tuples",
    "nan",
    "inf",
    "str",
    "foreign-id",
    "duplicate-id",
    "ingest-keyerror",
    "lose-memory",
    "not-json",
    "slow",
    "calm",  # behaves (bm25 under a plugin's name): for what a plugin records, at full speed
]


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the plugin module and its distribution's dist-info."""
    points = {f"evil-{mode}": f"misbehaving_rb:make_{mode.replace('-', '_')}" for mode in MODES}
    return install_distribution(
        tmp_path_factory.mktemp("plugin"),
        "misbehaving-rb",
        "0.3.1",
        {"misbehaving_rb.py": PLUGIN},
        {"recallbench.systems": points},
    )


def _validate_and_hydrate_slow(command: list[str], env: dict[str, str]) -> None:
    """`validate` on the committed fixtures, then a transient `hydrate` of the slow plugin
    (`evil-slow`), through `command` (recallbench with its --build-dir); both must succeed."""
    for args in (
        ["validate", "--corpus", str(CORPUS), "--queries", str(QUERIES)],
        ["hydrate", "--system", "evil-slow", "--transient"],
    ):
        done = subprocess.run([*command, *args], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr


def _env(plugin_path: Path, tmp: Path | None = None) -> dict[str, str]:
    return plugin_env(plugin_path, tmp=tmp)


def run_system(
    plugin_path: Path, build: Path, system: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_recallbench(_env(plugin_path), build, system, *extra)


# --------------------------------------------------------------------------- the boundary


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("mode", ["exit0", "exit3"])
def test_a_store_that_exits_is_a_failure_naming_system_call_and_query(
    plugin_path: Path, tmp_path: Path, mode: str, workers: str
) -> None:
    """sys.exit(0) in `search` made `run` exit 0 with no results; sys.exit(3) looked like a
    failed baseline gate. Both are now exit 1, one line naming the system, call and query."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, f"evil-{mode}", "--workers", workers)
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert f"system 'evil-{mode}': search (scope " in line
    assert ", query " in line
    assert f"called sys.exit({mode[-1]})" in line
    assert_nothing_published(build)


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("raise", "search (scope suite, query q-"),
        ("none", "returned None, not a list of recallbench Hit"),
        ("tuples", "returned a tuple at rank 1, not a recallbench Hit"),
        ("ingest-keyerror", "ingest (scope suite) raised KeyError: 'memory_id'"),
        ("not-json", "configuration returned something that is not JSON"),
        ("foreign-id", "returned id 'never-stored' at rank 1, which was never stored"),
        ("duplicate-id", "twice"),
    ],
)
def test_a_store_that_raises_or_returns_the_wrong_type_is_one_line(
    plugin_path: Path, tmp_path: Path, mode: str, needle: str
) -> None:
    """A 55-80 line traceback naming neither system nor query before."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, f"evil-{mode}")
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert f"system 'evil-{mode}': " in line
    assert needle in line, line
    assert_nothing_published(build)


@pytest.mark.parametrize(("mode", "shown"), [("nan", "nan"), ("inf", "inf"), ("str", "'0.5'")])
def test_nan_infinite_and_string_scores_are_refused_at_query_time(
    plugin_path: Path, tmp_path: Path, mode: str, shown: str
) -> None:
    """runs.json got `null` for a NaN score; only export-trec refused it, later."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, f"evil-{mode}")
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert f"system 'evil-{mode}': search (scope suite, query " in line
    assert f"returned the score {shown} for id " in line
    assert "scores must be finite numbers" in line
    assert_nothing_published(build)


def test_a_store_that_loses_a_memory_is_blamed_not_the_ids(
    plugin_path: Path, tmp_path: Path
) -> None:
    """The message blamed duplicate ids and did not name the system."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, "evil-lose-memory")
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert "system 'evil-lose-memory': ingest (scope suite) lost 1 of " in line
    assert "ids must be unique" not in line
    assert_nothing_published(build)


def test_an_interrupt_from_the_store_stays_an_interrupt(plugin_path: Path, tmp_path: Path) -> None:
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, "evil-interrupt")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["recallbench run: interrupted; nothing half-written"]
    assert_nothing_published(build)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_hung_call_ends_at_the_call_timeout(
    plugin_path: Path, tmp_path: Path, workers: str
) -> None:
    """A hung store waited forever; with --call-timeout it is one line, exit 1. The limit
    holds for every call, open and ingest too: 5 s is far above what they take even on a
    loaded machine, so the one call that reaches it is the hung search."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, "evil-hang", "--call-timeout", "5", "--workers", workers)
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert "system 'evil-hang': search (scope suite, query " in line
    assert "did not return within --call-timeout 5 s" in line
    assert_nothing_published(build)


def test_the_call_timeout_is_recorded_beside_the_result(plugin_path: Path, tmp_path: Path) -> None:
    """On: in runs.json and the results envelope's provenance; the result document (what a
    baseline compares) is the same as without it. The provider is recorded there too."""
    plain, limited = tmp_path / "plain", tmp_path / "limited"
    assert run_system(plugin_path, plain, "evil-calm").returncode == 0
    proc = run_system(plugin_path, limited, "evil-calm", "--call-timeout", "30")
    assert proc.returncode == 0, proc.stderr
    a = orjson.loads((plain / "results.json").read_bytes())
    b = orjson.loads((limited / "results.json").read_bytes())
    assert a["data"] == b["data"]
    assert a["provenance"]["call_timeout"] == {"hydrate": None, "query": None}
    assert b["provenance"]["call_timeout"] == {"hydrate": 30.0, "query": 30.0}
    assert b["provenance"]["system"] == {
        "name": "evil-calm",
        "distribution": "misbehaving-rb",
        "version": "0.3.1",
    }
    runs = orjson.loads((limited / "runs.json").read_bytes())
    assert runs["data"]["call_timeout"] == 30.0


# --------------------------------------------------------------------------- dead workers


def test_a_killed_local_worker_is_one_line_naming_its_task(
    plugin_path: Path, tmp_path: Path
) -> None:
    """A ~53-line BrokenProcessPool traceback before."""
    build = tmp_path / "build"
    proc = run_system(plugin_path, build, "evil-die", "--workers", "2")
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert "was killed by SIGKILL while running query_scope of scope 'suite'" in line, line
    assert_nothing_published(build)


# --------------------------------------------------------------------------- SIGTERM


def _searching(env: dict[str, str], directory: Path) -> dict[str, str]:
    """`env` with evil-slow's search marking each search's start in `directory`."""
    directory.mkdir()
    return {**env, "EVIL_SEARCHING": str(directory)}


def _terminate_when_searching(args: list[str], env: dict[str, str], ready) -> tuple[int, str]:
    """Run `args`, send SIGTERM once `ready()` holds and a search has begun (evil-slow's
    marker), both seen while the process was stopped (tests/signalling.py), so the signal
    lands inside the searches however loaded the machine is; return exit code and stderr."""
    searching = Path(env["EVIL_SEARCHING"])
    ran = run_signalled(args, env, lambda pid: ready() and any(searching.iterdir()), signal.SIGTERM)
    return ran.returncode, ran.stderr


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_during_run_exits_143_and_removes_its_work(
    plugin_path: Path, tmp_path: Path, workers: str
) -> None:
    """SIGTERM (timeout, a CI cancel, docker stop) gave exit 143 with no message and left
    the transient stores in BUILD/work/worker-*; now it is cleaned up like Ctrl-C."""
    build = tmp_path / "build"
    validate = [
        sys.executable,
        "-m",
        "recallbench.cli.main",
        "--build-dir",
        str(build),
    ]
    env = _env(plugin_path)
    _validate_and_hydrate_slow(validate, env)
    before = sorted(p.name for p in build.iterdir())
    work = build / "work"
    code, err = _terminate_when_searching(
        [*validate, "query", "--workers", workers],
        _searching(env, tmp_path / "searching"),
        lambda: work.is_dir() and any(work.glob("worker-*")),
    )
    assert code == 143, err
    assert err.splitlines() == ["recallbench query: terminated; nothing half-written"]
    assert "leaked" not in err
    assert not work.exists()
    assert sorted(p.name for p in build.iterdir()) == before  # no runs.json, no temp file


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sigterm_during_the_script_removes_its_temporary_directory(
    plugin_path: Path, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    output = tmp_path / "result.json"
    args = [
        sys.executable,
        str(SCRIPT),
        "--system",
        "evil-slow",
        "--workers",
        "2",
        "--output",
        str(output),
    ]
    code, err = _terminate_when_searching(
        args,
        _searching(_env(plugin_path, tmp), tmp_path / "searching"),
        lambda: (
            any(tmp.glob("recallbench-*/runs.json.timing*"))
            or any(tmp.glob("recallbench-*/stores/*/*"))
        ),
    )
    assert code == 143, err
    assert err.splitlines() == ["recallbench retrieval_eval: terminated; nothing half-written"]
    assert "leaked" not in err
    assert list(tmp.iterdir()) == []
    assert not output.exists()


def test_no_worker_outlives_a_terminated_run(plugin_path: Path, tmp_path: Path) -> None:
    build = tmp_path / "build"
    searching = tmp_path / "searching"
    proc = subprocess.Popen(
        _run_args(build, "evil-slow", "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_searching(_env(plugin_path), searching),
        preexec_fn=default_signals,
    )
    workers: list[int] = []

    def searching_in_workers(pid: int) -> bool:
        workers[:] = [p for p in _children_of(pid) if not _resource_tracker(p)]
        return len(workers) >= 2 and any(searching.iterdir())

    try:
        signal_when(proc, searching_in_workers, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.splitlines() == ["recallbench run: terminated; nothing half-written"]
    assert workers and not [pid for pid in workers if _alive(pid)]


def _resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker (it exits by itself once its pipe closes)."""
    try:
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Running (a zombie, reaped by nobody yet, is not)."""
    try:
        return "(zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _hang_up_when(args: list[str], env: dict[str, str], ready) -> tuple[int, str]:
    """Start `args`, send SIGHUP (a closed terminal) once `ready()` holds; (exit code, stderr)."""
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate()
                pytest.fail(f"never became ready (exit {proc.returncode}): {err}")
            time.sleep(0.01)
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sighup_during_the_script_removes_its_temporary_directory(
    plugin_path: Path, tmp_path: Path
) -> None:
    """Issue 27: SIGHUP (a closed terminal, an ssh drop) killed the script outright and left
    its temporary directory with the stores in it; now it is cleaned up like SIGTERM."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    output = tmp_path / "result.json"
    args = [sys.executable, str(SCRIPT), "--system", "evil-slow", "--output", str(output)]
    code, err = _hang_up_when(
        args, _env(plugin_path, tmp), lambda: any(tmp.glob("recallbench-*/stores/*/*"))
    )
    assert code == 129, err
    assert err.splitlines() == ["recallbench retrieval_eval: hung up; nothing half-written"]
    assert list(tmp.iterdir()) == []
    assert not output.exists()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sighup_during_compare_removes_its_work_directories(
    plugin_path: Path, tmp_path: Path
) -> None:
    """Issue 27: a hung-up compare left BUILD/compare-*/ with its stores; exit 129 now, one
    line, no work directory left (only matplotlib's font list, if it was made)."""
    build = tmp_path / "build"
    args = [
        sys.executable,
        "-m",
        "recallbench.cli.main",
        "--build-dir",
        str(build),
        "compare",
        "--system",
        "evil-slow",
        "--system",
        "bm25",
    ]
    code, err = _hang_up_when(
        args, _env(plugin_path), lambda: any(build.glob("compare-*/stores/*/*"))
    )
    assert code == 129, err
    assert err.splitlines()[-1] == "recallbench compare: hung up; nothing half-written"
    left = sorted(p.name for p in build.iterdir()) if build.exists() else []
    assert set(left) <= {".cache"}, left


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sighup_during_query_with_workers_exits_129_and_removes_its_work(
    plugin_path: Path, tmp_path: Path
) -> None:
    """The workers ignore SIGHUP (sent to the whole process group when a terminal closes):
    the parent hangs up, stops them and removes the transient stores, instead of a dead
    worker reading as a crash."""
    build = tmp_path / "build"
    base = [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build)]
    env = _env(plugin_path)
    _validate_and_hydrate_slow(base, env)
    before = sorted(p.name for p in build.iterdir())
    work = build / "work"
    proc = subprocess.Popen(
        [*base, "query", "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's job is
    )
    try:
        deadline = time.monotonic() + 120
        while not (work.is_dir() and any(work.glob("worker-*"))):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGHUP)  # the parent and its workers, as a hang-up does
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 129, err
    assert err.splitlines() == ["recallbench query: hung up; nothing half-written"]
    assert not work.exists()
    assert sorted(p.name for p in build.iterdir()) == before
