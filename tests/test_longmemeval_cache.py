"""Vector cache: exact scores vs inline embedding, no embedding on a cached run, mismatches."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from recallbench.artifacts import dumps, file_sha256
from recallbench.errors import RecallbenchError
from recallbench.longmemeval import stages
from recallbench.longmemeval.cache import KEYS, MANIFEST, VECTORS, VectorCache, text_key
from recallbench.longmemeval.generator import generate
from recallbench.systems.base import MissingVector


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("lme-cache")
    data = root / "d.json"
    generate(data, shape="s", questions=16, seed=9, sessions_per_question=8, session_chars=250)
    build = root / "build"
    stages.validate(data, build_dir=build, quiet=True)
    cache = root / "cache"
    out = stages.prep(data, cache_dir=cache, build_dir=build, quiet=True)
    inline = stages.run(data, build_dir=build, quiet=True)
    return {
        "root": root,
        "data": data,
        "build": build,
        "cache": cache,
        "prep": out,
        "inline": inline,
    }


def _copy_cache(setup: dict, tmp_path: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(setup["cache"], target)
    return target


def test_prep_embeds_each_distinct_text_once(setup: dict) -> None:
    manifest = setup["prep"]["manifest"]
    texts = manifest["texts"]
    assert manifest["count"] == texts["distinct_session_texts"] + texts["distinct_question_texts"]
    assert texts["session_texts_seen"] > texts["distinct_session_texts"]  # the shared pool
    assert manifest["embedder_identity"] == "hotmem-hash-v1@64"
    assert manifest["session_text"] == "user"
    assert manifest["data_file"]["sha256"] == file_sha256(setup["data"])
    assert (setup["cache"] / KEYS).stat().st_size == manifest["count"] * 32
    assert (setup["cache"] / VECTORS).stat().st_size == manifest["count"] * 64 * 4


def test_cached_scores_equal_inline_scores_exactly(setup: dict, tmp_path: Path) -> None:
    build = tmp_path / "b"
    shutil.copytree(setup["build"] / "longmemeval", build / "longmemeval")
    cached = stages.run(setup["data"], build_dir=build, cache_dir=setup["cache"], quiet=True)
    assert cached["data"]["vectors"] == "cache" and setup["inline"]["data"]["vectors"] == "inline"
    assert cached["data"]["questions"] == setup["inline"]["data"]["questions"]


def test_cached_run_computes_no_embedding(
    setup: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hotmem.embed

    def refuse(self: object, text: str) -> list[float]:
        raise AssertionError("embedded a text during a cached run")

    monkeypatch.setattr(hotmem.embed.HashEmbedder, "embed", refuse)
    build = tmp_path / "b"
    shutil.copytree(setup["build"] / "longmemeval", build / "longmemeval")
    env = stages.run(
        setup["data"], build_dir=build, cache_dir=setup["cache"], workers=1, quiet=True
    )
    assert len(env["data"]["questions"]) == 15
    with pytest.raises(AssertionError, match="embedded a text"):
        stages.run(setup["data"], build_dir=build, workers=1, quiet=True)


def test_lookup_hit_and_miss(setup: dict) -> None:
    manifest = setup["prep"]["manifest"]
    cache = VectorCache.open(
        setup["cache"],
        embedder_identity=manifest["embedder_identity"],
        data_sha256=manifest["data_file"]["sha256"],
        session_text="user",
    )
    try:
        question = orjson.loads(setup["data"].read_bytes())[0]["question"]
        vector = cache.lookup(question)
        assert len(vector) == 64 and question in cache
        with pytest.raises(MissingVector, match="no cached vector"):
            cache.lookup("a text prep never saw")
    finally:
        cache.close()


def _run(setup: dict, tmp_path: Path, cache: Path, **kw) -> dict:
    build = tmp_path / "b"
    if not build.exists():
        shutil.copytree(setup["build"] / "longmemeval", build / "longmemeval")
    return stages.run(setup["data"], build_dir=build, cache_dir=cache, quiet=True, **kw)


def test_missing_cache(setup: dict, tmp_path: Path) -> None:
    with pytest.raises(RecallbenchError, match="no vector cache here"):
        _run(setup, tmp_path, tmp_path / "nothing")


def test_session_text_mismatch(setup: dict, tmp_path: Path) -> None:
    with pytest.raises(
        RecallbenchError, match="made for --session-text user, this run uses --session-text all"
    ):
        _run(setup, tmp_path, setup["cache"], session_text="all")


def _edit_manifest(cache: Path, **changes) -> None:
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    manifest.update(changes)
    (cache / MANIFEST).write_bytes(dumps(manifest))


def test_embedder_mismatch(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    _edit_manifest(cache, embedder_identity="some-other-model@384")
    with pytest.raises(RecallbenchError, match="made by embedder 'some-other-model@384'"):
        _run(setup, tmp_path, cache)


def test_data_file_mismatch(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    _edit_manifest(cache, data_file={"name": "x.json", "sha256": "0" * 64, "size_bytes": 1})
    with pytest.raises(RecallbenchError, match="made from another data file"):
        _run(setup, tmp_path, cache)


def test_damaged_vectors(setup: dict, tmp_path: Path) -> None:
    cache = _copy_cache(setup, tmp_path)
    with open(cache / VECTORS, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(RecallbenchError, match="not the size its manifest says"):
        _run(setup, tmp_path, cache)
    cache = tmp_path / "cache2"
    shutil.copytree(setup["cache"], cache)
    raw = bytearray((cache / VECTORS).read_bytes())
    raw[0] ^= 0xFF
    (cache / VECTORS).write_bytes(bytes(raw))
    with pytest.raises(RecallbenchError, match="does not match its manifest's sha256"):
        _run(setup, tmp_path, cache)


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
    for workers in (1, 2):
        with pytest.raises(RecallbenchError, match="no cached vector for a text"):
            _run(setup, tmp_path, cache, workers=workers)


def test_prep_with_two_workers_writes_the_same_cache(setup: dict, tmp_path: Path) -> None:
    cache = tmp_path / "c2"
    stages.prep(setup["data"], cache_dir=cache, build_dir=setup["build"], workers=2, quiet=True)
    for name in (KEYS, VECTORS):
        assert (cache / name).read_bytes() == (setup["cache"] / name).read_bytes()
