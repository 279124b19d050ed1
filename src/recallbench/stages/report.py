"""report: the machine-readable result (results.json) and the Markdown report.

`normalize(result)` strips everything machine- or time-specific (timestamps, timings,
versions of recallbench itself, the environment, repeat count) so two runs of the same
inputs compare byte-identical; that normalized form is what the committed baseline holds.
"""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from typing import Any

from recallbench import __version__
from recallbench.artifacts import require_made_from
from recallbench.stages.decide import decide
from recallbench.stages.validate import suite_of
from recallbench.suite import NEGATIVE_CATEGORY, Query, Suite

RESULT_SCHEMA = "recallbench.fixture-result"
RESULT_SCHEMA_VERSION = 1
#: top-level result keys that depend on the machine, the clock or the run, not the inputs
VOLATILE_KEYS = ("generated_at", "recallbench_version", "environment", "performance")


def normalize(result: dict[str, Any]) -> dict[str, Any]:
    """The result without volatile keys (and without `run.repeat`, which only moves latency)."""
    out = {k: v for k, v in result.items() if k not in VOLATILE_KEYS}
    out["run"] = {k: v for k, v in result["run"].items() if k != "repeat"}
    return out


def explain_miss(
    missed_id: str,
    query: Query,
    hits: list[dict[str, Any]],
    full_ranking: list[str],
    suite: Suite,
    lexical: dict[str, Any] | None = None,
) -> str:
    """Why a relevant memory is not in the top-k, as far as the data shows it: where it
    ranked, what held the top-k slots, and whether the system's lexical matcher found it."""
    groups = suite.duplicate_groups
    target = suite.memory_by_id[missed_id]
    grade = query.relevance.get(missed_id, 0)
    where = (
        f"ranked {full_ranking.index(missed_id) + 1} of {len(full_ranking)}"
        if missed_id in full_ranking
        else "not returned at all"
    )
    reasons = []
    seen_groups: dict[str, str] = {}
    for h in hits:
        mid = h["memory_id"]
        g = query.relevance.get(mid, 0)
        group = groups.get(mid)
        if group and group in seen_groups:
            why = f"near-duplicate of {seen_groups[group]}"
        elif g > 0:
            why = f"graded {g}"
        elif h["identifier"] != target.identifier:
            why = f"another project's memory ({h['identifier']})"
        else:
            why = "same-project distractor"
        if group and group not in seen_groups:
            seen_groups[group] = mid
        reasons.append(f"{mid} ({why})")
    text = f"{missed_id} (grade {grade}) {where}; the top-{len(hits)} held: " + ", ".join(reasons)
    if lexical is not None:
        matched = lexical["matched"]
        if not matched:
            text += f"; {lexical['matcher']} matched no memory for this query"
        else:
            found = "among them" if missed_id in matched else "not among them"
            noun = "memory" if len(matched) == 1 else "memories"
            text += f"; {lexical['matcher']} matched {len(matched)} {noun}, {missed_id} {found}"
    return text


def build_result(
    suite_env: dict[str, Any],
    hydrate_env: dict[str, Any],
    runs_env: dict[str, Any],
    roundtrip_env: dict[str, Any],
    scores_env: dict[str, Any],
    generated_at: str | None = None,
) -> dict[str, Any]:
    """Assemble the full result document from the upstream artifacts."""
    suite = suite_of(suite_env)
    hyd, runs, rt, scores = (e["data"] for e in (hydrate_env, runs_env, roundtrip_env, scores_env))
    k = runs["top_k"]
    by_id = {q.query_id: q for q in suite.queries}
    per_query_scores = {r["query_id"]: r for r in scores["per_query"]}
    queries = []
    for row in runs["queries"]:
        q = by_id[row["query_id"]]
        s = per_query_scores[q.query_id]
        queries.append(
            {
                "query_id": q.query_id,
                "category": q.category,
                "query": q.query,
                "expected": dict(sorted(q.relevance.items(), key=lambda kv: (-kv[1], kv[0]))),
                "returned": [
                    {k2: h[k2] for k2 in ("memory_id", "identifier", "grade", "score")}
                    for h in row["hits"]
                ],
                "metrics": {name: s[name] for name in scores["metrics"]},
                "missed": s["missed"],
                "why_missed": [
                    explain_miss(mid, q, row["hits"], row["full_ranking"], suite, row["lexical"])
                    for mid in s["missed"]
                ],
                "lexical_matches": {
                    "matcher": row["lexical"]["matcher"],
                    "count": len(row["lexical"]["matched"]),
                },
                "roundtrip_identical": rt["per_query"][q.query_id]["identical"],
            }
        )
    config = hyd["configuration"]
    decision = decide(scores)
    return {
        "schema": RESULT_SCHEMA,
        "schema_version": RESULT_SCHEMA_VERSION,
        "generated_at": generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recallbench_version": __version__,
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
        "system": {"name": hyd["system"], **config},
        "suite": {
            "sources": suite_env["data"]["sources"],
            "counts": suite_env["data"]["counts"],
            "categories": list(suite.categories),
        },
        "run": {"top_k": k, "repeat": runs["repeat"], "metrics": scores["metrics"]},
        "metrics": {"overall": scores["overall"], "per_category": scores["per_category"]},
        "queries": queries,
        "missed_query_ids": [q["query_id"] for q in queries if q["missed"]],
        "false_positive_query_ids": [
            q["query_id"] for q in queries if q["category"] == NEGATIVE_CATEGORY and q["returned"]
        ],
        "roundtrip": {
            "equivalence": rt["equivalence"],
            "records": rt["records"],
            "drift": {
                q: d
                for q, d in rt["per_query"].items()
                if not d["identical"] or d["max_score_drift"] > 0
            },
            "corruption_check": rt["corruption_check"],
        },
        "performance": {
            "note": "local diagnostic data from this machine, not a cross-machine guarantee",
            "hydrate": hyd["timing"],
            "roundtrip": rt["timing"],
            "latency": scores["latency"],
        },
        "decision": decision,
    }


# ---------------------------------------------------------------------------- Markdown


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x * 100:.1f}%" if pct else f"{x:.3f}"


def _cell(summary: dict[str, Any] | None, name: str) -> str:
    """One metric summary as table text: value plus its integer counts."""
    if not summary:
        return "n/a"
    if name.startswith("recall"):
        if summary["value"] is None:
            return "n/a"
        return f"{_fmt(summary['value'])} (found {summary['found']}/{summary['relevant']})"
    if "rate" in name:
        if summary["value"] is None:
            return "n/a"
        return (
            f"{_fmt(summary['value'], pct=True)} ({summary['numerator']}/{summary['denominator']})"
        )
    if summary["value"] is None:
        return "n/a"
    return f"{_fmt(summary['value'])} (n={summary['queries']})"


def format_setting(value: Any) -> str:
    """A configuration value as table text: mappings as `key value, ...`, keys sorted."""
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(value.items()))
    return str(value)


def _worst(result: dict[str, Any], n: int = 5) -> list[dict[str, Any]]:
    k = result["run"]["top_k"]
    graded = [q for q in result["queries"] if q["category"] != NEGATIVE_CATEGORY]

    def key(q: dict[str, Any]) -> tuple:
        m = q["metrics"]
        recall = m[f"recall@{k}"]["value"] if m[f"recall@{k}"] else 1.0
        return (m[f"ndcg@{k}"] or 0.0, recall, m[f"mrr@{k}"] or 0.0, q["query_id"])

    return sorted(graded, key=key)[:n]


def _observations(result: dict[str, Any]) -> list[str]:
    k = result["run"]["top_k"]
    lines = []
    for cat in result["suite"]["categories"]:
        s = result["metrics"]["per_category"][cat]
        in_cat = [q for q in result["queries"] if q["category"] == cat]
        missed = [q["query_id"] for q in in_cat if q["missed"]]
        matcher = in_cat[0]["lexical_matches"]["matcher"] if in_cat else "lexical matcher"
        lexical = sum(1 for q in in_cat if q["lexical_matches"]["count"])
        lexical_text = f" {matcher} matched any memory for {lexical} of {len(in_cat)} queries."
        if cat == NEGATIVE_CATEGORY:
            fp = s[f"fp_rate@{k}"]
            lines.append(
                f"**{cat}** ({len(in_cat)} queries): {fp['numerator']} of {fp['denominator']} "
                f"returned slots hold a memory although the corpus has no answer "
                f"(false-positive rate {_fmt(fp['value'], pct=True)}); the system returned results "
                f"for {sum(1 for q in in_cat if q['returned'])} of {len(in_cat)} queries."
                + lexical_text
            )
            continue
        r = s[f"recall@{k}"]
        text = (
            f"**{cat}** ({len(in_cat)} queries): Recall@{k} {_fmt(r['value'])} "
            f"({r['found']}/{r['relevant']} relevant found), nDCG@{k} {_fmt(s[f'ndcg@{k}']['value'])}; "
        )
        text += (
            f"queries missing a relevant memory: {', '.join(missed)}."
            if missed
            else "no relevant memory missed."
        )
        dup = s[f"duplicate_slot_rate@{k}"]
        if dup["denominator"]:
            text += (
                f" Duplicate slots: {dup['numerator']}/{dup['denominator']} "
                f"({_fmt(dup['value'], pct=True)})."
            )
        lines.append(text + lexical_text)
    return lines


def render_markdown(result: dict[str, Any]) -> str:
    """The human-readable report, rendered from the result document only."""
    k = result["run"]["top_k"]
    sysinfo = result["system"]
    names = result["run"]["metrics"]
    overall = result["metrics"]["overall"]
    per_cat = result["metrics"]["per_category"]
    d = result["decision"]
    rt = result["roundtrip"]
    perf = result["performance"]
    counts = result["suite"]["counts"]
    out = [
        "# Retrieval quality report",
        "",
        f"Generated {result['generated_at']} by recallbench {result['recallbench_version']}.",
        "",
        "## Configuration",
        "",
        "| setting | value |",
        "|---|---|",
        *(
            f"| {'system' if key == 'name' else key.replace('_', ' ')} | {format_setting(value)} |"
            # name first, then sorted: the same order whether the configuration came
            # straight from the system or back from a sorted-key artifact
            for key, value in sorted(sysinfo.items(), key=lambda kv: (kv[0] != "name", kv[0]))
        ),
        f"| suite | {counts['memories']} memories, {counts['queries']} queries "
        f"({result['suite']['sources']['corpus']['file']}, {result['suite']['sources']['queries']['file']}) |",
        f"| top-k / repeat | {k} / {result['run']['repeat']} |",
        "",
        "## Metrics",
        "",
        "Recall and MRR count memories graded 2 or 3 as relevant; nDCG uses the 0-3 grades. "
        "Recall, MRR and nDCG are means over the queries they apply to (as trec_eval averages); "
        "`found a/b` are the pooled counts of relevant memories behind recall, which can differ "
        "from the mean when queries have several relevant memories. Rates are pooled slot counts. "
        "`n/a` means no query in that row has the metric (never a made-up 0).",
        "",
        "| category | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| **overall** | " + " | ".join(_cell(overall[n], n) for n in names) + " |",
    ]
    for cat in result["suite"]["categories"]:
        s = per_cat[cat]
        out.append(f"| {cat} | " + " | ".join(_cell(s[n], n) for n in names) + " |")
    out += ["", "## Five worst queries", ""]
    out += [
        "| query | category | nDCG | expected (grade) | returned (grade) |",
        "|---|---|---|---|---|",
    ]
    for q in _worst(result):
        expected = ", ".join(f"{m} ({g})" for m, g in q["expected"].items())
        returned = ", ".join(f"{h['memory_id']} ({h['grade']})" for h in q["returned"])
        out.append(
            f"| {q['query_id']} | {q['category']} | {_fmt(q['metrics'][f'ndcg@{k}'])} | {expected} | {returned} |"
        )
    out += ["", "## Why relevant memories were missed", ""]
    misses = [(q["query_id"], why) for q in result["queries"] for why in q["why_missed"]]
    out += [f"- `{qid}`: {why}" for qid, why in misses] or ["No relevant memory was missed."]
    out += ["", "## Category observations", ""]
    out += [f"- {line}" for line in _observations(result)]
    eq = rt["equivalence"]
    cc = rt["corruption_check"]
    out += [
        "",
        "## Snapshot -> verify -> clean hydrate",
        "",
        f"Logical top-{k} equivalence: {eq['numerator']}/{eq['denominator']} queries identical "
        f"({_fmt(eq['value'], pct=True)}). Records: source {rt['records']['source']}, packaged "
        f"{rt['records']['packaged']}, verified {rt['records']['verified']}, clone {rt['records']['clone']}.",
        "",
    ]
    if rt["drift"]:
        for qid, drift in sorted(rt["drift"].items()):
            out.append(
                f"- `{qid}`: positions {drift['moved_positions'] or 'none'} changed, max score drift "
                f"{drift['max_score_drift']:.4f}, now {', '.join(drift['after'])}"
            )
    else:
        out.append("No query changed order or score after the round trip.")
    out += [
        "",
        f"A copy of the package with one byte flipped in `{cc['file']}` was "
        + (
            f"rejected by verification (`{cc['reason']}`)."
            if cc["rejected"]
            else "**accepted** by verification."
        ),
        "",
        "## Cost (local diagnostic data, not a cross-machine guarantee)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| hydrate (ingest) | {perf['hydrate']['records_per_second']:.0f} records/s |",
        f"| snapshot | {perf['roundtrip']['snapshot_records_per_second']:.0f} records/s |",
        f"| verify | {perf['roundtrip']['verify_records_per_second']:.0f} records/s |",
        f"| clean hydrate from package | {perf['roundtrip']['hydrate_records_per_second']:.0f} records/s |",
        f"| package size | {perf['roundtrip']['package_bytes']} bytes |",
        f"| cold start to first query | {perf['roundtrip']['cold_start_to_first_query_seconds'] * 1000:.1f} ms |",
        f"| query latency p50 / p95 | {perf['latency']['p50_ms']:.2f} / {perf['latency']['p95_ms']:.2f} ms "
        f"({perf['latency']['samples']} samples) |",
        "",
        "## Conclusion",
        "",
        f"**Rule {d['rule']} fired: {d['recommendation']}**",
        "",
    ]
    for r in d["rules"]:
        measured = ", ".join(
            f"{name} = {_fmt(v) if isinstance(v, float) else v}"
            for name, v in r["measured"].items()
        )
        if r["fired"]:
            state = "**fired**"
        elif r["met"]:
            state = "also met, but an earlier rule fired first"
        else:
            state = "not met"
        out.append(
            f"{r['rule']}. {r['condition']}: {state}" + (f" ({measured})" if measured else "")
        )
    out += [""] + [f"- {g}" for g in d["guardrails"]] + [""]
    return "\n".join(out)


def run_report(
    suite_env: dict[str, Any],
    hydrate_env: dict[str, Any],
    runs_env: dict[str, Any],
    roundtrip_env: dict[str, Any],
    scores_env: dict[str, Any],
) -> tuple[dict[str, Any], str]:
    """The result document (written as results.json, not an envelope) and the Markdown report."""
    require_made_from(runs_env, suite_env, hydrate_env)
    require_made_from(roundtrip_env, runs_env)
    require_made_from(scores_env, runs_env, roundtrip_env)
    result = build_result(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    return result, render_markdown(result)
