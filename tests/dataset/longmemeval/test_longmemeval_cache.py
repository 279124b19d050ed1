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

from recallbench.builddir.artifacts import dumps, file_sha256
from recallbench.cli.main import main
from recallbench.core.model import Scope
from recallbench.datasets.longmemeval.generator import generate
from recallbench.datasets.longmemeval.reader import open_source
from recallbench.engine.vectorcache import (
    FILES,
    KEYS,
    MANIFEST,
    OFFSETS,
    SCOPES,
    VECTORS,
    ScopeLookup,
    VectorCache,
    rows_dir,
    text_key,
)
from recallbench.systems.base import MissingVector


def cache_file(cache: Path, name: str) -> Path:
    """A cache file where the cache's manifest says its rows are."""
    return rows_dir(cache, orjson.loads((cache / MANIFEST).read_bytes())) / name


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
    source = open_source({"data": setup["data"]}, {})
    scopes = [s for s in source.stream() if isinstance(s, Scope)]
    seen = [t for s in scopes for t in [q.text for q in s.queries] + [m.text for m in s.memories]]
    assert manifest["count"] == len(set(seen)) == manifest["texts"]["distinct"]
    assert manifest["texts"]["seen"] == len(seen) > len(set(seen))  # the shared filler pool
    assert manifest["embedder_identity"] == "hotmem-hash-v1@64"
    assert manifest["system"] == "hotmem"
    # made for this file with these reader options (what a later run is checked against)
    assert manifest["source"] == {
        "dataset": "longmemeval",
        "files": [{"role": "data", "sha256": file_sha256(setup["data"])}],
        "options": {"session_text": "user", "unit": "session"},
        "spool_sha256": setup["suite"]["data"]["spool"]["sha256"],
    }
    assert cache_file(setup["cache"], KEYS).stat().st_size == manifest["count"] * 32
    assert cache_file(setup["cache"], VECTORS).stat().st_size == manifest["count"] * 64 * 4
    assert cache_file(setup["cache"], OFFSETS).stat().st_size == (manifest["scopes"] + 1) * 8
    assert cache_file(setup["cache"], SCOPES).stat().st_size == manifest["texts"]["seen"] * 4
    assert "timing" not in manifest
    assert f"{manifest['count']} vectors (hotmem-hash-v1@64)" in setup["prep_output"]


def _open(setup: dict) -> VectorCache:
    manifest = setup["manifest"]
    return VectorCache.open(
        setup["cache"], embedder_identity=manifest["embedder_identity"], source=manifest["source"]
    )


def test_scope_rows_are_the_rows_of_each_scopes_texts(setup: dict) -> None:
    """scopes.bin: for every scope of the spool, its query then memory texts' rows, each
    the row whose key is that text's sha256 (checked here for every text, not sampled)."""
    source = open_source({"data": setup["data"]}, {})
    scopes = [s for s in source.stream() if isinstance(s, Scope)]
    assert setup["manifest"]["scopes"] == len(scopes)
    keys = cache_file(setup["cache"], KEYS).read_bytes()
    cache = _open(setup)
    try:
        for index, scope in enumerate(scopes):
            queries = [q.text for q in scope.queries]
            memories = [m.text for m in scope.memories]
            rows = cache.scope_rows(index, queries, memories)
            assert len(rows) == len(queries) + len(memories)
            for text, row in zip(queries + memories, rows, strict=True):
                assert keys[row * 32 : (row + 1) * 32] == text_key(text)
                assert cache.vector(row) == cache.lookup(text)
    finally:
        cache.close()


def test_scope_lookup_by_identity_and_by_key(setup: dict) -> None:
    """The texts given to `use` are found by identity; an equal copy by its sha256 (same
    vector); a text the cache never saw raises MissingVector."""
    source = open_source({"data": setup["data"]}, {})
    scope = next(s for s in source.stream() if isinstance(s, Scope))
    cache = _open(setup)
    try:
        lookup = ScopeLookup(cache)
        queries = [q.text for q in scope.queries]
        memories = [m.text for m in scope.memories]
        lookup.use(0, queries, memories)
        text = memories[0]
        copy = "".join(list(text))
        assert copy == text and copy is not text
        expected = cache.lookup(text)
        assert lookup(text) == lookup(copy) == expected
        with pytest.raises(MissingVector):
            lookup(text + " (never embedded)")
        with pytest.raises(Exception, match="do not fit its texts"):
            lookup.use(0, queries, memories[:-1])
        with pytest.raises(Exception, match="no rows for scope"):
            lookup.use(setup["manifest"]["scopes"], queries, memories)
    finally:
        cache.close()


def test_cached_scores_equal_inline_scores_exactly(setup: dict, tmp_path: Path) -> None:
    validate(tmp_path, setup["data"])
    ok(cached_query(tmp_path, setup["cache"]))
    cached = runs_data(tmp_path)
    assert cached == setup["inline"]
    assert len(cached["queries"]) == 11


@pytest.mark.parametrize("stores", ["--transient", "--keep-stores"])
def test_a_cached_run_computes_no_embedding(
    setup: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stores: str
) -> None:
    """hydrate, query and snapshot-roundtrip with --cache: every vector (stored texts and
    queries, on the source store and on the restored clone) comes from the cache."""
    import hotmem.embed

    def refuse(self: object, text: str) -> list[float]:
        raise AssertionError("embedded a text during a cached run")

    validate(tmp_path, setup["data"])
    monkeypatch.setattr(hotmem.embed.HashEmbedder, "embed", refuse)
    cache = setup["cache"]
    ok(cli(tmp_path, "hydrate", "--system", "hotmem", stores, "--cache", cache))
    ok(cli(tmp_path, "query", "--cache", cache))  # one worker: in this process
    # the same searches; kept stores also carry the digest hydrate recorded
    runs = runs_data(tmp_path)
    scopes = [{k: v for k, v in s.items() if k != "digest"} for s in runs["scopes"]]
    assert runs | {"scopes": scopes} == setup["inline"] | {"store_mode": runs["store_mode"]}
    ok(cli(tmp_path, "snapshot-roundtrip", "--cache", cache))
    roundtrip = orjson.loads((tmp_path / "roundtrip.json").read_bytes())["data"]
    assert roundtrip["equivalence"]["value"] == 1.0
    inline = cli(tmp_path, "query")  # embeds: the refusal inside the store is one line
    assert inline.exit_code == 1, inline.output
    assert "system 'hotmem': " in inline.stderr
    assert "raised AssertionError: embedded a text" in inline.stderr


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
    validate(tmp_path, setup["data"])
    line = one_line_error(cached_query(tmp_path, tmp_path / "nothing"), "query")
    assert "no vector cache here" in line


@pytest.mark.parametrize(
    ("options", "made_with"),
    [
        (("--unit", "turn"), "'unit': 'turn'"),
        (("--session-text", "all"), "'session_text': 'all'"),
    ],
)
def test_other_reader_options(
    setup: dict, tmp_path: Path, options: tuple[str, str], made_with: str
) -> None:
    validate(tmp_path, setup["data"], *options)
    line = one_line_error(cached_query(tmp_path, setup["cache"]), "query")
    assert "vectors were made with reader options" in line and made_with in line
    assert "run `recallbench prep --cache" in line


def test_embedder_mismatch(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    _edit_manifest(cache, embedder_identity="some-other-model@384")
    validate(tmp_path / "b", setup["data"])
    line = one_line_error(cached_query(tmp_path / "b", cache), "query")
    assert "made by embedder 'some-other-model@384'" in line


def test_other_data_file(setup: dict, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    generate(other, shape="s", questions=4, seed=2, sessions_per_question=4, session_chars=60)
    validate(tmp_path / "b", other)
    line = one_line_error(cached_query(tmp_path / "b", setup["cache"]), "query")
    assert "made from other data files than suite.json names" in line


def test_damaged_vectors(setup: dict, tmp_path: Path) -> None:
    validate(tmp_path / "b", setup["data"])
    cache = _copy_cache(setup, tmp_path)
    with open(cache_file(cache, VECTORS), "r+b") as handle:
        handle.truncate(100)
    line = one_line_error(cached_query(tmp_path / "b", cache), "query")
    assert "not the size its manifest says" in line
    cache = tmp_path / "cache2"
    shutil.copytree(setup["cache"], cache)
    raw = bytearray(cache_file(cache, VECTORS).read_bytes())
    raw[0] ^= 0xFF
    cache_file(cache, VECTORS).write_bytes(bytes(raw))
    line = one_line_error(cached_query(tmp_path / "b", cache), "query")
    assert "does not match its manifest's sha256" in line


def _forge(cache: Path, name: str, blob: bytes) -> None:
    """Replace a cache file and record its new sha256 in the manifest (a cache whose files
    agree with its manifest, but not with the data)."""
    cache_file(cache, name).write_bytes(blob)
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    manifest["files"][name]["sha256"] = file_sha256(cache_file(cache, name))
    (cache / MANIFEST).write_bytes(dumps(manifest))


def test_rows_that_are_not_the_scopes_texts_stop_the_run(setup: dict, tmp_path: Path) -> None:
    """A question's key zeroed in keys.bin, or a scope's rows shifted in scopes.bin (each
    with a manifest that agrees): refused in one line, whichever worker finds it."""
    question = orjson.loads(setup["data"].read_bytes())[0]["question"]
    validate(tmp_path / "b", setup["data"])
    cache = _copy_cache(setup, tmp_path)
    keys = bytearray(cache_file(cache, KEYS).read_bytes())
    at = bytes(keys).index(text_key(question))
    keys[at : at + 32] = b"\0" * 32
    _forge(cache, KEYS, bytes(keys))
    for workers in ("1", "2"):  # a worker's error comes back as one line too
        line = one_line_error(cached_query(tmp_path / "b", cache, "--workers", workers), "query")
        assert "scope 0's rows are not its texts'; run `recallbench prep" in line
    shutil.rmtree(cache)
    cache = _copy_cache(setup, tmp_path)
    rows = cache_file(cache, SCOPES).read_bytes()
    _forge(cache, SCOPES, rows[4:] + rows[:4])  # every row one place earlier
    line = one_line_error(cached_query(tmp_path / "b", cache), "query")
    assert "scope 0's rows are not its texts'" in line


def test_a_cache_of_another_spool_is_refused(setup: dict, tmp_path: Path) -> None:
    """The rows follow the spool's scopes: a cache made for another spool of the same data
    (another recallbench's validate, say) is refused before any lookup."""
    cache = _copy_cache(setup, tmp_path)
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    manifest["source"]["spool_sha256"] = "0" * 64
    (cache / MANIFEST).write_bytes(dumps(manifest))
    validate(tmp_path / "b", setup["data"])
    line = one_line_error(cached_query(tmp_path / "b", cache), "query")
    assert "made for another validation of this data" in line


def test_prep_with_two_workers_writes_the_same_cache(setup: dict, tmp_path: Path) -> None:
    validate(tmp_path / "b", setup["data"])
    ok(cli(tmp_path / "b", "prep", "--cache", tmp_path / "c2", "--workers", "2"))
    for name in FILES:
        assert (
            cache_file(tmp_path / "c2", name).read_bytes()
            == cache_file(setup["cache"], name).read_bytes()
        ), name
    assert (tmp_path / "c2" / MANIFEST).read_bytes() == (setup["cache"] / MANIFEST).read_bytes()


def test_a_system_without_embedder_needs_no_cache(setup: dict, tmp_path: Path) -> None:
    validate(tmp_path, setup["data"])
    line = one_line_error(
        cli(tmp_path, "prep", "--cache", tmp_path / "c", "--system", "bm25"), "prep"
    )
    assert "bm25 has no embedder" in line
    ok(cli(tmp_path, "hydrate", "--system", "bm25"))
    line = one_line_error(cli(tmp_path, "query", "--cache", setup["cache"]), "query")
    assert "--cache: bm25 has no embedder" in line
