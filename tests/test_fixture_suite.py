"""The committed synthetic fixture suite (benchmarks/retrieval) is valid and keeps its shape.

These checks are about the fixture files only; they never run a memory system.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from recallbench.datasets.fixtures import load_fixture_suite
from recallbench.suite import CATEGORIES, DUPLICATE_CATEGORY, NEGATIVE_CATEGORY, Suite

FIXTURES = Path(__file__).parents[1] / "benchmarks/retrieval"
CORPUS = FIXTURES / "corpus.jsonl"
QUERIES = FIXTURES / "queries.jsonl"
NEUTRAL_IMPORTANCE = 0.5


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_fixture_suite(CORPUS, QUERIES)


def test_committed_suite_validates(suite: Suite) -> None:
    assert suite.memories
    assert suite.queries


def test_minimum_sizes(suite: Suite) -> None:
    assert len(suite.memories) >= 50
    assert len(suite.queries) >= 40


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_has_at_least_five_queries(suite: Suite, category: str) -> None:
    counts = Counter(q.category for q in suite.queries)
    assert counts[category] >= 5, f"{category} has only {counts[category]} queries"


def test_negative_queries_have_empty_relevance(suite: Suite) -> None:
    negatives = suite.queries_in(NEGATIVE_CATEGORY)
    assert negatives
    for query in negatives:
        assert query.relevance == {}, query.query_id


def test_duplicate_groups_exist_and_duplicate_queries_use_them(suite: Suite) -> None:
    groups = suite.duplicate_groups
    assert len(set(groups.values())) >= 3
    for query in suite.queries_in(DUPLICATE_CATEGORY):
        graded = {mid for mid, grade in query.relevance.items() if grade > 0}
        assert graded & set(groups), f"{query.query_id} grades no memory in a duplicate group"


def _capitalised_words(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z][A-Za-z]+\b", text))


def test_a_cross_project_query_excludes_a_same_named_memory(suite: Suite) -> None:
    """Some query names a product (a capitalised word) that a relevant memory and a memory
    under a different identifier both mention, and grades that other memory 0 or omits it."""
    by_id = {m.memory_id: m for m in suite.memories}
    examples = []
    for query in suite.queries_in("cross_project_isolation"):
        names = _capitalised_words(query.query)
        for target_id in query.relevant_ids:
            target = by_id[target_id]
            for other in suite.memories:
                if other.identifier == target.identifier or query.relevance.get(other.memory_id):
                    continue
                shared = names & _capitalised_words(target.fact) & _capitalised_words(other.fact)
                if shared:
                    examples.append((query.query_id, target_id, other.memory_id, shared))
    assert examples


def test_non_neutral_importance_only_where_a_query_tests_it(suite: Suite) -> None:
    tested = {mid for q in suite.queries if "importance" in q.notes.lower() for mid in q.relevance}
    unusual = {m.memory_id for m in suite.memories if m.importance != NEUTRAL_IMPORTANCE}
    assert unusual <= tested, f"importance != 0.5 without a query testing it: {unusual - tested}"
