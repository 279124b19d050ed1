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

from recallbench.builddir.artifacts import STAGES
from recallbench.cli.main import main
from recallbench.commands.pipeline import Run, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "retrieval"
CORPUS = FIXTURES / "corpus.jsonl"
QUERIES = FIXTURES / "queries.jsonl"
BASELINE = FIXTURES / "baseline.json"

#: the stage commands in pipeline order, each with the artifact file it writes (one definition:
#: recallbench.builddir.artifacts.STAGES)
STAGE_OUTPUTS: tuple[tuple[str, str], ...] = tuple((s.command, s.file) for s in STAGES)


#: The portable rerun (`make test-portable`: torch's default ATen kernels, MKL limited to AVX2)
#: takes the tests marked `embedding`. The rule: a test is marked when one of its assertions
#: compares numbers a learned embedder computed in this run with numbers computed another way,
#: so that other CPU kernels could change its outcome: a committed figure (a docs table, a
#: bound on a learned recall) or a second computation over other batch shapes, equal only
#: within a tolerance. A test comparing two paths of this run that share prep's batches
#: (cache or not, 1 or 2 workers, local or Ray: the one embedding path) computes both sides
#: with the same kernels; it holds for any kernels that are deterministic, and runs once.
#: Listed as "file::function"; each entry says what it compares.
KERNEL_SENSITIVE_TESTS = {
    # docs/stores.md's committed figures table, from compares over every built-in system
    "test_stores_figures.py::test_compare_over_every_built_in_system_matches_the_docs",
    "test_stores_figures_servers.py::test_compare_over_the_server_systems_matches_the_docs",
    # a recall@5 bound on hotmem-minilm's paraphrase category
    "test_semantic.py::test_minilm_finds_paraphrases_the_hash_embedder_misses",
    # the store's scores against numpy's cosine of vectors from another batch (1e-6)
    "test_systems_semantic.py::test_minilm_is_exact_cosine_with_ties_by_id",
    # the rerun's own check that torch really took the default kernels
    "test_embedding_path.py::test_the_portable_kernels_are_what_this_run_uses",
}
#: parametrized by system, marked for the learned systems only: cached vectors against the
#: store's inline embedding (another batch shape) within a tolerance
KERNEL_SENSITIVE_PER_SYSTEM = {"test_systems_contract.py::test_the_embedder_feeds_a_vector_cache"}

#: The files that cost most, heaviest first (their seconds, from `make bench-tests`, are in
#: docs/performance.md, "The heaviest test files"; only the order matters here): they run
#: before every other file, so that the two workers (`--dist loadfile
#: --no-loadscope-reorder` hands out whole files in this order) start on them and the short
#: files fill the end: neither worker is left with a long file while the other idles. The
#: rest keep pytest's order.
SLOW_FIRST = (
    "e2e/test_embedding_path.py",
    "e2e/test_ray_cluster.py",  # a real two-node cluster, two runs per case
    "systems/test_stores_e2e.py",
    "systems/test_postgres_stores.py",  # four servers per compare, kill tests
    "systems/test_milvus_store.py",
    "e2e/test_embedding_path_ray.py",
    "e2e/test_embedding_cache.py",
    "systems/test_semantic.py",
    "systems/test_mem0_store.py",
    "unit/test_executor.py",
    "e2e/test_docs_commands.py",
    "systems/test_stores_figures.py",
    "systems/test_stores_figures_servers.py",
    "e2e/test_ray_pipeline.py",
)


#: The fast pass (`make test-fast`) leaves out the tests marked `extras`: those that need an
#: optional extra's heavy parts (a learned embedder, a memory store's package, a database or
#: vector server, Ray, the browser) and so take most of the suite's time. Every test of these
#: files is marked; so is every test parametrized by a system outside `LIGHT_SYSTEMS`, and
#: every `embedding` test. `make test` runs everything.
EXTRAS_FILES = frozenset(
    {
        "e2e/test_browser.py",
        "e2e/test_embedding_cache.py",
        "e2e/test_embedding_path.py",
        "e2e/test_embedding_path_ray.py",
        "e2e/test_embedding_threads.py",
        "e2e/test_ray_cluster.py",
        "e2e/test_ray_faults.py",
        "e2e/test_ray_pipeline.py",
        "e2e/test_setup_weights.py",
        "e2e/test_vector_import.py",
        "systems/test_chroma_store.py",
        "systems/test_compare_decision.py",
        "systems/test_mem0_qdrant.py",
        "systems/test_mem0_store.py",
        "systems/test_milvus_store.py",
        "systems/test_postgres_stores.py",
        "systems/test_reliability_stores.py",
        "systems/test_semantic.py",
        "systems/test_stores_e2e.py",
        "systems/test_stores_figures.py",
        "systems/test_stores_figures_servers.py",
        "systems/test_systems_semantic.py",
        "systems/test_vipune_adapter.py",
    }
)
#: systems that need no heavy extra (no model, no store package, no server)
LIGHT_SYSTEMS = frozenset({"hotmem", "hotmem-mmr", "bm25", "bm25-okapi", "dory", "turn-pairs"})


def needs_extras(item: pytest.Item, tests: Path) -> bool:
    """Whether `item` belongs to the extras (see `EXTRAS_FILES`)."""
    if item.path.relative_to(tests).as_posix() in EXTRAS_FILES:
        return True
    if item.get_closest_marker("embedding") is not None:
        return True
    from recallbench.systems.registry import system_names

    params = getattr(getattr(item, "callspec", None), "params", {})
    named = {v for v in params.values() if isinstance(v, str)} & set(system_names())
    return bool(named - LIGHT_SYSTEMS)


@functools.cache
def learned_systems() -> frozenset[str]:
    """Registered systems whose vectors come from a batch-dependent (learned) embedder."""
    from recallbench.core.embedding import needs_cache
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
    """Mark `embedding` the tests of the rule above; then move the files of SLOW_FIRST to
    the front (each file's tests stay together and in their order)."""
    learned = learned_systems()
    listed = KERNEL_SENSITIVE_TESTS | KERNEL_SENSITIVE_PER_SYSTEM
    seen, files = set(), {item.path.name for item in items}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        values = {v for v in params.values() if isinstance(v, str)}
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        seen.add(name)
        if name in KERNEL_SENSITIVE_TESTS or (
            name in KERNEL_SENSITIVE_PER_SYSTEM and values & learned
        ):
            item.add_marker(pytest.mark.embedding)
    # a renamed test must not drop out of the portable rerun unnoticed
    if stale := sorted(n for n in listed - seen if n.split("::")[0] in files):
        raise pytest.UsageError(f"tests/conftest.py lists tests that do not exist: {stale}")
    tests = Path(__file__).resolve().parent
    if missing := [name for name in SLOW_FIRST if not (tests / name).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py: SLOW_FIRST names no file {missing}")
    if missing := sorted(name for name in EXTRAS_FILES if not (tests / name).is_file()):
        raise pytest.UsageError(f"tests/conftest.py: EXTRAS_FILES names no file {missing}")
    for item in items:
        if needs_extras(item, tests):
            item.add_marker(pytest.mark.extras)
    rank = {tests / name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))  # stable: the rest in order


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


def run_generated_longmemeval(work: Path, questions: int = 120, **kwargs) -> Run:
    """The seven stages in process on generated LongMemEval data (`questions` questions of
    4 short sessions each, seed 1) with bm25: a suite of more queries than report.html's
    first slice (`report.pagedata.FIRST_SLICE_QUERIES`), quick to run."""
    from recallbench.datasets.longmemeval import generator

    data = Path(work) / "lme.json"
    if not data.exists():
        generator.generate(
            data, shape="s", questions=questions, seed=1, sessions_per_question=4, session_chars=200
        )
    kwargs.setdefault("system", "bm25")
    kwargs.setdefault("top_k", 10)
    return run_pipeline("longmemeval", {"data": data}, Path(work) / "build", **kwargs)


@pytest.fixture(scope="session")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One in-process run of the whole fixture suite (read-only): `.result` is the result
    document, `.envelopes` every artifact, `.markdown` the report."""
    return run_fixtures(tmp_path_factory.mktemp("fixture_run"))
