"""The fixture validator: every rule reports FILE:LINE: reason, and all problems at once."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from recallbench.artifacts import file_sha256
from recallbench.datasets.fixtures.reader import (
    CATEGORIES,
    LEVEL,
    MIN_QUERIES_PER_CATEGORY,
    NEGATIVE_CATEGORY,
    load_fixture_scope,
)
from recallbench.errors import ValidationFailed
from recallbench.model import Scope

Record = dict[str, Any]


# --- a valid suite ----------------------------------------------------------------------


def valid_corpus() -> list[Record]:
    """12 memories in two projects; m11 and m12 form a duplicate group."""
    records: list[Record] = []
    for i in range(1, 13):
        record: Record = {
            "memory_id": f"m{i:02d}",
            "identifier": "proj-alpha" if i % 2 else "proj-beta",
            "fact": f"Fact number {i}: the build uses tool {i}.",
            "importance": 0.5,
            "tags": ["fixture"],
        }
        if i >= 11:
            record["duplicate_group"] = "dup-build"
        records.append(record)
    records[0]["duplicate_group"] = None  # an explicit null group is allowed
    return records


def valid_queries() -> list[Record]:
    """8 categories x 5 queries, in CATEGORIES order (category c starts on line 5*c + 1)."""
    records: list[Record] = []
    for category in CATEGORIES:
        for j in range(MIN_QUERIES_PER_CATEGORY):
            relevance = {} if category == NEGATIVE_CATEGORY else {f"m{j + 1:02d}": 3, "m11": 1}
            records.append(
                {
                    "query_id": f"{category}-{j}",
                    "category": category,
                    "query": f"question {j} about {category}",
                    "relevance": relevance,
                    "notes": "",
                }
            )
    return records


def first_line_of(category: str) -> int:
    return CATEGORIES.index(category) * MIN_QUERIES_PER_CATEGORY + 1


def encode(records: list[Record]) -> list[bytes]:
    return [orjson.dumps(r) for r in records]


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def write_suite(
    tmp_path: Path,
    corpus: list[Record] | list[bytes] | None = None,
    queries: list[Record] | list[bytes] | None = None,
) -> tuple[Path, Path]:
    """Write corpus.jsonl and queries.jsonl; records are JSON-encoded, bytes written raw."""

    def lines(items: list[Any]) -> list[bytes]:
        return [i if isinstance(i, bytes) else orjson.dumps(i) for i in items]

    corpus_path = write_lines(
        tmp_path / "corpus.jsonl", lines(valid_corpus() if corpus is None else corpus)
    )
    queries_path = write_lines(
        tmp_path / "queries.jsonl", lines(valid_queries() if queries is None else queries)
    )
    return corpus_path, queries_path


def load(paths: tuple[Path, Path]) -> Scope:
    scope, _ = load_fixture_scope(*paths)
    return scope


def problems_of(paths: tuple[Path, Path]) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        load_fixture_scope(*paths)
    assert info.value.problems, "ValidationFailed without problems"
    assert str(info.value).startswith(info.value.problems[0])
    return info.value.problems


def assert_problem(problems: list[str], path: Path, line: int | None, *fragments: str) -> str:
    """Exactly one problem starts with `path:line: ` (or `path: `) and contains all fragments."""
    prefix = f"{path}:{line}: " if line is not None else f"{path}: "
    matching = [p for p in problems if p.startswith(prefix) and all(f in p for f in fragments)]
    assert len(matching) == 1, f"expected one {prefix!r} problem with {fragments}, got {problems}"
    return matching[0]


def test_valid_suite_loads(tmp_path: Path) -> None:
    paths = write_suite(tmp_path)
    suite, files = load_fixture_scope(*paths)
    assert isinstance(suite, Scope)
    assert len(suite.memories) == 12
    assert len(suite.queries) == len(CATEGORIES) * MIN_QUERIES_PER_CATEGORY
    assert [q.query_id for q in suite.queries] == [q["query_id"] for q in valid_queries()]
    groups = {m.memory_id: m.duplicate_group for m in suite.memories if m.duplicate_group}
    assert groups == {"m11": "dup-build", "m12": "dup-build"}
    assert suite.memories[0].duplicate_group is None
    for category in CATEGORIES:
        assert sum(q.category == category for q in suite.queries) == MIN_QUERIES_PER_CATEGORY
    assert suite.queries[0].relevant(LEVEL) == {"m01"}
    assert suite.queries[0].relevance == {LEVEL: {"m01": 3, "m11": 1}}
    first = suite.memories[0]
    assert (first.memory_id, first.identifier, first.text) == (
        "m01",
        "proj-alpha",
        "Fact number 1: the build uses tool 1.",
    )
    assert first.units == {LEVEL: ("m01",)}
    assert (first.importance, first.tags) == (0.5, ("fixture",))
    # the identity describes exactly the bytes that were parsed
    assert [(f["role"], f["name"], f["size_bytes"], f["sha256"]) for f in files] == [
        (role, p.name, p.stat().st_size, file_sha256(p))
        for role, p in zip(("corpus", "queries"), paths, strict=True)
    ]


def test_valid_suite_without_trailing_newline_loads(tmp_path: Path) -> None:
    corpus_path, queries_path = write_suite(tmp_path)
    corpus_path.write_bytes(corpus_path.read_bytes().rstrip(b"\n"))
    assert len(load((corpus_path, queries_path)).memories) == 12


# --- line-level syntax ---------------------------------------------------------------


def test_invalid_json(tmp_path: Path) -> None:
    corpus = encode(valid_corpus())
    corpus[2] = b'{"memory_id": "m03", '
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 3, "invalid JSON")


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_number_is_invalid_json(tmp_path: Path, constant: bytes) -> None:
    corpus = encode(valid_corpus())
    corpus[2] = corpus[2].replace(b'"importance":0.5', b'"importance":' + constant)
    assert constant in corpus[2]
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 3, constant.decode().lstrip("-"), "not valid JSON")


@pytest.mark.parametrize(
    ("line", "key", "where"),
    [
        # a repeated top-level field: "last one wins" would silently change the fact
        (
            b'{"memory_id":"m03","identifier":"proj-alpha","fact":"one","fact":"two",'
            b'"importance":0.5,"tags":["fixture"]}',
            "fact",
            "fact",
        ),
        (
            b'{"memory_id":"m03","memory_id":"m04","identifier":"proj-alpha","fact":"x",'
            b'"importance":0.5,"tags":["fixture"]}',
            "memory_id",
            "memory_id",
        ),
    ],
)
def test_duplicate_key_in_a_corpus_line(tmp_path: Path, line: bytes, key: str, where: str) -> None:
    corpus = encode(valid_corpus())
    corpus[2] = line
    paths = write_suite(tmp_path, corpus=corpus)
    problems = problems_of(paths)
    assert_problem(problems, paths[0], 3, f'duplicate key "{key}" at {where}')
    assert len(problems) == 1  # the line is refused whole, not also checked field by field


def test_duplicate_key_nested_in_relevance(tmp_path: Path) -> None:
    queries = encode(valid_queries())
    # m01 graded 3 then 0: which grade would count is exactly what must not be guessed
    queries[5] = queries[5].replace(b'"m01":3', b'"m01":3,"m01":0')
    assert b'"m01":3,"m01":0' in queries[5]
    paths = write_suite(tmp_path, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[1], 6, 'duplicate key "m01" at relevance.m01')
    assert len(problems) == 1


def test_invalid_utf8(tmp_path: Path) -> None:
    queries = encode(valid_queries())
    queries[3] = queries[3].replace(b"question", b"question \xff\xfe")
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 4, "invalid UTF-8")


def test_blank_line(tmp_path: Path) -> None:
    corpus = encode(valid_corpus())
    corpus.insert(4, b"   ")
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 5, "blank line")


def test_blank_line_at_end_of_file(tmp_path: Path) -> None:
    # one final newline ends the last line; a second one is a blank line
    paths = write_suite(tmp_path, corpus=[*encode(valid_corpus()), b""])
    assert_problem(problems_of(paths), paths[0], 13, "blank line")


@pytest.mark.parametrize(
    ("line", "kind"), [(b"[1, 2]", "an array"), (b'"text"', "a string"), (b"42", "a number")]
)
def test_non_object_line(tmp_path: Path, line: bytes, kind: str) -> None:
    corpus = encode(valid_corpus())
    corpus[0] = line
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 1, "expected a JSON object", kind)


@pytest.mark.parametrize("which", ["corpus", "queries"])
def test_empty_file(tmp_path: Path, which: str) -> None:
    paths = write_suite(tmp_path)
    target = paths[0] if which == "corpus" else paths[1]
    target.write_bytes(b"")
    assert_problem(problems_of(paths), target, None, "file is empty")


def test_missing_file(tmp_path: Path) -> None:
    corpus_path, queries_path = write_suite(tmp_path)
    queries_path.unlink()
    problems = problems_of((corpus_path, queries_path))
    assert problems == [f"fixture file {queries_path} does not exist"]


def test_a_directory_is_not_a_fixture_file(tmp_path: Path) -> None:
    corpus_path, _ = write_suite(tmp_path)
    problems = problems_of((corpus_path, tmp_path))
    assert problems == [f"fixture file {tmp_path} is a directory; give a regular file"]


# --- fields --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["memory_id", "identifier", "fact", "importance", "tags"])
def test_missing_memory_field(tmp_path: Path, name: str) -> None:
    corpus = valid_corpus()
    del corpus[5][name]
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 6, f"missing field '{name}'")


@pytest.mark.parametrize("name", ["query_id", "category", "query", "relevance", "notes"])
def test_missing_query_field(tmp_path: Path, name: str) -> None:
    queries = valid_queries()
    del queries[7][name]
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 8, f"missing field '{name}'")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("memory_id", 7, "must be a string"),
        ("identifier", ["proj"], "must be a string"),
        ("fact", None, "must be a string"),
        ("importance", "0.5", "must be a number"),
        ("importance", True, "must be a number"),  # bool is not a number here
        ("importance", None, "must be a number"),
        ("tags", "fixture", "must be a list"),
        ("duplicate_group", 3, "must be a string"),
    ],
)
def test_wrongly_typed_memory_field(tmp_path: Path, name: str, value: Any, expected: str) -> None:
    corpus = valid_corpus()
    corpus[1][name] = value
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 2, f"field '{name}' {expected}")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("query_id", 1, "must be a string"),
        ("category", None, "must be a string"),
        ("query", {"text": "q"}, "must be a string"),
        ("relevance", [["m01", 2]], "must be an object"),
        ("notes", False, "must be a string"),
    ],
)
def test_wrongly_typed_query_field(tmp_path: Path, name: str, value: Any, expected: str) -> None:
    queries = valid_queries()
    queries[0][name] = value
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 1, f"field '{name}' {expected}")


def test_tags_must_be_non_empty_strings(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[2]["tags"] = ["ok", 3]
    corpus[3]["tags"] = [" "]
    paths = write_suite(tmp_path, corpus=corpus)
    problems = problems_of(paths)
    assert_problem(problems, paths[0], 3, "'tags' must be a list of non-empty strings")
    assert_problem(problems, paths[0], 4, "'tags' must be a list of non-empty strings")


def test_unknown_field(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[3]["importanse"] = 0.5
    queries = valid_queries()
    queries[9]["grades"] = {}
    paths = write_suite(tmp_path, corpus=corpus, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[0], 4, "unknown field 'importanse'")
    assert_problem(problems, paths[1], 10, "unknown field 'grades'")


@pytest.mark.parametrize("name", ["memory_id", "identifier", "fact"])
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_memory_text_field(tmp_path: Path, name: str, value: str) -> None:
    corpus = valid_corpus()
    corpus[4][name] = value
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 5, f"field '{name}' is empty")


def test_empty_duplicate_group(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[4]["duplicate_group"] = " "
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 5, "field 'duplicate_group' is empty")


@pytest.mark.parametrize("name", ["query_id", "query"])
def test_empty_query_text_field(tmp_path: Path, name: str) -> None:
    queries = valid_queries()
    queries[6][name] = " "
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 7, f"field '{name}' is empty")


@pytest.mark.parametrize("value", [-0.01, 1.5, 2])
def test_importance_outside_unit_interval(tmp_path: Path, value: float) -> None:
    corpus = valid_corpus()
    corpus[7]["importance"] = value
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 8, "importance", "outside [0, 1]")


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0])
def test_importance_bounds_are_inclusive(tmp_path: Path, value: float) -> None:
    corpus = valid_corpus()
    corpus[7]["importance"] = value
    suite = load(write_suite(tmp_path, corpus=corpus))
    assert suite.memories[7].importance == float(value)


# --- identity and duplicates ----------------------------------------------------------


def test_duplicate_memory_id(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[8]["memory_id"] = "m03"
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 9, "duplicate memory_id 'm03'", "line 3")


def test_duplicate_query_id(tmp_path: Path) -> None:
    queries = valid_queries()
    queries[12]["query_id"] = queries[2]["query_id"]
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 13, "duplicate query_id", "line 3")


def test_duplicate_identifier_and_fact(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[5]["identifier"] = corpus[1]["identifier"]
    corpus[5]["fact"] = corpus[1]["fact"]
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 6, "same identifier and fact as line 2")


def test_same_fact_in_another_project_is_fine(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[1]["fact"] = corpus[0]["fact"]  # proj-beta vs proj-alpha
    assert len(load(write_suite(tmp_path, corpus=corpus)).memories) == 12


def test_identifier_fact_colon_collision(tmp_path: Path) -> None:
    # HotMem hashes f"{identifier}:{fact}", so ("proj:alpha", "note") and ("proj", "alpha:note")
    # would replace each other in the store.
    corpus = valid_corpus()
    corpus[0].update(identifier="proj:alpha", fact="note")
    corpus[2].update(identifier="proj", fact="alpha:note")
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 3, "same identifier and fact")


BAD_IDS = [
    # (id, fragment of the reason): each would break a TREC file, a Markdown table, or make
    # two different ids look the same on screen
    ("m\x0003", "U+0000"),
    ("m\u202e30", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("m\u200b03", "U+200B"),
    ("m|03", "breaks Markdown tables"),
    ("m`03", "breaks Markdown code"),
    ("m 03", "contains whitespace U+0020 SPACE"),
    ("m\t03", "contains whitespace"),
    ("#m03", "starts with '#'"),
    ("m" * 201, "at most 200"),
]


@pytest.mark.parametrize(("value", "reason"), BAD_IDS)
def test_memory_id_outside_the_id_grammar(tmp_path: Path, value: str, reason: str) -> None:
    corpus = valid_corpus()
    corpus[2]["memory_id"] = value
    paths = write_suite(tmp_path, corpus=corpus)
    problems = problems_of(paths)
    line = assert_problem(problems, paths[0], 3, "field 'memory_id'", reason)
    assert repr(value) in line  # the id is shown escaped, so the line itself stays readable
    assert len(problems) == 1


@pytest.mark.parametrize(("value", "reason"), BAD_IDS)
def test_query_id_outside_the_id_grammar(tmp_path: Path, value: str, reason: str) -> None:
    queries = valid_queries()
    queries[8]["query_id"] = value
    paths = write_suite(tmp_path, queries=queries)
    problems = problems_of(paths)
    line = assert_problem(problems, paths[1], 9, "field 'query_id'", reason)
    assert repr(value) in line
    assert len(problems) == 1


def test_ids_within_the_grammar_are_accepted(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[6]["memory_id"] = "mém:07/ü.v2"  # m07: no query grades it
    queries = valid_queries()
    queries[0]["relevance"] = {"mém:07/ü.v2": 3}
    queries[8]["query_id"] = "q#8-日本"
    suite = load(write_suite(tmp_path, corpus=corpus, queries=queries))
    assert suite.memories[6].memory_id == "mém:07/ü.v2"
    assert suite.queries[0].relevant(LEVEL) == {"mém:07/ü.v2"}
    assert suite.queries[8].query_id == "q#8-日本"


def test_duplicate_group_with_one_member(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[3]["duplicate_group"] = "lonely"
    paths = write_suite(tmp_path, corpus=corpus)
    assert_problem(problems_of(paths), paths[0], 4, "duplicate_group 'lonely' has only one memory")


# --- relevance -------------------------------------------------------------------------


@pytest.mark.parametrize("grade", [4, -1, 99])
def test_grade_outside_range(tmp_path: Path, grade: int) -> None:
    queries = valid_queries()
    queries[4]["relevance"]["m02"] = grade
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 5, "grade for 'm02'", "0-3", repr(grade))


@pytest.mark.parametrize("grade", [2.5, 2.0, "2", True, None])
def test_non_integer_grade(tmp_path: Path, grade: Any) -> None:
    queries = valid_queries()
    queries[4]["relevance"]["m02"] = grade
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 5, "grade for 'm02'", "must be an integer")


def test_unknown_memory_reference(tmp_path: Path) -> None:
    queries = valid_queries()
    queries[10]["relevance"]["m99"] = 1
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], 11, "unknown memory 'm99'")


def test_unknown_category(tmp_path: Path) -> None:
    queries = valid_queries()
    queries.append({**queries[0], "query_id": "extra", "category": "exact-lexical"})
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], len(queries), "unknown category 'exact-lexical'")


def test_category_with_fewer_than_five_queries(tmp_path: Path) -> None:
    category = "temporal_or_revision"
    queries = valid_queries()
    del queries[first_line_of(category) - 1]
    paths = write_suite(tmp_path, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[1], None, f"category '{category}' has 4 queries", "at least 5")
    assert len(problems) == 1


def test_category_with_no_queries(tmp_path: Path) -> None:
    category = "snapshot_hydration_equivalence"
    queries = [q for q in valid_queries() if q["category"] != category]
    paths = write_suite(tmp_path, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[1], None, f"category '{category}' has 0 queries", "at least 5")
    assert len(problems) == 1


@pytest.mark.parametrize("relevance", [{"m01": 2}, {"m01": 0}])
def test_negative_query_with_relevance(tmp_path: Path, relevance: dict[str, int]) -> None:
    line = first_line_of(NEGATIVE_CATEGORY) + 2
    queries = valid_queries()
    queries[line - 1]["relevance"] = relevance
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(problems_of(paths), paths[1], line, "must have an empty relevance object")


@pytest.mark.parametrize("relevance", [{}, {"m01": 1}, {"m01": 1, "m02": 0}])
def test_non_negative_query_without_relevant_memory(
    tmp_path: Path, relevance: dict[str, int]
) -> None:
    line = first_line_of("cross_project_isolation") + 1
    queries = valid_queries()
    queries[line - 1]["relevance"] = relevance
    paths = write_suite(tmp_path, queries=queries)
    assert_problem(
        problems_of(paths), paths[1], line, "cross_project_isolation query needs", "graded 2 or 3"
    )


# --- several problems --------------------------------------------------------------------


def test_several_problems_in_one_file_are_all_reported(tmp_path: Path) -> None:
    corpus = encode(valid_corpus())
    corpus[1] = b"{not json"
    records = valid_corpus()
    records[3]["memory_id"] = "m03"  # duplicate of line 3
    records[4]["importance"] = 7  # outside [0, 1]
    records[5]["colour"] = "red"  # unknown field
    del records[6]["fact"]  # missing field
    corpus[3:7] = encode(records[3:7])
    paths = write_suite(tmp_path, corpus=corpus)
    problems = problems_of(paths)
    assert_problem(problems, paths[0], 2, "invalid JSON")
    assert_problem(problems, paths[0], 4, "duplicate memory_id 'm03'")
    assert_problem(problems, paths[0], 5, "outside [0, 1]")
    assert_problem(problems, paths[0], 6, "unknown field 'colour'")
    assert_problem(problems, paths[0], 7, "missing field 'fact'")
    assert len(problems) == 5
    assert str(ValidationFailed(problems)).endswith("(and 4 more problems)")


def test_several_problems_on_one_line_are_all_reported(tmp_path: Path) -> None:
    queries = valid_queries()
    queries[0].update(query=" ", category="nope", query_id=queries[1]["query_id"])
    paths = write_suite(tmp_path, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[1], 1, "field 'query' is empty")
    assert_problem(problems, paths[1], 1, "unknown category 'nope'")
    # line 1 takes the id first, so the real owner on line 2 is the duplicate
    assert_problem(problems, paths[1], 2, "duplicate query_id", "line 1")


def test_problems_in_both_files_are_reported(tmp_path: Path) -> None:
    corpus = valid_corpus()
    corpus[0]["importance"] = -1
    queries = copy.deepcopy(valid_queries())
    queries[2]["relevance"]["m01"] = 5
    paths = write_suite(tmp_path, corpus=corpus, queries=queries)
    problems = problems_of(paths)
    assert_problem(problems, paths[0], 1, "outside [0, 1]")
    assert_problem(problems, paths[1], 3, "must be an integer 0-3")
