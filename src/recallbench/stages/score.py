"""score: the quality metrics per query, per category and overall, plus the round-trip and
latency figures. Metric formulas live in `recallbench.metrics`."""

from __future__ import annotations

from typing import Any

from recallbench import metrics as m
from recallbench.artifacts import envelope, require_made_from
from recallbench.stages.validate import suite_of
from recallbench.suite import DUPLICATE_CATEGORY, NEGATIVE_CATEGORY, Suite


def metric_names(k: int) -> list[str]:
    """Metric names in report order for a run with cutoff k (recall@1 once when k == 1)."""
    names = [
        "recall@1",
        f"recall@{k}",
        f"mrr@{k}",
        f"ndcg@{k}",
        f"fp_rate@{k}",
        f"duplicate_slot_rate@{k}",
    ]
    return list(dict.fromkeys(names))


def score_query(
    ranked: list[str], grades: dict[str, int], category: str, groups: dict[str, str], k: int
) -> dict[str, Any]:
    """Every metric for one query; None where the metric does not apply to it."""
    r1 = m.recall_at_k(ranked, grades, 1)
    rk = m.recall_at_k(ranked, grades, k)
    return {
        "recall@1": r1.to_dict() if r1 else None,
        f"recall@{k}": rk.to_dict() if rk else None,
        f"mrr@{k}": m.reciprocal_rank_at_k(ranked, grades, k),
        f"ndcg@{k}": m.ndcg_at_k(ranked, grades, k),
        f"fp_rate@{k}": m.false_positive_slots(ranked, grades, k).to_dict()
        if category == NEGATIVE_CATEGORY
        else None,
        f"duplicate_slot_rate@{k}": m.duplicate_slots(ranked, groups, k).to_dict()
        if category == DUPLICATE_CATEGORY
        else None,
        "missed": sorted(m.relevant_ids(grades) - set(ranked[:k])),
    }


def _ratio(d: dict[str, Any] | None) -> m.Ratio | None:
    return m.Ratio(d["numerator"], d["denominator"]) if d else None


def aggregate(rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """Means over applicable queries (recall, MRR, nDCG) and pooled slot ratios (FP, dup).

    recall@k value = mean over queries of |relevant ∩ top-k| / |relevant| (as trec_eval
    averages); `found`/`relevant` are the pooled integer counts behind it.
    """
    out: dict[str, Any] = {}
    for name in dict.fromkeys(("recall@1", f"recall@{k}")):
        ratios = [_ratio(r[name]) for r in rows]
        pooled = m.total(ratios)
        out[name] = {
            **m.mean_of(x.value if x else None for x in ratios),
            "found": pooled.numerator,
            "relevant": pooled.denominator,
        }
    for name in (f"mrr@{k}", f"ndcg@{k}"):
        out[name] = m.mean_of(r[name] for r in rows)
    for name in (f"fp_rate@{k}", f"duplicate_slot_rate@{k}"):
        ratios = [_ratio(r[name]) for r in rows]
        pooled = m.total(ratios)
        out[name] = {**pooled.to_dict(), "queries": sum(1 for x in ratios if x is not None)}
    return out


def score_runs(suite: Suite, runs: dict[str, Any]) -> dict[str, Any]:
    """Per-query, per-category and overall metrics for a `runs` artifact's data."""
    k = runs["top_k"]
    groups = suite.duplicate_groups
    by_id = {q.query_id: q for q in suite.queries}
    per_query = []
    for row in runs["queries"]:
        q = by_id[row["query_id"]]
        ranked = [h["memory_id"] for h in row["hits"]]
        per_query.append(
            {
                "query_id": q.query_id,
                "category": q.category,
                **score_query(ranked, q.relevance, q.category, groups, k),
            }
        )
    return {
        "top_k": k,
        "metrics": metric_names(k),
        "overall": aggregate(per_query, k),
        "per_category": {
            c: aggregate([r for r in per_query if r["category"] == c], k) for c in suite.categories
        },
        "per_query": per_query,
    }


def latency_summary(latency_ms: dict[str, list[float]]) -> dict[str, Any]:
    samples = [x for xs in latency_ms.values() for x in xs]
    return {
        "samples": len(samples),
        "p50_ms": m.percentile(samples, 50),
        "p95_ms": m.percentile(samples, 95),
        "note": "local diagnostic data from this machine, not a cross-machine performance guarantee",
    }


def run_score(
    suite_env: dict[str, Any], runs_env: dict[str, Any], roundtrip_env: dict[str, Any]
) -> dict[str, Any]:
    """Score the runs and fold in round-trip equivalence; return the `scores` envelope."""
    require_made_from(runs_env, suite_env)
    require_made_from(roundtrip_env, suite_env, runs_env)
    suite = suite_of(suite_env)
    rt = roundtrip_env["data"]
    data = {
        **score_runs(suite, runs_env["data"]),
        "roundtrip": {
            "equivalence": rt["equivalence"],
            "corruption_rejected": rt["corruption_check"]["rejected"],
            "drifted_queries": sorted(q for q, d in rt["per_query"].items() if not d["identical"]),
        },
        "latency": latency_summary(runs_env["data"]["latency_ms"]),
    }
    inputs = {
        "suite": suite_env["fingerprint"],
        "runs": runs_env["fingerprint"],
        "roundtrip": roundtrip_env["fingerprint"],
    }
    return envelope("scores", data, inputs)
