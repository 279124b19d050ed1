"""The result document: everything a reader of the report trusts, from the artifacts only.

It is the `data` of the results envelope (results.json) and holds nothing machine- or
time-specific (timings live in the sidecars), so the same inputs give byte-identical results
and the committed baseline is exactly this document for the fixture suite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.core.errors import RecallbenchError
from recallbench.metrics.measures import value_of

RESULT_SCHEMA = "recallbench.result"
RESULT_SCHEMA_VERSION = 3
#: the fields of a scores.json measure record a result keeps
RESULT_MEASURE_FIELDS = ("name", "level", "k", "pooled", "definition", "empty_gold")


def load_result_envelope(path: Path) -> dict[str, Any]:
    """A results.json envelope (checked: schema version, fingerprint) as it is, or a bare
    result document (a baseline) as ``{"data": document, "inputs": {}}``: so a baseline is
    a result to `compare` and `power`. Anything else is a one-line error."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise RecallbenchError(f"{path}: not found") from None
    except IsADirectoryError:
        raise RecallbenchError(f"{path}: is a directory, not a result") from None
    except orjson.JSONDecodeError as exc:
        raise RecallbenchError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(doc, dict) and doc.get("artifact") == "results":
        from recallbench.builddir.artifacts import check_envelope

        return check_envelope(doc, "results", str(path), "recallbench report")
    if not isinstance(doc, dict) or doc.get("schema") != RESULT_SCHEMA:
        raise RecallbenchError(
            f"{path}: not a {RESULT_SCHEMA} document nor a results.json; "
            "regenerate it with `make baseline` or `recallbench report`"
        )
    return {"data": doc, "inputs": {}}


def explain_miss(entry: Mapping[str, Any], row: Mapping[str, Any], level: str, top_k: int) -> str:
    """Why a relevant id is not in the top-k, as far as the data shows it: where it ranked in
    a search of the whole store, what held the top-k slots, and whether the system's lexical
    matcher matched it."""
    missed_id = entry["id"]
    where = (
        f"ranked {entry['rank']} of {entry['of']}"
        if entry["rank"] is not None
        else "not returned at all"
    )
    gold = row["levels"][level]["gold"]
    ranking = row["levels"][level]["ranking"]
    reasons = []
    if level == row.get("memory_level"):
        seen: dict[str, str] = {}
        for h in row["hits"][:top_k]:
            mid, group = h["memory_id"], h.get("group")
            if group and group in seen:
                why = f"near-duplicate of {seen[group]}"
            elif gold.get(mid, 0) > 0:
                why = f"graded {gold[mid]}"
            elif entry.get("identifier") is not None and h["identifier"] != entry["identifier"]:
                why = f"another project's memory ({h['identifier']})"
            else:
                why = "same-project distractor"
            if group and group not in seen:
                seen[group] = mid
            reasons.append(f"{mid} ({why})")
    else:
        for unit in ranking:
            grade = gold.get(unit, 0)
            reasons.append(f"{unit} ({f'graded {grade}' if grade else 'not gold'})")
    text = (
        f"{missed_id} (grade {entry['grade']}) {where}; the top-{len(reasons)} held: "
        + ", ".join(reasons)
    )
    lexical = row.get("lexical")
    if lexical is not None and "lexical_match" in entry:
        if not lexical["matched"]:
            text += f"; {lexical['matcher']} matched no memory for this query"
        else:
            found = "among them" if entry["lexical_match"] else "not among them"
            noun = "memory" if lexical["matched"] == 1 else "memories"
            text += (
                f"; {lexical['matcher']} matched {lexical['matched']} {noun}, {missed_id} {found}"
            )
    return text


def _query_entry(
    row: Mapping[str, Any], scored: Mapping[str, Any], level: str, top_k: int, memory_level: bool
) -> dict[str, Any]:
    lv = row["levels"][level]
    gold = lv["gold"]
    view = {**row, "memory_level": level if memory_level else None}
    return {
        "query_id": row["query_id"],
        "scope_id": row["scope_id"],
        "category": row["category"],
        "expected": dict(sorted(gold.items(), key=lambda kv: (-kv[1], kv[0]))),
        "returned": [
            {"id": unit, "grade": gold.get(unit, 0), "score": score}
            for unit, score in zip(lv["ranking"], lv["scores"], strict=True)
        ],
        "metrics": scored["metrics"],
        "missed": scored["missed"],
        "why_missed": [
            explain_miss(entry, view, level, top_k) for entry in row["missed"].get(level, [])
        ],
        "lexical_matches": (
            {"matcher": row["lexical"]["matcher"], "count": row["lexical"]["matched"]}
            if row.get("lexical")
            else None
        ),
    }


def build_result(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    runs_env: Mapping[str, Any],
    roundtrip_env: Mapping[str, Any],
    scores_env: Mapping[str, Any],
    *,
    decision: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the result document from the upstream artifacts' data. `decision`: the
    decision already made from them (`systems.rules.decide_run`); else it is made here."""
    from recallbench.systems.rules import decide_run

    suite, hyd, runs, rt, scores = (
        e["data"] for e in (suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    )
    k = runs["top_k"]
    primary = suite["levels"][0]["name"]
    # the memory level: each memory is its own unit (the fixture suite's `memory` level)
    memory_level = primary == "memory"
    scored = {r["query_id"]: r for r in scores["per_query"]}
    queries = [
        _query_entry(row, scored[row["query_id"]], primary, k, memory_level)
        for row in runs["queries"]
    ]
    result = {
        "schema": RESULT_SCHEMA,
        "schema_version": RESULT_SCHEMA_VERSION,
        "dataset": {
            key: suite[key]
            for key in (
                "dataset",
                "identity",
                "options",
                "levels",
                "categories",
                "category_labels",
                "drop_rules",
                "notes",
                "decision_policy",
            )
        },
        "counts": suite["counts"],
        "drops": suite["drops"],
        "summary": suite["summary"],
        "system": {"name": hyd["system"], **hyd["configuration"]},
        "capabilities": hyd["capabilities"],
        "truncation": hyd["truncation"],
        "run": {
            "top_k": k,
            "store_mode": runs["store_mode"],
            # the result keeps the measure fields it has always had (the baseline compares
            # them byte for byte); `measures.from_record` gives the value back from them
            "measures": [
                {key: m[key] for key in RESULT_MEASURE_FIELDS if key in m}
                for m in scores["measures"]
            ],
        },
        "metrics": {"overall": scores["overall"], "per_category": scores["per_category"]},
        "queries": queries,
        "roundtrip": roundtrip_view(rt),
        "decision": dict(decision) if decision is not None else decide_run(suite, scores, rt)[0],
    }
    if "content_loss" in hyd:  # a system that declares what its stores keep (input_limit)
        result["content_loss"] = hyd["content_loss"]
    return result


def roundtrip_view(rt: Mapping[str, Any]) -> dict[str, Any]:
    if not rt.get("available"):
        return {"available": False, "reason": rt.get("reason"), "sample": rt.get("sample")}
    return {
        "available": True,
        "sample": rt["sample"],
        "equivalence": rt["equivalence"],
        "records": rt["records"],
        "clone_digest_matches": rt["clone_digest_matches"],
        "drift": {
            q: d
            for q, d in sorted(rt["per_query"].items())
            if not d["identical"] or d["max_score_drift"] > 0
        },
        "corruption_checks": rt["corruption_checks"],
    }


def per_query_values(result: Mapping[str, Any], metric: str) -> dict[str, float | None]:
    """query id -> the metric's per-query number (Ratio cells as their value)."""
    return {q["query_id"]: value_of(q["metrics"].get(metric)) for q in result["queries"]}


def mean_measures(result: Mapping[str, Any]) -> Sequence[str]:
    """Names of the result's per-query measures that are means (not pooled slot rates)."""
    return [m["name"] for m in result["run"]["measures"] if not m["pooled"]]


#: the seed of the per-system intervals a run's report shows (compare's `--seed` 0 gives
#: the same intervals, so a system's figures agree between its report and a comparison)
INTERVAL_SEED = 0
INTERVAL_RESAMPLES = 10_000


#: the intervals last computed (two), with the result they were computed for: the report's
#: sections (`run_sections`, report.md and report.html) and then the terminal's headline
#: table or --json (`summary.headline_intervals`) ask for the same ones of the same result
#: when the headline measures are all its means (the fixtures); a result is not changed once
#: built
_INTERVALS: list[tuple[Any, tuple, dict]] = []


def system_intervals(
    result: Mapping[str, Any],
    metrics: Sequence[str],
    *,
    seed: int = INTERVAL_SEED,
    resamples: int = INTERVAL_RESAMPLES,
    categories: bool = True,
) -> dict[str | None, dict[str, Any]]:
    """Each metric's mean with its 95% interval (`stats.mean_interval`: Wilson's when every
    value is 0 or 1, else the percentile bootstrap), overall (key None) and, with
    `categories`, per category: {level: {metric: Interval or None}}. The stream of each
    figure is named by ("mean", metric, level) alone, so a figure does not depend on the
    system's label, the other metrics or the order they are computed in. The last two
    results' intervals are remembered (by identity and arguments): the report's sections
    and the terminal's headline table may ask for the same ones (`_INTERVALS`)."""
    key = (tuple(metrics), seed, resamples, categories)
    for held, held_key, intervals in _INTERVALS:
        if held is result and held_key == key:
            return intervals
    from recallbench.metrics.stats import mean_interval

    levels: list[str | None] = [None]
    if categories:
        levels += list(result["dataset"]["categories"])
    out: dict[str | None, dict[str, Any]] = {level: {} for level in levels}
    for metric in metrics:
        values = [(q["category"], value_of(q["metrics"].get(metric))) for q in result["queries"]]
        for level in levels:
            xs = [v for c, v in values if v is not None and (level is None or c == level)]
            out[level][metric] = mean_interval(
                xs,
                seed=seed,
                names=("mean", metric, "overall" if level is None else f"category:{level}"),
                resamples=resamples,
            )
    _INTERVALS.insert(0, (result, key, out))
    del _INTERVALS[2:]
    return out


def interval_text(interval: Any) -> str:
    """`0.872 [0.855, 0.888]`; the mean alone when one query gives no interval; `n/a`."""
    if interval is None:
        return "n/a"
    if interval.low is None:
        return f"{interval.mean:.3f}"
    return f"{interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
