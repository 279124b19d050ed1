"""The one embedding path: every learned vector comes from prep's fixed batches, so a run
gives the same bytes with and without `--cache`, for 1 and 2 workers, local and Ray; prep
gives the same cache on every engine; `compare` embeds each distinct text once per
embedder; and the cache is never lost or shared by two writers.

Every test here is marked `embedding` (see conftest): `make test-portable` runs them again
with other CPU kernels. No test compares floats computed by two different kernel paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.cache import FILES, MANIFEST, CacheWriter, VectorCache, rows_dir
from recallbench.cli import main
from recallbench.errors import RecallbenchError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"
LEARNED = ("minilm", "hybrid-rrf", "hotmem-minilm")
RESULT_FILES = ("runs.json", "results.json")


def cli(build: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def one_line_error(result: Result, command: str) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"recallbench {command}: error: ")
    return lines[0]


def fixture_args() -> list[str | Path]:
    return ["--corpus", FIXTURES / "corpus.jsonl", "--queries", FIXTURES / "queries.jsonl"]


def cache_bytes(cache: Path) -> dict[str, bytes]:
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    out = {name: (rows_dir(cache, manifest) / name).read_bytes() for name in FILES}
    out[MANIFEST] = (cache / MANIFEST).read_bytes()
    return out


@pytest.fixture(scope="module")
def fixture_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures validated once, and minilm's cache made by `prep` with one worker."""
    root = tmp_path_factory.mktemp("embedding-path")
    build = root / "build"
    ok(cli(build, "validate", *fixture_args()))
    ok(cli(build, "prep", "--cache", root / "cache", "--system", "minilm", "--workers", "1"))
    return {"root": root, "build": build, "cache": root / "cache"}


def test_prep_writes_the_same_cache_for_any_workers_and_engine(fixture_cache, tmp_path) -> None:
    reference = cache_bytes(fixture_cache["cache"])
    for name, extra in (
        ("two-local", ["--workers", "2"]),
        ("ray", ["--executor", "ray", "--workers", "2"]),
    ):
        cache = tmp_path / name
        ok(cli(fixture_cache["build"], "prep", "--cache", cache, "--system", "minilm", *extra))
        assert cache_bytes(cache) == reference, name
    manifest = orjson.loads(reference[MANIFEST])
    assert manifest["batching"]["batch"] == 64
    assert manifest["texts"] == {"seen": 137, "distinct": 136}
    build = manifest["embedder_build"]
    assert build["device"] == "cpu" and build["torch_threads"] == 1 and build["cpu_capability"]


@pytest.mark.parametrize("system", LEARNED)
def test_a_run_gives_the_same_bytes_on_every_path(system, fixture_cache, tmp_path) -> None:
    """Without a cache (made in BUILD/vectors), with prep's cache, with 2 local workers and
    with Ray: runs.json and results.json byte for byte."""
    paths = {
        "no cache": [],
        "prep cache": ["--cache", fixture_cache["cache"]],
        "2 workers": ["--workers", "2"],
        "ray": ["--executor", "ray", "--workers", "2"],
    }
    outputs = {}
    for label, extra in paths.items():
        build = tmp_path / label.replace(" ", "-")
        ok(cli(build, "run", *fixture_args(), "--system", system, *extra))
        outputs[label] = {name: (build / name).read_bytes() for name in RESULT_FILES}
        if not extra:  # the cache this run made for itself, through the same batches
            (made,) = (build / "vectors").iterdir()
            rows, reference = cache_bytes(made), cache_bytes(fixture_cache["cache"])
            assert {n: rows[n] for n in FILES} == {n: reference[n] for n in FILES}
    for label, files in outputs.items():
        assert files == outputs["no cache"], label
    env = orjson.loads(outputs["no cache"]["results.json"])
    assert env["embedder_build"]["device"] == "cpu"  # beside the data, outside the fingerprint


def test_compare_embeds_each_distinct_text_once(tmp_path) -> None:
    build = tmp_path / "compare"
    args = [arg for name in LEARNED for arg in ("--system", name)]
    ok(cli(build, "compare", *fixture_args(), *args))
    timing = orjson.loads((build / "timings" / "compare.json").read_bytes())
    assert [s["texts_embedded"] for s in timing["systems"]] == [136, 0, 0]
    assert list(timing["texts_embedded"].values()) == [136]
    doc = orjson.loads((build / "compare.json").read_bytes())
    assert [v["system"] for v in doc["vectors"]] == list(LEARNED)
    assert {v["cache"] for v in doc["vectors"]} == {"made in this run"}
    assert "each distinct text embedded once" in (build / "compare.md").read_text()


def test_compare_reads_a_given_cache(fixture_cache, tmp_path) -> None:
    build = tmp_path / "compare"
    cache = fixture_cache["cache"]
    ok(
        cli(
            build,
            "compare",
            *fixture_args(),
            "--system",
            "minilm",
            "--system",
            "hotmem",
            "--cache",
            cache,
        )
    )
    timing = orjson.loads((build / "timings" / "compare.json").read_bytes())
    assert [s["texts_embedded"] for s in timing["systems"]] == [0, 0]
    doc = orjson.loads((build / "compare.json").read_bytes())
    assert doc["vectors"] == [
        {
            "system": "minilm",
            "embedder_identity": doc["vectors"][0]["embedder_identity"],
            "cache": "given (--cache)",
        }
    ]


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
        "from recallbench.cache import CacheWriter\n"
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
    from recallbench.vectorprep import BATCH, plan_batches

    texts = [f"text {i}" for i in range(150)]
    tokens = [(i * 7) % 13 + 1 for i in range(150)]
    batches = plan_batches(texts, 0, tokens, cap=10)
    assert [len(b) for b in batches] == [BATCH, BATCH, 150 - 2 * BATCH]
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(150))
    assert [min(tokens[i], 10) for i in flat] == sorted(min(t, 10) for t in tokens)
    assert plan_batches(texts, 0, tokens, cap=10) == batches  # nothing else decides them


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


def test_the_portable_kernels_are_what_this_run_uses() -> None:
    """Under `make test-portable` torch really takes its default (non-vectorised) kernels."""
    if os.environ.get("ATEN_CPU_CAPABILITY") != "default":
        return
    import torch

    assert torch.backends.cpu.get_cpu_capability() == "DEFAULT"
