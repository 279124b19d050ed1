"""Nothing is written outside the build directory and a temporary directory.

Each test runs with the current directory, TMPDIR (and `tempfile.tempdir`) and HOME pointed
at fresh, empty directories, and compares file listings with mtimes before and after.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import (
    BASELINE,
    CORPUS,
    QUERIES,
    ROOT,
    STAGE_OUTPUTS,
    cli,
    load_json,
    run_fixtures,
)

from recallbench.builddir.lock import LOCK_NAME
from recallbench.builddir.scopespool import SPOOL
from recallbench.commands.pipeline import write_run
from recallbench.report import REPORT_DATA_DIR
from recallbench.report.plots import REPORT_PLOTS_DIR

Listing = dict[str, tuple[int, int]]


def listing(root: Path) -> Listing:
    """relative path -> (size, mtime_ns) of every file and directory under `root`."""
    out: Listing = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns)
    return out


@dataclass
class Sandbox:
    cwd: Path
    tmp: Path
    home: Path

    def watched(self) -> dict[str, Listing]:
        return {
            "benchmarks": listing(ROOT / "benchmarks"),
            "home": listing(self.home),
            "tmp": listing(self.tmp),
            "cwd": listing(self.cwd),
        }


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tmp_path / "cwd", tmp_path / "tmp", tmp_path / "home")
    for d in (box.cwd, box.tmp, box.home):
        d.mkdir()
    monkeypatch.setenv("TMPDIR", str(box.tmp))
    monkeypatch.setenv("HOME", str(box.home))
    monkeypatch.delenv("RECALLBENCH_BUILD_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(box.tmp))
    monkeypatch.chdir(box.cwd)
    assert tempfile.gettempdir() == str(box.tmp)
    assert Path.home() == box.home
    return box


def test_in_process_chain_in_a_temporary_directory(sandbox: Sandbox) -> None:
    before = sandbox.watched()
    with tempfile.TemporaryDirectory(prefix="recallbench-") as work:
        assert Path(work).parent == sandbox.tmp
        out = run_fixtures(Path(work))
        inside = {p.relative_to(work).parts[0] for p in Path(work).rglob("*")}
        # the scope spool, the stores and the round trip went into the work dir, and
        # report.html's data files, staged there (not held in memory) until published or
        # `Run.close`; the artifacts themselves are returned, not written
        staged = {p for p in inside if p.startswith(".recallbench-")}
        assert inside - staged == {SPOOL, "stores", "roundtrip"} and len(staged) == 1
        files = [p.name for p in (Path(work) / staged.pop()).iterdir()]
        assert files and all(re.fullmatch(r"\d{4}\.js", name) for name in files)
        out.close()
        assert not [p for p in Path(work).iterdir() if p.name.startswith(".recallbench-")]
    assert out.result["roundtrip"]["equivalence"]["numerator"] == 57
    after = sandbox.watched()
    assert after["tmp"] == {}  # the TemporaryDirectory is gone and nothing else is left
    assert after == before


def test_in_process_chain_into_a_build_dir(sandbox: Sandbox) -> None:
    before = sandbox.watched()
    write_run(run_fixtures(Path("build")), Path("build"))
    after = sandbox.watched()
    assert set(after["cwd"]) - set(before["cwd"]) == {
        p for p in after["cwd"] if p == "build" or p.startswith("build" + os.sep)
    }
    assert {p.split(os.sep)[1] for p in after["cwd"] if os.sep in p} == {
        name for _, name in STAGE_OUTPUTS
    } | {SPOOL, "report.md", "report.html", REPORT_PLOTS_DIR, REPORT_DATA_DIR, "stores"} | {
        "roundtrip",
        "timings",
    }
    assert after["tmp"] == {}  # HotMem's spool stayed inside the build dir
    assert after["home"] == before["home"] == {}
    assert after["benchmarks"] == before["benchmarks"]


def test_cli_stages_write_only_into_the_build_dir(sandbox: Sandbox) -> None:
    before = sandbox.watched()
    build = Path("build")  # relative: resolved against the sandbox cwd
    assert cli(build, "validate", "--corpus", CORPUS, "--queries", QUERIES).exit_code == 0
    for stage, _ in STAGE_OUTPUTS[1:]:
        result = cli(build, stage)
        assert result.exit_code == 0, (stage, result.output)
    assert cli(build, "check-baseline", "--baseline", BASELINE).exit_code == 0
    assert cli(build, "export-trec").exit_code == 0
    after = sandbox.watched()
    new = set(after["cwd"]) - set(before["cwd"])
    assert new and all(p == "build" or p.startswith("build" + os.sep) for p in new)
    top = {p.split(os.sep)[1] for p in new if os.sep in p}
    assert top == {name for _, name in STAGE_OUTPUTS} | {
        SPOOL, "report.md", "report.html", REPORT_PLOTS_DIR, REPORT_DATA_DIR, "stores", "roundtrip",
        "timings", "run.trec", "qrels.trec", LOCK_NAME,
    }  # fmt: skip
    assert (Path("build") / LOCK_NAME).read_bytes() == b""  # released: no holder recorded
    assert not [p for p in new if p.endswith(".tmp")]  # every publish completed
    assert after["tmp"] == {}
    assert after["home"] == {}
    assert after["benchmarks"] == before["benchmarks"]


def test_script_leaves_tmpdir_empty_and_writes_only_its_outputs(sandbox: Sandbox) -> None:
    before = sandbox.watched()
    env = {
        **os.environ,
        "TMPDIR": str(sandbox.tmp),
        "HOME": str(sandbox.home),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "retrieval_eval.py"), "--output", "r.json",
         "--report", "r.md"],
        cwd=sandbox.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    after = sandbox.watched()
    # the report's plots go beside it, where its links point (and results.json lists them)
    plots = [p["file"] for p in load_json(sandbox.cwd / "r.json")["plots"]]
    assert plots and all(p.startswith(REPORT_PLOTS_DIR + "/") for p in plots)
    data = {p for p in after["cwd"] if p.startswith(REPORT_DATA_DIR + os.sep)}
    assert data and all(re.fullmatch(r"\d{4}\.js", os.path.basename(p)) for p in data)
    assert set(after["cwd"]) - data == {"r.json", "r.md", "r.html", REPORT_PLOTS_DIR} | {
        REPORT_DATA_DIR
    } | {os.path.join(*p.split("/")) for p in plots}
    assert after["tmp"] == {}
    assert after["home"] == {}
    assert after["benchmarks"] == before["benchmarks"]


def test_a_minilm_run_of_the_script_leaves_tmpdir_empty(sandbox: Sandbox) -> None:
    """Issue 38: `scripts/retrieval_eval.py --system minilm` left `$TMPDIR/torchinductor_root/`
    (torch's compile cache directory, made when sentence-transformers imports
    torch._dynamo). Torch's cache now lives in a directory of the run's own, removed at its
    end: TMPDIR is as it was, and so is everything else."""
    before = sandbox.watched()
    env = {
        **os.environ,
        "TMPDIR": str(sandbox.tmp),
        "HOME": str(sandbox.home),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NO_PROGRESS": "1",
    }
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # an earlier test's, or the caller's: not ours
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "retrieval_eval.py"), "--system", "minilm", "-q"],
        cwd=sandbox.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert sandbox.watched() == before


def test_failed_validation_writes_nothing_anywhere(sandbox: Sandbox) -> None:
    bad = sandbox.tmp.parent / "bad.jsonl"
    bad.write_text('{"memory_id": \n', encoding="utf-8")
    before = sandbox.watched()
    result = cli(Path("build"), "validate", "--corpus", bad, "--queries", QUERIES)
    assert result.exit_code == 1
    # not even the build directory and its lock, taken before reading anything: the
    # failed command made them, so it removed them (issue 26)
    assert sandbox.watched() == before


@pytest.mark.parametrize(
    "name",
    ["chroma", "txtai", "llamaindex", "langgraph", "langmem", "mem0", "mem0-qdrant", "milvus"],
)
def test_the_memory_stores_write_only_into_their_directory(sandbox: Sandbox, name: str) -> None:
    """Each store people run, through its own API (add, search, save, load, its clone
    path): no home or cache directory of its own, nothing in TMPDIR, nothing beside the
    build directory. Telemetry is off and the hubs offline, so nothing is fetched either."""
    from recallbench.systems import get_system
    from recallbench.systems.base import StoreRecord

    system = get_system(name)
    # the model loads first: torch leaves its inductor directory in TMPDIR when it loads,
    # which is torch's, not the store's
    system.embedder.embed_texts(["warm the model up before the listing"])
    before = sandbox.watched()
    build = Path("build")
    store = system.open_store(build / "stores" / "s")
    store.ingest(
        [
            StoreRecord(f"m{i}", "acme", text)
            for i, text in enumerate(["Backups are kept for ninety days.", "Trains over planes."])
        ]
    )
    assert store.search("backup retention", 2)
    system.clone.snapshot(store, build / "package")
    store.close()
    system.clone.verify(build / "package", build / "work")
    system.clone.restore(build / "package", build / "restored").close()
    system.attach(build / "stores" / "s").close()
    after = sandbox.watched()
    new = set(after["cwd"]) - set(before["cwd"])
    assert new and all(p == "build" or p.startswith("build" + os.sep) for p in new)
    assert after["home"] == before["home"] == {}
    assert after["tmp"] == before["tmp"]
    assert after["benchmarks"] == before["benchmarks"]
