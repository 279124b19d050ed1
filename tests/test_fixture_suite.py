"""The committed synthetic fixture suite (benchmarks/retrieval) is valid and keeps its shape.

These checks are about the fixture files only; they never run a memory system.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from recallbench.artifacts import file_sha256
from recallbench.datasets.fixtures.reader import (
    CATEGORIES,
    DUPLICATE_CATEGORY,
    LEVEL,
    NEGATIVE_CATEGORY,
    load_fixture_scope,
)
from recallbench.model import Query, Scope

FIXTURES = Path(__file__).parents[1] / "benchmarks/retrieval"
CORPUS = FIXTURES / "corpus.jsonl"
QUERIES = FIXTURES / "queries.jsonl"
NEUTRAL_IMPORTANCE = 0.5


@pytest.fixture(scope="module")
def scope() -> Scope:
    loaded, _ = load_fixture_scope(CORPUS, QUERIES)
    return loaded


def queries_in(scope: Scope, category: str) -> list[Query]:
    return [q for q in scope.queries if q.category == category]


def grades(query: Query) -> dict[str, int]:
    return dict(query.relevance.get(LEVEL, {}))


def test_committed_suite_validates(scope: Scope) -> None:
    assert scope.memories
    assert scope.queries
    # one memory level: each memory stands for exactly its own id
    assert all(dict(m.units) == {LEVEL: (m.memory_id,)} for m in scope.memories)
    assert all(set(q.relevance) <= {LEVEL} for q in scope.queries)


def test_identity_names_both_files_with_their_digests() -> None:
    _, files = load_fixture_scope(CORPUS, QUERIES)
    assert files == [
        {
            "role": "corpus",
            "name": "corpus.jsonl",
            "size_bytes": CORPUS.stat().st_size,
            "sha256": file_sha256(CORPUS),
        },
        {
            "role": "queries",
            "name": "queries.jsonl",
            "size_bytes": QUERIES.stat().st_size,
            "sha256": file_sha256(QUERIES),
        },
    ]


def test_minimum_sizes(scope: Scope) -> None:
    assert len(scope.memories) >= 50
    assert len(scope.queries) >= 40


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_has_at_least_five_queries(scope: Scope, category: str) -> None:
    counts = Counter(q.category for q in scope.queries)
    assert counts[category] >= 5, f"{category} has only {counts[category]} queries"


def test_negative_queries_have_empty_relevance(scope: Scope) -> None:
    negatives = queries_in(scope, NEGATIVE_CATEGORY)
    assert negatives
    for query in negatives:
        assert grades(query) == {}, query.query_id


def test_duplicate_groups_exist_and_duplicate_queries_use_them(scope: Scope) -> None:
    groups = {m.memory_id: m.duplicate_group for m in scope.memories if m.duplicate_group}
    assert len(set(groups.values())) >= 3
    for query in queries_in(scope, DUPLICATE_CATEGORY):
        graded = {mid for mid, grade in grades(query).items() if grade > 0}
        assert graded & set(groups), f"{query.query_id} grades no memory in a duplicate group"


def _capitalised_words(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z][A-Za-z]+\b", text))


def test_a_cross_project_query_excludes_a_same_named_memory(scope: Scope) -> None:
    """Some query names a product (a capitalised word) that a relevant memory and a memory
    under a different identifier both mention, and grades that other memory 0 or omits it."""
    by_id = scope.memory_by_id()
    examples = []
    for query in queries_in(scope, "cross_project_isolation"):
        names = _capitalised_words(query.text)
        for target_id in query.relevant(LEVEL):
            target = by_id[target_id]
            for other in scope.memories:
                if other.identifier == target.identifier or grades(query).get(other.memory_id):
                    continue
                shared = names & _capitalised_words(target.text) & _capitalised_words(other.text)
                if shared:
                    examples.append((query.query_id, target_id, other.memory_id, shared))
    assert examples


def test_non_neutral_importance_only_where_a_query_tests_it(scope: Scope) -> None:
    tested = {mid for q in scope.queries if "importance" in q.notes.lower() for mid in grades(q)}
    unusual = {m.memory_id for m in scope.memories if m.importance != NEUTRAL_IMPORTANCE}
    assert unusual <= tested, f"importance != 0.5 without a query testing it: {unusual - tested}"
