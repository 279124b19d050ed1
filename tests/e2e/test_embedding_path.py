"""The one embedding path: every learned vector comes from prep's fixed batches, so a run
gives the same bytes with and without `--cache`, for 1 and 2 workers, and `compare` embeds
each distinct text once per embedder (the same run on Ray: test_embedding_path_ray.py, a file
of its own so that the two workers of `make test` share these runs; prep's cache itself:
test_embedding_cache.py).

No test compares floats computed by two different kernel paths: both sides of every
comparison share prep's batches and this run's CPU kernels, so these tests run once (the
portable rerun's rule: tests/conftest.py), but for the rerun's check of its own kernels.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from embeddingpath import (
    LEARNED,
    RESULT_FILES,
    cache_bytes,
    cli,
    fixture_args,
    ok,
    validated_with_cache,
)

from recallbench.cache import FILES


@pytest.fixture(scope="module")
def fixture_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures validated once, and minilm's cache made by `prep` with one worker."""
    return validated_with_cache(tmp_path_factory)


@pytest.mark.parametrize("system", LEARNED)
def test_a_run_gives_the_same_bytes_on_every_path(system, fixture_cache, tmp_path) -> None:
    """Without a cache (made in BUILD/vectors), with prep's cache and with 2 local workers:
    runs.json and results.json byte for byte (with Ray: test_embedding_path_ray.py compares
    with the prep-cache run, the same bytes as these)."""
    paths = {
        "no cache": [],
        "prep cache": ["--cache", fixture_cache["cache"]],
        "2 workers": ["--workers", "2"],
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


def test_the_portable_kernels_are_what_this_run_uses() -> None:
    """Under `make test-portable` torch really takes its default (non-vectorised) kernels."""
    if os.environ.get("ATEN_CPU_CAPABILITY") != "default":
        return
    import torch

    assert torch.backends.cpu.get_cpu_capability() == "DEFAULT"
