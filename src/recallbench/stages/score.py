"""score: every measure of the dataset per query, per category and overall. Measures are
values (`recallbench.metrics.measures`), rebuilt from suite.json's levels and options
through the dataset's measure family; this stage only loops."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.builddir.artifacts import envelope, inputs_of, require_made_from
from recallbench.core.errors import RecallbenchError
from recallbench.datasets.base import family_measures, suite_family
from recallbench.metrics.measures import Measure, aggregate, distinct, parse, per_query_value


def score_rows(rows: Sequence[Mapping[str, Any]], measures: Sequence[Measure]) -> list[dict]:
    """Per-query values of every measure (None where a measure does not apply)."""
    out = []
    primary = measures[0].level if measures else None
    for row in rows:
        groups = {h["memory_id"]: h["group"] for h in row["hits"] if h.get("group")}
        values = {}
        for measure in measures:
            # a measure may read another level's ranking (a session figure from turns)
            level = row["levels"].get(getattr(measure, "reads", None) or measure.level)
            if level is None or not measure.applies_to(row["category"]):
                values[measure.name] = None
                continue
            values[measure.name] = per_query_value(measure(level["ranking"], level["gold"], groups))
        missed = [m["id"] for m in row["missed"].get(primary, [])] if primary else []
        out.append(
            {
                "query_id": row["query_id"],
                "scope_id": row["scope_id"],
                "category": row["category"],
                "metrics": values,
                "missed": sorted(missed),
            }
        )
    return out


def aggregate_rows(rows: Sequence[Mapping[str, Any]], measures: Sequence[Measure]) -> dict:
    return {m.name: aggregate(m, (r["metrics"][m.name] for r in rows)) for m in measures}


def score_runs(
    runs: Mapping[str, Any], measures: Sequence[Measure], categories: Sequence[str]
) -> dict[str, Any]:
    """Per-query, per-category and overall cells for a `runs` artifact's data."""
    per_query = score_rows(runs["queries"], measures)
    by_category: dict[str, list[dict[str, Any]]] = {c: [] for c in categories}
    for row in per_query:
        by_category.setdefault(row["category"], []).append(row)
    return {
        "top_k": runs["top_k"],
        "measures": [m.record() for m in measures],
        "overall": aggregate_rows(per_query, measures),
        "per_category": {c: aggregate_rows(rows, measures) for c, rows in by_category.items()},
        "per_query": per_query,
    }


def suite_measures(
    suite: Mapping[str, Any],
    top_k: int,
    ks: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
) -> list[Measure]:
    """The measures a suite's runs are scored with, from suite.json alone: the named ones
    (`--measure`, parsed against the suite's levels), else the dataset's measure family
    (suite.json's ``measure_family``, or the dataset's name) at its levels and options."""
    if names:
        chosen = [parse(name, suite["levels"]) for name in names]
        levels = [lv["name"] for lv in suite["levels"]]
        for measure in chosen:
            if measure.level not in levels:
                raise RecallbenchError(
                    f"--measure {measure.spec}: the suite has no level {measure.level!r} "
                    f"(levels: {', '.join(levels)})"
                )
            if measure.k > top_k:
                raise RecallbenchError(
                    f"--measure {measure.name}: k {measure.k} is above --top-k {top_k}"
                )
        return distinct(chosen)
    return family_measures(suite_family(suite), suite["levels"], top_k, ks, suite["options"])


def run_score(
    suite_env: Mapping[str, Any],
    runs_env: Mapping[str, Any],
    *,
    ks: Sequence[int] | None = None,
    measure_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Score the runs; return the `scores` envelope. `ks`: the
    cutoffs to score at (default: the run's own, else the dataset's); `measure_names`: the
    measures to score instead of the dataset's (`--measure`)."""
    require_made_from(runs_env, suite_env)
    suite = suite_env["data"]
    runs = runs_env["data"]
    top_k = runs["top_k"]
    if ks and not all(1 <= k <= top_k for k in ks):
        raise RecallbenchError(
            f"--k {','.join(map(str, ks))}: every k must be between 1 and --top-k {top_k}"
        )
    measures = suite_measures(suite, top_k, ks or runs.get("ks"), measure_names)
    data = score_runs(runs_env["data"], measures, suite["categories"])
    return envelope("scores", data, inputs_of(suite_env, runs_env))
