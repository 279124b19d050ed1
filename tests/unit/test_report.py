"""report: the result document, the Markdown beside it, and why-missed explanations."""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import hotmem
import orjson
import pytest
from conftest import CORPUS, QUERIES, run_fixtures
from hotmem import search as hm_search
from hotmem.embed import DEFAULT_EMBEDDER

from recallbench import __version__
from recallbench.builddir.artifacts import envelope
from recallbench.commands.pipeline import Run, run_pipeline
from recallbench.core import escape
from recallbench.core.errors import ArtifactError
from recallbench.datasets.fixtures.reader import CATEGORIES
from recallbench.datasets.longmemeval import generator as longmemeval_generator
from recallbench.report.figures import cell_text
from recallbench.report.result import (
    RESULT_SCHEMA,
    RESULT_SCHEMA_VERSION,
    build_result,
    explain_miss,
    mean_measures,
    per_query_values,
)
from recallbench.report.run_sections import MAX_COLUMNS, render_markdown
from recallbench.report.sections import LIST_LIMIT, cut
from recallbench.stages.report import build_report
from recallbench.stages.roundtrip import run_roundtrip
from recallbench.stages.score import run_score
from recallbench.systems.rules import decision

METRICS = ["recall@1", "recall@5", "mrr@5", "ndcg@5", "fp_rate@5", "duplicate_slot_rate@5"]
WHEN = "2025-01-01T00:00:00Z"
PATHS = {"corpus": CORPUS, "queries": QUERIES}


def fixture_lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def render(result: dict[str, Any], timings: dict | None = None) -> str:
    return render_markdown(result, timings or {}, WHEN, "9.9.9")


# --- the result document -----------------------------------------------------------------


def test_result_has_every_required_key(fixture_run: Run) -> None:
    r = fixture_run.result
    assert r["schema"] == RESULT_SCHEMA == "recallbench.result"
    assert r["schema_version"] == RESULT_SCHEMA_VERSION == 3
    assert set(r) == {
        "schema",
        "schema_version",
        "dataset",
        "counts",
        "drops",
        "summary",
        "system",
        "capabilities",
        "truncation",
        "run",
        "metrics",
        "queries",
        "roundtrip",
        "decision",
    }
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
    assert r["capabilities"] == {"clone": True, "embedder": True, "lexical": True}
    assert r["truncation"] is None  # the hash embedder has no input limit
    ds = r["dataset"]
    assert ds["dataset"] == "fixtures"
    assert ds["categories"] == list(CATEGORIES)
    assert ds["levels"] == [{"name": "memory", "prefix": "", "description": "one fixture memory"}]
    assert ds["options"] == {} and ds["drop_rules"] == {}
    assert ds["decision_policy"] == "hotmem-fixture-rules"
    assert ds["identity"]["known"] is True
    assert ds["identity"]["files"] == [
        {
            "role": role,
            "name": path.name,
            "size_bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
        for role, path in PATHS.items()
    ]
    counts = r["counts"]
    assert (counts["scopes"], counts["memories"], counts["queries"]) == (1, 80, 57)
    assert counts["queries_raw"] == 57 and counts["dropped"] == {} and r["drops"] == []
    assert sum(c["scored"] for c in counts["per_category"].values()) == 57
    assert r["summary"] == {"duplicate_groups": 7}
    assert r["run"]["top_k"] == 5 and r["run"]["store_mode"] == "kept"
    assert [m["name"] for m in r["run"]["measures"]] == METRICS
    assert [(m["level"], m["k"], m["pooled"]) for m in r["run"]["measures"]] == [
        ("memory", 1, False),
        ("memory", 5, False),
        ("memory", 5, False),
        ("memory", 5, False),
        ("memory", 5, True),
        ("memory", 5, True),
    ]
    assert mean_measures(r) == METRICS[:4]
    assert set(r["metrics"]) == {"overall", "per_category"}
    assert set(r["metrics"]["overall"]) == set(METRICS)
    assert list(r["metrics"]["per_category"]) == list(CATEGORIES)
    for cat in CATEGORIES:
        assert set(r["metrics"]["per_category"][cat]) == set(METRICS)
    # nothing machine- or time-specific in the result; the timings live beside it
    assert "generated_at" not in r and "performance" not in r
    assert fixture_run.timings["runs"]["latency"]["samples"] == 57
    assert "not a cross-machine" in fixture_run.timings["runs"]["latency"]["note"]


def test_generated_at_can_be_fixed_and_is_only_in_the_markdown(fixture_run: Run) -> None:
    envs = fixture_run.envelopes
    report = build_report(
        envs["suite"],
        envs["hydrate"],
        envs["runs"],
        envs["roundtrip"],
        envs["scores"],
        timings=fixture_run.timings,
        generated_at=WHEN,
    )
    lines = report.markdown.splitlines()
    assert lines[2] == f"Generated {WHEN} by recallbench {__version__}."
    # the result (and so its fingerprint) does not depend on when it was made
    assert report.envelope == envs["results"]
    assert report.envelope["data"] == build_result(
        envs["suite"], envs["hydrate"], envs["runs"], envs["roundtrip"], envs["scores"]
    )
    assert lines[3:] == fixture_run.markdown.splitlines()[3:]
    # without plots: the same envelope without the plot list, the Markdown without links
    bare = build_report(
        envs["suite"], envs["hydrate"], envs["runs"], envs["roundtrip"], envs["scores"], plots=False
    )
    env, markdown = bare.envelope, bare.markdown
    assert env["data"] == report.envelope["data"]
    assert env["fingerprint"] == report.envelope["fingerprint"]
    assert "plots" not in env and "![" not in markdown


def test_counts_are_integers_behind_each_value(fixture_run: Run) -> None:
    o = fixture_run.result["metrics"]["overall"]
    assert o["recall@5"]["pooled"] == {"numerator": 58, "denominator": 86}
    assert (o["recall@5"]["denominator"], o["recall@5"]["queries"]) == (50, 50)
    assert o["recall@5"]["numerator"] == pytest.approx(50 * o["recall@5"]["value"])
    assert (o["fp_rate@5"]["numerator"], o["fp_rate@5"]["denominator"]) == (35, 35)
    assert (o["duplicate_slot_rate@5"]["numerator"], o["duplicate_slot_rate@5"]["denominator"]) == (
        10,
        30,
    )
    assert o["mrr@5"]["queries"] == 50 and o["mrr@5"]["not_applicable"] == 7
    assert o["fp_rate@5"]["queries"] == 7 and o["fp_rate@5"]["not_applicable"] == 50
    assert o["duplicate_slot_rate@5"]["queries"] == 6
    assert o["mrr@5"]["pooled"] is None and o["fp_rate@5"]["pooled"] is None


def test_per_query_ordered_ids_grades_and_scores(fixture_run: Run) -> None:
    runs = {r["query_id"]: r for r in fixture_run.envelopes["runs"]["data"]["queries"]}
    roundtrip = fixture_run.envelopes["roundtrip"]["data"]["per_query"]
    relevance = {q["query_id"]: q["relevance"] for q in fixture_lines(QUERIES)}
    queries = fixture_run.result["queries"]
    assert [q["query_id"] for q in queries] == list(relevance)  # the file's order
    for q in queries:
        qid = q["query_id"]
        returned = q["returned"]
        assert [h["id"] for h in returned] == [h["memory_id"] for h in runs[qid]["hits"]]
        assert [h["score"] for h in returned] == [h["score"] for h in runs[qid]["hits"]]
        for h in returned:
            assert set(h) == {"id", "grade", "score"}
            assert isinstance(h["score"], float)
            assert h["grade"] == relevance[qid].get(h["id"], 0)
        assert q["expected"] == relevance[qid]
        grades = list(q["expected"].values())
        assert grades == sorted(grades, reverse=True)  # best grade first
        assert q["scope_id"] == "suite"
        assert roundtrip[qid]["identical"] is True
    first = queries[0]
    assert first["query_id"] == "q-lexical-001"
    assert [h["grade"] for h in first["returned"]] == [3, 3, 0, 0, 0]


def test_per_query_values_read_ratio_cells_as_numbers(fixture_run: Run) -> None:
    recall = per_query_values(fixture_run.result, "recall@5")
    assert recall["q-lexical-001"] == 1.0
    assert recall["q-dup-001"] == 0.8  # 4 of 5 relevant
    assert recall["q-negative-001"] is None
    assert per_query_values(fixture_run.result, "mrr@5")["q-dup-001"] == 1.0


def test_the_per_query_misses(fixture_run: Run) -> None:
    r = fixture_run.result
    missed = [q["query_id"] for q in r["queries"] if q["missed"]]
    assert "missed_query_ids" not in r  # derivable from the queries: not stored twice
    assert len(missed) == 17
    assert {f"q-semantic-00{i}" for i in range(1, 8)} <= set(missed)
    for q in r["queries"]:
        returned = {h["id"] for h in q["returned"]}
        relevant = {m for m, g in q["expected"].items() if g >= 2}
        assert q["missed"] == sorted(relevant - returned)
        assert len(q["why_missed"]) == len(q["missed"])
        for mid, why in zip(q["missed"], q["why_missed"], strict=True):
            assert why.startswith(f"{mid} (grade {q['expected'][mid]}) ")


def test_false_positive_slots_are_counted_on_the_negative_queries_only(fixture_run: Run) -> None:
    fp = {q["query_id"]: q["metrics"]["fp_rate@5"] for q in fixture_run.result["queries"]}
    with_fp = [qid for qid, v in fp.items() if v is not None and v["numerator"]]
    assert with_fp == [f"q-negative-00{i}" for i in range(1, 8)]
    assert all(fp[qid] == {"numerator": 5, "denominator": 5, "value": 1.0} for qid in with_fp)
    assert all(v is None for qid, v in fp.items() if not qid.startswith("q-negative"))


# --- the Markdown ------------------------------------------------------------------------


def section(markdown: str, title: str) -> list[str]:
    """The lines of a `## title` section (up to the next `## `)."""
    lines = markdown.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def assert_tables_are_rectangular(markdown: str) -> None:
    """Every row of every table has as many cell borders as the table's header."""
    header = None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = unescaped_pipes(line)
        assert unescaped_pipes(line) == header, line


def test_markdown_configuration_table(fixture_run: Run) -> None:
    config = section(fixture_run.markdown, "Configuration")
    assert config[3] == "| system | hotmem |"  # the system first, then its settings by name
    assert "| hotmem version | 0.2.6 |" in config
    assert "| embedding model | hotmem-hash-v1 |" in config
    assert "| embedding dimension | 64 |" in config
    assert "| scoring weights | cosine 0.6, fts bm25 0.2, importance 0.2 |" in config
    assert "| reranker | none |" in config
    assert "| dataset | fixtures: fixture suite (JSONL corpus + graded queries) |" in config
    sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in PATHS.values()}
    assert (
        f"| files | corpus.jsonl ({CORPUS.stat().st_size:,} bytes, sha256 {sha['corpus.jsonl']}...), "
        f"queries.jsonl ({QUERIES.stat().st_size:,} bytes, sha256 {sha['queries.jsonl']}...) |"
    ) in config
    assert "| scopes / memories / queries | 1 / 80 / 57 scored of 57 |" in config
    assert "| top-k / stores | 5 / kept |" in config
    assert not any(x.startswith("| reader options") for x in config)  # the suite has none
    assert_tables_are_rectangular(fixture_run.markdown)


def test_the_system_source_is_beside_the_result_and_in_the_report(fixture_run: Run) -> None:
    """Where HotMem came from (issue 41): in the results envelope's provenance, outside the
    fingerprinted document (a baseline never sees it), and a row of report.md and
    report.html's configuration."""
    from recallbench.core.source import describe_source, installed_source

    env = fixture_run.envelopes["results"]
    source = installed_source("hotmem")
    assert source is not None and source["version"] == hotmem.__version__
    assert env["provenance"]["system_source"] == source
    assert "source" not in fixture_run.result["system"] and "provenance" not in fixture_run.result
    row = f"| system source | {escape.markdown(describe_source(source))} |"
    assert row in section(fixture_run.markdown, "Configuration")
    assert describe_source(source) in fixture_run.html.decode("utf-8")


def test_markdown_metrics_table_has_a_row_per_category(fixture_run: Run) -> None:
    metrics = section(fixture_run.markdown, "Metrics")
    assert "### memory level (one fixture memory)" in metrics
    table = [x for x in metrics if x.startswith("|")]
    means = METRICS[:4]
    assert table[0] == "| category | queries | " + " | ".join(means) + " |"
    # each mean with its 95% interval (`result.system_intervals`)
    assert table[2].startswith(
        "| **overall** | 57 | 0.467 [0.337, 0.593] (n=50; found 29/86) | "
        "0.702 [0.570, 0.824] (n=50; found 58/86) |"
    )
    rows = table[3 : 3 + len(CATEGORIES)]
    assert [row.split(" | ")[0][2:] for row in rows] == list(CATEGORIES)
    assert all(row.count("|") == len(means) + 3 for row in table[: 3 + len(CATEGORIES)])
    exact = rows[0]
    # 7 of 7 at recall@5: Wilson's interval, lower bound (1 + z²/14 - z²/14) / (1 + z²/7)
    # = 1 / (1 + 3.8415 / 7) = 0.646; recall@1's values are not all 0 or 1: a bootstrap
    assert exact.startswith(
        "| exact_lexical | 7 | 0.929 [0.786, 1.000] (n=7; found 7/8) | "
        "1.000 [0.646, 1.000] (n=7; found 8/8) |"
    )
    negative = rows[CATEGORIES.index("negative_or_no_answer")]
    assert negative == "| negative_or_no_answer | 7 | n/a | n/a | n/a | n/a |"
    for m in ("recall", "mrr", "ndcg", "fp_rate", "duplicate_slot_rate"):
        assert sum(1 for x in metrics if x.startswith(f"- `{m}@k`: ")) == 1, m


def test_slot_rates_are_apart_from_the_bold_overall_row(fixture_run: Run) -> None:
    """fp_rate on no-answer queries is not a failure in the row of means: it has its own
    table naming the queries it was measured on and what 100% means (issue 26)."""
    metrics = section(fixture_run.markdown, "Metrics")
    overall = next(x for x in metrics if x.startswith("| **overall**"))
    assert "%" not in overall and "35/35" not in overall
    start = metrics.index(
        "### Slot rates (pooled over returned slots, not means: not in the rows above)"
    )
    rates = [x for x in metrics[start:] if x.startswith("|")]
    assert rates[0] == "| rate | level | measured on | value (slots) | what it counts |"
    assert rates[2].startswith(
        "| fp_rate@5 | memory | negative_or_no_answer (7 queries) | 100.0% (35/35) | "
    )
    assert "on no-answer queries every returned item is one" in rates[2]
    assert rates[3].startswith(
        "| duplicate_slot_rate@5 | memory | near_duplicate_diversity (6 queries) | 33.3% (10/30) | "
    )
    html = fixture_run.html.decode("utf-8")
    row = '<tr><th scope="row"><strong>overall</strong></th>'
    assert row in html
    bold = html.split(row)[1].split("</tr>")[0]
    assert "35/35" not in bold and "%" not in bold
    assert (
        '<th scope="row">fp_rate@5</th><td>memory</td><td>negative_or_no_answer (7 queries)</td>'
        in html
    )


def test_cell_text() -> None:
    mean = {"pooled": False}
    pooled = {"pooled": True}
    assert cell_text(None, mean) == "n/a"
    assert cell_text({"value": None, "pooled": None}, mean) == "n/a"
    cell = {"value": 0.5, "numerator": 1.0, "denominator": 2, "pooled": None}
    assert cell_text(cell, mean) == "0.500 (n=2)"
    recall = {**cell, "pooled": {"numerator": 3, "denominator": 7}}
    assert cell_text(recall, mean) == "0.500 (n=2; found 3/7)"
    rate = {"value": 1 / 3, "numerator": 2, "denominator": 6, "pooled": None}
    assert cell_text(rate, pooled) == "33.3% (2/6)"


def test_markdown_five_worst_queries(fixture_run: Run) -> None:
    worst = section(fixture_run.markdown, "Five worst queries")
    assert worst[1] == "| query | category | ndcg@5 | expected (grade) | returned (grade) |"
    rows = [x for x in worst if x.startswith("| q-")]
    assert len(rows) == 5
    assert [r.split(" | ")[0][2:] for r in rows] == [
        "q-cross-003",
        "q-cross-004",
        "q-cross-005",
        "q-cross-008",
        "q-entity-003",
    ]
    assert rows[0].startswith("| q-cross-003 | cross_project_isolation | 0.000 | mem-fin-011 (3)")


def test_markdown_why_missed_lines(fixture_run: Run) -> None:
    lines = [x for x in section(fixture_run.markdown, "Why relevant items were missed") if x]
    total = sum(len(q["why_missed"]) for q in fixture_run.result["queries"])
    assert len(lines) == total == 28  # fewer than the 30 shown: no "... and N more" line
    assert lines[0].startswith(
        "- `q-semantic-001` (semantic_paraphrase): mem-fin-001 (grade 3) ranked "
    )
    assert all(
        re.match(r"- `q-[a-z]+-\d{3}` \([a-z_]+\): mem-\S+ \(grade [23]\) ", x) for x in lines
    )


def test_markdown_category_observations_and_roundtrip(fixture_run: Run) -> None:
    obs = [x for x in section(fixture_run.markdown, "Category observations") if x]
    assert len(obs) == 8
    for cat, line in zip(CATEGORIES, obs, strict=True):
        assert line.startswith(f"- **{cat}** ")
    assert obs[0] == (
        "- **exact_lexical** (7 queries): recall@5 1.000 (8/8 relevant found); no relevant item "
        "missed. FTS5 matched any memory for 2 of 7 queries."
    )
    negative = obs[CATEGORIES.index("negative_or_no_answer")]
    assert "fp_rate@5: 35/35 slots (100.0%)." in negative
    assert "recall@5" not in negative and "missing" not in negative
    rt = "\n".join(section(fixture_run.markdown, "Snapshot -> verify -> clean hydrate"))
    assert "57/57 queries identical (100.0%)" in rt
    assert "Records: source 80, packaged 80, verified 80, clone 80" in rt
    assert "clone content digest matches the source's" in rt
    assert "rejected in 1/1 scopes (`corrupt_compression`)" in rt
    assert "No query changed order or score after the round trip." in rt
    assert "Sampled" not in rt  # one scope: all of it


def test_markdown_cost_section_comes_from_the_timings(fixture_run: Run) -> None:
    cost = section(
        fixture_run.markdown, "Cost (local diagnostic data, not a cross-machine guarantee)"
    )
    assert any(x.startswith("| hydrate (ingest) | ") for x in cost)
    assert any(
        x.startswith("| query latency p50 / p95 | ") and "(57 samples, repeat 1)" in x for x in cost
    )
    assert any(x.startswith("| package size | ") for x in cost)
    # without sidecars the report says so rather than inventing figures
    bare = section(
        render(fixture_run.result), "Cost (local diagnostic data, not a cross-machine guarantee)"
    )
    assert "No timing sidecar matches these artifacts." in bare


def test_markdown_conclusion_names_the_fired_rule(fixture_run: Run) -> None:
    d = fixture_run.result["decision"]
    conclusion = section(fixture_run.markdown, "Conclusion")
    assert d["rule"] == 2
    assert f"**Rule 2 fired: {d['recommendation']}**" in conclusion
    assert any(x.startswith("2. ") and "**fired**" in x for x in conclusion)
    assert any(
        x.startswith("3. ") and "also met, but an earlier rule fired first" in x for x in conclusion
    )
    assert any(x.startswith("1. ") and "not met" in x for x in conclusion)
    assert any(x.startswith("4. ") and "not met" in x for x in conclusion)
    for g in d["guardrails"]:
        assert f"- {g}" in conclusion


def test_markdown_conclusion_follows_a_different_rule(fixture_run: Run) -> None:
    result = copy.deepcopy(fixture_run.result)
    roundtrip = copy.deepcopy(fixture_run.envelopes["roundtrip"]["data"])
    roundtrip["equivalence"] = {"numerator": 56, "denominator": 57, "value": 56 / 57}
    scores = fixture_run.envelopes["scores"]["data"]
    result["decision"] = decision(fixture_run.envelopes["suite"]["data"], scores, roundtrip)
    text = render(result)
    assert "**Rule 1 fired: Fix clone/index compatibility" in text
    assert "Rule 2 fired" not in text


def test_markdown_conclusion_without_decision_rules(fixture_run: Run) -> None:
    result = copy.deepcopy(fixture_run.result)
    envs = fixture_run.envelopes
    result["decision"] = decision(
        {"dataset": "locomo"}, envs["scores"]["data"], envs["roundtrip"]["data"]
    )
    conclusion = section(render(result), "Conclusion")
    assert (
        conclusion[1] == "**no decision rules: the locomo dataset defines none; read the metrics**"
    )
    assert not any(re.match(r"\d\. ", x) for x in conclusion)


def test_build_report_refuses_stale_scores(fixture_run: Run) -> None:
    envs = fixture_run.envelopes
    stale = envelope("scores", envs["scores"]["data"], {**envs["scores"]["inputs"], "runs": "x"})
    with pytest.raises(ArtifactError, match=r"scores\.json is stale.*recallbench score"):
        build_report(envs["suite"], envs["hydrate"], envs["runs"], envs["roundtrip"], stale)


def test_configuration_rows_do_not_depend_on_key_order(fixture_run: Run) -> None:
    """`report` reads the configuration back from a sorted-key artifact; `run` gets it from
    the system directly. Both must render the same table."""
    shuffled = copy.deepcopy(fixture_run.result)
    shuffled["system"] = dict(reversed(list(shuffled["system"].items())))
    shuffled["system"]["scoring_weights"] = dict(
        reversed(list(shuffled["system"]["scoring_weights"].items()))
    )
    source = [
        line for line in section(fixture_run.markdown, "Configuration") if "system source" in line
    ]
    assert section(render(shuffled), "Configuration") == [
        line for line in section(fixture_run.markdown, "Configuration") if line not in source
    ]
    assert section(fixture_run.markdown, "Configuration")[3] == "| system | hotmem |"


def test_a_top_k_past_the_systems_search_depth_is_said(fixture_run: Run) -> None:
    """A system whose configuration records a `search_depth_limit` (pgvector's HNSW stores:
    their index returns at most 1000 rows) gets a warning in report.md's and report.html's
    configuration when top-k passes it, and neither at or below it."""
    from markupsafe import escape

    from recallbench.report.run_sections import configuration_section
    from recallbench.report.sections import html_sections

    def html_configuration(result: dict[str, Any]) -> str:
        (config,) = html_sections([configuration_section(result)])
        return "".join(str(b["text"]) for b in config["blocks"] if b["kind"] == "quote")

    result = copy.deepcopy(fixture_run.result)
    result["system"]["search_depth_limit"] = 1000
    result["run"]["top_k"] = 1000
    assert "> Warning: top-k" not in render(result)
    assert "Warning" not in html_configuration(result)
    result["run"]["top_k"] = 1001
    note = (
        "top-k 1001 is above the 1,000 hits hotmem's index can return (search depth limit): "
        "past rank 1,000 a ranking may be cut short, so the figures at cutoffs above 1,000 "
        "are approximate at that depth"
    )
    assert f"> Warning: {note}." in section(render(result), "Configuration")
    assert html_configuration(result) == str(escape(f"Warning: {note}."))


# --- long lists and characters that would break a table ----------------------------------


def test_cut_keeps_the_first_ten() -> None:
    items = [f"q{i}" for i in range(12)]
    assert LIST_LIMIT == 10
    assert (
        cut(items) == "q0, q1, q2, q3, q4, q5, q6, q7, q8, q9 ... and 2 more; all in results.json"
    )
    assert cut(items[:10]) == ", ".join(items[:10])
    assert cut([]) == ""
    assert cut(items, 3, "drops.json") == "q0, q1, q2 ... and 9 more; all in drops.json"


@pytest.fixture(scope="module")
def crowded(fixture_run: Run) -> dict[str, Any]:
    """The fixture run's result made crowded by hand: 14 paraphrase queries with ids holding '|',
    12 drops, 12 drifted queries, a pipe in a category label, a setting and a drop rule."""
    result = copy.deepcopy(fixture_run.result)
    semantic = [q for q in result["queries"] if q["category"] == "semantic_paraphrase"]
    copies = copy.deepcopy(semantic)
    for i, q in enumerate(semantic + copies, start=1):
        q["query_id"] = f"q|sem-{i:02d}"
    result["queries"] += copies
    result["counts"]["per_category"]["semantic_paraphrase"]["scored"] = 14
    result["dataset"]["category_labels"]["exact_lexical"] = "exact | lexical"
    result["system"]["reranker"] = "none|yet"
    result["drops"] = [
        {
            "query_id": f"d|{i:02d}",
            "category": "exact_lexical",
            "reason": "abstention",
            "detail": "no evidence",
            "scope_id": "suite",
        }
        for i in range(12)
    ]
    result["counts"]["dropped"] = {"abstention": 12}
    result["dataset"]["drop_rules"] = {"abstention": "no evidence | nothing to find"}
    result["roundtrip"]["drift"] = {
        f"q|drift-{i:02d}": {
            "identical": False,
            "same_set": True,
            "moved_positions": [1, 2],
            "only_before": [],
            "only_after": [],
            "max_score_drift": 0.01,
            "after": [f"m|{j}" for j in range(12)],
        }
        for i in range(12)
    }
    return result


def test_long_lists_are_cut_to_ten(crowded: dict[str, Any]) -> None:
    text = render(crowded)
    obs = next(x for x in section(text, "Category observations") if "semantic_paraphrase" in x)
    shown = ", ".join(f"q\\|sem-{i:02d}" for i in range(1, 11))
    assert f"queries missing a relevant item: {shown} ... and 4 more; all in results.json." in obs
    drops = next(x for x in section(text, "Dataset") if x.startswith("- abstention: "))
    shown = ", ".join(f"d\\|{i:02d}" for i in range(10))
    assert drops == (
        f"- abstention: 12 (no evidence \\| nothing to find): {shown} ... and 2 more; "
        "all in results.json"
    )
    rt = section(text, "Snapshot -> verify -> clean hydrate")
    drifted = [x for x in rt if x.startswith("- `q|drift-")]  # a code span: shown as is
    assert len(drifted) == 10
    assert drifted[0].startswith("- `q|drift-00`: positions \\[1, 2\\] changed, max score drift ")
    assert drifted[0].endswith("m\\|8, m\\|9 ... and 2 more; all in results.json")
    assert "- ... and 2 more; all in results.json" in rt
    why = [x for x in section(text, "Why relevant items were missed") if x]
    total = sum(len(q["why_missed"]) for q in crowded["queries"])
    assert total > 3 * LIST_LIMIT
    assert len(why) == 3 * LIST_LIMIT + 1
    assert why[-1] == f"- ... and {total - 3 * LIST_LIMIT} more; all in results.json"


def test_pipes_in_ids_and_labels_are_escaped_in_tables(crowded: dict[str, Any]) -> None:
    text = render(crowded)
    assert_tables_are_rectangular(text)
    assert "| reranker | none\\|yet |" in section(text, "Configuration")
    metrics = section(text, "Metrics")
    assert any(x.startswith("| exact \\| lexical | 7 | ") for x in metrics)
    assert any(x.startswith("- **exact \\| lexical** (7 queries)") for x in text.splitlines())
    # no raw id with a pipe outside a code span: every one went through escape.markdown
    plain = re.sub(r"`[^`]*`", "", text)
    assert "q|sem" not in plain and "d|0" not in plain and "m|1" not in plain


def test_expected_lists_in_the_worst_queries_are_cut_to_five(fixture_run: Run) -> None:
    result = copy.deepcopy(fixture_run.result)
    q = next(x for x in result["queries"] if x["query_id"] == "q-cross-003")
    q["expected"] = {f"mem-x-{i:02d}": 3 for i in range(7)}
    row = next(
        x for x in section(render(result), "Five worst queries") if x.startswith("| q-cross-003")
    )
    shown = ", ".join(f"mem-x-{i:02d} (3)" for i in range(5))
    assert f"| {shown} ... and 2 more; all in results.json |" in row


# --- a two-level dataset ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def turn_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Generated LongMemEval data, one memory per turn (levels session and turn), three of
    its eleven scopes round-tripped."""
    work = tmp_path_factory.mktemp("turns")
    data = work / "longmemeval.json"
    longmemeval_generator.generate(
        data, shape="s", questions=12, seed=1, sessions_per_question=8, session_chars=300
    )
    return run_pipeline(
        "longmemeval", {"data": data}, work, options={"unit": "turn"}, top_k=10, sample=3
    )


def test_a_table_per_level(turn_run: Run) -> None:
    metrics = section(turn_run.markdown, "Metrics")
    headings = [x for x in metrics if x.startswith("### ")]
    # twelve measures a level: a table per cutoff, so each fits a 1280 px window
    turn = "### turn level (a haystack turn (session id + '\\_' + position))"
    assert headings == [
        *(f"### session level (a haystack session), k = {k}" for k in (1, 5, 10)),
        *(f"{turn}, k = {k}" for k in (1, 5, 10)),
    ]
    headers = [x for x in metrics if x.startswith("| category | queries | ")]
    measures = turn_run.result["run"]["measures"]
    assert len(measures) == 24
    assert headers == [
        "| category | queries | "
        + " | ".join(m["name"] for m in measures if m["level"] == level and m["k"] == k)
        + " |"
        for level in ("session", "turn")
        for k in (1, 5, 10)
    ]
    assert all(h.count("|") - 3 <= MAX_COLUMNS for h in headers)
    assert_tables_are_rectangular(turn_run.markdown)


def test_drops_sampling_and_no_rules_in_a_dataset_report(turn_run: Run) -> None:
    r, text = turn_run.result, turn_run.markdown
    assert r["counts"]["dropped"] == {"abstention": 1}
    drop = r["drops"][0]
    rule = escape.markdown(r["dataset"]["drop_rules"]["abstention"])
    assert f"- abstention: 1 ({rule}): {drop['query_id']}" in (section(text, "Dataset"))
    assert "| reader options | session text user, unit turn |" in section(text, "Configuration")
    sample = r["roundtrip"]["sample"]
    assert (sample["scopes_sampled"], sample["scopes_total"]) == (3, 11)
    rt = section(text, "Snapshot -> verify -> clean hydrate")
    assert rt[1] == (
        f"Sampled 3 of 11 scopes ({sample['rule']}): {', '.join(sample['scope_ids'])}."
    )
    assert r["decision"]["rule"] is None
    assert section(text, "Conclusion")[1].startswith("**no decision rules: the longmemeval")


# --- score drift after the round trip ----------------------------------------------------


def test_score_only_drift_is_reported(tmp_path: Path) -> None:
    envs = run_fixtures(tmp_path).envelopes  # its stores are kept under tmp_path
    suite, hydrate, runs = envs["suite"], envs["hydrate"], envs["runs"]
    data = copy.deepcopy(runs["data"])
    data["queries"][0]["hits"][0]["score"] += 0.05  # the clone will score it 0.05 lower
    runs = envelope("runs", data, runs["inputs"])
    rt, _ = run_roundtrip(suite, hydrate, runs, tmp_path)
    scores = run_score(suite, runs)
    report = build_report(suite, hydrate, runs, rt, scores, plots=False)
    results, markdown = report.envelope, report.markdown
    result = results["data"]
    assert rt["data"]["per_query"]["q-lexical-001"]["max_score_drift"] == pytest.approx(0.05)
    assert "No query changed order or score" not in markdown
    assert list(result["roundtrip"]["drift"]) == ["q-lexical-001"]
    assert result["roundtrip"]["equivalence"]["numerator"] == 57  # ids still identical
    line = next(x for x in markdown.splitlines() if x.startswith("- `q-lexical-001`: positions"))
    assert line.startswith(
        "- `q-lexical-001`: positions none changed, max score drift 0.0500, now "
    )


# --- explain_miss by hand ----------------------------------------------------------------

IDENTIFIERS = {"a1": "proj-a", "a2": "proj-a", "a3": "proj-a", "d1": "proj-a", "d2": "proj-a",
               "b1": "proj-b", "b2": "proj-b"}  # fmt: skip
GROUPS = {"d1": "g", "d2": "g"}
GOLD = {"a1": 3, "a3": 1, "d1": 2}


def miss(mid: str, rank: int | None, of: int, grade: int = 3, **extra: Any) -> dict[str, Any]:
    return {
        "id": mid,
        "grade": grade,
        "rank": rank,
        "of": of,
        "identifier": IDENTIFIERS[mid],
    } | extra


def memory_row(top: list[str], gold: dict[str, int], lexical: dict | None = None) -> dict:
    """A runs row at the memory level, as explain_miss sees it."""
    return {
        "hits": [
            {"memory_id": m, "score": 0.5, "identifier": IDENTIFIERS[m], "group": GROUPS.get(m)}
            for m in top
        ],
        "levels": {"memory": {"ranking": top, "gold": gold}},
        "memory_level": "memory",
        "lexical": lexical,
    }


def test_explain_miss_composite() -> None:
    row = memory_row(["d1", "d2", "b1", "a3", "a2", "b2"], GOLD)
    assert explain_miss(miss("a1", 7, 7), row, "memory", 5) == (
        "a1 (grade 3) ranked 7 of 7; the top-5 held: d1 (graded 2), "
        "d2 (near-duplicate of d1), b1 (another project's memory (proj-b)), "
        "a3 (graded 1), a2 (same-project distractor)"
    )


def test_explain_miss_not_returned_at_all() -> None:
    text = explain_miss(miss("a1", None, 1), memory_row(["a2"], GOLD), "memory", 5)
    assert text == "a1 (grade 3) not returned at all; the top-1 held: a2 (same-project distractor)"


def test_explain_miss_another_project_is_relative_to_the_missed_memory() -> None:
    """b1 is 'another project' for a proj-a target, but a same-project distractor for b-targets."""
    text = explain_miss(miss("b2", None, 2), memory_row(["b1", "a2"], {"b2": 3}), "memory", 5)
    assert text.endswith("b1 (same-project distractor), a2 (another project's memory (proj-a))")


def test_explain_miss_duplicate_group_first_member_is_not_a_duplicate() -> None:
    text = explain_miss(miss("a1", None, 2), memory_row(["d2", "d1"], {"a1": 3}), "memory", 5)
    assert "d2 (same-project distractor), d1 (near-duplicate of d2)" in text
    assert "(grade 3) not returned at all" in text


def test_explain_miss_reports_the_lexical_matcher() -> None:
    def explain(lexical: dict, matched: bool) -> str:
        row = memory_row(["a2"], {"a1": 3}, lexical)
        return explain_miss(miss("a1", 2, 2, lexical_match=matched), row, "memory", 5)

    none = explain({"matcher": "FTS5", "matched": 0}, False)
    assert none.endswith("; FTS5 matched no memory for this query")
    assert explain({"matcher": "FTS5", "matched": 2}, True).endswith(
        "; FTS5 matched 2 memories, a1 among them"
    )
    assert explain({"matcher": "BM25", "matched": 1}, False).endswith(
        "; BM25 matched 1 memory, a1 not among them"
    )
    # a system without lexical diagnostics: nothing is said about matching
    plain = explain_miss(miss("a1", 2, 2), memory_row(["a2"], {"a1": 3}), "memory", 5)
    assert plain == "a1 (grade 3) ranked 2 of 2; the top-1 held: a2 (same-project distractor)"


def test_explain_miss_at_a_level_of_dataset_units() -> None:
    """At a session level the top-k is the level's ranking, each unit graded or not gold."""
    row = {
        "hits": [{"memory_id": "h1"}, {"memory_id": "h2"}, {"memory_id": "h3"}],
        "levels": {"session": {"ranking": ["s2", "s1"], "gold": {"s1": 1, "s3": 2}}},
        "memory_level": None,
        "lexical": None,
    }
    entry = {"id": "s3", "grade": 2, "rank": 5, "of": 9}
    assert explain_miss(entry, row, "session", 10) == (
        "s3 (grade 2) ranked 5 of 9; the top-2 held: s2 (not gold), s1 (graded 1)"
    )


def test_lexical_matches_come_from_hotmem_fts(fixture_run: Run) -> None:
    """FTS5 is an implicit AND of prefix terms: on this suite it matches few queries at all."""
    counts = {q["query_id"]: q["lexical_matches"] for q in fixture_run.result["queries"]}
    assert {c["matcher"] for c in counts.values()} == {"FTS5"}
    assert sum(1 for c in counts.values() if c["count"]) == 7
    assert counts["q-semantic-001"]["count"] == 0


def test_explain_miss_on_the_real_run(fixture_run: Run) -> None:
    q = next(x for x in fixture_run.result["queries"] if x["query_id"] == "q-dup-001")
    assert q["missed"] == ["mem-eng-005"]
    assert q["why_missed"] == [
        "mem-eng-005 (grade 2) ranked 7 of 80; the top-5 held: mem-eng-003 (graded 2), "
        "mem-eng-002 (near-duplicate of mem-eng-003), mem-sup-009 (another project's memory "
        "(delta-support)), mem-eng-001 (near-duplicate of mem-eng-003), mem-eng-004 (graded 3); "
        "FTS5 matched no memory for this query"
    ]


def test_generated_data_gets_a_banner_at_the_top(
    turn_run: Run, fixture_run: Run, tmp_path: Path
) -> None:
    """A data file written by a recallbench generator (LongMemEval, LoCoMo) is flagged at the
    top of report.md and report.html, before any figure; the committed suite is not a
    generated file (issue 26, item 7)."""
    lines = turn_run.markdown.splitlines()
    assert lines[2].startswith(
        "> **Synthetic data**: synthetic data from the recallbench generator (shape s, "
    )
    assert lines[2].endswith(
        "These figures test the tooling, not a system's quality on a benchmark."
    )
    html = turn_run.html.decode("utf-8")
    assert html.index('<p class="banner" role="note"><strong>Synthetic data</strong>') < html.index(
        "<h2>Metrics</h2>"
    )
    assert (
        "Synthetic data" not in fixture_run.markdown
        and 'class="banner"' not in fixture_run.html.decode()
    )
    from recallbench.datasets.locomo import generator as locomo_generator

    data = tmp_path / "locomo.json"
    locomo_generator.generate(
        data, conversations=2, sessions=2, turns_per_session=4, questions_per_conversation=3
    )
    run = run_pipeline("locomo", {"data": data}, tmp_path / "build", system="bm25")
    assert run.result["dataset"]["identity"]["generated"] is True
    assert run.markdown.splitlines()[2].startswith("> **Synthetic data**: synthetic data from")
