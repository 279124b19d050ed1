"""The vector cache on LongMemEval data: exact scores vs inline embedding, no embedding on a
cached query, one-line refusals of a cache made for another embedder, file or reader
options, damaged files, and MissingVector."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.artifacts import dumps, file_sha256
from recallbench.cache import KEYS, MANIFEST, VECTORS, VectorCache, text_key
from recallbench.cli import main
from recallbench.datasets.longmemeval.generator import generate
from recallbench.datasets.longmemeval.reader import open_source
from recallbench.model import Scope
from recallbench.systems.base import MissingVector


def cli(build: Path, *args: str | Path) -> Result:
    """`recallbench --build-dir BUILD ARGS...` in process."""
    return CliRunner().invoke(main, ["--build-dir", str(build), *map(str, args)])


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def one_line_error(result: Result, command: str) -> str:
    """The single stderr line of a failed command (exit 1, no traceback)."""
    assert result.exit_code == 1, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"recallbench {command}: error: ")
    return lines[0]


def validate(build: Path, data: Path, *options: str) -> None:
    ok(cli(build, "validate", "--dataset", "longmemeval", "--data", data, *options))


def runs_data(build: Path) -> dict[str, Any]:
    return orjson.loads((build / "runs.json").read_bytes())["data"]


def cached_query(build: Path, cache: Path, *extra: str) -> Result:
    """hydrate (transient stores) and query with HotMem and the cache; query's result."""
    ok(cli(build, "hydrate", "--system", "hotmem"))
    return cli(build, "query", "--cache", cache, *extra)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("lme-cache")
    data = root / "d.json"
    generate(data, shape="s", questions=12, seed=1, sessions_per_question=8, session_chars=300)
    build, cache = root / "build", root / "cache"
    validate(build, data)
    prep = ok(cli(build, "prep", "--cache", cache, "--system", "hotmem"))
    ok(cli(build, "hydrate", "--system", "hotmem"))
    ok(cli(build, "query"))
    return {
        "root": root,
        "data": data,
        "suite": orjson.loads((build / "suite.json").read_bytes()),
        "cache": cache,
        "prep_output": prep.stderr,
        "manifest": orjson.loads((cache / MANIFEST).read_bytes()),
        "inline": runs_data(build),
    }


def _copy_cache(setup: dict, tmp_path: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(setup["cache"], target)
    return target


def _edit_manifest(cache: Path, **changes: Any) -> None:
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    manifest.update(changes)
    (cache / MANIFEST).write_bytes(dumps(manifest))


def test_prep_embeds_each_distinct_text_once(setup: dict) -> None:
    manifest = setup["manifest"]
    texts = set()
    seen = 0
    for _, scope in scopes_of(setup["suite"]):
        scope_texts = [q.text for q in scope.queries] + [m.text for m in scope.memories]
        seen += len(scope_texts)
        texts.update(scope_texts)
    assert manifest["count"] == len(texts) == manifest["texts"]["distinct"]
    assert manifest["texts"]["seen"] == seen > len(texts)  # the shared filler pool
    assert manifest["embedder_identity"] == "hotmem-hash-v1@64"
    assert manifest["system"] == "hotmem"
    assert manifest["source"] == cache_source(setup["suite"])
    assert manifest["source"] == {
        "dataset": "longmemeval",
        "files": [{"role": "data", "sha256": file_sha256(setup["data"])}],
        "options": {"session_text": "user", "unit": "session"},
    }
    assert (setup["cache"] / KEYS).stat().st_size == manifest["count"] * 32
    assert (setup["cache"] / VECTORS).stat().st_size == manifest["count"] * 64 * 4
    assert "timing" not in orjson.loads((setup["cache"] / MANIFEST).read_bytes())


def test_cached_scores_equal_inline_scores_exactly(setup: dict, tmp_path: Path) -> None:
    cached = query(setup["suite"], tmp_path, cache=setup["cache"])
    assert cached["data"] == setup["inline"]["data"]
    assert len(cached["data"]["queries"]) == 11


def test_cached_query_computes_no_embedding(
    setup: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hotmem.embed

    def refuse(self: object, text: str) -> list[float]:
        raise AssertionError("embedded a text during a cached run")

    monkeypatch.setattr(hotmem.embed.HashEmbedder, "embed", refuse)
    runs = query(setup["suite"], tmp_path / "a", cache=setup["cache"])
    assert len(runs["data"]["queries"]) == 11
    with pytest.raises(AssertionError, match="embedded a text"):
        query(setup["suite"], tmp_path / "b")


def test_lookup_hit_and_miss(setup: dict) -> None:
    manifest = setup["manifest"]
    cache = VectorCache.open(
        setup["cache"],
        embedder_identity=manifest["embedder_identity"],
        source=manifest["source"],
    )
    try:
        question = orjson.loads(setup["data"].read_bytes())[0]["question"]
        vector = cache.lookup(question)
        assert len(vector) == 64 and question in cache
        with pytest.raises(MissingVector, match="no cached vector"):
            cache.lookup("a text prep never saw")
    finally:
        cache.close()


def test_missing_cache(setup: dict, tmp_path: Path) -> None:
    with pytest.raises(RecallbenchError, match="no vector cache here"):
        query(setup["suite"], tmp_path, cache=tmp_path / "nothing")


@pytest.mark.parametrize(
    ("options", "made_with"),
    [
        ({"unit": "turn"}, "'unit': 'turn'"),
        ({"session_text": "all"}, "'session_text': 'all'"),
    ],
)
def test_other_reader_options(setup: dict, tmp_path: Path, options: dict, made_with: str) -> None:
    suite = run_validate("longmemeval", {"data": setup["data"]}, options)
    with pytest.raises(RecallbenchError) as err:
        query(suite, tmp_path, cache=setup["cache"])
    message = str(err.value)
    assert "vectors were made with reader options" in message and made_with in message
    assert "run `recallbench prep --cache" in message and "\n" not in message


def test_embedder_mismatch(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    _edit_manifest(cache, embedder_identity="some-other-model@384")
    with pytest.raises(RecallbenchError, match="made by embedder 'some-other-model@384'"):
        query(setup["suite"], tmp_path / "w", cache=cache)


def test_other_data_file(setup: dict, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    generate(other, shape="s", questions=4, seed=2, sessions_per_question=4, session_chars=60)
    suite = run_validate("longmemeval", {"data": other}, {})
    with pytest.raises(RecallbenchError, match="made from other data files than suite.json names"):
        query(suite, tmp_path / "w", cache=setup["cache"])


def test_damaged_vectors(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    with open(cache / VECTORS, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(RecallbenchError, match="not the size its manifest says"):
        query(setup["suite"], tmp_path / "w", cache=cache)
    cache = tmp_path / "cache2"
    shutil.copytree(setup["cache"], cache)
    raw = bytearray((cache / VECTORS).read_bytes())
    raw[0] ^= 0xFF
    (cache / VECTORS).write_bytes(bytes(raw))
    with pytest.raises(RecallbenchError, match="does not match its manifest's sha256"):
        query(setup["suite"], tmp_path / "w", cache=cache)


def test_missing_vector_stops_the_run(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    question = orjson.loads(setup["data"].read_bytes())[0]["question"]
    keys = bytearray((cache / KEYS).read_bytes())
    at = bytes(keys).index(text_key(question))
    keys[at : at + 32] = b"\0" * 32
    (cache / KEYS).write_bytes(bytes(keys))
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    manifest["files"][KEYS]["sha256"] = file_sha256(cache / KEYS)
    (cache / MANIFEST).write_bytes(dumps(manifest))
    for workers in (1, 2):  # the worker's MissingVector comes back as itself
        with pytest.raises(MissingVector, match="no cached vector for a text"):
            query(setup["suite"], tmp_path / f"w{workers}", cache=cache, workers=workers)


def test_prep_with_two_workers_writes_the_same_cache(setup: dict, tmp_path: Path) -> None:
    cache = tmp_path / "c2"
    manifest = run_prep(setup["suite"], cache, "hotmem", workers=2)
    assert manifest["count"] == setup["manifest"]["count"]
    for name in (KEYS, VECTORS, MANIFEST):
        assert (cache / name).read_bytes() == (setup["cache"] / name).read_bytes(), name


def test_cli_prep_and_cached_query(setup: dict, tmp_path: Path) -> None:
    build = tmp_path / "b"
    runner = CliRunner()

    def call(*args: str | Path) -> Any:
        return runner.invoke(main, ["--build-dir", str(build), *map(str, args)])

    assert call("validate", "--dataset", "longmemeval", "--data", setup["data"]).exit_code == 0
    prep = call("prep", "--cache", tmp_path / "cache", "--system", "hotmem")
    assert prep.exit_code == 0, prep.output
    assert f"{setup['manifest']['count']} vectors (hotmem-hash-v1@64)" in prep.stderr
    assert call("hydrate", "--cache", tmp_path / "cache").exit_code == 0
    assert call("query", "--cache", tmp_path / "cache").exit_code == 0
    runs = orjson.loads((build / "runs.json").read_bytes())
    assert runs["data"] == setup["inline"]["data"]
    for args, message in (
        (("query", "--cache", tmp_path / "nope"), "no vector cache here"),
        (("prep", "--cache", tmp_path / "c3", "--system", "bm25"), "bm25 has no embedder"),
    ):
        result = call(*args)
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], result.stderr
        assert "Traceback" not in result.output
