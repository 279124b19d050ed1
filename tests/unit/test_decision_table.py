"""compare's decision table from the document alone: systems that rank identically are named
as one group (and a pair identical to its reference is one line), each embedder's
truncation is stated, configuration keys that differ are marked, saved results say they
carry no cost."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson

from recallbench.commands.compare import compare_results, identical_rankings, truncation_groups
from recallbench.report.comparison import compare_sections, decision_sections, differing_keys
from recallbench.report.sections import to_markdown, to_terminal

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "benchmarks" / "retrieval" / "baseline.json"


def _baseline() -> dict:
    return orjson.loads(BASELINE.read_bytes())


def _reordered(result: dict, queries: int, name: str) -> dict:
    """A copy of `result` from a system called `name` whose first `queries` rankings (of
    those returning two or more ids) have their top two swapped."""
    out = copy.deepcopy(result)
    out["system"] = {**out["system"], "name": name}
    changed = 0
    for q in out["queries"]:
        if changed == queries:
            break
        if len(q["returned"]) >= 2:
            q["returned"][0], q["returned"][1] = q["returned"][1], q["returned"][0]
            changed += 1
    assert changed == queries
    return out


def test_systems_identical_on_every_query_are_one_group() -> None:
    base = _baseline()
    same, also = copy.deepcopy(base), copy.deepcopy(base)
    other = _reordered(base, 3, "other")
    ranked = identical_rankings([base, same, other, also], ["a", "b", "c", "d"])
    n = len(base["queries"])
    assert ranked["queries"] == n == 57
    assert ranked["groups"] == [["a", "b", "d"]]
    pairs = {tuple(p["systems"]): p["identical"] for p in ranked["pairs"]}
    assert pairs[("a", "b")] == n and pairs[("a", "c")] == n - 3 and pairs[("c", "d")] == n - 3
    # connected through identical pairs: c is near, not identical, and stays out
    assert identical_rankings([base, other], ["a", "c"])["groups"] == []


def test_the_decision_table_names_the_group_and_an_identical_pair_is_one_line() -> None:
    base = _baseline()
    results = [base, copy.deepcopy(base), _reordered(base, 3, "other")]
    doc = compare_results(results, ["ref", "twin", "other"], resamples=200)
    assert doc["cost"] is None  # saved results: nothing measured here
    text = to_terminal(decision_sections(doc))
    assert "ref, twin: identical rankings on 57 of 57 queries; retrieval cannot choose" in text
    assert "Cost is measured only when compare runs the systems" in text
    rows = decision_sections(doc)[0].table.rows
    assert [r[-1] for r in rows] == ["twin", "ref", "none"]  # "same rankings as"
    assert rows[0][0] == "ref (reference)"
    sections = compare_sections(doc)
    twin = next(s for s in sections if s.title == "twin against ref")
    assert twin.table is None and twin.paragraphs == (
        "twin returned the same ids in the same order as ref on every one of the 57 "
        "queries: every measure is equal and there is nothing to test.",
    )
    assert not [s for s in sections if s.title.startswith("twin against ref,")]
    other = next(s for s in sections if s.title == "other against ref")
    assert other.paragraphs == ("Identical rankings on 54 of 57 queries.",)
    assert other.table is not None


def test_the_truncation_of_each_embedder_is_stated() -> None:
    base = _baseline()
    counts = {
        "texts": 272,
        "texts_over_limit": 272,
        "max_tokens": 256,
        "tokens_total": 300_000,
        "tokens_of_long_texts": 300_000,
        "tokens_unseen": 200_100,
        "share_unseen_of_long_texts": 0.667,
        "share_unseen": 0.667,
    }
    a, b, c = (copy.deepcopy(base) for _ in range(3))
    b["truncation"] = copy.deepcopy(counts)
    c["truncation"] = copy.deepcopy(counts)
    vectors = [{"system": label, "embedder_identity": "minilm-x"} for label in ("b", "c")]
    groups = truncation_groups([a, b, c], ["a", "b", "c"], vectors)
    assert groups == [{"systems": ["b", "c"], "embedder": "minilm-x", **counts}]
    doc = compare_results([a, b, c], ["a", "b", "c"], resamples=200, vectors=vectors)
    text = to_markdown(decision_sections(doc))
    assert (
        "b, c (minilm-x): 272 of 272 stored texts exceed the embedder's 256-token window; "
        "the model never saw 66.7% of their tokens (66.7% of all stored tokens)"
    ) in text


def test_configuration_keys_that_differ_are_marked() -> None:
    base = _baseline()
    other = copy.deepcopy(base)
    other["system"] = {**other["system"], "reranker": "hotmem/mmr-l0.5"}
    doc = compare_results([base, other], ["a", "b"], resamples=200)
    assert differing_keys(doc) == ["reranker"]
    config = next(s for s in compare_sections(doc) if s.key == "systems")
    assert config.paragraphs == ("Keys marked ≠ differ between the systems: reranker.",)
    assert "≠ reranker hotmem/mmr-l0.5" in config.table.rows[1][2]
    assert "≠ embedding model" not in config.table.rows[1][2]
