"""Vectors from anywhere (issue 43): `recallbench prep --import FILE` fills a vector cache
from a file of vectors made elsewhere, so a store's own model is measured through the
cache. Vectors exported from a MiniLM cache and imported under another name (for a system
whose embedder has that name) give the same rankings as the MiniLM cache; vectors named by
memory and query id work as by text sha256; a malformed file is one line naming the
record."""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from conftest import CORPUS, QUERIES
from plugintools import install_plugin

from recallbench.builddir.scopespool import SPOOL, stream_scopes
from recallbench.cli.main import main
from recallbench.commands.pipeline import run_pipeline
from recallbench.core.errors import RecallbenchError
from recallbench.engine.tasks import Execution
from recallbench.engine.vectorcache import export_vectors, read_manifest
from recallbench.engine.vectorprep import import_vector_cache, make_vector_cache
from recallbench.stages.validate import place_spool, run_validate

#: MiniLM's store under another embedder name: it has no model of its own here (its
#: `embed_texts` refuses), so its vectors can only come from a cache
RENAMED = textwrap.dedent(
    '''
    from recallbench.plugin import RecallbenchError, get_system

    NAME = "minilm-exported"


    class RenamedEmbedder:
        max_tokens = None

        def identity(self):
            return NAME

        def embed_texts(self, texts):
            raise RecallbenchError("no model here: the vectors come from the cache")

        def token_counts(self, texts):
            return [len(t.split()) for t in texts]


    class Renamed:
        """MiniLM's exact-cosine store over vectors imported under another name."""

        clone = None
        lexical = False

        def __init__(self):
            self.name = "renamed-minilm"
            self.inner = get_system("minilm")
            self.embedder = RenamedEmbedder()

        def configuration(self):
            return {"store": "minilm's", "vectors": NAME}

        def open_store(self, directory, *, vectors=None):
            return self.inner.open_store(directory, vectors=vectors)

        def attach(self, directory, *, vectors=None):
            return self.inner.attach(directory, vectors=vectors)

        def seconds_inside(self):
            return self.inner.seconds_inside()


    def make():
        return Renamed()
    '''
)


def validated(work: Path) -> dict:
    suite = run_validate("fixtures", {"corpus": CORPUS, "queries": QUERIES}, spool=work / SPOOL)
    place_spool(suite)
    return suite


def hits(run) -> dict[str, list[tuple[str, float]]]:
    rows = run.envelopes["runs"]["data"]["queries"]
    return {r["query_id"]: [(h["memory_id"], h["score"]) for h in r["hits"]] for r in rows}


@pytest.fixture
def renamed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with install_plugin(monkeypatch, tmp_path, "rb_renamed", RENAMED, {"renamed-minilm": "make"}):
        yield


def test_minilm_vectors_exported_and_imported_under_another_name_rank_the_same(
    renamed, tmp_path: Path
) -> None:
    suite = validated(tmp_path / "suite")
    minilm_cache = tmp_path / "minilm-cache"
    make_vector_cache(suite, minilm_cache, "minilm")
    file = tmp_path / "vectors.jsonl"
    header = export_vectors(minilm_cache, file, "minilm-exported")
    assert header["normalized"] and header["dimension"] == 384
    imported = tmp_path / "imported"
    manifest = import_vector_cache(suite, imported, "renamed-minilm", file)
    assert manifest["embedder_identity"] == "minilm-exported"
    assert (
        manifest["imported"]["vectors_used"]
        == manifest["count"]
        == read_manifest(minilm_cache)["count"]
    )

    def run(system: str, cache: Path):
        work = tmp_path / system
        return run_pipeline(
            "fixtures",
            {"corpus": CORPUS, "queries": QUERIES},
            work,
            system=system,
            execution=Execution(cache=cache),
            sample=1,
        )

    reference, through_import = run("minilm", minilm_cache), run("renamed-minilm", imported)
    assert hits(through_import) == hits(reference)
    assert any(hits(reference).values())
    assert through_import.result["metrics"] == reference.result["metrics"]


def _write(path: Path, header: dict | None, *records: dict | str) -> Path:
    lines = [] if header is None else [orjson.dumps(header).decode()]
    lines += [r if isinstance(r, str) else orjson.dumps(r).decode() for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


HASH = "hotmem-hash-v1@64"


def _header(**changes) -> dict:
    return {
        "format": "recallbench-vectors-import",
        "version": 1,
        "embedder": HASH,
        "dimension": 64,
        "normalized": False,
        **changes,
    }


@pytest.fixture(scope="module")
def hash_suite(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return validated(tmp_path_factory.mktemp("hash-suite"))


def test_vectors_by_memory_and_query_id_fill_the_cache(hash_suite, tmp_path: Path) -> None:
    """The hash embedder's own vectors, named by id, make the same cache as prep's (the
    vectors, the rows, the scopes), and a text named both ways takes its sha256's."""
    from recallbench.systems import get_system

    made = make_vector_cache(hash_suite, tmp_path / "prep", "hotmem")
    embedder = get_system("hotmem").embedder
    (_, scope), *_ = stream_scopes(hash_suite)
    named = [("query_id", q["query_id"], q["text"]) for q in scope["queries"]]
    named += [("memory_id", m["memory_id"], m["text"]) for m in scope["memories"]]
    vectors = embedder.embed_texts([text for _, _, text in named])
    records = [
        {key: value, "vector": vector}
        for (key, value, _), vector in zip(named, vectors, strict=True)
    ]
    records.append({"query_id": "q-not-in-this-suite", "vector": vectors[0]})
    file = _write(tmp_path / "ids.jsonl", _header(), *records)
    manifest = import_vector_cache(hash_suite, tmp_path / "imported", "hotmem", file)
    assert manifest["files"] == made["files"]  # byte for byte the cache prep made
    assert manifest["imported"]["vectors_in_file"] == len(records)
    assert manifest["imported"]["vectors_used"] == made["count"] < len(records)


@pytest.mark.parametrize(
    ("header", "record", "message"),
    [
        (None, {"text_sha256": "0" * 64, "vector": [0.0] * 64}, "line 1: not a vectors header"),
        (_header(version=2), None, "line 1: version 2 (this recallbench reads 1)"),
        (_header(dimension=0), None, "line 1: 'dimension' must be a whole number >= 1, not 0"),
        (
            _header(),
            {"memory_id": "mem-fin-001", "vector": [0.0] * 63},
            "line 2 (memory_id 'mem-fin-001'): vector has 63 numbers, the header says 64",
        ),
        (
            _header(),
            {"query_id": "q-lexical-001", "vector": [1e39] + [0.0] * 63},
            "line 2 (query_id 'q-lexical-001'): vector holds a value that is not a finite number",
        ),
        (
            _header(normalized=True),
            {"memory_id": "mem-fin-001", "vector": [2.0] + [0.0] * 63},
            "line 2 (memory_id 'mem-fin-001'): vector has length 2; the header says the "
            "vectors are normalized",
        ),
        (
            _header(),
            {"text_sha256": "XYZ", "vector": [0.0] * 64},
            "line 2 (text_sha256 'XYZ'): not a sha256 (64 lowercase hex digits)",
        ),
        (
            _header(),
            {"memory_id": "m", "query_id": "q", "vector": [0.0] * 64},
            "line 2: must name its text by exactly one of text_sha256, memory_id, query_id",
        ),
        (_header(), "{not json", "line 2: not valid JSON"),
        (
            _header(embedder="another-model"),
            None,
            "vectors of embedder 'another-model', but hotmem embeds with 'hotmem-hash-v1@64'",
        ),
        (
            _header(),
            {"memory_id": "mem-fin-001", "vector": [0.0] * 64},
            "no vector for query 'q-lexical-001' of scope suite (text sha256 ",
        ),
    ],
)
def test_a_malformed_file_is_one_line_naming_the_record(
    hash_suite, tmp_path: Path, header, record, message
) -> None:
    file = _write(tmp_path / "bad.jsonl", header, *([] if record is None else [record]))
    with pytest.raises(RecallbenchError) as refused:
        import_vector_cache(hash_suite, tmp_path / "cache", "hotmem", file)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith(str(file))
    assert not (tmp_path / "cache" / "manifest.json").exists()  # nothing half-written


def test_a_repeated_record_names_both_lines(hash_suite, tmp_path: Path) -> None:
    record = {"memory_id": "mem-fin-001", "vector": [0.0] * 64}
    file = _write(tmp_path / "twice.jsonl", _header(), record, record)
    with pytest.raises(RecallbenchError, match=r"line 3 \(memory_id 'mem-fin-001'\): a second "):
        import_vector_cache(hash_suite, tmp_path / "cache", "hotmem", file)


def test_prep_import_on_the_command_line(tmp_path: Path) -> None:
    """`recallbench prep --import` says what it imported; a bad file exits 1, one line."""
    runner = CliRunner()
    build = ["--build-dir", str(tmp_path / "build")]
    assert runner.invoke(main, [*build, "validate"]).exit_code == 0
    made = runner.invoke(main, [*build, "prep", "--cache", str(tmp_path / "c1")])
    assert made.exit_code == 0, made.output
    export_vectors(tmp_path / "c1", tmp_path / "v.jsonl", HASH)
    done = runner.invoke(
        main,
        [*build, "prep", "--cache", str(tmp_path / "c2"), "--import", str(tmp_path / "v.jsonl")],
    )
    assert done.exit_code == 0, done.output
    assert "vectors imported from" in done.stderr and "(hotmem-hash-v1@64, 64 dimensions" in (
        done.stderr
    )
    bad = _write(tmp_path / "bad.jsonl", _header(dimension=-3))
    refused = runner.invoke(
        main, [*build, "prep", "--cache", str(tmp_path / "c3"), "--import", str(bad)]
    )
    assert refused.exit_code == 1
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"recallbench prep: error: {bad}: line 1: 'dimension'")
    assert not (tmp_path / "c3" / "manifest.json").exists()


def test_a_query_id_equal_to_a_memory_id_is_two_holders(tmp_path: Path) -> None:
    """Ids are per kind: a fixture query may carry a memory's id (validate allows it), and
    each gets its own vector by id (the check of a holder's one text was keyed by the id
    alone, and refused such a file: "memory id 'mem-fin-001' holds two different texts")."""
    from recallbench.systems import get_system

    queries = tmp_path / "queries.jsonl"
    lines = QUERIES.read_bytes().splitlines()
    first = orjson.loads(lines[0])
    first["query_id"] = "mem-fin-001"
    queries.write_bytes(b"\n".join([orjson.dumps(first), *lines[1:]]) + b"\n")
    suite = run_validate("fixtures", {"corpus": CORPUS, "queries": queries}, spool=tmp_path / SPOOL)
    place_spool(suite)
    made = make_vector_cache(suite, tmp_path / "prep", "hotmem")
    embedder = get_system("hotmem").embedder
    (_, scope), *_ = stream_scopes(suite)
    named = [("query_id", q["query_id"], q["text"]) for q in scope["queries"]]
    named += [("memory_id", m["memory_id"], m["text"]) for m in scope["memories"]]
    vectors = embedder.embed_texts([text for _, _, text in named])
    records = [{k: v, "vector": vec} for (k, v, _), vec in zip(named, vectors, strict=True)]
    file = _write(tmp_path / "ids.jsonl", _header(), *records)
    manifest = import_vector_cache(suite, tmp_path / "imported", "hotmem", file)
    assert manifest["files"] == made["files"]


def test_a_cache_extended_with_another_roles_forms_counts_each_form_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache made for one role's forms, extended for another role's, is the cache made at
    once for both: the same rows and the same count of form rows (the extension added the
    old cache's form count to forms it had embedded anew, all of them, so a later extension
    would have copied form rows as text rows)."""
    import recallbench.core.embedding as embedding

    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    for source, target, field in ((CORPUS, corpus, "fact"), (QUERIES, queries, "query")):
        lines = [orjson.loads(line) for line in source.read_bytes().splitlines() if line]
        for n, record in enumerate(lines):
            if n % 3 == 0:  # a third of the texts have a stripped form of their own
                record[field] = f"  {record[field]} "
        target.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    suite = run_validate("fixtures", {"corpus": corpus, "queries": queries}, spool=tmp_path / SPOOL)
    place_spool(suite)

    def made(transforms: dict, directory: Path, extend: bool = False) -> dict:
        monkeypatch.setattr(embedding, "text_transforms", lambda embedder: dict(transforms))
        return make_vector_cache(suite, directory, "hotmem", extend=extend)

    both = {"memory": "strip", "query": "strip"}
    at_once = made(both, tmp_path / "at-once")
    made({"query": "strip"}, tmp_path / "grown")
    grown = made({"memory": "strip"}, tmp_path / "grown", extend=True)
    assert grown["timing"]["texts_kept"] > 0  # it was extended, not made again
    assert grown["forms"] == at_once["forms"] and grown["count"] == at_once["count"]
    assert grown["files"] == at_once["files"]
