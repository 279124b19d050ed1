"""A plugin's once-per-process setup hook and thread settings (issue 43): `setup()` runs
once in each worker process, before any store is opened there, with the system's threads
set (`--threads`, one per worker by default), and the run records the setting."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from plugintools import WORD_STORE, dist_plugin

from recallbench.commands.pipeline import run_pipeline
from recallbench.engine.tasks import Execution
from recallbench.systems import registry

#: a word-overlap store whose system notes, in $RB_SETUP_LOG, each setup (process, thread
#: settings seen) and each store opened (process, whether setup ran before)
SETUP_PLUGIN = WORD_STORE + textwrap.dedent(
    """
    import os


    def note(**entry):
        with open(os.environ["RB_SETUP_LOG"], "a") as log:
            log.write(json.dumps({"pid": os.getpid(), **entry}) + "\\n")


    class SetupSystem(WordSystem):
        def __init__(self):
            super().__init__("with-setup")
            self.ready = False

        def setup(self):
            from threadpoolctl import threadpool_info

            import numpy  # noqa: F401  (its BLAS is loaded, as a store's encoder's would be)

            pools = sorted({p["num_threads"] for p in threadpool_info()})
            note(event="setup", omp=os.environ.get("OMP_NUM_THREADS"), pools=pools)
            self.ready = True

        def open_store(self, directory, *, vectors=None):
            note(event="open", ready=self.ready)
            return super().open_store(directory, vectors=vectors)


    def make():
        return SetupSystem()
    """
)


@pytest.fixture
def setup_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = dist_plugin(tmp_path, "rb_setup_plugin", SETUP_PLUGIN, {"with-setup": "make"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", f"{site}:{Path(__file__).parents[2] / 'src'}")
    log = tmp_path / "setup.log"
    monkeypatch.setenv("RB_SETUP_LOG", str(log))
    registry.clear_cache()
    yield log
    registry.clear_cache()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from recallbench.datasets.longmemeval.generator import generate

    path = tmp_path_factory.mktemp("setup") / "lme.json"
    generate(path, shape="s", questions=8, seed=2, sessions_per_question=3, session_chars=200)
    return path


def entries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("threads", [1, 2])
def test_setup_runs_once_per_worker_before_its_stores(setup_plugin, data, tmp_path, threads):
    made = run_pipeline(
        "longmemeval",
        {"data": data},
        tmp_path / "build",
        system="with-setup",
        keep_stores=False,
        sample=1,
        execution=Execution("local", 2, threads=threads),
    )
    log = entries(setup_plugin)
    setups = [e for e in log if e["event"] == "setup"]
    opens = [e for e in log if e["event"] == "open"]
    # every worker process set up once, then opened its stores (several per process)
    assert len({e["pid"] for e in setups}) == len(setups) >= 2
    assert {e["pid"] for e in opens} <= {e["pid"] for e in setups} and os.getpid() not in {
        e["pid"] for e in setups
    }
    assert all(e["ready"] for e in opens) and len(opens) > len(setups)
    # the system's threads: the variables for what loads later, the pools already loaded
    assert {e["omp"] for e in setups} == {str(threads)}
    assert {tuple(e["pools"]) for e in setups} == {(threads,)}
    assert made.envelopes["hydrate"]["data"]["threads"] == threads
    assert made.envelopes["results"]["provenance"]["threads"] == {
        "hydrate": threads,
        "query": threads,
    }
    assert "threads" not in repr(made.result)  # beside the result, never in a baseline
