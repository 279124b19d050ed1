"""What a plugin returns, changes or leaves open never gives a wrong figure, moves a file or
crashes the run (issue 38, "the plugin boundary").

The plugins are real: a module and its distribution's dist-info (tests/plugindist.py) on
the PYTHONPATH of a `recallbench` process, found through the entry points. Each system
wraps the built-in BM25 store and does one thing a plugin may do: move the working
directory, leave a log file open, return identifiers it was never given, scores beyond a
float or numpy scalars.
"""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from plugindist import (
    assert_nothing_published,
    install_distribution,
    one_error_line,
    plugin_env,
    run_recallbench,
)

PLUGIN = '''
"""Plugins at recallbench's boundary: BM25 with one behaviour each."""
import math
import os
import time
from pathlib import Path

from recallbench.datasets.base import DecisionRules
from recallbench.plugin import Hit
from wrapped_bm25 import Store as Wrapped, System as WrappedSystem, makers

_LOG = []


def log_search():
    """A line in a log opened once and never closed (a plugin's own debug log), and one
    unbuffered line per search in another file: how many lines the log must hold."""
    if not _LOG:
        _LOG.append(open(os.environ["RB_LOG"], "a", encoding="utf-8"))
    _LOG[0].write("searched\\n")
    with open(os.environ["RB_LOG"] + ".count", "ab", buffering=0) as count:
        count.write(b"x\\n")


class Store(Wrapped):
    def search(self, query, top_k):
        mode = self._mode
        hits = self._inner.search(query, top_k)
        if mode == "chdir":
            os.chdir(os.environ["RB_ELSEWHERE"])
        if mode == "log":
            log_search()
        if mode == "foreign-identifier":
            return [Hit(h.memory_id, h.score, "another-project") for h in hits]
        if mode in ("huge", "float32") and hits:
            import numpy as np

            score = 10**400 if mode == "huge" else np.float32(hits[0].score)
            return [Hit(hits[0].memory_id, score, hits[0].identifier), *hits[1:]]
        return hits


class SlowEmbedder:
    """An embedder that makes a tqdm bar as it loads (as sentence-transformers does) and
    marks in $RB_EMBEDDING that a batch has begun, then never returns."""

    max_tokens = None
    thread_safe = True

    def identity(self):
        return "rb-slow-embedder/1"

    def preload(self):
        from tqdm import tqdm

        tqdm(disable=True).close()

    def embed_texts(self, texts):
        Path(os.environ["RB_EMBEDDING"], f"batch-{os.getpid()}-{len(texts)}").touch()
        time.sleep(600)
        return [[float(len(t)), 1.0] for t in texts]

    def token_counts(self, texts):
        return [len(t.split()) for t in texts]


class System(WrappedSystem):
    def __init__(self, mode):
        super().__init__(f"rb-{mode}", mode, Store)
        if mode == "embedder":
            self.embedder = SlowEmbedder()


def make(mode):
    return System(mode)


SYSTEMS = (
    "chdir", "log", "foreign-identifier", "huge", "float32", "ruled", "hung", "nan", "embedder"
)
globals().update(makers(SYSTEMS, make))


def decide(given, **changes):
    k = given["top_k"]
    made = {"policy": "rb", "rule": 1, "action": "look", "recommendation": f"look at k={k}",
            "evidence": {}, "top_k": k, "rules": [], "guardrails": []}
    return {**made, **changes}


def decide_hung(evidence):
    while True:
        time.sleep(1)


def decide_nan(evidence):
    return decide(evidence, evidence={"gap": math.nan})


RULES_RULED = DecisionRules("rb-ruled", "fixtures", ("rb-ruled",), decide)
RULES_HUNG = DecisionRules("rb-hung", "fixtures", ("rb-hung",), decide_hung)
RULES_NAN = DecisionRules("rb-nan", "fixtures", ("rb-nan",), decide_nan)
'''

SYSTEMS = (
    "chdir",
    "log",
    "foreign-identifier",
    "huge",
    "float32",
    "ruled",
    "hung",
    "nan",
    "embedder",
)
#: rules another package declares for a built-in system (issue 38: "rule 9: FAKE")
FAKE_RULES = """
from recallbench.datasets.base import DecisionRules


def decide(evidence):
    return {"policy": "fake", "rule": 9, "action": "x", "recommendation": "FAKE",
            "evidence": {}, "top_k": evidence["top_k"], "rules": [], "guardrails": []}


RULES = DecisionRules("fake", "fixtures", ("bm25", "hotmem"), decide)
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution `boundary-rb` 0.2.0: the systems `rb-<mode>`."""
    return install_distribution(
        tmp_path_factory.mktemp("plugin"),
        "boundary-rb",
        "0.2.0",
        {"boundary_rb.py": PLUGIN},
        {
            "recallbench.systems": {
                f"rb-{mode}": f"boundary_rb:make_{mode.replace('-', '_')}" for mode in SYSTEMS
            },
            "recallbench.rules": {
                f"rb-{mode}": f"boundary_rb:RULES_{mode.upper()}"
                for mode in ("ruled", "hung", "nan")
            },
        },
    )


@pytest.fixture
def run(plugin_path: Path):
    """`recallbench run` of a system with the plugin installed."""
    return functools.partial(run_recallbench, plugin_env(plugin_path))


# --------------------------------------------------------------------------- what it returns


@pytest.mark.parametrize(
    ("system", "needles"),
    [
        # report.md explained 19 misses with the store's word ("another project's memory
        # (another-project)")
        (
            "rb-foreign-identifier",
            ["returned the identifier 'another-project' for id ", "which was stored with the "],
        ),
        # a 73-line OverflowError traceback
        (
            "rb-huge",
            [
                "returned the score an int of 1329 bits for id ",
                "beyond the range of a float; scores must be finite numbers",
            ],
        ),
    ],
)
def test_a_hit_the_store_could_not_have_given_is_one_line(
    run, tmp_path: Path, system: str, needles: list[str]
) -> None:
    """Issue 38: a hit's identifier was taken on the store's word, and a score of 10**400
    ended the run with a traceback. Each is one line naming the system and the query."""
    build = tmp_path / "build"
    proc = run(build, system)
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert f"system '{system}': search (scope suite, query " in line
    for needle in needles:
        assert needle in line, line
    assert_nothing_published(build)


def test_numpy_scores_are_recorded_as_floats(run, tmp_path: Path) -> None:
    """Issue 38: `np.float32` scores were refused as "scores must be finite numbers"; they
    are real numbers, recorded as their float value."""
    build = tmp_path / "build"
    proc = run(build, "rb-float32")
    assert proc.returncode == 0, proc.stderr
    runs = orjson.loads((build / "runs.json").read_bytes())["data"]["queries"]
    scores = [h["score"] for row in runs for h in row["hits"]]
    assert scores and all(isinstance(s, float) for s in scores)


# --------------------------------------------------------------------------- what it changes


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_plugin_that_changes_directory_moves_no_artifact(
    plugin_path: Path, tmp_path: Path, workers: str
) -> None:
    """Issue 38: a plugin calling `os.chdir` in `search` made `run --build-dir b` write every
    artifact into `<new cwd>/b/`, outside the locked build dir (here the run failed: the
    round trip looked for the store there). The paths are absolute from the command line on
    (the files the run names are), and the working directory is put back after every call."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    env = {**plugin_env(plugin_path), "RB_ELSEWHERE": str(elsewhere)}
    proc = run_recallbench(env, "b", "rb-chdir", "--workers", workers, "--json", cwd=home)
    assert proc.returncode == 0, proc.stderr
    assert list(elsewhere.iterdir()) == []
    for name in ("suite.json", "runs.json", "roundtrip.json", "results.json", "decision.json"):
        assert (home / "b" / name).is_file(), name
    files = orjson.loads(proc.stdout)["files"]
    assert files[0] == str(home / "b" / "results.json")


# --------------------------------------------------------------------------- what it leaves


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_file_a_plugin_never_closed_is_complete_after_the_fast_exit(
    plugin_path: Path, tmp_path: Path, workers: str
) -> None:
    """Issue 38: the console's fast exit (`recallbench.core.exiting`) skipped the teardown that
    closes (and so flushes) the files a plugin opened and never closed: its log was empty
    after `run`, complete after Python's own exit. Each process (the command, and each
    worker) now closes them before it ends: one line per search, as many as searches."""
    log = tmp_path / "plugin.log"
    env = {**plugin_env(plugin_path), "RB_LOG": str(log)}
    proc = run_recallbench(env, tmp_path / "build", "rb-log", "--workers", workers)
    assert proc.returncode == 0, proc.stderr
    searches = Path(f"{log}.count").read_bytes().count(b"\n")
    assert searches >= 57  # every query searched at least once
    assert log.read_text(encoding="utf-8").count("searched\n") == searches


# --------------------------------------------------------------------------- its rules


def test_rules_for_a_built_in_from_another_package_are_refused_before_any_work(
    tmp_path: Path,
) -> None:
    """Issue 38: any installed package could declare rules for `bm25`: `run --system bm25`
    printed "rule 9: FAKE", report.md said "Rule 9 fired", and the package was recorded
    nowhere. Now the run is refused in one line, before any stage runs."""
    fake = install_distribution(
        tmp_path / "fake",
        "fake-rules",
        "0.1",
        {"fake_rules.py": FAKE_RULES},
        {"recallbench.rules": {"fake": "fake_rules:RULES"}},
    )
    build = tmp_path / "build"
    proc = run_recallbench(plugin_env(fake), build, "bm25")
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert line.startswith(
        "recallbench run: error: decision rules 'fake' (fake-rules 0.1, entry point fake = "
        "fake_rules:RULES) are for the system 'bm25', which recallbench "
    )
    assert line.endswith(
        "provides: only the package that provides a system may declare its rules; "
        "uninstall fake-rules"
    )
    assert "FAKE" not in proc.stdout
    assert not build.exists() or sorted(p.name for p in build.iterdir()) <= [
        ".cache",
        ".recallbench.lock",
    ]


def test_a_plugins_own_rules_are_recorded_and_named_in_the_report(run, tmp_path: Path) -> None:
    """The rules' distribution, version and entry point are in decision.json's and
    results.json's provenance (beside the result document) and the Conclusion of report.md
    and report.html."""
    build = tmp_path / "build"
    proc = run(build, "rb-ruled")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "rule 1: look at k=5"
    source = {
        "name": "rb-ruled",
        "kind": "plugin",
        "distribution": "boundary-rb",
        "version": "0.2.0",
        "entry_point": "rb-ruled = boundary_rb:RULES_RULED",
    }
    for name in ("decision.json", "results.json"):
        assert orjson.loads((build / name).read_bytes())["provenance"]["rules"] == source
    conclusion = (build / "report.md").read_text(encoding="utf-8").split("## Conclusion")[1]
    assert (
        "Decision rules: `rb-ruled`, from the plugin boundary-rb 0.2.0 (entry point "
        "`rb-ruled = boundary_rb:RULES_RULED`)."
    ) in conclusion
    page = (build / "report.html").read_text(encoding="utf-8").split('id="conclusion"')[1]
    assert (
        "<p>Decision rules: <code>rb-ruled</code>, from the plugin boundary-rb 0.2.0 (entry point "
        "<code>rb-ruled = boundary_rb:RULES_RULED</code>).</p>"
    ) in page
    assert "<p></p>" not in page  # no rules of the system's own: no empty paragraph


def test_rules_that_never_return_end_at_the_call_timeout(run, tmp_path: Path) -> None:
    """Issue 38: rules that never returned hung `run` whatever --call-timeout said."""
    build = tmp_path / "build"
    proc = run(build, "rb-hung", "--call-timeout", "3")  # far above what any call here takes
    assert proc.returncode == 1, proc.stderr
    assert one_error_line(proc) == (
        "recallbench run: error: decision rules 'rb-hung' (boundary-rb 0.2.0): decide (rb-hung "
        "on fixtures) did not return within --call-timeout 3 s"
    )
    assert_nothing_published(build)


def test_a_nan_from_rules_never_reaches_the_json_printed(run, tmp_path: Path) -> None:
    """Issue 38: `run --json` printed a bare `NaN` (invalid JSON) that a plugin's rules
    returned. The decision is refused in one line; nothing is printed on stdout."""
    build = tmp_path / "build"
    proc = run(build, "rb-nan", "--json")
    assert proc.returncode == 1, proc.stderr
    assert one_error_line(proc).endswith(
        "decide (rb-nan on fixtures) returned nan at evidence.gap; a decision holds finite "
        "numbers only"
    )
    assert proc.stdout == ""
    assert_nothing_published(build)


# --------------------------------------------------------------------------- its workers


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sigterm_while_a_prep_worker_embeds_is_one_line(plugin_path: Path, tmp_path: Path) -> None:
    """Issue 38: SIGTERM to `prep --workers 2` while embedding printed a two-line "leaked
    semaphore" warning after the promised single line: tqdm, made as the model loads on a
    thread of the spawned worker, held a named semaphore the killed worker never unlinked.
    The signal is sent while the command is stopped (tests/signalling.py), so another of
    its threads may take it: the command's wait for a batch (which never ends here) wakes
    to handle it, instead of holding it until the batch is done."""
    from plugindist import CORPUS, QUERIES
    from signalling import run_signalled

    build, embedding = tmp_path / "build", tmp_path / "embedding"
    embedding.mkdir()
    env = {**plugin_env(plugin_path), "RB_EMBEDDING": str(embedding)}
    base = [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(build)]
    validate = [*base, "validate", "--corpus", str(CORPUS), "--queries", str(QUERIES)]
    assert subprocess.run(validate, env=env, capture_output=True).returncode == 0
    args = [*base, "prep", "--cache", str(tmp_path / "cache"), "--system", "rb-embedder"]
    proc = run_signalled(
        [*args, "--workers", "2"], env, lambda pid: any(embedding.iterdir()), signal.SIGTERM
    )
    code, err = proc.returncode, proc.stderr
    assert code == 143, err
    assert err.splitlines()[-1] == "recallbench prep: terminated; nothing half-written", err
    assert "leaked" not in err
    assert not (tmp_path / "cache").exists()
