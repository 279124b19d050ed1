"""The committed baseline: it equals a fresh run, holds nothing volatile, its metrics are
right, and the gate catches changes."""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import BASELINE, CORPUS, QUERIES, cli, load_json

from recallbench.artifacts import dumps
from recallbench.baseline import category_table, differences, load_result
from recallbench.errors import RecallbenchError
from recallbench.pipeline import LaneOutput, run_fixture_lane
from recallbench.stages.report import normalize
from recallbench.suite import CATEGORIES

K = 5


@pytest.fixture(scope="module")
def baseline() -> dict[str, Any]:
    return load_json(BASELINE)


def strings_and_keys(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from strings_and_keys(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from strings_and_keys(value)
    elif isinstance(obj, str):
        yield obj


def keys(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from keys(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from keys(value)


# --- a fresh run equals the baseline -----------------------------------------------------


def test_fresh_run_equals_the_baseline_byte_for_byte(lane: LaneOutput) -> None:
    assert dumps(normalize(lane.result)) == BASELINE.read_bytes()


def test_fresh_run_equals_the_baseline_query_by_query(
    lane: LaneOutput, baseline: dict[str, Any]
) -> None:
    """The same check, broken down so that a failure names the query that changed."""
    fresh = normalize(lane.result)
    assert [q["query_id"] for q in fresh["queries"]] == [q["query_id"] for q in baseline["queries"]]
    for now, then in zip(fresh["queries"], baseline["queries"], strict=True):
        qid = now["query_id"]
        assert [h["memory_id"] for h in now["returned"]] == [
            h["memory_id"] for h in then["returned"]
        ], qid
        assert [h["grade"] for h in now["returned"]] == [h["grade"] for h in then["returned"]], qid
        assert [h["score"] for h in now["returned"]] == [h["score"] for h in then["returned"]], qid
        assert now["metrics"] == then["metrics"], qid
    assert fresh["metrics"] == baseline["metrics"]
    assert fresh["decision"] == baseline["decision"]
    assert fresh["roundtrip"] == baseline["roundtrip"]
    assert differences(baseline, lane.result) == []


def test_repeat_does_not_change_the_normalized_result(tmp_path: Path) -> None:
    out = run_fixture_lane(CORPUS, QUERIES, tmp_path, repeat=3)
    assert out.result["run"]["repeat"] == 3
    assert out.result["performance"]["latency"]["samples"] == 3 * 57
    assert dumps(normalize(out.result)) == BASELINE.read_bytes()


# --- the baseline's schema ---------------------------------------------------------------


def test_baseline_schema_and_counts(baseline: dict[str, Any]) -> None:
    assert load_result(BASELINE) == baseline
    assert baseline["schema"] == "recallbench.fixture-result"
    assert baseline["schema_version"] == 1
    assert set(baseline) == {
        "schema",
        "schema_version",
        "system",
        "suite",
        "run",
        "metrics",
        "queries",
        "missed_query_ids",
        "false_positive_query_ids",
        "roundtrip",
        "decision",
    }
    counts = baseline["suite"]["counts"]
    assert counts["memories"] == 80
    assert counts["queries"] == 57 == len(baseline["queries"])
    assert baseline["suite"]["categories"] == list(CATEGORIES)
    assert len(counts["per_category"]) == 8
    assert sum(counts["per_category"].values()) == 57
    assert all(n >= 5 for n in counts["per_category"].values())
    assert set(baseline["metrics"]["per_category"]) == set(CATEGORIES)  # keys are sorted
    for cat, n in counts["per_category"].items():
        assert sum(1 for q in baseline["queries"] if q["category"] == cat) == n
    assert baseline["run"] == {"top_k": 5, "metrics": [
        "recall@1", "recall@5", "mrr@5", "ndcg@5", "fp_rate@5", "duplicate_slot_rate@5"
    ]}  # fmt: skip
    assert baseline["system"]["hotmem_version"] == "0.2.6"
    assert baseline["system"]["embedding_model"] == "hotmem-hash-v1"
    assert baseline["system"]["embedding_dimension"] == 64


def test_baseline_has_no_volatile_keys(baseline: dict[str, Any]) -> None:
    for key in ("generated_at", "performance", "environment", "recallbench_version"):
        assert key not in baseline
    assert "repeat" not in baseline["run"]
    volatile = re.compile(
        r"generated_at|timestamp|latency|timing|seconds|_ms$|per_second|host|commit"
    )
    assert [k for k in keys(baseline) if volatile.search(k)] == []


def test_baseline_holds_no_paths(baseline: dict[str, Any]) -> None:
    for text in strings_and_keys(baseline):
        assert "/tmp" not in text, text
        assert not text.startswith(os.sep), text
        assert not text.startswith("/"), text
        assert not re.match(r"^[A-Za-z]:[\\/]", text), text
        assert not re.search(r"(^|\s)(/home/|/Users/|/var/|/private/|~/)", text), text
    assert baseline["suite"]["sources"]["corpus"]["file"] == "corpus.jsonl"
    assert baseline["suite"]["sources"]["queries"]["file"] == "queries.jsonl"


def test_baseline_is_canonical_json(baseline: dict[str, Any]) -> None:
    assert dumps(baseline) == BASELINE.read_bytes()
    assert normalize(baseline) == baseline  # already normalized


# --- the baseline's metrics, recomputed by hand --------------------------------------------


def hand_recall(ranked: list[str], grades: dict[str, int], k: int) -> tuple[int, int] | None:
    relevant = {m for m, g in grades.items() if g >= 2}
    if not relevant:
        return None
    return len(relevant & set(ranked[:k])), len(relevant)


def hand_ndcg(ranked: list[str], grades: dict[str, int], k: int) -> float | None:
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return None
    dcg = math.fsum(grades.get(m, 0) / math.log2(i + 2) for i, m in enumerate(ranked[:k]))
    idcg = math.fsum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def hand_rr(ranked: list[str], grades: dict[str, int], k: int) -> float | None:
    if not any(g >= 2 for g in grades.values()):
        return None
    for i, m in enumerate(ranked[:k]):
        if grades.get(m, 0) >= 2:
            return 1 / (i + 1)
    return 0.0


def hand_mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def duplicate_groups() -> dict[str, str]:
    rows = [orjson.loads(x) for x in CORPUS.read_bytes().splitlines() if x.strip()]
    return {r["memory_id"]: r["duplicate_group"] for r in rows if r.get("duplicate_group")}


def ranked(q: dict[str, Any]) -> list[str]:
    return [h["memory_id"] for h in q["returned"]]


@pytest.mark.parametrize("scope", ["overall", *CATEGORIES])
def test_baseline_recall_and_ndcg_recomputed_by_hand(baseline: dict[str, Any], scope: str) -> None:
    qs = [q for q in baseline["queries"] if scope in ("overall", q["category"])]
    summary = (
        baseline["metrics"]["overall"]
        if scope == "overall"
        else baseline["metrics"]["per_category"][scope]
    )
    for name, k in (("recall@5", 5), ("recall@1", 1)):
        pairs = [hand_recall(ranked(q), q["expected"], k) for q in qs]
        present = [p for p in pairs if p is not None]
        assert summary[name]["value"] == hand_mean([a / b for a, b in present]), name
        assert summary[name]["found"] == sum(a for a, _ in present)
        assert summary[name]["relevant"] == sum(b for _, b in present)
        assert summary[name]["queries"] == len(present)
        assert summary[name]["not_applicable"] == len(qs) - len(present)
    ndcg = [hand_ndcg(ranked(q), q["expected"], K) for q in qs]
    assert summary["ndcg@5"]["value"] == hand_mean(ndcg)
    rr = [hand_rr(ranked(q), q["expected"], K) for q in qs]
    assert summary["mrr@5"]["value"] == hand_mean(rr)


def test_baseline_recall_values_by_hand_for_two_categories(baseline: dict[str, Any]) -> None:
    """Spot values: all exact-lexical relevant memories found, no paraphrase one."""
    per_cat = baseline["metrics"]["per_category"]
    assert per_cat["exact_lexical"]["recall@5"]["value"] == 1.0
    assert per_cat["semantic_paraphrase"]["recall@5"]["value"] == 0.0
    assert per_cat["semantic_paraphrase"]["ndcg@5"]["value"] == 0.0
    assert per_cat["negative_or_no_answer"]["recall@5"]["value"] is None


def test_baseline_per_query_metrics_recomputed_by_hand(baseline: dict[str, Any]) -> None:
    for q in baseline["queries"]:
        m, ids, grades = q["metrics"], ranked(q), q["expected"]
        rec = hand_recall(ids, grades, K)
        if rec is None:
            assert m["recall@5"] is None
        else:
            assert (m["recall@5"]["numerator"], m["recall@5"]["denominator"]) == rec
        assert m["ndcg@5"] == hand_ndcg(ids, grades, K), q["query_id"]
        assert m["mrr@5"] == hand_rr(ids, grades, K), q["query_id"]
        assert [h["grade"] for h in q["returned"]] == [grades.get(x, 0) for x in ids]


def test_baseline_rates_recomputed_by_hand(baseline: dict[str, Any]) -> None:
    negatives = [q for q in baseline["queries"] if q["category"] == "negative_or_no_answer"]
    fp = sum(
        1 for q in negatives for h in q["returned"][:K] if q["expected"].get(h["memory_id"], 0) == 0
    )
    slots = sum(len(q["returned"][:K]) for q in negatives)
    got = baseline["metrics"]["per_category"]["negative_or_no_answer"]["fp_rate@5"]
    assert (got["numerator"], got["denominator"]) == (fp, slots) == (35, 35)

    groups = duplicate_groups()
    dups = slots = 0
    for q in baseline["queries"]:
        if q["category"] != "near_duplicate_diversity":
            continue
        seen: set[str] = set()
        for mid in ranked(q)[:K]:
            key = groups.get(mid, "id:" + mid)
            dups += key in seen
            seen.add(key)
            slots += 1
    got = baseline["metrics"]["per_category"]["near_duplicate_diversity"]["duplicate_slot_rate@5"]
    assert (got["numerator"], got["denominator"]) == (dups, slots) == (10, 30)
    assert got["value"] == dups / slots


def test_baseline_decision_follows_its_own_metrics(baseline: dict[str, Any]) -> None:
    per_cat = baseline["metrics"]["per_category"]
    gap = (
        per_cat["exact_lexical"]["recall@5"]["value"]
        - per_cat["semantic_paraphrase"]["recall@5"]["value"]
    ) * 100
    assert baseline["roundtrip"]["equivalence"]["value"] == 1.0
    assert gap >= 15
    assert baseline["decision"]["rule"] == 2


def test_baseline_missed_ids_follow_its_own_queries(baseline: dict[str, Any]) -> None:
    expected = [
        q["query_id"]
        for q in baseline["queries"]
        if {m for m, g in q["expected"].items() if g >= 2} - set(ranked(q))
    ]
    assert baseline["missed_query_ids"] == expected


# --- differences() -----------------------------------------------------------------------


def test_differences_ignore_volatile_fields(lane: LaneOutput, baseline: dict[str, Any]) -> None:
    changed = copy.deepcopy(lane.result)
    changed["generated_at"] = "1999-12-31T23:59:59Z"
    changed["performance"] = {"anything": 123.0}
    changed["environment"] = {"python": "0.0"}
    changed["recallbench_version"] = "9.9.9"
    changed["run"]["repeat"] = 50
    assert differences(baseline, changed) == []
    assert differences(changed, baseline) == []


def test_differences_catch_a_swapped_pair_of_returned_ids(
    lane: LaneOutput, baseline: dict[str, Any]
) -> None:
    changed = copy.deepcopy(lane.result)
    returned = changed["queries"][10]["returned"]
    returned[1]["memory_id"], returned[2]["memory_id"] = (
        returned[2]["memory_id"],
        returned[1]["memory_id"],
    )
    diffs = differences(baseline, changed)
    assert len(diffs) == 2
    assert diffs[0].startswith("$.queries[10].returned[1].memory_id: ")
    assert diffs[1].startswith("$.queries[10].returned[2].memory_id: ")


def test_differences_catch_a_changed_metric(lane: LaneOutput, baseline: dict[str, Any]) -> None:
    changed = copy.deepcopy(lane.result)
    changed["metrics"]["per_category"]["exact_lexical"]["ndcg@5"]["value"] = 0.5
    diffs = differences(baseline, changed)
    assert diffs == [
        "$.metrics.per_category.exact_lexical.ndcg@5.value: "
        f"{baseline['metrics']['per_category']['exact_lexical']['ndcg@5']['value']!r} -> 0.5"
    ]


def test_differences_catch_added_and_removed_keys(
    lane: LaneOutput, baseline: dict[str, Any]
) -> None:
    changed = copy.deepcopy(lane.result)
    del changed["missed_query_ids"]
    changed["queries"][0]["extra"] = 1
    diffs = differences(baseline, changed)
    assert "$.missed_query_ids: removed" in diffs
    assert "$.queries[0].extra: added" in diffs


def test_category_table_shows_before_and_after(baseline: dict[str, Any]) -> None:
    changed = copy.deepcopy(baseline)
    changed["metrics"]["per_category"]["semantic_paraphrase"]["recall@5"]["value"] = 0.25
    table = category_table(baseline, changed)
    assert table.splitlines() == [
        f"  {'semantic_paraphrase':<32} {'recall@5':<26} {'0.0000':>8} -> {'0.2500':>8}"
    ]
    assert "no metric changed" in category_table(baseline, baseline)


def test_load_result_refuses_other_documents(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_bytes(b'{"schema": "something-else"}')
    with pytest.raises(RecallbenchError, match="not a recallbench.fixture-result document"):
        load_result(other)
    with pytest.raises(RecallbenchError, match="not found"):
        load_result(tmp_path / "missing.json")


# --- the check-baseline command ----------------------------------------------------------


@pytest.fixture(scope="module")
def run_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("gate") / "build"
    result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
    assert result.exit_code == 0, result.output
    return build


def test_check_baseline_passes_for_the_committed_baseline(run_build: Path) -> None:
    result = cli(run_build, "check-baseline", "--baseline", BASELINE)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"result matches {BASELINE}"


def test_check_baseline_fails_with_a_category_table(run_build: Path, tmp_path: Path) -> None:
    doc = load_json(BASELINE)
    doc["metrics"]["per_category"]["cross_project_isolation"]["recall@5"]["value"] = 0.75
    tampered = tmp_path / "baseline.json"
    tampered.write_bytes(dumps(doc))
    result = cli(run_build, "check-baseline", "--baseline", tampered)
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    err = result.stderr.splitlines()
    assert err[0] == "category-level before -> after:"
    assert (
        err[1]
        == f"  {'cross_project_isolation':<32} {'recall@5':<26} {'0.7500':>8} -> {'0.5000':>8}"
    )
    assert err[2] == "differences:"
    assert err[3] == "  $.metrics.per_category.cross_project_isolation.recall@5.value: 0.75 -> 0.5"
    assert err[-1].startswith(f"recallbench check-baseline: error: result differs from {tampered}")
    assert "make baseline" in err[-1]
    assert len(err) == 5


def test_check_baseline_fails_for_a_swapped_ranking(run_build: Path, tmp_path: Path) -> None:
    doc = load_json(BASELINE)
    r = doc["queries"][0]["returned"]
    r[0], r[1] = r[1], r[0]
    tampered = tmp_path / "baseline.json"
    tampered.write_bytes(dumps(doc))
    result = cli(run_build, "check-baseline", "--baseline", tampered)
    assert result.exit_code == 3
    assert "no metric changed; ids, scores or other fields did" in result.stderr
    assert "$.queries[0].returned[0].memory_id: 'mem-fin-002' -> 'mem-fin-001'" in result.stderr


def test_differences_with_another_top_k_say_so_in_one_line(
    lane: LaneOutput, baseline: dict[str, Any]
) -> None:
    changed = copy.deepcopy(lane.result)
    changed["run"]["top_k"] = 3
    assert differences(baseline, changed) == [
        "$.run.top_k: the baseline was made with top-k 5, this run used 3"
    ]
    assert category_table(baseline, changed) == "  (not comparable: different top-k)"


def test_check_baseline_fails_for_a_run_with_another_top_k(tmp_path: Path) -> None:
    build = tmp_path / "build"
    assert (
        cli(build, "-q", "run", "--corpus", CORPUS, "--queries", QUERIES, "--top-k", "3").exit_code
        == 0
    )
    result = cli(build, "check-baseline", "--baseline", BASELINE)
    assert result.exit_code == 3
    assert "the baseline was made with top-k 5, this run used 3" in result.stderr
    assert "Traceback" not in result.output


def test_check_baseline_with_a_missing_baseline_file(run_build: Path, tmp_path: Path) -> None:
    result = cli(run_build, "check-baseline", "--baseline", tmp_path / "none.json")
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == f"recallbench check-baseline: error: {tmp_path / 'none.json'}: not found"
    )
