"""`milvus` and `milvus-flat` (Milvus Lite through pymilvus): the index and its options in the
configuration and in each store (a store built under other options is refused), FLAT ranks
as `minilm` does on the fixtures (the same cosine of the same vectors, up to float32 bits),
the default index too (Milvus Lite searches exhaustively at this size), and a run killed
while Milvus Lite's server runs leaves no server process, however it is ended."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from signalling import default_signals, signal_when

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from recallbench.cli.main import main  # noqa: E402
from recallbench.core.errors import RecallbenchError  # noqa: E402
from recallbench.systems import get_system  # noqa: E402
from recallbench.systems.base import StoreRecord  # noqa: E402

#: two computation paths (Milvus's float32 kernels, numpy's): never float equality
SCORE_TOLERANCE = 1e-5


def test_the_configuration_records_the_index_each_system_ships(monkeypatch) -> None:
    monkeypatch.delenv("RECALLBENCH_INDEX_MILVUS", raising=False)
    monkeypatch.delenv("RECALLBENCH_INDEX_MILVUS_FLAT", raising=False)
    default = get_system("milvus").configuration()
    assert default["index"] == {
        "field": "vector",
        "index_type": "AUTOINDEX",
        "metric_type": "COSINE",
        "params": {},
    }
    assert default["options"] == {"index_type": "AUTOINDEX"}
    assert default["options_variable"] == "RECALLBENCH_INDEX_MILVUS"
    assert default["implementation_version"] == "3.0.2"
    assert "milvus-lite 2.5.1" in default["server"]
    flat = get_system("milvus-flat").configuration()
    assert flat["index"]["index_type"] == "FLAT" and flat["exact"].startswith("yes")


def test_options_set_the_index_and_are_refused_in_one_line_when_wrong(monkeypatch) -> None:
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=ivf_flat, nprobe=16")
    config = get_system("milvus").configuration()
    assert config["options"] == {"index_type": "IVF_FLAT", "nlist": 128, "nprobe": 16}
    assert config["index"]["params"] == {"nlist": 128}  # Milvus's default nlist
    assert config["search_params"] == {"nprobe": 16}
    for given, says in [
        ("index_type=HNSW", "one of FLAT, IVF_FLAT, AUTOINDEX"),
        ("M=16", "is not KEY=VALUE with KEY one of index_type, nlist, nprobe"),
        ("nprobe", "is not KEY=VALUE"),
        ("index_type=IVF_FLAT,nlist=0", "between 1 and 65536"),
        ("nprobe=8", "nprobe applies to IVF_FLAT only, not AUTOINDEX"),
    ]:
        monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", given)
        with pytest.raises(RecallbenchError) as refused:
            get_system("milvus")
        assert says in str(refused.value) and "RECALLBENCH_INDEX_MILVUS" in str(refused.value)
        assert "\n" not in str(refused.value)


def test_a_store_built_under_other_options_is_refused_when_reopened(
    monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nlist=4")
    system = get_system("milvus")
    store = system.open_store(tmp_path / "s")
    store.ingest([StoreRecord("a", "x", "alpha"), StoreRecord("b", "y", "beta")])
    assert store._client.describe_index("memories", "vector")["nlist"] == "4"  # Milvus's own
    package = tmp_path / "package"
    system.clone.snapshot(store, package)
    assert milvus_servers(tmp_path / "s")  # the store's server runs while it is open
    store.close()
    assert milvus_servers(tmp_path / "s") == []  # and close stops it, there and then
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nlist=4,nprobe=2")
    other = get_system("milvus")
    with pytest.raises(RecallbenchError, match="was built with options"):
        other.attach(tmp_path / "s")
    with pytest.raises(RecallbenchError, match="was built with options"):
        other.clone.restore(package, tmp_path / "restored")
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nlist=4")
    again = get_system("milvus").attach(tmp_path / "s")
    assert again.count() == 2
    again.close()


def test_a_store_whose_index_is_not_the_recorded_one_is_refused_when_opened(
    monkeypatch, tmp_path: Path
) -> None:
    """The index is read back from Milvus (`describe_index`: type, metric and nlist) when a
    store opens, not taken from its marker: a store whose marker says nlist 8 (an older
    marker, or an edited one) but whose index Milvus built with nlist 4 is refused in one
    line naming both."""
    from recallbench.systems.adapters import MARKER

    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nlist=4")
    store = get_system("milvus").open_store(tmp_path / "s")
    store.ingest([StoreRecord("a", "x", "alpha")])
    store.close()
    marker = tmp_path / "s" / MARKER
    held = orjson.loads(marker.read_bytes())
    held["options"]["nlist"] = 8
    marker.write_bytes(orjson.dumps(held))
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nlist=8")
    with pytest.raises(RecallbenchError) as refused:
        get_system("milvus").attach(tmp_path / "s")
    message = str(refused.value)
    assert "\n" not in message
    assert "Milvus holds the index index_type IVF_FLAT, metric_type COSINE, nlist 4" in message
    assert "records index_type IVF_FLAT, metric_type COSINE, nlist 8" in message
    assert milvus_servers(tmp_path / "s") == []  # refused, and its server stopped


HOLD = """
import sys, time
from pathlib import Path
from recallbench.systems import get_system
store = get_system("milvus").open_store(Path(sys.argv[1]))
print("open", flush=True)
time.sleep(600)
"""


def test_a_server_that_does_not_start_is_one_line_with_milvus_lites_reason(
    tmp_path: Path,
) -> None:
    """Another process holds the store (Milvus Lite takes one): opening it here is one line
    with what Milvus Lite said, nothing else on the terminal."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "s")], stdout=subprocess.PIPE, env=env
    )
    try:
        assert holder.stdout.readline() == b"open\n"
        with pytest.raises(RecallbenchError) as refused:
            get_system("milvus").attach(tmp_path / "s")
    finally:
        holder.kill()
        holder.wait()
    message = str(refused.value)
    assert "Milvus Lite did not start" in message and "\n" not in message
    assert "opened by another program" in message


# --------------------------------------------------------------------------- the fixtures


def cli(build: Path, *args: str | Path) -> Result:
    result = CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """hydrate + query of minilm, milvus-flat and milvus on the fixtures, one prep cache."""
    root = tmp_path_factory.mktemp("milvus-fixtures")
    cli(root / "base", "validate")
    cli(root / "base", "prep", "--cache", root / "cache", "--system", "minilm")
    out: dict[str, Any] = {"root": root}
    for system in ("minilm", "milvus-flat", "milvus"):
        build = root / system
        shutil.copytree(root / "base", build)
        cli(build, "hydrate", "--system", system, "--cache", root / "cache")
        cli(build, "query", "--cache", root / "cache", "--top-k", "20")
        out[system] = orjson.loads((build / "runs.json").read_bytes())["data"]
    return out


def assert_ranks_as_minilm(exact: dict[str, Any], other: dict[str, Any]) -> None:
    """The same hits for every query, each score within SCORE_TOLERANCE of minilm's at the same
    rank. Two ids may trade places only when their scores are that close (a near-tie; at the
    last rank, a tied memory past minilm's cut-off); every hit scoring clearly above the
    last one is in both lists."""
    assert len(exact["queries"]) == len(other["queries"]) > 0
    for a, b in zip(exact["queries"], other["queries"], strict=True):
        assert a["query_id"] == b["query_id"]
        assert len(a["hits"]) == len(b["hits"]) > 0
        last = a["hits"][-1]["score"]
        scores = {h["memory_id"]: h["score"] for h in a["hits"]}
        for x, y in zip(a["hits"], b["hits"], strict=True):
            assert abs(x["score"] - y["score"]) <= SCORE_TOLERANCE, (a["query_id"], x, y)
            if x["memory_id"] != y["memory_id"]:
                theirs = scores.get(y["memory_id"], last)  # past the cut-off: tied with the last
                assert abs(theirs - x["score"]) <= SCORE_TOLERANCE, (a["query_id"], x, y)
        clearly_in = {h["memory_id"] for h in a["hits"] if h["score"] > last + SCORE_TOLERANCE}
        assert clearly_in <= {h["memory_id"] for h in b["hits"]}, a["query_id"]


def test_flat_ranks_as_minilm_on_the_fixtures(fixture_runs: dict[str, Any]) -> None:
    assert_ranks_as_minilm(fixture_runs["minilm"], fixture_runs["milvus-flat"])


def test_the_default_index_ranks_as_minilm_on_the_fixtures(fixture_runs: dict[str, Any]) -> None:
    """AUTOINDEX is approximate by kind; Milvus Lite 2.5.1 searches 80 memories exhaustively."""
    assert_ranks_as_minilm(fixture_runs["minilm"], fixture_runs["milvus"])


@pytest.mark.parametrize("system", ["milvus", "mem0-qdrant"])
def test_two_workers_give_the_same_results_though_a_store_takes_one_process(
    fixture_runs: dict[str, Any], system: str
) -> None:
    """Milvus Lite and Qdrant local lock a store to one process: with two workers and one
    scope, query and the round trip must not search one store from both (they do for
    stores several processes may open), and the results are the same as with one."""
    root = fixture_runs["root"]
    runs = {}
    for workers in ("1", "2"):
        build = root / f"{system}-w{workers}"
        shutil.copytree(root / "base", build)
        options = ("--cache", root / "cache", "--workers", workers)
        cli(build, "hydrate", "--system", system, *options)
        cli(build, "query", *options, "--top-k", "20")
        cli(build, "snapshot-roundtrip", *options)
        runs[workers] = orjson.loads((build / "runs.json").read_bytes())["data"]
        equivalence = orjson.loads((build / "roundtrip.json").read_bytes())["data"]["equivalence"]
        assert equivalence["numerator"] == equivalence["denominator"] > 0
    assert runs["2"] == runs["1"]


# --------------------------------------------------------------------------- the server's end


def milvus_servers(under: Path) -> list[int]:
    """Pids of Milvus Lite servers whose data file is under `under`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"milvus_lite/lib/milvus")
            and any(str(under).encode() in a for a in argv[1:])
        ):
            found.append(int(entry.name))
    return found


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def gone_within(under: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while milvus_servers(under):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize(
    ("signum", "codes"),
    [
        (signal.SIGTERM, {143}),
        (signal.SIGHUP, {129}),
        (signal.SIGINT, {130}),
        (signal.SIGKILL, {-signal.SIGKILL}),
    ],
    ids=["sigterm", "sighup", "ctrl-c", "killed"],
)
def test_a_run_ended_while_milvus_serves_leaves_no_server(
    tmp_path: Path, signum: int, codes: set[int], fixture_runs: dict[str, Any]
) -> None:
    """hydrate is signalled once its store's Milvus Lite server is up (seen while the run is
    stopped, so the signal lands during the work); afterwards no server of its build is left
    (SIGKILL included: the server stops when the lock its parent held is released). The
    vectors come from the module's prep cache: what is signalled is the server, not a model
    load."""
    build = tmp_path / "build"
    cli(build, "validate")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build), "-q", "hydrate"]
        + ["--system", "milvus", "--cache", str(fixture_runs["root"] / "cache")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=default_signals,
    )
    signal_when(proc, lambda pid: bool(milvus_servers(build)), signum)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in codes, err.decode()[-2000:]
    assert b"Traceback" not in err
    assert gone_within(build, 60), f"Milvus Lite servers left: {milvus_servers(build)}"


def test_query_refuses_options_other_than_hydrates(monkeypatch, tmp_path: Path) -> None:
    """Transient stores (a dataset of many scopes) are built by query: under other options
    than hydrate recorded, the result would name hydrate's, so query refuses in one line."""
    from recallbench.datasets.longmemeval.generator import generate

    data = tmp_path / "lme.json"
    generate(data, shape="s", questions=2, seed=3, sessions_per_question=2, session_chars=120)
    build = tmp_path / "build"
    cli(build, "validate", "--dataset", "longmemeval", "--data", data)
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT")
    cli(build, "hydrate", "--system", "milvus")
    hydrate = orjson.loads((build / "hydrate.json").read_bytes())["data"]
    assert hydrate["mode"] == "transient"
    assert hydrate["configuration"]["options"] == {
        "index_type": "IVF_FLAT",
        "nlist": 128,
        "nprobe": 8,
    }
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT,nprobe=1")
    result = CliRunner().invoke(main, ["--build-dir", str(build), "-q", "query"])
    assert result.exit_code == 1, result.output
    assert "hydrate ran with options" in result.output and "Traceback" not in result.output
    monkeypatch.setenv("RECALLBENCH_INDEX_MILVUS", "index_type=IVF_FLAT")
    cli(build, "query")


def test_a_worker_killed_while_its_milvus_serves_leaves_no_server(tmp_path: Path) -> None:
    """hydrate on two workers (a generated LongMemEval file: one store per question); the
    worker whose store's server is up is killed (SIGKILL): the run fails in one line, and
    no server of its build is left."""
    from recallbench.datasets.longmemeval.generator import generate

    data = tmp_path / "lme.json"
    generate(data, shape="s", questions=4, seed=5, sessions_per_question=3, session_chars=120)
    build = tmp_path / "build"
    cli(build, "validate", "--dataset", "longmemeval", "--data", data)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build), "-q", "hydrate"]
        + ["--system", "milvus", "--keep-stores", "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=default_signals,
    )
    deadline = time.monotonic() + 300
    worker = None
    while worker is None:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        for server in milvus_servers(build):
            parent = parent_of(server)  # the worker whose store it serves
            if parent is not None and parent != proc.pid and parent_of(parent) == proc.pid:
                worker = parent
        time.sleep(0.01)
    os.kill(worker, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err.decode()[-2000:]
    assert b"Traceback" not in err and b"worker" in err
    assert gone_within(build, 60), f"Milvus Lite servers left: {milvus_servers(build)}"
