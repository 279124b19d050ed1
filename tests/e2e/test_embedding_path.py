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
import shutil
from pathlib import Path

import orjson
import pytest
from conftest import learned_systems
from embeddingpath import (
    FIXTURES,
    LEARNED,
    RESULT_FILES,
    cache_bytes,
    cli,
    fixture_args,
    ok,
    validated_with_cache,
)

from recallbench.engine.vectorcache import FILES, MANIFEST


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


def wrapped_fixtures(root: Path) -> tuple[Path, Path, int, int]:
    """The fixtures with every other query wrapped in whitespace, and the second query's
    text the first's wrapped (its stripped form is a text already); the files, how many
    distinct texts they hold and how many stripped query forms are no text of theirs."""
    corpus, queries = root / "corpus.jsonl", root / "queries.jsonl"
    shutil.copyfile(FIXTURES / "corpus.jsonl", corpus)
    records = [
        orjson.loads(line) for line in (FIXTURES / "queries.jsonl").read_bytes().splitlines()
    ]
    for n, record in enumerate(records):
        if n % 2:
            record["query"] = f"  {record['query']}\n"
    records[1]["query"] = f"\t{records[0]['query']} "
    queries.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    facts = [orjson.loads(line)["fact"] for line in corpus.read_bytes().splitlines()]
    texts = {*facts, *(r["query"] for r in records)}
    forms = {r["query"].strip() for r in records} - texts
    return corpus, queries, len(texts), len(forms)


@pytest.mark.skipif("mem0" not in learned_systems(), reason="mem0's extra is not installed")
def test_compare_embeds_each_text_and_each_needed_form_once(tmp_path) -> None:
    """minilm then mem0 (whose search strips the query: a form of its own) share one cache:
    minilm embeds each distinct text, mem0 only the stripped forms that are no text (the
    cache's texts kept), and the cache is the one `prep --system mem0` makes at once."""
    corpus, queries, texts, forms = wrapped_fixtures(tmp_path)
    assert texts > 100 and forms > 20  # the data holds both kinds
    build = tmp_path / "compare"
    data = ["--corpus", corpus, "--queries", queries]
    ok(cli(build, "compare", *data, "--system", "minilm", "--system", "mem0"))
    timing = orjson.loads((build / "timings" / "compare.json").read_bytes())
    assert [s["texts_embedded"] for s in timing["systems"]] == [texts, forms]
    assert list(timing["texts_embedded"].values()) == [texts + forms]
    (cache,) = (build / "vectors").iterdir()
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    assert manifest["count"] == manifest["texts"]["distinct"] == texts + forms
    assert manifest["forms"]["rows"] == forms
    # the same rows as a cache made for mem0 at once (its texts' batches never see a form)
    ok(cli(tmp_path / "prep", "validate", *data))
    at_once = tmp_path / "at-once"
    ok(cli(tmp_path / "prep", "prep", "--cache", at_once, "--system", "mem0", "--workers", "1"))
    made, reference = cache_bytes(cache), cache_bytes(at_once)
    assert {n: made[n] for n in FILES} == {n: reference[n] for n in FILES}


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
