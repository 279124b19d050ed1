"""`--executor ray --ray-address` against a real two-node Ray cluster (tests/raycluster.py):
`ray start --head` and `ray start --address` on loopback addresses, one CPU each, token
authentication on. Each case runs a recallbench command as a real process twice, locally
with one worker and through the cluster with two, and checks that the artifacts are
byte-identical and that the worker actors of the cluster run (two per stage that has tasks)
ran on both nodes. The module's last test kills the worker node and checks that a run
started right after, and one started once the cluster knows, is one line naming it.

To cover another command, add a `Case` to CASES: `setup` runs (locally, in both build
directories) before `command`, which gets `--workers 1` for the local run and `--executor ray
--workers 2 --ray-address ADDRESS` for the cluster run; `compare` names the files (or
directories, compared file by file) under the build directory that must be byte-identical.
In arguments, `{data}` is the case's data file and `{build}` the build directory (each
command runs in a directory of its own beside it). For example:

    Case("prep-longmemeval", data="lme", command=("prep", *LME, "--out", "{build}/cache"),
         compare=("cache",))
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import raycluster

from recallbench.datasets.longmemeval.generator import generate

ROOT = Path(__file__).resolve().parents[2]
RECALLBENCH = Path(sys.executable).with_name("recallbench")
#: seconds for one recallbench command: a bound, not a measure (a cluster run took 5-35 s on
#: the shared 2-core machine; this holds at load 15)
COMMAND_TIMEOUT = 900


@dataclass(frozen=True)
class Case:
    name: str
    command: tuple[str, ...]
    compare: tuple[str, ...]
    setup: tuple[tuple[str, ...], ...] = ()
    #: the host the driver is given: the head's own address, or 127.0.0.1 (which Ray turns
    #: into this machine's interface address; the head listens there too)
    host: str = raycluster.HEAD_IP
    #: the DATA file the commands read (made once per module): "{data}" in an argument
    data: str = ""


BM25 = ("--system", "bm25")
FIXTURES = ("--corpus", str(ROOT / "benchmarks/retrieval/corpus.jsonl"))
FIXTURES += ("--queries", str(ROOT / "benchmarks/retrieval/queries.jsonl"))
LME = ("--dataset", "longmemeval", "--data", "{data}")

#: `run` covers query on the cluster (kept stores on the fixtures, transient ones built by
#: query on the generated file); `prep` embeds on it, so `compare` runs systems without a
#: model (minilm's cached vectors on the cluster: test_embedding_path_ray.py on a local Ray)
CASES = [
    Case(
        "run-fixtures",
        command=("run", *FIXTURES, *BM25),
        compare=("runs.json", "results.json"),
    ),
    Case(
        "run-longmemeval",
        data="lme",
        command=("run", *LME, *BM25),
        compare=("runs.json", "results.json"),
        host="127.0.0.1",
    ),
    Case(
        "prep-longmemeval",
        data="lme",
        setup=(("validate", *LME),),
        command=("prep", "--cache", "{build}/cache", "--system", "minilm"),
        compare=("cache",),
    ),
    Case(
        "compare-fixtures",
        command=("compare", *FIXTURES, "--system", "hotmem", "--system", "bm25"),
        compare=("compare.json",),
    ),
]

#: the data files cases name in `data`, each made once: name -> writer(path)
DATA: dict[str, Callable[[Path], object]] = {
    "lme": lambda path: generate(
        path, shape="s", questions=6, seed=17, sessions_per_question=8, session_chars=300
    ),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[raycluster.RayCluster]:
    """The two-node cluster for the module, stopped (and checked gone) whatever happens."""
    try:
        import ray  # noqa: F401
    except ImportError:  # `make setup` installs the ray extra: missing Ray is a failure
        pytest.fail("the ray extra is not installed: pip install -e '.[ray]'")
    root = tmp_path_factory.mktemp("ray")
    private = None
    if len(str(root / "h")) > raycluster.MAX_TEMP_DIR:  # a long --basetemp
        root = private = Path(tempfile.mkdtemp(prefix="rbray", dir="/tmp"))
    started = raycluster.start(root)
    # if pytest exits without tearing the fixture down; a killed pytest: PR_SET_PDEATHSIG
    atexit.register(raycluster.stop, started)
    try:
        yield started
    finally:
        left = raycluster.stop(started)
        atexit.unregister(raycluster.stop)
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
        assert not left, f"Ray processes of the test cluster still running: {left}"


@pytest.fixture(scope="module")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ray-data")
    files = {}
    for name, write in DATA.items():
        files[name] = folder / f"{name}.json"
        write(files[name])
    return files


def run(build: Path, args: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen:
    """`recallbench --build-dir BUILD ARGS...` as a process of its own; asserts success."""
    cwd = build.with_name(f"{build.name}-cwd")
    cwd.mkdir(exist_ok=True)
    process = subprocess.Popen(
        [str(RECALLBENCH), "--build-dir", str(build), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        out, err = process.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"recallbench {' '.join(args)} did not finish in {COMMAND_TIMEOUT} s: {err}")
    assert process.returncode == 0, (args, out, err[-4000:])
    return process


def contents(path: Path) -> dict[str, bytes]:
    """A file's bytes, or every file's under a directory by relative path; compare.json
    without its cost table (local diagnostics, measured anew by each run)."""
    if path.is_dir():
        return {
            str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }
    if path.name == "compare.json":
        doc = orjson.loads(path.read_bytes())
        assert doc.pop("cost")["systems"], path
        return {path.name: orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)}
    return {path.name: path.read_bytes()}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_cluster_run_matches_local(
    case: Case, cluster: raycluster.RayCluster, data_files: dict[str, Path], tmp_path: Path
) -> None:
    env = {**cluster.env, "NO_PROGRESS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("RECALLBENCH_BUILD_DIR", None)

    def args(command: tuple[str, ...], build: Path) -> tuple[str, ...]:
        data = str(data_files[case.data]) if case.data else ""
        return tuple(a.replace("{data}", data).replace("{build}", str(build)) for a in command)

    address = f"{case.host}:{cluster.address.rsplit(':', 1)[1]}"
    engines = {
        "local": ("--workers", "1"),
        "ray": ("--executor", "ray", "--workers", "2", "--ray-address", address),
    }
    drivers = {}
    for engine, options in engines.items():
        build = tmp_path / engine
        for command in case.setup:
            run(build, args(command, build), env)
        drivers[engine] = run(build, (*args(case.command, build), *options), env).pid

    for name in case.compare:
        local, ray = contents(tmp_path / "local" / name), contents(tmp_path / "ray" / name)
        assert local, name
        assert ray == local, name

    # the cluster run's worker actors: two per executor (one per stage that has tasks), each
    # reserving one CPU, so one on each node, and each gets its first task at once
    actors = [a for a in raycluster.probe(cluster, "actors") if a["driver_pid"] == drivers["ray"]]
    per_node = Counter(a["node_id"] for a in actors)
    if case.command[0] == "prep":
        # prep starts no more processes than it has batches (vectorprep.embedding_plan): the
        # plan it recorded, each actor on a node of its own
        timing = orjson.loads((tmp_path / "ray" / "timings" / "prep.json").read_bytes())
        assert len(actors) == timing["plan"]["processes"] >= 1, (actors, timing["plan"])
        assert set(per_node.values()) == {1}, actors
        return
    assert actors and per_node == dict.fromkeys(cluster.nodes, len(actors) // 2), actors


def test_the_nodes_are_on_loopback(cluster: raycluster.RayCluster) -> None:
    assert sorted(cluster.nodes.values()) == [raycluster.HEAD_IP, raycluster.WORKER_IP]
    assert cluster.address.startswith(f"{raycluster.HEAD_IP}:")


def test_a_driver_without_the_token_gets_one_line(
    cluster: raycluster.RayCluster, tmp_path: Path
) -> None:
    env = {k: v for k, v in cluster.env.items() if not k.startswith("RAY_AUTH")}
    env["NO_PROGRESS"] = "1"
    env["RAY_NUM_REDIS_GET_RETRIES"] = "2"  # Ray tries for 20 s by default
    build = tmp_path / "build"
    run(build, ("validate", *FIXTURES), env)
    done = subprocess.run(
        [str(RECALLBENCH), "--build-dir", str(build), "hydrate", "--system", "bm25"]
        + ["--executor", "ray", "--workers", "2", "--ray-address", cluster.address],
        capture_output=True,
        text=True,
        env=env,
        timeout=COMMAND_TIMEOUT,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done
    ours = [line for line in done.stderr.splitlines() if line.startswith("recallbench ")]
    assert len(ours) == 1, done.stderr
    assert f"cannot connect to the Ray cluster at {cluster.address}" in ours[0]
    assert "InvalidAuthToken" in ours[0] and "RAY_AUTH_MODE=token" in ours[0]
    assert "Traceback" not in done.stderr


# The last tests of the module: they kill the worker node of the module's cluster.


def _hydrate_on(cluster: raycluster.RayCluster, build: Path, cwd: Path) -> subprocess.Popen:
    env = {**cluster.env, "NO_PROGRESS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen(
        [str(RECALLBENCH), "--build-dir", str(build), "hydrate", "--system", "bm25"]
        + ["--executor", "ray", "--workers", "2", "--ray-address", cluster.address],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )


def _one_line_naming_the_dead_node(process: subprocess.Popen, what: str) -> str:
    try:
        _, err = process.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"{what}: still running after {COMMAND_TIMEOUT} s (a hang): {err[-2000:]}")
    assert process.returncode == 1, (what, err[-4000:])
    ours = [line for line in err.splitlines() if line.startswith("recallbench ")]
    assert len(ours) == 1, (what, err[-4000:])
    assert "Traceback" not in err and "ActorDiedError" not in err.replace(ours[0], ""), err
    assert raycluster.WORKER_IP in ours[0] and ("died" in ours[0] or "dead" in ours[0]), ours
    return ours[0]


def test_a_run_right_after_a_node_died_is_one_line(
    cluster: raycluster.RayCluster, tmp_path: Path
) -> None:
    """A run started right after a worker node died hung (200 s) or ended in a 68-line
    ActorDiedError traceback from the actors' readiness check: now one line naming the
    dead node, exit 1, whether or not the cluster has noticed the death yet; and so is a
    run once it has (the live nodes' CPUs are fewer than --workers)."""
    env = {**cluster.env, "NO_PROGRESS": "1"}
    build = tmp_path / "build"
    run(build, ("validate", *FIXTURES), env)
    raycluster.kill_node(cluster, 1)
    first = _one_line_naming_the_dead_node(_hydrate_on(cluster, build, tmp_path), "right after")
    assert first.startswith("recallbench hydrate: error: "), first
    # once the cluster knows the node is dead, a new run says so before starting any actor
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while any(
        n["alive"] for n in raycluster.probe(cluster, "state") if n["ip"] == raycluster.WORKER_IP
    ):
        assert time.monotonic() < deadline, "the cluster never noticed the dead node"
        time.sleep(1)
    later = _one_line_naming_the_dead_node(_hydrate_on(cluster, build, tmp_path), "later")
    assert "fewer than --workers 2" in later and f"dead: {raycluster.WORKER_IP}" in later, later
    assert not (build / "hydrate.json").exists()
