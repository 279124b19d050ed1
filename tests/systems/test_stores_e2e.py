"""The memory stores people run (Chroma, txtai, LlamaIndex, LangGraph, LangMem, mem0) end to end
through the stages on the fixture suite: the same results for 1 and 2 workers, and with and
without the vector cache. Real stores through their own APIs, nothing mocked.

With the cache (every vector from `prep`) the runs are identical byte for byte whatever the
number of workers. Without it, the store's vectors come from the model in other batches than
prep's: all-MiniLM-L6-v2's vectors differ in the last bits with the batch (CPU kernels are
chosen by shape), so there the scores must agree within 1e-5 and the rankings be the same
up to the order within ties (two computation paths: never float equality).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.cli.main import main

STORES = ("chroma", "txtai", "llamaindex", "langgraph", "langmem", "mem0")


def cli(build: Path, *args: str | Path) -> Result:
    result = CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def runs(build: Path) -> dict[str, Any]:
    return orjson.loads((build / "runs.json").read_bytes())["data"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A validated fixture build and one vector cache: every store here has the minilm
    embedder's identity, so `prep` for minilm feeds them all."""
    root = tmp_path_factory.mktemp("stores-e2e")
    cli(root / "base", "validate")
    cli(root / "base", "prep", "--cache", root / "cache", "--system", "minilm")
    return {"root": root, "build": root / "base", "cache": root / "cache"}


def staged(base: dict[str, Path], name: str, system: str, *options: str | Path) -> dict:
    build = base["root"] / f"{system}-{name}"
    shutil.copytree(base["build"], build)
    cli(build, "hydrate", "--system", system, *options)
    cli(build, "query", *options)
    return runs(build)


def rankings(data: dict) -> dict[str, list[tuple[str, str]]]:
    return {
        q["query_id"]: [(h["memory_id"], h["identifier"]) for h in q["hits"]]
        for q in data["queries"]
    }


@pytest.mark.parametrize("system", STORES)
def test_workers_and_cache_give_the_same_results(base: dict[str, Path], system: str) -> None:
    cache = base["cache"]
    one = staged(base, "w1", system, "--cache", cache)
    two = staged(base, "w2", system, "--cache", cache, "--workers", "2")
    assert one["system"] == system
    assert two == one  # every hit, score and scope, byte for byte
    assert sum(len(q["hits"]) for q in one["queries"]) > 0

    # without --cache the stages make the same cache in BUILD/vectors (the one embedding
    # path): the same bytes, not only the same rankings. For one store: the path is the
    # stages', the same for every store (each store's own vector lookup is the contract's
    # test_the_embedder_feeds_a_vector_cache), and each such run loads the model again
    if system == STORES[0]:
        auto = staged(base, "auto", system)
        assert auto == one


def test_compare_over_the_stores_on_a_generated_longmemeval_file(tmp_path: Path) -> None:
    """The stores side by side on conversational data: one store per question (scope)."""
    from recallbench.datasets.longmemeval.generator import generate

    data = tmp_path / "lme.json"
    generate(data, shape="s", questions=3, seed=3, sessions_per_question=4, session_chars=200)
    out = tmp_path / "compare.json"
    args = ["compare", "--dataset", "longmemeval", "--data", data, "--resamples", "200"]
    for name in ("minilm", *STORES):
        args += ["--system", name]
    cli(tmp_path / "build", *args, "--output", out, "--report", tmp_path / "c.md")
    doc = orjson.loads(out.read_bytes())
    assert [s["label"] for s in doc["systems"]] == ["minilm", *STORES]
    assert len(doc["comparisons"]) == len(STORES)
    for c in doc["comparisons"]:
        assert any(m["overall"]["queries"] > 0 for m in c["metrics"].values()), c["challenger"]
