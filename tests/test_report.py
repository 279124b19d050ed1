"""report: the result document the ticket requires, the Markdown, and why-missed explanations."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import hotmem
import pytest
from conftest import CORPUS, QUERIES
from hotmem import search as hm_search
from hotmem.embed import DEFAULT_EMBEDDER

from recallbench.artifacts import envelope
from recallbench.pipeline import LaneOutput
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.report import build_result, explain_miss, render_markdown, run_report
from recallbench.stages.roundtrip import run_roundtrip
from recallbench.stages.score import run_score
from recallbench.stages.validate import run_validate
from recallbench.suite import CATEGORIES, Memory, Query, Suite

METRICS = ["recall@1", "recall@5", "mrr@5", "ndcg@5", "fp_rate@5", "duplicate_slot_rate@5"]


# --- the result document -----------------------------------------------------------------


def test_result_has_every_required_key(lane: LaneOutput) -> None:
    r = lane.result
    assert r["schema"] == "recallbench.fixture-result"
    assert r["schema_version"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["generated_at"])
    assert r["system"]["name"] == "hotmem"
    assert r["system"]["hotmem_version"] == hotmem.__version__ == "0.2.6"
    assert r["system"]["embedding_model"] == DEFAULT_EMBEDDER.descriptor.key == "hotmem-hash-v1"
    assert r["system"]["embedding_dimension"] == DEFAULT_EMBEDDER.descriptor.dimension == 64
    assert r["system"]["scoring_weights"] == {
        "cosine": hm_search.W_COSINE,
        "fts_bm25": hm_search.W_FTS,
        "importance": hm_search.W_IMPORTANCE,
    }
    assert r["system"]["scoring_weights"] == {"cosine": 0.6, "fts_bm25": 0.2, "importance": 0.2}
    assert r["suite"]["counts"]["memories"] == 80
    assert r["suite"]["counts"]["queries"] == 57
    assert r["suite"]["categories"] == list(CATEGORIES)
    assert r["run"] == {"top_k": 5, "repeat": 1, "metrics": METRICS}
    assert set(r["metrics"]) == {"overall", "per_category"}
    assert set(r["metrics"]["overall"]) == set(METRICS)
    assert list(r["metrics"]["per_category"]) == list(CATEGORIES)
    for cat in CATEGORIES:
        assert set(r["metrics"]["per_category"][cat]) == set(METRICS)
    assert r["performance"]["latency"]["samples"] == 57
    assert "not a cross-machine" in r["performance"]["note"]


def test_generated_at_can_be_fixed(lane: LaneOutput) -> None:
    envs = lane.envelopes
    result = build_result(
        envs["suite"],
        envs["hydrate"],
        envs["runs"],
        envs["roundtrip"],
        envs["scores"],
        generated_at="2025-01-01T00:00:00Z",
    )
    assert result["generated_at"] == "2025-01-01T00:00:00Z"


def test_counts_are_integers_behind_each_value(lane: LaneOutput) -> None:
    o = lane.result["metrics"]["overall"]
    assert (o["recall@5"]["found"], o["recall@5"]["relevant"]) == (58, 86)
    assert (o["fp_rate@5"]["numerator"], o["fp_rate@5"]["denominator"]) == (35, 35)
    assert (o["duplicate_slot_rate@5"]["numerator"], o["duplicate_slot_rate@5"]["denominator"]) == (
        10,
        30,
    )
    assert o["mrr@5"]["queries"] == 50 and o["mrr@5"]["not_applicable"] == 7


def test_per_query_ordered_ids_grades_and_scores(lane: LaneOutput) -> None:
    runs = {r["query_id"]: r for r in lane.envelopes["runs"]["data"]["queries"]}
    suite = {q["query_id"]: q for q in lane.envelopes["suite"]["data"]["suite"]["queries"]}
    queries = lane.result["queries"]
    assert [q["query_id"] for q in queries] == list(suite)
    for q in queries:
        returned = q["returned"]
        assert [h["memory_id"] for h in returned] == [
            h["memory_id"] for h in runs[q["query_id"]]["hits"]
        ]
        for h in returned:
            assert set(h) == {"memory_id", "identifier", "grade", "score"}
            assert isinstance(h["score"], float)
            assert h["grade"] == suite[q["query_id"]]["relevance"].get(h["memory_id"], 0)
        assert q["expected"] == suite[q["query_id"]]["relevance"]
        grades = list(q["expected"].values())
        assert grades == sorted(grades, reverse=True)  # best grade first
        assert q["roundtrip_identical"] is True
    first = queries[0]
    assert first["query_id"] == "q-lexical-001"
    assert [h["grade"] for h in first["returned"]] == [3, 3, 0, 0, 0]


def test_missed_query_ids_match_the_per_query_misses(lane: LaneOutput) -> None:
    r = lane.result
    missed = [q["query_id"] for q in r["queries"] if q["missed"]]
    assert r["missed_query_ids"] == missed
    assert len(missed) == 17
    assert {f"q-semantic-00{i}" for i in range(1, 8)} <= set(missed)
    for q in r["queries"]:
        returned = {h["memory_id"] for h in q["returned"]}
        relevant = {m for m, g in q["expected"].items() if g >= 2}
        assert q["missed"] == sorted(relevant - returned)
        assert len(q["why_missed"]) == len(q["missed"])
        for mid, why in zip(q["missed"], q["why_missed"], strict=True):
            assert why.startswith(f"{mid} (grade {q['expected'][mid]}) ")
    assert r["false_positive_query_ids"] == [f"q-negative-00{i}" for i in range(1, 8)]


# --- the Markdown ------------------------------------------------------------------------


def section(markdown: str, title: str) -> list[str]:
    """The lines of a `## title` section (up to the next `## `)."""
    lines = markdown.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def test_markdown_configuration_table(lane: LaneOutput) -> None:
    config = section(lane.markdown, "Configuration")
    assert "| system | hotmem |" in config
    assert "| hotmem version | 0.2.6 |" in config
    assert "| embedding model | hotmem-hash-v1 |" in config
    assert "| embedding dimension | 64 |" in config
    assert "| scoring weights | cosine 0.6, fts bm25 0.2, importance 0.2 |" in config
    assert "| reranker | none |" in config
    assert "| suite | 80 memories, 57 queries (corpus.jsonl, queries.jsonl) |" in config
    assert "| top-k / repeat | 5 / 1 |" in config


def test_markdown_metrics_table_has_a_row_per_category(lane: LaneOutput) -> None:
    table = [x for x in section(lane.markdown, "Metrics") if x.startswith("|")]
    assert table[0] == "| category | " + " | ".join(METRICS) + " |"
    assert table[2].startswith("| **overall** | 0.467 (found 29/86) | 0.702 (found 58/86) |")
    rows = table[3:]
    assert [row.split(" | ")[0][2:] for row in rows] == list(CATEGORIES)
    assert all(row.count("|") == len(METRICS) + 2 for row in table)
    exact = rows[0]
    assert exact.startswith("| exact_lexical | 0.929 (found 7/8) | 1.000 (found 8/8) |")
    negative = rows[CATEGORIES.index("negative_or_no_answer")]
    assert negative == "| negative_or_no_answer | n/a | n/a | n/a | n/a | 100.0% (35/35) | n/a |"


def test_markdown_five_worst_queries(lane: LaneOutput) -> None:
    rows = [x for x in section(lane.markdown, "Five worst queries") if x.startswith("| q-")]
    assert len(rows) == 5
    assert [r.split(" | ")[0][2:] for r in rows] == [
        "q-cross-003",
        "q-cross-004",
        "q-cross-005",
        "q-cross-008",
        "q-entity-003",
    ]
    assert rows[0].startswith("| q-cross-003 | cross_project_isolation | 0.000 | mem-fin-011 (3)")


def test_markdown_why_missed_lines(lane: LaneOutput) -> None:
    lines = [x for x in section(lane.markdown, "Why relevant memories were missed") if x]
    total = sum(len(q["why_missed"]) for q in lane.result["queries"])
    assert len(lines) == total == 28
    assert lines[0].startswith("- `q-semantic-001`: mem-fin-001 (grade 3) ranked ")
    assert all(re.match(r"- `q-[a-z]+-\d{3}`: mem-\S+ \(grade [23]\) ", x) for x in lines)


def test_markdown_category_observations_and_roundtrip(lane: LaneOutput) -> None:
    obs = [x for x in section(lane.markdown, "Category observations") if x]
    assert len(obs) == 8
    for cat, line in zip(CATEGORIES, obs, strict=True):
        assert line.startswith(f"- **{cat}** ")
    rt = "\n".join(section(lane.markdown, "Snapshot -> verify -> clean hydrate"))
    assert "57/57 queries identical (100.0%)" in rt
    assert "rejected by verification (`corrupt_compression`)" in rt


def test_markdown_conclusion_names_the_fired_rule(lane: LaneOutput) -> None:
    d = lane.result["decision"]
    conclusion = section(lane.markdown, "Conclusion")
    assert d["rule"] == 2
    assert f"**Rule 2 fired: {d['recommendation']}**" in conclusion
    assert any(x.startswith("2. ") and "**fired**" in x for x in conclusion)
    assert any(
        x.startswith("3. ") and "also met, but an earlier rule fired first" in x for x in conclusion
    )
    assert any(x.startswith("1. ") and "not met" in x for x in conclusion)
    for g in d["guardrails"]:
        assert f"- {g}" in conclusion


def test_markdown_conclusion_follows_a_different_rule(lane: LaneOutput) -> None:
    result = copy.deepcopy(lane.result)
    scores = copy.deepcopy(lane.envelopes["scores"]["data"])
    scores["roundtrip"]["equivalence"] = {"numerator": 56, "denominator": 57, "value": 56 / 57}
    from recallbench.stages.decide import decide

    result["decision"] = decide(scores)
    text = render_markdown(result)
    assert "**Rule 1 fired: Fix clone/index compatibility" in text
    assert "Rule 2 fired" not in text


def test_run_report_refuses_stale_scores(lane: LaneOutput) -> None:
    envs = lane.envelopes
    stale = envelope("scores", envs["scores"]["data"], {**envs["scores"]["inputs"], "runs": "x"})
    from recallbench.errors import ArtifactError

    with pytest.raises(ArtifactError, match=r"scores\.json is stale.*recallbench score"):
        run_report(envs["suite"], envs["hydrate"], envs["runs"], envs["roundtrip"], stale)


# --- score drift after the round trip ----------------------------------------------------


def test_score_only_drift_is_reported(tmp_path: Path) -> None:
    suite = run_validate(CORPUS, QUERIES)
    hydrate = run_hydrate(suite, tmp_path / "store", "hotmem")
    runs = run_query(suite, hydrate, tmp_path / "store")
    data = copy.deepcopy(runs["data"])
    data["queries"][0]["hits"][0]["score"] += 0.05  # the clone will score it 0.05 lower
    runs = envelope("runs", data, runs["inputs"])
    rt = run_roundtrip(suite, hydrate, runs, tmp_path / "store", tmp_path / "rt")
    scores = run_score(suite, runs, rt)
    result, markdown = run_report(suite, hydrate, runs, rt, scores)
    assert rt["data"]["per_query"]["q-lexical-001"]["max_score_drift"] == pytest.approx(0.05)
    assert "No query changed order or score" not in markdown
    assert "q-lexical-001" in result["roundtrip"]["drift"]
    assert list(result["roundtrip"]["drift"]) == ["q-lexical-001"]
    assert result["roundtrip"]["equivalence"]["numerator"] == 57  # ids still identical
    line = next(x for x in markdown.splitlines() if x.startswith("- `q-lexical-001`: positions"))
    assert line.startswith(
        "- `q-lexical-001`: positions none changed, max score drift 0.0500, now "
    )


# --- explain_miss by hand ----------------------------------------------------------------


def small_suite() -> Suite:
    mems = [
        Memory("a1", "proj-a", "target fact"),
        Memory("a2", "proj-a", "same project, other topic"),
        Memory("a3", "proj-a", "partial answer"),
        Memory("d1", "proj-a", "duplicate one", duplicate_group="g"),
        Memory("d2", "proj-a", "duplicate two", duplicate_group="g"),
        Memory("b1", "proj-b", "other project fact"),
    ]
    query = Query("q1", "exact_lexical", "what is the target?", {"a1": 3, "a3": 1, "d1": 2})
    return Suite(memories=tuple(mems), queries=(query,))


def row(mid: str, identifier: str, score: float = 0.5) -> dict[str, Any]:
    return {"memory_id": mid, "identifier": identifier, "score": score, "grade": 0}


def test_explain_miss_composite() -> None:
    suite = small_suite()
    q = suite.queries[0]
    top = [row("d1", "proj-a"), row("d2", "proj-a"), row("b1", "proj-b"), row("a3", "proj-a"),
           row("a2", "proj-a")]  # fmt: skip
    full = ["d1", "d2", "b1", "a3", "a2", "a1"]
    assert explain_miss("a1", q, top, full, suite) == (
        "a1 (grade 3) ranked 6 of 6; the top-5 held: d1 (graded 2), "
        "d2 (near-duplicate of d1), b1 (another project's memory (proj-b)), "
        "a3 (graded 1), a2 (same-project distractor)"
    )


def test_explain_miss_not_returned_at_all() -> None:
    suite = small_suite()
    q = suite.queries[0]
    text = explain_miss("a1", q, [row("a2", "proj-a")], ["a2"], suite)
    assert text == "a1 (grade 3) not returned at all; the top-1 held: a2 (same-project distractor)"


def test_explain_miss_another_project_is_relative_to_the_missed_memory() -> None:
    """b1 is 'another project' for a proj-a target, but a same-project distractor for b-targets."""
    mems = (*small_suite().memories, Memory("b2", "proj-b", "b target"))
    suite = Suite(memories=mems, queries=())
    q = Query("q2", "cross_project_isolation", "b?", {"b2": 3})
    text = explain_miss("b2", q, [row("b1", "proj-b"), row("a2", "proj-a")], ["b1", "a2"], suite)
    assert text.endswith("b1 (same-project distractor), a2 (another project's memory (proj-a))")


def test_explain_miss_duplicate_group_first_member_is_not_a_duplicate() -> None:
    suite = small_suite()
    q = Query("q3", "near_duplicate_diversity", "dup?", {"a1": 3})
    text = explain_miss("a1", q, [row("d2", "proj-a"), row("d1", "proj-a")], ["d2", "d1"], suite)
    assert "d2 (same-project distractor), d1 (near-duplicate of d2)" in text
    assert "(grade 3) not returned at all" in text


def test_explain_miss_reports_the_lexical_matcher() -> None:
    suite = small_suite()
    q = Query("q4", "exact_lexical", "a?", {"a1": 3})
    top = [row("a2", "proj-a")]
    none = explain_miss("a1", q, top, ["a2", "a1"], suite, {"matcher": "FTS5", "matched": []})
    assert none.endswith("; FTS5 matched no memory for this query")
    hit = explain_miss(
        "a1", q, top, ["a2", "a1"], suite, {"matcher": "FTS5", "matched": ["a1", "a2"]}
    )
    assert hit.endswith("; FTS5 matched 2 memories, a1 among them")
    other = explain_miss("a1", q, top, ["a2", "a1"], suite, {"matcher": "BM25", "matched": ["a2"]})
    assert other.endswith("; BM25 matched 1 memory, a1 not among them")


def test_lexical_matches_come_from_hotmem_fts(lane: LaneOutput) -> None:
    """FTS5 is an implicit AND of prefix terms: on this suite it matches few queries at all."""
    counts = {q["query_id"]: q["lexical_matches"] for q in lane.result["queries"]}
    assert {c["matcher"] for c in counts.values()} == {"FTS5"}
    assert sum(1 for c in counts.values() if c["count"]) == 7
    assert counts["q-semantic-001"]["count"] == 0


def test_explain_miss_on_the_real_run(lane: LaneOutput) -> None:
    q = next(x for x in lane.result["queries"] if x["query_id"] == "q-dup-001")
    assert q["missed"] == ["mem-eng-005"]
    assert q["why_missed"] == [
        "mem-eng-005 (grade 2) ranked 7 of 80; the top-5 held: mem-eng-003 (graded 2), "
        "mem-eng-002 (near-duplicate of mem-eng-003), mem-sup-009 (another project's memory "
        "(delta-support)), mem-eng-001 (near-duplicate of mem-eng-003), mem-eng-004 (graded 3); "
        "FTS5 matched no memory for this query"
    ]


def test_configuration_rows_do_not_depend_on_key_order(lane: LaneOutput) -> None:
    """`report` reads the configuration back from a sorted-key artifact; `run` gets it from
    the system directly. Both must render the same table."""
    shuffled = copy.deepcopy(lane.result)
    shuffled["system"] = dict(reversed(list(shuffled["system"].items())))
    shuffled["system"]["scoring_weights"] = dict(
        reversed(list(shuffled["system"]["scoring_weights"].items()))
    )
    assert section(render_markdown(shuffled), "Configuration") == section(
        lane.markdown, "Configuration"
    )
    assert section(lane.markdown, "Configuration")[3] == "| system | hotmem |"
