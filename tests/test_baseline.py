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
from conftest import BASELINE, CORPUS, QUERIES, cli, load_json, run_fixtures

from recallbench.artifacts import dumps, envelope
from recallbench.baseline import category_table, differences, load_result, normalize
from recallbench.datasets.fixtures.reader import CATEGORIES
from recallbench.errors import ArtifactError, RecallbenchError
from recallbench.pipeline import Run

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


def test_fresh_run_equals_the_baseline_byte_for_byte(lane: Run) -> None:
    assert dumps(lane.result) == BASELINE.read_bytes()
    assert dumps(normalize(lane.envelopes["results"])) == BASELINE.read_bytes()


def test_fresh_run_equals_the_baseline_query_by_query(lane: Run, baseline: dict[str, Any]) -> None:
    """The same check, broken down so that a failure names the query that changed."""
    fresh = lane.result
    assert [q["query_id"] for q in fresh["queries"]] == [q["query_id"] for q in baseline["queries"]]
    for now, then in zip(fresh["queries"], baseline["queries"], strict=True):
        qid = now["query_id"]
        assert [h["id"] for h in now["returned"]] == [h["id"] for h in then["returned"]], qid
        assert [h["grade"] for h in now["returned"]] == [h["grade"] for h in then["returned"]], qid
        assert [h["score"] for h in now["returned"]] == [h["score"] for h in then["returned"]], qid
        assert now["metrics"] == then["metrics"], qid
        assert now["why_missed"] == then["why_missed"], qid
    assert fresh["metrics"] == baseline["metrics"]
    assert fresh["decision"] == baseline["decision"]
    assert fresh["roundtrip"] == baseline["roundtrip"]
    assert differences(baseline, lane.result) == []


def test_repeat_does_not_change_the_result(tmp_path: Path) -> None:
    out = run_fixtures(tmp_path, repeat=3)
    assert out.timings["runs"]["repeat"] == 3
    assert out.timings["runs"]["latency"]["samples"] == 3 * 57
    assert "repeat" not in out.result["run"]
    assert dumps(out.result) == BASELINE.read_bytes()


# --- the baseline's schema ---------------------------------------------------------------


def test_baseline_schema_and_counts(baseline: dict[str, Any]) -> None:
    assert load_result(BASELINE) == baseline
    assert baseline["schema"] == "recallbench.result"
    assert baseline["schema_version"] == 2
    assert set(baseline) == {
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
        "missed_query_ids",
        "roundtrip",
        "decision",
    }
    counts = baseline["counts"]
    assert counts["memories"] == 80
    assert counts["queries"] == counts["queries_raw"] == 57 == len(baseline["queries"])
    assert counts["scopes"] == 1 and counts["dropped"] == {} and baseline["drops"] == []
    assert baseline["dataset"]["dataset"] == "fixtures"
    assert baseline["dataset"]["categories"] == list(CATEGORIES)
    per_category = counts["per_category"]
    assert set(per_category) == set(CATEGORIES)
    assert all(c["raw"] == c["scored"] and c["dropped"] == {} for c in per_category.values())
    assert sum(c["scored"] for c in per_category.values()) == 57
    assert all(c["scored"] >= 5 for c in per_category.values())
    assert set(baseline["metrics"]["per_category"]) == set(CATEGORIES)  # keys are sorted
    for cat, c in per_category.items():
        assert sum(1 for q in baseline["queries"] if q["category"] == cat) == c["scored"]
    assert baseline["run"]["top_k"] == 5
    assert baseline["run"]["store_mode"] == "kept"
    assert baseline["run"]["metrics"] == [
        "recall@1", "recall@5", "mrr@5", "ndcg@5", "fp_rate@5", "duplicate_slot_rate@5"
    ]  # fmt: skip
    assert [m["name"] for m in baseline["run"]["measures"]] == baseline["run"]["metrics"]
    assert baseline["system"]["name"] == "hotmem"
    assert baseline["system"]["hotmem_version"] == "0.2.6"
    assert baseline["system"]["embedding_model"] == "hotmem-hash-v1"
    assert baseline["system"]["embedding_dimension"] == 64


def test_baseline_has_no_volatile_keys(baseline: dict[str, Any]) -> None:
    for key in ("generated_at", "performance", "environment", "recallbench_version"):
        assert key not in baseline
    for key in ("fingerprint", "inputs", "artifact"):  # the envelope's, not the document's
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
    files = baseline["dataset"]["identity"]["files"]
    assert [(f["role"], f["name"]) for f in files] == [
        ("corpus", "corpus.jsonl"),
        ("queries", "queries.jsonl"),
    ]


def test_baseline_is_canonical_json(baseline: dict[str, Any]) -> None:
    assert dumps(baseline) == BASELINE.read_bytes()
    assert normalize(baseline) == baseline  # a document is its own comparable form


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
    return [h["id"] for h in q["returned"]]


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
        cell = summary[name]
        assert cell["value"] == hand_mean([a / b for a, b in present]), name
        assert cell["numerator"] == math.fsum(a / b for a, b in present), name
        assert cell["denominator"] == cell["queries"] == len(present)
        assert cell["pooled"]["numerator"] == sum(a for a, _ in present)
        assert cell["pooled"]["denominator"] == sum(b for _, b in present)
        assert cell["not_applicable"] == len(qs) - len(present)
    for name, hand in (("ndcg@5", hand_ndcg), ("mrr@5", hand_rr)):
        values = [hand(ranked(q), q["expected"], K) for q in qs]
        present = [v for v in values if v is not None]
        cell = summary[name]
        assert cell["value"] == hand_mean(values), name
        assert (cell["queries"], cell["not_applicable"]) == (len(present), len(qs) - len(present))
        assert cell["pooled"] is None


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
    fp = sum(1 for q in negatives for h in q["returned"][:K] if q["expected"].get(h["id"], 0) == 0)
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


def test_differences_read_through_the_envelope(lane: Run, baseline: dict[str, Any]) -> None:
    """The envelope's version, inputs and fingerprint are not part of the comparison; the
    timings are not in the result at all."""
    env = copy.deepcopy(lane.envelopes["results"])
    env["recallbench_version"] = "9.9.9"
    env["inputs"] = {"scores": "0" * 64}
    assert differences(baseline, env) == []
    assert differences(env, baseline) == []
    assert normalize(env) == lane.result
    assert "no metric changed" in category_table(baseline, env)
    env["data"] = copy.deepcopy(env["data"])
    env["data"]["metrics"]["overall"]["mrr@5"]["value"] = 0.5
    assert differences(baseline, env) == [
        f"$.metrics.overall.mrr@5.value: {baseline['metrics']['overall']['mrr@5']['value']!r} -> 0.5"
    ]
    assert "mrr@5" in category_table(baseline, env)


def test_differences_catch_a_swapped_pair_of_returned_ids(
    lane: Run, baseline: dict[str, Any]
) -> None:
    changed = copy.deepcopy(lane.result)
    returned = changed["queries"][10]["returned"]
    returned[1]["id"], returned[2]["id"] = returned[2]["id"], returned[1]["id"]
    diffs = differences(baseline, changed)
    assert len(diffs) == 2
    assert diffs[0].startswith("$.queries[10].returned[1].id: ")
    assert diffs[1].startswith("$.queries[10].returned[2].id: ")


def test_differences_catch_a_changed_metric(lane: Run, baseline: dict[str, Any]) -> None:
    changed = copy.deepcopy(lane.result)
    changed["metrics"]["per_category"]["exact_lexical"]["ndcg@5"]["value"] = 0.5
    diffs = differences(baseline, changed)
    assert diffs == [
        "$.metrics.per_category.exact_lexical.ndcg@5.value: "
        f"{baseline['metrics']['per_category']['exact_lexical']['ndcg@5']['value']!r} -> 0.5"
    ]


def test_differences_catch_added_and_removed_keys(lane: Run, baseline: dict[str, Any]) -> None:
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
    with pytest.raises(RecallbenchError, match="not a recallbench.result document"):
        load_result(other)
    old = tmp_path / "old.json"
    old.write_bytes(b'{"schema": "recallbench.fixture-result", "schema_version": 1}')
    with pytest.raises(RecallbenchError, match="regenerate it with `make baseline`"):
        load_result(old)
    with pytest.raises(RecallbenchError, match="not found"):
        load_result(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"{")
    with pytest.raises(RecallbenchError, match="not valid JSON"):
        load_result(broken)


def test_load_result_reads_a_results_envelope(lane: Run, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(dumps(lane.envelopes["results"]))
    assert load_result(path) == lane.result == load_result(BASELINE)
    # an envelope whose data no longer matches its fingerprint is refused
    tampered = copy.deepcopy(lane.envelopes["results"])
    tampered["data"]["decision"]["rule"] = 4
    path.write_bytes(dumps(tampered))
    with pytest.raises(ArtifactError, match="does not match its fingerprint"):
        load_result(path)
    # so is an envelope of another kind
    path.write_bytes(dumps(envelope("scores", lane.envelopes["scores"]["data"], {})))
    with pytest.raises(RecallbenchError, match="not a recallbench.result document"):
        load_result(path)


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
    assert "$.queries[0].returned[0].id: 'mem-fin-002' -> 'mem-fin-001'" in result.stderr


def test_differences_with_another_top_k_say_so_in_one_line(
    lane: Run, baseline: dict[str, Any]
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
