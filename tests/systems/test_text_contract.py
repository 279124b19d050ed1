"""The text contract: every built-in system, on a fixture-format suite whose texts carry
leading and trailing whitespace, newlines and tabs (the committed fixtures, each fact and
query wrapped), runs hydrate and query from a prep cache and returns k hits for every query
when its store holds k (here: every memory, top-k above the store's size).

A store that changes a text before it embeds it says so (its embedder's `text_transform`;
mem0's search strips the query), and prep embeds that form too: without it, mem0 asks the
cache for a text prep never embedded. A cache made by a system without the transform is
refused at the up-front check, in one line naming the prep to run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.cli.main import main
from recallbench.core.embedding import covers, text_transforms, transformed
from recallbench.systems.registry import describe_systems

FIXTURES = Path(__file__).resolve().parents[2] / "benchmarks" / "retrieval"
#: what each text is wrapped in, in turn: spaces, tabs, newlines, carriage returns
WRAPS = [("  ", "  "), ("\t", "\t"), ("", "\n"), ("\n\n", "\r\n"), (" ", "\n\t"), ("\t ", " ")]
TOP_K = 100  # above every store's size: each query must get every memory of its scope
#: systems whose own search returns only hits of positive score, whitespace or not
#: (txtai: `embeddings/search/base.py` keeps `score > 0`; on the plain fixtures at top-k 100
#: it returns 51 to 80 of the 80 memories)
KEEPS_POSITIVE_SCORES = {"txtai"}
#: systems whose search drops hits of negative cosine (mem0 on its Qdrant store: its threshold,
#: 0, is on Qdrant's cosine; tests/systems/test_mem0_qdrant.py)
KEEPS_NON_NEGATIVE_SCORES = {"mem0-qdrant"}


def wrapped(text: str, n: int) -> str:
    before, after = WRAPS[n % len(WRAPS)]
    return f"{before}{text}{after}"


def write_suite(root: Path) -> tuple[Path, Path]:
    """The committed fixtures with every fact and query wrapped in whitespace."""
    corpus, queries = root / "corpus.jsonl", root / "queries.jsonl"
    lines = (FIXTURES / "corpus.jsonl").read_bytes().splitlines()
    corpus.write_bytes(
        b"".join(
            orjson.dumps({**(o := orjson.loads(line)), "fact": wrapped(o["fact"], n)}) + b"\n"
            for n, line in enumerate(lines)
        )
    )
    lines = (FIXTURES / "queries.jsonl").read_bytes().splitlines()
    queries.write_bytes(
        b"".join(
            orjson.dumps({**(o := orjson.loads(line)), "query": wrapped(o["query"], n + 1)}) + b"\n"
            for n, line in enumerate(lines)
        )
    )
    return corpus, queries


def cli(build: Path, *args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


def builtin_available() -> list[dict[str, Any]]:
    return [s for s in describe_systems() if s["source"] == "built-in" and s["available"]]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("text-contract")
    corpus, queries = write_suite(root)
    cli(root / "base", "validate", "--corpus", corpus, "--queries", queries)
    return {"root": root, "base": root / "base", "caches": {}}


def prep_cache(suite: dict[str, Any], system: str) -> Path:
    """One prep cache per (embedder identity, text transforms), made by `system`'s prep."""
    from recallbench.systems import get_system

    embedder = get_system(system).embedder
    key = (embedder.identity(), tuple(text_transforms(embedder).items()))
    if key not in suite["caches"]:
        cache = suite["root"] / f"cache-{len(suite['caches'])}"
        cli(suite["base"], "prep", "--cache", cache, "--system", system, "--workers", "1")
        suite["caches"][key] = cache
    return suite["caches"][key]


@pytest.mark.parametrize("system", [s["name"] for s in builtin_available()])
def test_every_builtin_system_returns_k_hits_on_texts_with_surrounding_whitespace(
    suite: dict[str, Any], system: str
) -> None:
    build = suite["root"] / system
    shutil.copytree(suite["base"], build)
    options: list[str | Path] = []
    if "embedder" in next(s for s in describe_systems() if s["name"] == system)["capabilities"]:
        options = ["--cache", prep_cache(suite, system)]
    cli(build, "hydrate", "--system", system, *options)
    cli(build, "query", "--top-k", TOP_K, *options)
    data = orjson.loads((build / "runs.json").read_bytes())["data"]
    memories = len((FIXTURES / "corpus.jsonl").read_bytes().splitlines())
    assert len(data["queries"]) == len((FIXTURES / "queries.jsonl").read_bytes().splitlines())
    for q in data["queries"]:
        # one scope holding every memory, top-k above its size: all of them come back
        ranking = q["levels"]["memory"]["ranking"]
        assert q["limit"] == memories
        assert len(ranking) == len(set(ranking))
        if system in KEEPS_POSITIVE_SCORES:  # fewer, and only for that reason
            assert 0 < len(ranking) <= memories
            assert all(score > 0 for score in q["levels"]["memory"]["scores"])
        elif system in KEEPS_NON_NEGATIVE_SCORES:
            assert 0 < len(ranking) <= memories
            assert all(score >= 0 for score in q["levels"]["memory"]["scores"])
        else:
            assert len(ranking) == memories, (q["query_id"], len(ranking))


def test_a_cache_without_mem0s_form_is_refused_in_one_line(suite: dict[str, Any]) -> None:
    """A cache prep made for `minilm` (texts as given) holds no stripped query: mem0 stops at
    its up-front check with the prep that makes one, before any store call."""
    if not any(s["name"] == "mem0" for s in builtin_available()):
        pytest.skip("mem0's extra is not installed")
    cache = prep_cache(suite, "minilm")
    build = suite["root"] / "mem0-minilm-cache"
    shutil.copytree(suite["base"], build)
    cli(build, "hydrate", "--system", "mem0", "--cache", cache)
    result = cli(build, "query", "--cache", cache, code=1)
    assert "no cached vector" in result.output
    assert "recallbench prep --system mem0" in result.output
    assert "Traceback" not in result.output


def test_transforms_by_role_and_what_a_cache_covers() -> None:
    class Declares:
        text_transform = {"query": "strip"}

    class Wraps:
        inner = Declares()

    class Plain:
        pass

    assert text_transforms(Plain()) == {}  # an embedder without the field: texts as given
    assert text_transforms(Wraps()) == {"query": "strip"}  # found along the inner chain
    assert transformed({"query": "strip"}, "query", " a\t") == "a"
    assert transformed({"query": "strip"}, "memory", " a\t") == " a\t"
    assert covers({"query": "strip"}, {"query": "strip"})
    assert covers({"query": "strip"}, {})
    assert not covers(None, {"query": "strip"})
