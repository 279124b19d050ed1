"""Shared fixtures for the stage and end-to-end tests: the committed suite, one staged CLI
build and one in-process run against the real HotMem (each made once per test session)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.artifacts import STAGES
from recallbench.cli import main
from recallbench.pipeline import Run, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "retrieval"
CORPUS = FIXTURES / "corpus.jsonl"
QUERIES = FIXTURES / "queries.jsonl"
BASELINE = FIXTURES / "baseline.json"

#: the stage commands in pipeline order, each with the artifact file it writes (one definition:
#: recallbench.artifacts.STAGES)
STAGE_OUTPUTS: tuple[tuple[str, str], ...] = tuple((s.command, s.file) for s in STAGES)


#: modules whose every assertion depends on a learned embedder's arithmetic: identical
#: bytes across paths (cache, workers, engines), or figures computed from its vectors
KERNEL_SENSITIVE_MODULES = {
    "test_semantic.py",
    "test_systems_semantic.py",
    "test_embedding_path.py",
    "test_embedding_cache.py",
    "test_stores_e2e.py",
    "test_stores_figures.py",
}
#: tests, parametrized by system, that compare vectors from two batchings (inline and cached)
KERNEL_SENSITIVE_TESTS = {"test_the_embedder_feeds_a_vector_cache"}


@functools.cache
def learned_systems() -> frozenset[str]:
    """Registered systems whose vectors come from a batch-dependent (learned) embedder."""
    from recallbench.embedding import needs_cache
    from recallbench.systems import get_system
    from recallbench.systems.registry import system_names

    names = set()
    for name in system_names():
        try:
            if needs_cache(get_system(name)):
                names.add(name)
        except Exception:  # unavailable here: the contract test fails it with its hint
            continue
    return frozenset(names)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `embedding` every test whose assertion depends on a learned embedder's
    arithmetic (a module above, or a test above parametrized with a learned system): CI runs
    them a second time with other CPU kernels (`ATEN_CPU_CAPABILITY=default
    MKL_ENABLE_INSTRUCTIONS=AVX2`, `make test-portable`). Tests of a learned store's other
    properties (its contract, where it writes) compare one kernel path with itself and run
    once."""
    learned = learned_systems()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        values = {v for v in params.values() if isinstance(v, str)}
        function = getattr(item, "originalname", item.name)
        if item.path.name in KERNEL_SENSITIVE_MODULES or (
            function in KERNEL_SENSITIVE_TESTS and values & learned
        ):
            item.add_marker(pytest.mark.embedding)


def cli(build_dir: Path, *args: str | Path) -> Result:
    """Invoke `recallbench --build-dir BUILD ARGS...` in-process (stdout and stderr kept apart)."""
    return CliRunner().invoke(main, ["--build-dir", str(build_dir), *map(str, args)])


def stage_args(stage: str) -> list[str | Path]:
    """Arguments for one stage that do not depend on the current directory."""
    if stage == "validate":
        return ["validate", "--corpus", CORPUS, "--queries", QUERIES]
    if stage == "check-baseline":
        return ["check-baseline", "--baseline", BASELINE]
    return [stage]


def run_stages(build_dir: Path, stages: Sequence[str] | None = None) -> None:
    """Run the given stages (default: all seven) through the CLI, asserting each succeeds."""
    for stage in stages or [s for s, _ in STAGE_OUTPUTS]:
        result = cli(build_dir, *stage_args(stage))
        assert result.exit_code == 0, (stage, result.output)


def load_json(path: Path) -> dict:
    return orjson.loads(Path(path).read_bytes())


def copy_build(src: Path, dst: Path) -> Path:
    """A private copy of a build directory, for tests that damage artifacts."""
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="session")
def staged_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build directory made by the seven stage commands, one after another (read-only)."""
    build = tmp_path_factory.mktemp("staged") / "build"
    run_stages(build)
    return build


def run_fixtures(work: Path, **kwargs) -> Run:
    """The seven stages in process on the committed fixture suite (artifacts not written)."""
    return run_pipeline("fixtures", {"corpus": CORPUS, "queries": QUERIES}, work, **kwargs)


@pytest.fixture(scope="session")
def lane(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One in-process run of the whole fixture suite (read-only): `.result` is the result
    document, `.envelopes` every artifact, `.markdown` the report."""
    return run_fixtures(tmp_path_factory.mktemp("lane"))
