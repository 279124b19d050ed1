"""Setup in two weights: `make eval` installs the core (the project and HotMem, no extras),
`make test`/`make setup` everything; the full stamp implies the core one; pip shows its own
progress. And the fixture pipeline that `make eval` runs imports nothing of the extras, in
the parent or in its workers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recallbench.systems.registry import BINARY, EXTRAS

ROOT = Path(__file__).resolve().parents[2]

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make_n(*args: str) -> list[str]:
    """The recipe lines `make -n` would run (nothing is run)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-f", str(ROOT / "Makefile"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line]


def stamped(venv: Path, *names: str) -> None:
    """A venv directory whose stamps are newer than every pyproject.toml."""
    venv.mkdir(parents=True, exist_ok=True)
    later = time.time() + 60
    for name in names:
        (venv / name).touch()
        os.utime(venv / name, (later, later))


@needs_make
def test_make_eval_on_a_fresh_venv_installs_the_core_only(tmp_path: Path) -> None:
    lines = make_n("eval", f"VENV={tmp_path / 'venv'}", f"BUILD={tmp_path / 'b'}")
    (install,) = installs(lines)
    assert install.endswith("pip install --disable-pip-version-check -e .")
    assert "torch" not in "\n".join(lines)
    assert "--quiet" not in install  # pip's own progress is shown
    assert any(line.startswith("touch ") and ".recallbench-core" in line for line in lines)


@needs_make
@pytest.mark.parametrize("target", ["setup", "test"])
def test_make_setup_and_test_install_everything(tmp_path: Path, target: str) -> None:
    venv = tmp_path / "venv"
    lines = make_n(target, f"VENV={venv}")
    # `make -n test` shows its recursive `make test-portable` too, which would install again
    # only if the first install had not made the stamp
    torch, everything, *again = installs(lines)
    assert again in ([], [torch, everything])
    assert "'torch==" in torch
    assert ".[dev,docs,semantic,ray," in everything and "-e examples/plugin-system" in everything
    assert not any("--quiet" in line for line in (torch, everything))
    touch = next(line for line in lines if line.startswith("touch "))
    assert f"{venv}/.recallbench-full" in touch and f"{venv}/.recallbench-core" in touch


@needs_make
def test_make_eval_after_the_full_setup_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stamped(venv, ".recallbench-full", ".recallbench-core")
    assert installs(make_n("eval", f"VENV={venv}", f"BUILD={tmp_path / 'b'}")) == []
    assert installs(make_n("test", f"VENV={venv}")) == []


@needs_make
def test_the_core_setup_does_not_stand_for_the_full_one(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stamped(venv, ".recallbench-core")
    assert installs(make_n("eval", f"VENV={venv}", f"BUILD={tmp_path / 'b'}")) == []
    torch, everything, *_ = installs(make_n("test", f"VENV={venv}"))
    assert "'torch==" in torch and "-e examples/plugin-system" in everything


#: the top-level modules of every optional extra (the registry's list), Ray's and the
#: example plugin's store: none belongs to the core install
EXTRA_MODULES = sorted(
    {m.split(".")[0] for modules, _ in EXTRAS.values() for m in modules if not m.startswith(BINARY)}
    | {"ray", "lancedb"}
)

#: installed first in every process (a sitecustomize on PYTHONPATH: spawned workers run it,
#: forked ones inherit the hook): the interpreter's "import" audit event fires when a module
#: is first loaded, so each extra module loaded anywhere is appended to $IMPORT_LOG
SITECUSTOMIZE = """
import os, sys
_WATCHED = set(os.environ["WATCHED_MODULES"].split(","))
_LOG = os.environ["IMPORT_LOG"]
def _hook(event, args):
    if event == "import" and args[0].split(".")[0] in _WATCHED:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {args[0]}\\n")
sys.addaudithook(_hook)
"""

#: what `make eval` runs, in one process: the seven stages, export-trec, check-baseline
PIPELINE = """
import sys
from recallbench.builddir.artifacts import STAGES
from recallbench.cli.main import main
build = sys.argv[1]
for command in [*(s.command for s in STAGES), "export-trec", "check-baseline"]:
    try:
        main(["--build-dir", build, "-q", command], standalone_mode=False)
    except SystemExit as exit:
        assert not exit.code, (command, exit.code)
"""


def test_the_fixture_pipeline_imports_nothing_of_the_extras(tmp_path: Path) -> None:
    """`make eval`'s commands load no module of an extra (torch,
    sentence-transformers, Ray, the stores, rank_bm25, LanceDB), so the core install runs
    them. Checked in this full environment, where every extra is importable."""
    assert {"torch", "ray", "chromadb", "rank_bm25", "mem0"} <= set(EXTRA_MODULES)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "imports.log"
    log.touch()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hooks), str(ROOT / "src")]),
        "WATCHED_MODULES": ",".join(EXTRA_MODULES),
        "IMPORT_LOG": str(log),
        "NO_PROGRESS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", PIPELINE, str(tmp_path / "build")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "build" / "decision.json").is_file()
    assert log.read_text(encoding="utf-8") == ""


def test_the_import_watch_sees_an_extra_when_one_is_imported(tmp_path: Path) -> None:
    """The check above can fail: the same hook records rank_bm25 (the okapi extra) in a
    process that imports it."""
    pytest.importorskip("rank_bm25")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "imports.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(hooks),
        "WATCHED_MODULES": ",".join(EXTRA_MODULES),
        "IMPORT_LOG": str(log),
    }
    subprocess.run([sys.executable, "-c", "import rank_bm25"], env=env, check=True, timeout=60)
    assert log.read_text(encoding="utf-8").split()[1:] == ["rank_bm25"]


def test_nox_picks_the_weight_a_dataset_session_needs() -> None:
    """The datasets' nox sessions run in the core environment unless told to run a system
    or executor that needs an extra."""
    pytest.importorskip("nox")
    import importlib.util

    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    assert spec and spec.loader
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    assert noxfile.WEIGHTS == {"core": "setup-core", "full": "setup"}
    assert noxfile._weight([]) == "core"
    assert noxfile._weight(["--system", "bm25", "--workers", "2"]) == "core"
    assert noxfile._weight(["--system=hotmem-mmr"]) == "core"
    assert noxfile._weight(["--system", "minilm"]) == "full"
    assert noxfile._weight(["--system=bm25-okapi"]) == "full"
    assert noxfile._weight(["--system", "bm25", "--system", "mine"]) == "full"
    assert noxfile._weight(["--executor", "ray"]) == "full"


# --- the system under test: a working copy given with STORE= (issue 41) --------------------

SUT = "scripts/system_under_test.py"


@needs_make
def test_make_eval_names_the_system_under_test_and_writes_the_block(tmp_path: Path) -> None:
    """`make eval STORE=...` hands the checkout to the script before the stages; the gate
    writes the pull request's block into the build directory."""
    venv, build = tmp_path / "venv", tmp_path / "b"
    stamped(venv, ".recallbench-core")
    lines = make_n("eval", f"VENV={venv}", f"BUILD={build}", "STORE=../hotmem-wc")
    assert lines[0] == (
        f'{venv}/bin/python {SUT} --stamp "{venv}/.recallbench-store" --distribution hotmem '
        'use "../hotmem-wc"'
    )
    (gate,) = [line for line in lines if " check-baseline" in line]
    assert gate.endswith(f'check-baseline --markdown "{build}/baseline-diff.md"')
    assert installs(lines) == []


@needs_make
@pytest.mark.parametrize(("target", "stamp"), [("eval", ".recallbench-core"), ("setup", None)])
def test_every_install_keeps_a_working_copy(tmp_path: Path, target: str, stamp: str) -> None:
    """Each install records an editable HotMem before pip runs and puts it back after."""
    venv = tmp_path / "venv"
    lines = make_n(target, f"VENV={venv}", f"BUILD={tmp_path / 'b'}")
    script = [i for i, line in enumerate(lines) if SUT in line and " use " not in line]
    pips = [i for i, line in enumerate(lines) if "pip install" in line]
    assert [lines[i].rsplit(" ", 1)[1] for i in script] == ["remember", "restore"]
    assert script[0] < min(pips) and max(pips) < script[1]


def system_under_test(stamp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / SUT), "--stamp", str(stamp), "--distribution", "hotmem", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_a_store_that_is_not_a_hotmem_checkout_is_refused(tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "mystore"\n', encoding="utf-8")
    for store, reason in (
        (tmp_path / "none", "not a directory"),
        (tmp_path, "no pyproject.toml or setup.py there"),
        (other, "that is the project 'mystore', not hotmem"),
    ):
        done = system_under_test(stamp, "use", str(store))
        assert done.returncode == 2
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"make: error: STORE={store}: {reason}")
    assert not stamp.exists()


def test_the_system_under_test_is_named_and_a_gone_copy_forgotten(tmp_path: Path) -> None:
    """Without STORE: one line naming the HotMem measured; a recorded working copy whose
    directory is gone is forgotten, in one line (nothing is installed either way)."""
    from recallbench.core.source import describe_source, installed_source

    stamp = tmp_path / "stamp"
    now = describe_source(installed_source("hotmem"))
    done = system_under_test(stamp, "use")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"system under test: {now}")
    stamp.write_text(json.dumps({"distribution": "hotmem", "path": str(tmp_path / "gone")}))
    done = system_under_test(stamp, "restore")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"note: the recorded working copy {os.path.relpath(tmp_path / 'gone', ROOT)} is gone; "
        f"the system under test is now {now}"
    ]
    assert not stamp.exists()
