"""The stores on PostgreSQL + pgvector: the server recallbench starts for each store, and
what the stores on it give.

* The server stops on every exit path: a run killed by SIGKILL, SIGTERM, SIGHUP or SIGINT, and
  a killed worker, leave no server process (each signal sent at a moment the test saw a
  server running, tests/signalling.py).
* Nothing outside the build directory changes: no user or group is added, no directory
  above the store changes its mode, HOME and TMPDIR stay as they were (a long build path
  puts the socket in a temporary directory, removed when the server stops).
* A server that does not start is one line with its log's last line.
* The exact variants (`llamaindex-pgvector`, `langgraph-postgres` with `kind=flat`) rank as
  `minilm` does on the fixtures, scores within float tolerance; the HNSW ones return k hits
  at top-k above `hnsw.ef_search`.
* Index options: defaults as pgvector ships them, set through `RECALLBENCH_INDEX_<SYSTEM>`,
  recorded in the configuration; a bad one is one line naming the variable.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from conftest import CORPUS, QUERIES
from signalling import default_signals, signal_when

from recallbench.cli.main import main
from recallbench.core.errors import RecallbenchError
from recallbench.systems.registry import describe_systems

PG_SYSTEMS = (
    "langgraph-postgres",
    "llamaindex-pgvector",
    "llamaindex-pgvector-hnsw",
    "mem0-pgvector",
)
#: seconds the kernel may take to end a killed server's processes: a bound, not a measure
GONE_TIMEOUT = 120.0

pytestmark = pytest.mark.skipif(
    not all(r["available"] for r in describe_systems() if r["name"] in PG_SYSTEMS),
    reason="the postgres extra is not installed",
)


def cli(build: Path, *args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


# --------------------------------------------------------------------------- processes


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        return "(zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def servers_under(root: Path) -> list[int]:
    """Pids of every server process for a data directory under `root`: the processes whose
    command line names it (unshare, postmaster) and all their descendants (the backends)."""
    mark = str(root).encode()
    pids = _pids()
    found = {p for p in pids if mark in _cmdline(p) and b"postgres" in _cmdline(p)}
    grew = True
    while grew:
        more = {p for p in pids if _parent(p) in found} - found
        found |= more
        grew = bool(more)
    return sorted(p for p in found if _alive(p))


def postmasters_under(root: Path) -> list[int]:
    mark = str(root).encode()
    return [p for p in _pids() if _cmdline(p).startswith(b"/") and mark in _cmdline(p)
            and b"/bin/postgres\0" in _cmdline(p) and _alive(p)]  # fmt: skip


def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "server processes outlived the run"


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROGRESS": "1", "TMPDIR": str(tmp)}
    env.pop("RECALLBENCH_BUILD_DIR", None)
    return env


def _run(build: Path, system: str, *extra: str | Path) -> list[str]:
    return [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build), "run",
            "--corpus", str(CORPUS), "--queries", str(QUERIES), "--system", system,
            *map(str, extra)]  # fmt: skip


@pytest.fixture(scope="module")
def kill_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """minilm's vector caches (one per dataset), made once, for the fixtures and a small generated
    LongMemEval file: the killed runs read their vectors from them instead of loading the
    model in every run (what is killed is the store's server, not the embedding)."""
    from recallbench.datasets.longmemeval.generator import generate

    root = tmp_path_factory.mktemp("pg-kill")
    cli(root / "b-fixtures", "validate", "--corpus", CORPUS, "--queries", QUERIES)
    cli(root / "b-fixtures", "prep", "--cache", root / "cache-fixtures", "--system", "minilm")
    data = root / "lme.json"
    generate(data, shape="s", questions=4, seed=3, sessions_per_question=3, session_chars=120)
    cli(root / "b-lme", "validate", "--dataset", "longmemeval", "--data", data)
    cli(root / "b-lme", "prep", "--cache", root / "cache-lme", "--system", "minilm")
    return {"fixtures": root / "cache-fixtures", "lme": data, "lme_cache": root / "cache-lme"}


@pytest.mark.parametrize(
    # SIGHUP takes SIGTERM's path (`signals.HungUp` is a `Terminated`): its exit code, 129,
    # is checked in test_reliability_stores.py, and with a server in test_milvus_store.py
    "signum",
    [signal.SIGKILL, signal.SIGTERM, signal.SIGINT],
    ids=lambda s: s.name,
)
def test_a_killed_run_leaves_no_server_process(
    tmp_path: Path, signum: signal.Signals, kill_data: dict[str, Path]
) -> None:
    build = tmp_path / "build"
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen(
        _run(build, "llamaindex-pgvector", "--cache", kill_data["fixtures"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path / "tmp"),
        preexec_fn=default_signals,
    )
    seen: list[int] = []

    def serving(pid: int) -> bool:
        seen[:] = servers_under(build)
        return bool(postmasters_under(build)) and len(seen) >= 3  # postmaster and backends

    try:
        signal_when(proc, serving, signum)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    expected = {signal.SIGKILL: -9, signal.SIGTERM: 143, signal.SIGINT: 130}
    assert proc.returncode == expected[signum], err
    if signum != signal.SIGKILL:
        assert "Traceback" not in err, err
    assert_all_gone(seen)
    assert servers_under(build) == []


def _two_worker_run(build: Path, tmp: Path, kill_data: dict[str, Path]) -> subprocess.Popen:
    """`run` of `llamaindex-pgvector` with two workers on the generated LongMemEval file (one
    store, so one server, per question), TMPDIR `tmp`, started as a shell would start it."""
    args = [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build), "run",
            "--dataset", "longmemeval", "--data", str(kill_data["lme"]),
            "--system", "llamaindex-pgvector", "--workers", "2",
            "--cache", str(kill_data["lme_cache"])]  # fmt: skip
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp),
        preexec_fn=default_signals,
    )


def test_a_killed_worker_leaves_no_server_process(
    tmp_path: Path, kill_data: dict[str, Path]
) -> None:
    """Two workers on a generated LongMemEval file (one store per question): the first worker
    seen serving a store is killed (SIGKILL); the run fails in one line, and neither that
    worker's server nor any other is left."""
    build = tmp_path / "build"
    (tmp_path / "tmp").mkdir()
    proc = _two_worker_run(build, tmp_path / "tmp", kill_data)
    victim: list[int] = []
    seen: list[int] = []

    def a_worker_serving(pid: int) -> bool:
        for postmaster in postmasters_under(build):
            unshare = _parent(postmaster)
            worker = _parent(unshare)
            if _parent(worker) == pid:
                victim[:] = [worker]
                seen[:] = servers_under(build)
                return True
        return False

    try:
        deadline = time.monotonic() + 600
        while not victim and proc.poll() is None and time.monotonic() < deadline:
            a_worker_serving(proc.pid)
            time.sleep(0.02)
        assert victim, "no worker was seen serving a store"
        os.kill(victim[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "killed by SIGKILL" in err, err
    assert "Traceback" not in err, err
    assert_all_gone(seen)
    assert servers_under(build) == []


# --------------------------------------------------------------------------- no outside writes


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and mtime, but the process's own torch
    compile cache (made when the embedder is first imported, removed at the process's
    exit: `embedding.torch_cache_in_scratch`)."""
    from recallbench.core.embedding import TORCH_SCRATCH_PREFIX

    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(TORCH_SCRATCH_PREFIX)]
        for name in dirnames + filenames:
            st = (Path(dirpath) / name).lstat()
            out[str((Path(dirpath) / name).relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def _system_files() -> dict[str, str]:
    out = {}
    for name in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
        path = Path(name)
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""
    return out


def _ancestor_modes(path: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for parent in [path, *path.parents]:
        st = parent.stat()
        out[str(parent)] = (st.st_mode, st.st_uid, st.st_gid)
    return out


@pytest.fixture
def short() -> Iterator[Path]:
    """A directory with a short path (under /tmp), removed afterwards: pytest's own
    temporary paths, longer under xdist (`popen-gw1/`), can leave no room for a socket in
    them, and a test of where a socket goes must not depend on how it was started."""
    made = Path(tempfile.mkdtemp(prefix="rbt-", dir="/tmp"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def sandbox(tmp_path: Path, short: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    box = {"cwd": tmp_path / "cwd", "tmp": short, "home": tmp_path / "home"}
    for d in (box["cwd"], box["home"]):
        d.mkdir()
    monkeypatch.setenv("TMPDIR", str(box["tmp"]))
    monkeypatch.setenv("HOME", str(box["home"]))
    monkeypatch.setattr(tempfile, "tempdir", str(box["tmp"]))
    monkeypatch.chdir(box["cwd"])
    return box


def _exercise(name: str, build: Path) -> None:
    """A store through its API: add, search, close, attach, its clone path."""
    from recallbench.systems import get_system
    from recallbench.systems.base import StoreRecord

    system = get_system(name)
    store = system.open_store(build / "stores" / "s")
    store.ingest(
        [
            StoreRecord(f"m{i}", "acme", text)
            for i, text in enumerate(["Backups are kept for ninety days.", "Trains over planes."])
        ]
    )
    assert [h.memory_id for h in store.search("backup retention", 2)] == ["m0", "m1"]
    system.clone.snapshot(store, build / "package")
    store.close()
    system.clone.verify(build / "package", build / "work")
    system.clone.restore(build / "package", build / "restored").close()
    system.attach(build / "stores" / "s").close()


@pytest.mark.parametrize("name", PG_SYSTEMS)
def test_the_postgres_stores_write_only_into_the_build_dir(
    sandbox: dict[str, Path], name: str
) -> None:
    from recallbench.systems import get_system

    get_system(name).embedder.embed_texts(["warm the model up before the listing"])
    build = sandbox["cwd"] / "build"
    before = {k: _listing(v) for k, v in sandbox.items()}
    files, modes = _system_files(), _ancestor_modes(sandbox["cwd"])
    _exercise(name, Path("build"))
    after = {k: _listing(v) for k, v in sandbox.items()}
    new = set(after["cwd"]) - set(before["cwd"])
    assert new and all(p == "build" or p.startswith("build" + os.sep) for p in new)
    assert after["home"] == before["home"] == {}
    assert after["tmp"] == before["tmp"]
    assert _system_files() == files  # no user, no group added
    assert _ancestor_modes(sandbox["cwd"]) == modes  # no directory above opened up
    assert servers_under(build) == []


def test_a_long_build_path_puts_the_socket_in_a_temporary_directory(
    sandbox: dict[str, Path],
) -> None:
    deep = Path("build") / ("d" * 60) / ("e" * 60)
    before = _listing(sandbox["tmp"])
    _exercise("langgraph-postgres", deep)
    assert not (deep / "stores" / "s" / "pg" / "sock").exists()
    assert _listing(sandbox["tmp"]) == before == {}  # made, then removed on every stop
    assert servers_under(sandbox["cwd"]) == []


# --------------------------------------------------------------------------- the server


def test_a_server_that_does_not_start_is_one_line_with_its_logs_cause(tmp_path: Path) -> None:
    from recallbench.systems.postgres_server import PostgresServer

    server = PostgresServer(tmp_path / "pg")
    server.start()
    server.stop()
    (server.data / "postgresql.conf").write_text("this is not a setting\n")
    with pytest.raises(RecallbenchError) as caught:
        PostgresServer(tmp_path / "pg").start()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"PostgreSQL server in {tmp_path / 'pg'} did not start: FATAL: ")
    log = (tmp_path / "pg" / "server.log").read_text()
    fatal = [line for line in log.splitlines() if " FATAL: " in line]
    assert message.endswith(" ".join(fatal[-1].split(" FATAL: ", 1)[1].split()))
    assert "postgresql.conf" in message
    assert servers_under(tmp_path) == []


def test_the_server_has_no_tcp_port_and_is_not_root(tmp_path: Path) -> None:
    import psycopg

    from recallbench.systems.postgres_server import PostgresServer

    with PostgresServer(tmp_path / "pg") as server:
        server.ensure_database()
        with psycopg.connect(server.conninfo()) as conn:
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")\
                .fetchone() == ("0.6.2",)  # fmt: skip
        postmaster = postmasters_under(tmp_path)[0]
        uid = Path(f"/proc/{postmaster}/status").read_text().split("Uid:")[1].split()[0]
        # seen from outside: the caller's uid (the user namespace maps it to 1000 inside)
        assert int(uid) == os.geteuid()
        if os.geteuid() == 0:
            inside = Path(f"/proc/{postmaster}/uid_map").read_text().split()
            assert inside[:2] == ["1000", "0"]
    assert servers_under(tmp_path) == []


# --------------------------------------------------------------------------- rankings


def _ranked(data: dict[str, Any]) -> dict[str, list[tuple[float, str]]]:
    """query -> (score, id) in rank order."""
    return {
        q["query_id"]: [(h["score"], h["memory_id"]) for h in q["hits"]] for q in data["queries"]
    }


def _same_up_to_ties(a: list[tuple[float, str]], b: list[tuple[float, str]]) -> bool:
    """The same ids and scores (within 1e-5) in the same order, up to the order within ties."""
    if len(a) != len(b):
        return False
    if any(abs(x[0] - y[0]) > 1e-5 for x, y in zip(a, b, strict=True)):
        return False
    key = [round(s, 4) for s, _ in a]
    groups_a: dict[float, set[str]] = {}
    groups_b: dict[float, set[str]] = {}
    for k, (_, i), (_, j) in zip(key, a, b, strict=True):
        groups_a.setdefault(k, set()).add(i)
        groups_b.setdefault(k, set()).add(j)
    return groups_a == groups_b


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("pg-rankings")
    cli(root / "base", "validate")
    cli(root / "base", "prep", "--cache", root / "cache", "--system", "minilm")

    def run(system: str, top_k: int, **env: str) -> dict[str, Any]:
        build = root / f"{system}-{top_k}-{len(list(root.iterdir()))}"
        shutil.copytree(root / "base", build)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            cli(build, "hydrate", "--system", system, "--cache", root / "cache")
            cli(build, "query", "--cache", root / "cache", "--top-k", str(top_k))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        data = orjson.loads((build / "runs.json").read_bytes())["data"]
        hydrated = orjson.loads((build / "hydrate.json").read_bytes())["data"]
        return {**data, "configuration": hydrated["configuration"]}

    return run


@pytest.mark.parametrize(
    ("system", "env"),
    [
        ("llamaindex-pgvector", {}),
        ("langgraph-postgres", {"RECALLBENCH_INDEX_LANGGRAPH_POSTGRES": "kind=flat"}),
    ],
)
def test_the_exact_variants_rank_as_minilm_does(staged: Any, system: str, env: dict) -> None:
    exact = _ranked(staged("minilm", 10))
    theirs = _ranked(staged(system, 10, **env))
    assert theirs.keys() == exact.keys()
    differ = [q for q in exact if not _same_up_to_ties(theirs[q], exact[q])]
    assert differ == []


@pytest.mark.parametrize(
    "system", ["langgraph-postgres", "llamaindex-pgvector-hnsw", "mem0-pgvector"]
)
def test_hnsw_returns_k_hits_above_ef_search(staged: Any, system: str) -> None:
    """top-k 100 over the 80 fixture memories: every query gets all 80 (pgvector 0.6.2 alone
    returns about ef_search = 40 when the planner takes the index); the configuration
    records the rule."""
    data = staged(system, 100)
    assert {len(q["hits"]) for q in data["queries"]} == {80}
    assert "max(ef_search, top_k)" in data["configuration"]["ef_search_for_search"]


# --------------------------------------------------------------------------- options


def test_index_options_default_to_pgvectors_and_are_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from recallbench.systems import get_system

    config = get_system("llamaindex-pgvector-hnsw").configuration()
    assert config["index_options"] == {"m": 16, "ef_construction": 64, "ef_search": 40}
    assert config["vector_store"]["hnsw_kwargs"]["hnsw_m"] == 16
    monkeypatch.setenv("RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW", "m=8, ef_search=100")
    config = get_system("llamaindex-pgvector-hnsw").configuration()
    assert config["index_options"] == {"m": 8, "ef_construction": 64, "ef_search": 100}
    assert config["vector_store"]["hnsw_kwargs"]["hnsw_ef_search"] == 100
    assert get_system("mem0-pgvector").configuration()["index_options"] == {
        "hnsw": True, "ef_search": 40}  # fmt: skip
    assert get_system("langgraph-postgres").configuration()["index"]["ann_index_config"] == {
        "kind": "hnsw", "m": 16, "ef_construction": 64}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("m=0", "m='0' is not a positive integer"),
        ("m=x", "m='x' is not a positive integer"),
        ("depth=3", "'depth=3': unknown (keys: ef_construction, ef_search, m)"),
        ("m=4,m=5", "'m=5': given twice (keys: ef_construction, ef_search, m)"),
        ("m", "'m': not KEY=VALUE (keys: ef_construction, ef_search, m)"),
    ],
)
def test_a_bad_index_option_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    from recallbench.systems import get_system

    monkeypatch.setenv("RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW", value)
    with pytest.raises(RecallbenchError) as caught:
        get_system("llamaindex-pgvector-hnsw")
    assert str(caught.value) == f"RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW: {says}"


def test_a_package_made_with_other_index_options_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recallbench.systems import get_system
    from recallbench.systems.base import SnapshotRejected, StoreRecord

    system = get_system("llamaindex-pgvector-hnsw")
    store = system.open_store(tmp_path / "s")
    store.ingest([StoreRecord("m0", "acme", "Backups are kept for ninety days.")])
    system.clone.snapshot(store, tmp_path / "package")
    store.close()
    monkeypatch.setenv("RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW", "m=8")
    with pytest.raises(SnapshotRejected) as caught:
        get_system("llamaindex-pgvector-hnsw").clone.verify(tmp_path / "package", tmp_path / "w")
    assert caught.value.reason == "index_mismatch"


# --------------------------------------------------------------------------- compare


def test_compare_over_the_postgres_stores_on_a_generated_longmemeval_file(tmp_path: Path) -> None:
    """bm25, minilm and stores on PostgreSQL side by side on conversational data (one store,
    so one server, per question), with its round trip through pg_dump / pg_restore: mem0's
    and LangGraph's (the LlamaIndex stores run through every stage in the docs figures'
    compare, test_stores_figures_servers.py, and in the contract tests)."""
    from recallbench.datasets.longmemeval.generator import generate

    data = tmp_path / "lme.json"
    generate(data, shape="s", questions=2, seed=3, sessions_per_question=4, session_chars=200)
    out = tmp_path / "compare.json"
    systems = ("bm25", "minilm", "langgraph-postgres", "mem0-pgvector")
    args: list[str | Path] = ["compare", "--dataset", "longmemeval", "--data", data,
                              "--resamples", "200"]  # fmt: skip
    for name in systems:
        args += ["--system", name]
    result = cli(tmp_path / "build", *args, "--output", out, "--report", tmp_path / "c.md")
    assert "Traceback" not in result.output
    doc = orjson.loads(out.read_bytes())
    assert [s["label"] for s in doc["systems"]] == list(systems)
    for c in doc["comparisons"]:
        assert any(m["overall"]["queries"] > 0 for m in c["metrics"].values()), c["challenger"]
    assert servers_under(tmp_path) == []


# --------------------------------------------------------------------------- round five
# (docs/reliability.md, "Round five: deployed stores")


def _vector(text: str) -> list[float]:
    """A unit vector drawn from the text's hash: a store fed these never loads a model."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    values = [((seed >> (i % 60)) & 0xFF) - 127.5 + i % 7 for i in range(384)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def _two_memories(store: Any) -> None:
    from recallbench.systems.base import StoreRecord

    store.ingest([StoreRecord("a", "x", "alpha"), StoreRecord("b", "y", "beta")])


def test_an_index_the_database_refused_is_one_line_not_a_scan_recorded_as_hnsw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pgvector refuses `m=1` (2 to 100); PGVectorStore only logs that, and its store is an
    exact scan. Read back from the database's catalog when the store opens, the missing
    index is one line: what the database holds, what was recorded, PostgreSQL's reason."""
    from recallbench.systems import get_system

    monkeypatch.setenv("RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW", "m=1")
    with pytest.raises(RecallbenchError) as refused:
        get_system("llamaindex-pgvector-hnsw").open_store(tmp_path / "s", vectors=_vector)
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        "llamaindex-pgvector-hnsw: the database holds no vector index (an exact scan) on "
        "data_memories, not the hnsw (vector_cosine_ops, ef_construction 64, m 1) its "
        "configuration records (RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW); PostgreSQL said: "
        'ERROR: value 1 out of bounds for option "m"'
    )
    assert servers_under(tmp_path) == []


def test_a_kept_store_is_refused_under_other_options_and_its_index_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Options are in every store's marker (as Milvus's are): an `ivfflat` store reopened
    under `kind=flat`, or under another `probes` or `ef_search`, is refused before its
    server starts (LangGraph's setup would leave the ivfflat index: its migration ran). And
    the index is read back whatever the marker says: a marker that names `flat` over a
    database holding the ivfflat index (an exact scan recorded, an approximate one run) is
    refused when the store opens."""
    from recallbench.systems import get_system
    from recallbench.systems.adapters import MARKER

    variable = "RECALLBENCH_INDEX_LANGGRAPH_POSTGRES"
    monkeypatch.setenv(variable, "kind=ivfflat")
    store = get_system("langgraph-postgres").open_store(tmp_path / "s", vectors=_vector)
    _two_memories(store)
    store.close()
    for other in ("kind=flat", "kind=ivfflat,probes=2", "kind=ivfflat,ef_search=100"):
        monkeypatch.setenv(variable, other)
        with pytest.raises(RecallbenchError, match="was built with options"):
            get_system("langgraph-postgres").attach(tmp_path / "s", vectors=_vector)
    marker = tmp_path / "s" / MARKER
    held = orjson.loads(marker.read_bytes())
    held["options"]["kind"] = "flat"
    marker.write_bytes(orjson.dumps(held))
    monkeypatch.setenv(variable, "kind=flat")
    with pytest.raises(RecallbenchError) as refused:
        get_system("langgraph-postgres").attach(tmp_path / "s", vectors=_vector)
    assert str(refused.value) == (
        "langgraph-postgres: the database holds ivfflat (vector_cosine_ops, lists 100) on "
        "store_vectors, not the no vector index (an exact scan) its configuration records "
        f"({variable})"
    )
    assert servers_under(tmp_path) == []


def test_query_and_the_round_trip_refuse_index_options_other_than_hydrates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stage check reads every store's options (`index_options` as well as Milvus's
    `options`): a PostgreSQL store's transient stores, built by query and rebuilt by the
    round trip, are refused under other options than hydrate recorded (no server starts)."""
    from recallbench.builddir.artifacts import envelope, inputs_of
    from recallbench.engine.tasks import check_same_options
    from recallbench.stages.roundtrip import run_roundtrip
    from recallbench.systems import get_system

    variable = "RECALLBENCH_INDEX_LANGGRAPH_POSTGRES"
    monkeypatch.setenv(variable, "kind=flat")
    hydrated = {"system": "langgraph-postgres",
                "configuration": get_system("langgraph-postgres").configuration()}  # fmt: skip
    check_same_options(hydrated, get_system("langgraph-postgres"))
    monkeypatch.setenv(variable, "kind=ivfflat")
    with pytest.raises(RecallbenchError) as refused:
        check_same_options(hydrated, get_system("langgraph-postgres"))
    assert str(refused.value).startswith(
        "langgraph-postgres: hydrate ran with options {'kind': 'flat', "
    )
    assert f"{variable} now gives {{'kind': 'ivfflat', " in str(refused.value)
    suite = envelope("suite", {}, {})
    hydrate = envelope("hydrate", hydrated, inputs_of(suite))
    runs = envelope("runs", {"scopes": []}, inputs_of(suite, hydrate))
    with pytest.raises(RecallbenchError, match="hydrate ran with options"):
        run_roundtrip(suite, hydrate, runs, Path("unused-build-dir"))
    assert not Path("unused-build-dir").exists()


def test_a_kept_store_of_another_system_is_refused_in_one_line(tmp_path: Path) -> None:
    """`llamaindex-pgvector-hnsw`'s store opened by `llamaindex-pgvector` (same records, so
    the same count and digest) is refused by its marker, before any server starts, with the
    command that rebuilds it."""
    from recallbench.systems import get_system
    from recallbench.systems.adapters import MARKER, claim

    claim(tmp_path / "s", "llamaindex-pgvector-hnsw", options=dict(m=16))
    with pytest.raises(RecallbenchError) as refused:
        get_system("llamaindex-pgvector").attach(tmp_path / "s", vectors=_vector)
    assert str(refused.value) == (
        f"{tmp_path / 's' / MARKER}: this store was made by 'llamaindex-pgvector-hnsw', not "
        "'llamaindex-pgvector': run `recallbench hydrate --system llamaindex-pgvector` again"
    )
    assert not (tmp_path / "s" / "pg").exists()


@pytest.mark.parametrize(
    "name", ["langgraph-postgres", "llamaindex-pgvector-hnsw", "mem0-pgvector"]
)
def test_hnsw_searches_deeper_than_pgvectors_ef_search_limit_are_clamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A search for 1,001 (a whole store of more than 1,000 memories, as query's search that
    explains a miss; or `--top-k` above 1000) sets `hnsw.ef_search` to pgvector's limit,
    1000, not above it (which pgvector refuses); the configuration records the clamp and
    the depth the index returns at most; an `ef_search` option above 1000 is one line."""
    from recallbench.systems import get_system

    system = get_system(name)
    config = system.configuration()
    assert config["ef_search_limit"] == config["search_depth_limit"] == 1000
    assert config["ef_search_for_search"].startswith("min(max(ef_search, top_k), 1000)")
    store = system.open_store(tmp_path / "s", vectors=_vector)
    try:
        _two_memories(store)
        assert sorted(h.memory_id for h in store.search("alpha", 1001)) == ["a", "b"]
    finally:
        store.close()
    variable = "RECALLBENCH_INDEX_" + name.upper().replace("-", "_")
    monkeypatch.setenv(variable, "ef_search=1001")
    with pytest.raises(RecallbenchError) as refused:
        get_system(name)
    assert str(refused.value) == (
        f"{variable}: ef_search=1001 is above pgvector's limit of 1000 (hnsw.ef_search)"
    )
    assert servers_under(tmp_path) == []


KILLED_SERVER = """
import sys, time
from recallbench.systems.postgres_server import PostgresServer
server = PostgresServer(sys.argv[1]).start()
server.ensure_database()
print("serving", flush=True)
time.sleep(600)
"""


def test_the_pid_file_of_a_server_killed_with_its_command_is_not_trusted(tmp_path: Path) -> None:
    """A command killed with SIGKILL while its server runs leaves `postmaster.pid` saying
    "ready"; the next start finds no process behind it, removes it and waits for its own
    server: the first connection is accepted (before, it was refused 9 times in 10)."""
    import psycopg

    from recallbench.systems.postgres_server import PostgresServer

    holder = subprocess.Popen(
        [sys.executable, "-c", KILLED_SERVER, str(tmp_path / "pg")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "serving"
        killed = servers_under(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "pg" / "data" / "postmaster.pid").read_text().splitlines()[7].strip() == (
        "ready"
    )
    with PostgresServer(tmp_path / "pg") as server, psycopg.connect(server.conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database").fetchone()[0] >= 3
    assert_all_gone(killed)
    assert servers_under(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "socket_inside"),
    [("a b&c+d%41e", True), ("x,y", False)],
    ids=["space-amp-plus-percent", "comma"],
)
def test_build_paths_a_connection_string_would_split_work(
    short: Path, name: str, socket_inside: bool
) -> None:
    """A store path with a space, `&`, `+` or `%41` reaches libpq and SQLAlchemy quoted
    (keyword values, a URL's percent-encoding: LlamaIndex's engine and psycopg connect to
    this store's socket); a comma, which postgres's `-k` and libpq's host split on with no
    escape, puts the socket in a temporary directory. The store adds, searches and dumps
    (pg_dump) either way."""
    from recallbench.systems import get_system

    tmp_path = short  # room for the socket inside the store, however pytest was started
    directory = tmp_path / name / "s"
    system = get_system("llamaindex-pgvector")
    store = system.open_store(directory, vectors=_vector)
    try:
        assert (store.server.socket_dir.parent == directory / "pg") is socket_inside
        _two_memories(store)
        assert [h.memory_id for h in store.search("alpha", 2)] == ["a", "b"]
        system.clone.snapshot(store, tmp_path / "package")
    finally:
        store.close()
    assert servers_under(tmp_path) == []


def test_a_data_directory_initdb_refuses_is_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    from recallbench.systems.postgres_server import PostgresServer

    with pytest.raises(RecallbenchError) as refused:
        PostgresServer(tmp_path / "new\nline" / "pg").start()
    data = tmp_path / "new\nline" / "pg" / "data"
    assert str(refused.value) == (
        f"PostgreSQL: {str(data)!r}: a data directory cannot hold '\\n' (initdb refuses it): "
        "use another build directory"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_socket_path_too_long_in_bytes_not_characters_moves_to_a_temporary_directory(
    sandbox: dict[str, Path],
) -> None:
    """The socket path's length is counted in bytes (Milvus's check is the same function,
    `adapters.fits_unix_socket`): a store path whose socket would be at most 107 characters
    but more than 107 bytes (each `é` is two) gets a socket in TMPDIR, removed when the
    server stops."""
    from recallbench.systems.postgres_server import SOCKET_FILE, PostgresServer

    base = sandbox["cwd"].resolve()
    room = 107 - len(str(base / "pg" / "sock" / SOCKET_FILE)) - 1
    directory = base / ("é" * room) / "pg"
    socket = directory / "sock" / SOCKET_FILE
    assert len(str(socket)) <= 107 < len(os.fsencode(socket))
    with PostgresServer(directory) as server:
        server.ensure_database()
        assert server.socket_dir is not None
        assert server.socket_dir.parent == sandbox["tmp"]
    assert not (directory / "sock").exists()
    assert _listing(sandbox["tmp"]) == {}
    assert servers_under(base) == []


FULL_DISK = """
import sys
from recallbench.core.errors import RecallbenchError
from recallbench.systems.postgres_server import PostgresServer
try:
    PostgresServer(sys.argv[1]).start()
except RecallbenchError as exc:
    print(exc)
"""


def test_a_full_disk_is_named_as_the_cause(tmp_path: Path) -> None:
    """initdb on a 3 MB tmpfs (mounted in a mount namespace of its own, so nothing outside
    sees it) fails writing its WAL: the line names that, not initdb's last line
    ("initdb: removing data directory")."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting a small tmpfs needs root and util-linux unshare")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = 'mount -t tmpfs -o size=3m tmpfs "$1" && exec "$2" -c "$3" "$1/pg"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
         str(disk), sys.executable, FULL_DISK],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        rf"PostgreSQL initdb failed in {re.escape(str(disk / 'pg'))}: FATAL: could not write "
        r'to file "pg_wal/xlogtemp\.\d+": No space left on device',
        done.stdout.strip(),
    ), done.stdout
    assert list(disk.iterdir()) == []  # the tmpfs is gone with its namespace


#: PostgreSQL's output when it failed, as captured here (pgserver 0.1.4's PostgreSQL 16.2)
CAPTURED_FAILURES = [
    (
        "running bootstrap script ... 2026-12-06 05:38:47.917 UTC [9] FATAL:  could not write "
        'to file "pg_wal/xlogtemp.9": No space left on device\n'
        "child process exited with exit code 1\n"
        'initdb: removing data directory "/tmp/s38/full/pg/data"\n',
        'FATAL: could not write to file "pg_wal/xlogtemp.9": No space left on device',
    ),
    (
        "2026-12-06 05:41:11.407 UTC [1] LOG:  database system is shut down\n"
        "2026-12-06 05:41:11.448 UTC [1] FATAL:  could not write lock file "
        '"postmaster.pid": No space left on device\n',
        'FATAL: could not write lock file "postmaster.pid": No space left on device',
    ),
    (
        "2026-12-06 05:38:30.243 UTC [1] LOG:  starting PostgreSQL 16.2 on x86_64-pc-linux-gnu\n"
        "2026-12-06 05:38:30.243 UTC [1] FATAL:  could not create lock file "
        '"/tmp/s38/paths/a/.s.PGSQL.5432.lock": No such file or directory\n'
        "2026-12-06 05:38:30.246 UTC [1] LOG:  database system is shut down\n",
        'FATAL: could not create lock file "/tmp/s38/paths/a/.s.PGSQL.5432.lock": No such '
        "file or directory",
    ),
    (
        'pg_restore: error: could not execute query: ERROR:  relation "t" already exists\n'
        "Command was: CREATE TABLE public.t (\n    x integer\n);\n\n\n",
        'ERROR: relation "t" already exists',
    ),
    ("LOG:  a line without a severity\nthe last line\n", "the last line"),
    ("", "(its log is empty)"),
]


@pytest.mark.parametrize(("said", "cause"), CAPTURED_FAILURES)
def test_the_cause_is_picked_from_postgresqls_output(said: str, cause: str) -> None:
    from recallbench.systems.postgres_server import cause_line

    assert cause_line(said) == cause


def test_sigterm_to_a_run_with_workers_leaves_no_socket_directory(
    tmp_path: Path, short: Path, kill_data: dict[str, Path]
) -> None:
    """A build path too long for a socket, two workers (one store per question, one server
    per worker), SIGTERM while a server runs: the workers are killed with their servers,
    and the temporary socket directories, made in TMPDIR (not /tmp), are removed by the
    parent as it exits (their makers are gone)."""
    build = tmp_path / ("d" * 60) / ("e" * 60) / "build"
    tmp = short  # a TMPDIR with room for a socket
    proc = _two_worker_run(build, tmp, kill_data)
    sockets: set[Path] = set()
    seen: list[int] = []

    def serving(pid: int) -> bool:
        for postmaster in postmasters_under(build):
            argv = _cmdline(postmaster).split(b"\0")
            sockets.add(Path(os.fsdecode(argv[argv.index(b"-k") + 1])))
        seen[:] = servers_under(build)
        return bool(sockets)

    try:
        signal_when(proc, serving, signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert {s.parent for s in sockets} == {tmp}  # in TMPDIR
    assert [s for s in sockets if s.exists()] == []
    assert [p.name for p in tmp.iterdir() if p.name.startswith("rb-pg-")] == []
    assert_all_gone(seen)
