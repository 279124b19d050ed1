"""The vector cache of the one embedding path: prep gives the same cache on every engine
and worker count, its batches depend on the texts alone, and the cache is never lost or
shared by two writers (a run on every path: test_embedding_path.py).

No test compares floats computed by two different kernel paths: both sides of every
comparison share prep's batches and this run's CPU kernels, so these tests run once (the
portable rerun's rule: tests/conftest.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from embeddingpath import (
    cache_bytes,
    cli,
    ok,
    one_line_error,
    validated_with_cache,
)

from recallbench.cli.main import main
from recallbench.core.errors import RecallbenchError
from recallbench.engine.vectorcache import MANIFEST, CacheWriter, VectorCache


@pytest.fixture(scope="module")
def fixture_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures validated once, and minilm's cache made by `prep` with one worker."""
    return validated_with_cache(tmp_path_factory)


def test_prep_writes_the_same_cache_for_any_workers_and_engine(
    fixture_cache, tmp_path, monkeypatch
) -> None:
    """1 process x 1 thread (the reference), 1 process x 2 threads (2 local workers' plan),
    2 processes x 1 thread and 2 Ray actors: the same bytes."""
    from recallbench.engine.vectorprep import PLAN_ENV

    reference = cache_bytes(fixture_cache["cache"])
    for name, extra, plan, summary in (
        ("two-local", ["--workers", "2"], "threads", "1 process x 2 threads"),
        ("two-processes", ["--workers", "2"], "processes", "2 processes x 1 thread"),
        ("ray", ["--executor", "ray", "--workers", "2"], "threads", "2 processes x 1 thread"),
    ):
        monkeypatch.setenv(PLAN_ENV, plan)
        cache = tmp_path / name
        ok(cli(fixture_cache["build"], "prep", "--cache", cache, "--system", "minilm", *extra))
        assert cache_bytes(cache) == reference, name
        timing = orjson.loads((fixture_cache["build"] / "timings" / "prep.json").read_bytes())
        assert timing["plan"]["summary"] == summary, name
    manifest = orjson.loads(reference[MANIFEST])
    assert manifest["batching"] == {
        "order": "distinct texts by first appearance; windows sorted by token count, then row",
        "batch_tokens": 2048,
        "batch_texts": 64,
        "window": 4096,
    }
    assert manifest["texts"] == {"seen": 137, "distinct": 136}
    build = manifest["embedder_build"]
    assert build["device"] == "cpu" and build["torch_threads"] == 1 and build["cpu_capability"]


def test_a_failed_prep_leaves_the_previous_cache_as_it_was(fixture_cache, tmp_path) -> None:
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(fixture_cache["cache"], cache)
    before = cache_bytes(cache)
    manifest = orjson.loads(before[MANIFEST])
    writer = CacheWriter(cache, manifest["embedder_identity"])
    writer.add_scope([0])
    writer.add([b"k" * 32], b"\0" * 4 * 384, 384)
    writer.abort()  # what an interrupted or failed prep does
    assert cache_bytes(cache) == before
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith("rows-")) == [
        manifest["rows"]
    ]
    VectorCache.open(
        cache, embedder_identity=manifest["embedder_identity"], source=manifest["source"]
    ).close()


def test_a_killed_prep_leaves_the_previous_cache_and_the_next_prep_cleans_up(
    fixture_cache, tmp_path
) -> None:
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(fixture_cache["cache"], cache)
    before = cache_bytes(cache)
    child = _hold_a_writer(cache)
    try:
        child.kill()  # SIGKILL mid-prep: no abort, its rows stay behind
        child.wait(timeout=30)
    finally:
        child.kill()
    assert cache_bytes(cache) == before
    leftovers = [p for p in cache.iterdir() if p.name.startswith("rows-new-")]
    assert leftovers
    ok(cli(fixture_cache["build"], "prep", "--cache", cache, "--system", "minilm"))
    assert cache_bytes(cache) == before  # same batches, same bytes
    assert not [p for p in cache.iterdir() if p.name.startswith("rows-new-")]


def _hold_a_writer(cache: Path) -> subprocess.Popen:
    """A process holding a CacheWriter open on `cache` (lock held, rows half-written)."""
    code = (
        "import sys, time\n"
        "from recallbench.engine.vectorcache import CacheWriter\n"
        "w = CacheWriter(sys.argv[1], 'x@1')\n"
        "w.add_scope([0]); w.add([b'k' * 32], b'\\0' * 4, 1)\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(cache)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def test_a_second_prep_into_one_cache_is_refused(fixture_cache, tmp_path) -> None:
    cache = tmp_path / "cache"
    child = _hold_a_writer(cache)
    try:
        line = one_line_error(
            cli(fixture_cache["build"], "prep", "--cache", cache, "--system", "minilm"), "prep"
        )
        assert f"{cache} is in use by pid {child.pid}" in line and "another --cache" in line
        with pytest.raises(RecallbenchError, match="in use by"):
            CacheWriter(cache, "x@1")
    finally:
        child.kill()
        child.wait(timeout=30)


def test_hydrate_checks_the_cache_with_transient_stores_too(fixture_cache, tmp_path) -> None:
    build = fixture_cache["build"]
    missing = one_line_error(
        cli(build, "hydrate", "--system", "minilm", "--transient", "--cache", tmp_path / "none"),
        "hydrate",
    )
    assert "no vector cache here" in missing
    no_embedder = one_line_error(
        cli(build, "hydrate", "--system", "bm25", "--transient", "--cache", fixture_cache["cache"]),
        "hydrate",
    )
    assert "bm25 has no embedder" in no_embedder


def test_the_batches_depend_on_the_texts_alone() -> None:
    from recallbench.engine.vectorprep import BATCH_TEXTS, plan_batches

    texts = [f"text {i}" for i in range(150)]
    tokens = [(i * 7) % 13 + 1 for i in range(150)]
    batches = plan_batches(texts, 0, tokens, cap=10)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(150))
    assert [min(tokens[i], 10) for i in flat] == sorted(min(t, 10) for t in tokens)
    # short texts: the count caps a batch (150 texts of at most 10 tokens: 64, 64, 22)
    assert [len(b) for b in batches] == [BATCH_TEXTS, BATCH_TEXTS, 150 - 2 * BATCH_TEXTS]
    assert plan_batches(texts, 0, tokens, cap=10) == batches  # nothing else decides them


def test_long_texts_go_in_small_batches_within_the_token_budget() -> None:
    from recallbench.engine.vectorprep import BATCH_TOKENS, plan_batches

    tokens = [300] * 20 + [100] * 50 + [5000]  # 300 and 5000 capped at 256
    texts = [f"t{i}" for i in range(len(tokens))]
    batches = plan_batches(texts, 0, tokens, cap=256)
    widths = [max(min(tokens[i], 256) for i in b) for b in batches]
    assert all(len(b) * w <= BATCH_TOKENS for b, w in zip(batches, widths, strict=True))
    # 50 texts of 100 tokens: 20 per batch; 21 of 256 tokens (capped): 8 per batch
    assert [len(b) for b in batches] == [20, 20, 10, 8, 8, 5]
    # no cap (a model without a limit): a text over the budget is a batch of its own
    alone = plan_batches(["a", "b"], 0, [BATCH_TOKENS + 1, 3], cap=None)
    assert alone == [[1], [0]]


def test_prep_reports_texts_and_tokens_per_second(fixture_cache, tmp_path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "--build-dir",
            str(fixture_cache["build"]),
            "prep",
            "--cache",
            tmp_path / "c",
            "--system",
            "minilm",
            "--workers",
            "1",
        ],
    )
    ok(result)
    assert (
        "136 vectors" in result.stderr
        and "texts/s" in result.stderr
        and "tokens/s" in result.stderr
    )


def test_a_stage_remakes_a_build_cache_of_other_batches(fixture_cache, tmp_path) -> None:
    """BUILD/vectors made in other batches (an older recallbench's batches of 64: vectors
    that differ in the last bits) is remade by the stage that finds it, never reused."""
    import shutil

    from recallbench.core.embedding import cache_dir_name
    from recallbench.engine.vectorprep import BATCHING
    from recallbench.systems import get_system

    build = tmp_path / "build"
    shutil.copytree(fixture_cache["build"], build)
    shutil.rmtree(build / "timings", ignore_errors=True)
    identity = get_system("minilm").embedder.identity()
    cache = build / "vectors" / cache_dir_name(identity)
    shutil.copytree(fixture_cache["cache"], cache)
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    (cache / MANIFEST).write_bytes(
        orjson.dumps({**manifest, "batching": {**manifest["batching"], "batch": 64}})
    )

    def embedded() -> int:
        ok(cli(build, "hydrate", "--system", "minilm", "--workers", "1"))
        timing = orjson.loads((build / "timings" / "hydrate.json").read_bytes())
        made = timing["vector_cache"]
        return made["texts_embedded"] if made else 0

    assert embedded() == 136
    assert orjson.loads((cache / MANIFEST).read_bytes())["batching"] == BATCHING
    assert cache_bytes(cache) == cache_bytes(fixture_cache["cache"])
    assert embedded() == 0  # made in these batches: reused
