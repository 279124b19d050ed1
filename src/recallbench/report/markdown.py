"""The Markdown report: a view of the result document plus the local timing sidecars.

Everything a figure needs (its metric name, its denominator) comes from the result; long
lists are cut to their first ten with a count. Every string from the result (ids, labels,
names, a plugin's configuration keys and values, notes) passes through `recallbench.escape`'s
Markdown rule where it is written here (`md` for text and table cells, `code` for code
spans), so no character of the data can add a heading, a link, raw HTML or a table cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.escape import markdown as md
from recallbench.escape import markdown_code as code
from recallbench.measures import RELEVANT_GRADE, from_record, select, value_of

LIST_LIMIT = 10
#: a metric table holds at most this many measure columns (wider ones are split by cutoff
#: k), so it fits a 1280 px window
MAX_COLUMNS = 5


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x * 100:.1f}%" if pct else f"{x:.3f}"


def cut(items: Sequence[str], limit: int = LIST_LIMIT, where: str = "results.json") -> str:
    """The first `limit` items, comma-separated, and "... and N more; all in results.json"."""
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" ... and {len(items) - limit} more; all in {where}"
    return shown


def cell_text(
    cell: Mapping[str, Any] | None, measure: Mapping[str, Any], interval: Any = None
) -> str:
    """One aggregate cell as table text: the value, its 95% interval when given
    (`result.system_intervals`) and the counts behind it."""
    if not cell or cell["value"] is None:
        return "n/a"
    if measure["pooled"]:
        return f"{_fmt(cell['value'], pct=True)} ({cell['numerator']}/{cell['denominator']})"
    value = _fmt(cell["value"])
    if interval is not None and interval.low is not None:
        value += f" [{interval.low:.3f}, {interval.high:.3f}]"
    pooled = cell.get("pooled")
    if pooled:
        return (
            f"{value} (n={cell['denominator']}; found "
            f"{pooled['numerator']}/{pooled['denominator']})"
        )
    return f"{value} (n={cell['denominator']})"


def format_setting(value: Any) -> str:
    """A configuration value as plain text: mappings as `key value, ...`, keys sorted (not
    escaped: each writer escapes it for its output)."""
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(value.items()))
    return str(value)


def column_groups(cols: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The measure columns of one level in tables of at most `MAX_COLUMNS`: all in one when
    they fit, else split by cutoff k (consecutive ks joined while they fit)."""
    if len(cols) <= MAX_COLUMNS:
        return [list(cols)] if cols else []
    by_k: dict[int, list[Mapping[str, Any]]] = {}
    for m in cols:
        by_k.setdefault(m["k"], []).append(m)
    groups: list[list[Mapping[str, Any]]] = []
    for ms in by_k.values():
        for i in range(0, len(ms), MAX_COLUMNS):
            chunk = ms[i : i + MAX_COLUMNS]
            if groups and len(groups[-1]) + len(chunk) <= MAX_COLUMNS:
                groups[-1].extend(chunk)
            else:
                groups.append(list(chunk))
    return groups


def search_depth_note(result: Mapping[str, Any]) -> str | None:
    """What a reader must know when top-k passes the depth the system's index can return
    (its configuration's `search_depth_limit`: pgvector's HNSW scan returns at most
    `hnsw.ef_search` rows, at most 1000); None otherwise."""
    depth, k = result["system"].get("search_depth_limit"), result["run"]["top_k"]
    if not isinstance(depth, int) or isinstance(depth, bool) or k <= depth:
        return None
    return (
        f"top-k {k} is above the {depth:,} hits {result['system']['name']}'s index can "
        f"return (search depth limit): past rank {depth:,} a ranking may be cut short, so "
        f"the figures at cutoffs above {depth:,} are approximate at that depth"
    )


def is_generated(result: Mapping[str, Any]) -> bool:
    """Whether the data file was written by a recallbench generator (synthetic data)."""
    identity = result["dataset"]["identity"]
    release = identity.get("release")
    return bool(identity.get("generated")) or (
        isinstance(release, dict) and release.get("kind") == "synthetic"
    )


def rate_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pooled slot rates (false positives on no-answer queries, duplicate slots), kept
    apart from the means: per rate its level, the categories it was measured on (those whose
    cell has slots), the queries and slots behind it and what its value means."""
    labels = result["dataset"]["category_labels"]
    counts = result["counts"]["per_category"]
    out = []
    for m in result["run"]["measures"]:
        if not m["pooled"]:
            continue
        cats = [
            c
            for c in result["dataset"]["categories"]
            if (result["metrics"]["per_category"][c].get(m["name"]) or {}).get("denominator")
        ]
        queries = sum(counts.get(c, {}).get("scored", 0) for c in cats)
        cell = result["metrics"]["overall"].get(m["name"])
        no_answer = m["name"].startswith("fp_rate")
        out.append(
            {
                "name": m["name"],
                "level": m["level"],
                "measured_on": [labels.get(c, c) for c in cats],
                "queries": queries,
                "value": cell_text(cell, m),
                "meaning": (
                    "share of returned slots holding an ungraded id; on no-answer queries "
                    "every returned item is one, so 100% means the system returned results "
                    "where nothing was to be found (lower is better)"
                    if no_answer
                    else f"{m['definition']}; lower is better"
                ),
            }
        )
    return out


def metric_tables(result: Mapping[str, Any]) -> list[str]:
    """Per level: the means, overall and per category, in tables of at most `MAX_COLUMNS`
    measures; then the pooled slot rates apart, each with the queries it was measured on."""
    from recallbench.report.result import mean_measures, system_intervals

    out: list[str] = []
    measures = result["run"]["measures"]
    labels = result["dataset"]["category_labels"]
    counts = result["counts"]["per_category"]
    intervals = system_intervals(result, mean_measures(result))
    for level in result["dataset"]["levels"]:
        means = [m for m in measures if m["level"] == level["name"] and not m["pooled"]]
        groups = column_groups(means)
        for cols in groups:
            title = f"{level['name']} level ({level['description'] or level['name']})"
            if len(groups) > 1:
                title += ", k = " + ", ".join(dict.fromkeys(str(m["k"]) for m in cols))
            out += [f"### {md(title)}", ""]
            out.append("| category | queries | " + " | ".join(md(m["name"]) for m in cols) + " |")
            out.append("|---|---|" + "---|" * len(cols))
            overall = result["metrics"]["overall"]
            out.append(
                f"| **overall** | {result['counts']['queries']} | "
                + " | ".join(
                    cell_text(overall[m["name"]], m, intervals[None][m["name"]]) for m in cols
                )
                + " |"
            )
            for cat in result["dataset"]["categories"]:
                cells = result["metrics"]["per_category"][cat]
                scored = counts.get(cat, {}).get("scored", 0)
                out.append(
                    f"| {md(labels.get(cat, cat))} | {scored} | "
                    + " | ".join(
                        cell_text(cells[m["name"]], m, intervals[cat][m["name"]]) for m in cols
                    )
                    + " |"
                )
            out.append("")
    rates = rate_rows(result)
    if rates:
        out += [
            "### Slot rates (pooled over returned slots, not means: not in the rows above)",
            "",
            "| rate | level | measured on | value (slots) | what it counts |",
            "|---|---|---|---|---|",
        ]
        out += [
            f"| {md(r['name'])} | {md(r['level'])} | "
            f"{md(', '.join(r['measured_on']) or 'no query')} ({r['queries']} queries) | "
            f"{r['value']} | {md(r['meaning'])} |"
            for r in rates
        ]
        out.append("")
    return out


def _primary_ranked(result: Mapping[str, Any]) -> list[str]:
    """The primary level's mean measures at the run's top-k (for ordering worst queries)."""
    k = result["run"]["top_k"]
    primary = result["dataset"]["levels"][0]["name"]
    names = [
        m["name"]
        for m in result["run"]["measures"]
        if m["level"] == primary and not m["pooled"] and m["k"] == k
    ]
    ndcg = select(names, stem=("ndcg", "ndcg_any"))
    return ndcg + [n for n in names if n not in ndcg]


def worst_queries(result: Mapping[str, Any], n: int = 5) -> list[dict[str, Any]]:
    names = _primary_ranked(result)

    def number(q: Mapping[str, Any], name: str) -> float:
        v = value_of(q["metrics"].get(name))
        return 1.0 if v is None else v

    graded = [q for q in result["queries"] if q["expected"]]
    return sorted(graded, key=lambda q: (*(number(q, m) for m in names), q["query_id"]))[:n]


def observations(result: Mapping[str, Any]) -> list[str]:
    """Per category: the primary recall with its counts, the queries that missed, the slot
    rates that apply, and how often the system's lexical matcher matched anything."""
    k = result["run"]["top_k"]
    labels = result["dataset"]["category_labels"]
    measures = {m["name"]: m for m in result["run"]["measures"]}
    recall = next(
        iter(select(result["run"]["measures"], stem="recall", k=k, prefix="", rel=RELEVANT_GRADE)),
        None,
    )
    lines = []
    for cat in result["dataset"]["categories"]:
        cells = result["metrics"]["per_category"][cat]
        in_cat = [q for q in result["queries"] if q["category"] == cat]
        if not in_cat:
            continue
        parts = [f"**{md(labels.get(cat, cat))}** ({len(in_cat)} queries):"]
        if recall and cells[recall]["value"] is not None:
            pooled = cells[recall]["pooled"] or {}
            parts.append(
                f"{md(recall)} {_fmt(cells[recall]['value'])} ({pooled.get('numerator')}/"
                f"{pooled.get('denominator')} relevant found);"
            )
        missed = [md(q["query_id"]) for q in in_cat if q["missed"]]
        if any(q["expected"] for q in in_cat):
            parts.append(
                f"queries missing a relevant item: {cut(missed)}."
                if missed
                else "no relevant item missed."
            )
        for name, m in measures.items():
            cell = cells[name]
            if m["pooled"] and cell["denominator"]:
                parts.append(
                    f"{md(name)}: {cell['numerator']}/{cell['denominator']} slots "
                    f"({_fmt(cell['value'], pct=True)})."
                )
        lexical = [q["lexical_matches"] for q in in_cat if q["lexical_matches"]]
        if lexical:
            hit = sum(1 for x in lexical if x["count"])
            parts.append(
                f"{md(lexical[0]['matcher'])} matched any memory for {hit} of {len(in_cat)} queries."
            )
        lines.append(" ".join(parts))
    return lines


def _roundtrip(result: Mapping[str, Any]) -> list[str]:
    rt = result["roundtrip"]
    k = result["run"]["top_k"]
    out = ["## Snapshot -> verify -> clean hydrate", ""]
    if not rt["available"]:
        return out + [f"{md(rt['reason'])}.", ""]
    sample = rt["sample"]
    if sample["scopes_sampled"] < sample["scopes_total"]:
        out += [
            f"Sampled {sample['scopes_sampled']} of {sample['scopes_total']} scopes "
            f"({md(sample['rule'])}): {cut([md(s) for s in sample['scope_ids']])}.",
            "",
        ]
    eq = rt["equivalence"]
    rec = rt["records"]
    out += [
        f"Logical top-{k} equivalence: {eq['numerator']}/{eq['denominator']} queries identical "
        f"({_fmt(eq['value'], pct=True)}). Records: source {rec['source']}, packaged "
        f"{rec['packaged']}, verified {rec['verified']}, clone {rec['clone']}; clone content "
        f"digest {'matches' if rt['clone_digest_matches'] else '**differs from**'} the source's.",
        "",
    ]
    drift = rt["drift"]
    if drift:
        shown = list(drift.items())[:LIST_LIMIT]
        for qid, d in shown:
            out.append(
                f"- {code(qid)}: positions {md(d['moved_positions'] or 'none')} changed, max "
                f"score drift {d['max_score_drift']:.4f}, now {cut([md(x) for x in d['after']])}"
            )
        if len(drift) > LIST_LIMIT:
            out.append(f"- ... and {len(drift) - LIST_LIMIT} more; all in results.json")
    else:
        out.append("No query changed order or score after the round trip.")
    out += ["", "Corrupted copies of the package, offered to the system's own verifier:", ""]
    for c in rt["corruption_checks"]:
        verdict = (
            f"rejected in {c['rejected']}/{c['scopes']} scopes ({code(', '.join(c['reasons']))})"
            if c["all_rejected"]
            else f"**accepted** in {c['scopes'] - c['rejected']}/{c['scopes']} scopes"
        )
        out.append(f"- {md(c['name'])} ({md(c['description'])}): {verdict}")
    return out + [""]


def _cost(timings: Mapping[str, Any]) -> list[str]:
    out = ["## Cost (local diagnostic data, not a cross-machine guarantee)", ""]
    hyd, runs, rt = (timings.get(k) or {} for k in ("hydrate", "runs", "roundtrip"))
    rows = []
    if hyd.get("records_per_second"):
        rows.append(f"| hydrate (ingest) | {hyd['records_per_second']:.0f} records/s |")
    elif runs.get("ingest_seconds"):
        rows.append(
            f"| ingest into transient stores (inside query) | {runs['ingest_seconds']:.2f} s |"
        )
    if rt.get("snapshot_records_per_second"):
        rows += [
            f"| snapshot | {rt['snapshot_records_per_second']:.0f} records/s |",
            f"| verify | {rt['verify_records_per_second']:.0f} records/s |",
            f"| clean hydrate from package | {rt['restore_records_per_second']:.0f} records/s |",
            f"| package size | {rt['package_bytes']} bytes |",
        ]
        if rt.get("cold_start_to_first_query_seconds") is not None:
            rows.append(
                f"| cold start to first query | {rt['cold_start_to_first_query_seconds'] * 1000:.1f} ms |"
            )
    lat = runs.get("latency")
    if lat and lat.get("samples"):
        rows.append(
            f"| query latency p50 / p95 | {lat['p50_ms']:.2f} / {lat['p95_ms']:.2f} ms "
            f"({lat['samples']} samples, repeat {runs.get('repeat', 1)}) |"
        )
    if runs.get("wall_seconds") is not None:
        ex = runs.get("execution", {})
        rows.append(
            f"| query stage wall time | {runs['wall_seconds']:.2f} s "
            f"({md(ex.get('executor', 'local'))} executor, {ex.get('workers', 1)} worker(s)) |"
        )
    if runs.get("harness_overhead_end_to_end") is not None:
        rows.append(
            f"| harness overhead (wall x workers vs time inside the system) | "
            f"{runs['harness_overhead_end_to_end'] * 100:.1f}% |"
        )
    if not rows:
        return out + ["No timing sidecar matches these artifacts.", ""]
    return out + ["| figure | value |", "|---|---|", *rows, ""]


def render_markdown(
    result: Mapping[str, Any],
    timings: Mapping[str, Any],
    generated_at: str,
    version: str,
    plots: Sequence[tuple[str, str]] = (),
    rules: Any = None,
    source: str = "",
) -> str:
    """The human-readable report, rendered from the result document and the timings;
    `plots` are (path relative to the report, caption) of the images the Metrics section
    links to; `rules` (a `systems.rules.RulesSource`, None when no rule applies) is where
    the decision rules came from, which the Conclusion names; `source`: where the code
    under test came from (`source.describe_source`)."""
    k = result["run"]["top_k"]
    ds = result["dataset"]
    counts = result["counts"]
    system = result["system"]
    d = result["decision"]
    out = ["# Retrieval quality report", ""]
    if is_generated(result):
        out += [
            f"> **Synthetic data**: {md(ds['identity']['label'])}. These figures test the "
            "tooling, not a system's quality on a benchmark.",
            "",
        ]
    out += [
        f"Generated {md(generated_at)} by recallbench {md(version)}.",
        "",
        "## Configuration",
        "",
        "| setting | value |",
        "|---|---|",
        *(
            f"| {'system' if key == 'name' else md(key.replace('_', ' '))} | {md(format_setting(v))} |"
            for key, v in sorted(system.items(), key=lambda kv: (kv[0] != "name", kv[0]))
        ),
        *([f"| system source | {md(source)} |"] if source else []),
        f"| dataset | {md(ds['dataset'])}: {md(ds['identity']['label'])} |",
        "| files | "
        + ", ".join(
            f"{md(f['name'])} ({f['size_bytes']:,} bytes, sha256 {md(f['sha256'][:12])}...)"
            for f in ds["identity"]["files"]
        )
        + " |",
    ]
    if ds["options"]:
        out.append(f"| reader options | {md(format_setting(ds['options']))} |")
    out += [
        f"| scopes / memories / queries | {counts['scopes']} / {counts['memories']} / "
        f"{counts['queries']} scored of {counts['queries_raw']} |",
        f"| top-k / stores | {k} / {md(result['run']['store_mode'])} |",
        "",
    ]
    if not ds["identity"]["known"]:
        out += [f"> Warning: {md(ds['identity']['label'])}.", ""]
    depth_note = search_depth_note(result)
    if depth_note:
        out += [f"> Warning: {md(depth_note)}.", ""]
    out += ["## Dataset", ""]
    out += [f"- {md(note)}" for note in ds["notes"]]
    if counts["dropped"]:
        out += ["", "Dropped before scoring (not in any denominator):", ""]
        for reason, n in counts["dropped"].items():
            ids = [md(x["query_id"]) for x in result["drops"] if x["reason"] == reason]
            rule = ds["drop_rules"].get(reason, reason)
            out.append(f"- {md(reason)}: {n} ({md(rule)}): {cut(ids)}")
    if result["summary"]:
        out += ["", "| dataset figure | value |", "|---|---|"]
        out += [
            f"| {md(key.replace('_', ' '))} | {md(format_setting(v))} |"
            for key, v in result["summary"].items()
        ]
    out += ["", "## Metrics", ""]
    out += [
        "Each mean is over the queries its row applies to (`n`); `found a/b` are the pooled "
        "relevant items behind a recall mean; rates are pooled slot counts. `n/a`: no query "
        "in that row has the measure (never a made-up 0). Definitions:",
        "",
    ]
    seen: set[str] = set()
    for m in result["run"]["measures"]:
        at_k = from_record(m).at_k
        if at_k not in seen:
            seen.add(at_k)
            out.append(f"- {code(at_k)}: {md(m['definition'])}")
    out.append("")
    out += metric_tables(result)
    out += [line for path, text in plots for line in (f"![{md(text)}]({path})", "")]
    if result["truncation"]:
        t = result["truncation"]
        out += [
            "## Embedder input limit",
            "",
            f"{t['texts_over_limit']} of {t['texts']} stored texts exceed the embedder's "
            f"{t['max_tokens']}-token window: the model never saw "
            f"{_fmt(t['share_unseen_of_long_texts'], pct=True)} of their tokens "
            f"({t['tokens_unseen']:,} of {t['tokens_of_long_texts']:,}; "
            f"{_fmt(t['share_unseen'], pct=True)} of all {t['tokens_total']:,} stored tokens). "
            "A long text is ranked by its opening only.",
            "",
        ]
    if result.get("content_loss"):
        out += content_loss_section(result["system"]["name"], result["content_loss"])
    out += ["## Five worst queries", ""]
    labels = ds["category_labels"]
    names = _primary_ranked(result)[:1]
    out += [
        f"| query | category | {md(names[0]) if names else 'score'} | expected (grade) | returned (grade) |",
        "|---|---|---|---|---|",
    ]
    for q in worst_queries(result):
        value = value_of(q["metrics"].get(names[0])) if names else None
        expected = cut([f"{md(i)} ({md(g)})" for i, g in q["expected"].items()], 5, "results.json")
        returned = ", ".join(f"{md(h['id'])} ({md(h['grade'])})" for h in q["returned"])
        out.append(
            f"| {md(q['query_id'])} | {md(labels.get(q['category'], q['category']))} "
            f"| {_fmt(value)} | {expected} | {returned} |"
        )
    out += ["", "## Why relevant items were missed", ""]
    misses = [
        (q["query_id"], q["category"], why) for q in result["queries"] for why in q["why_missed"]
    ]
    limit = 3 * LIST_LIMIT
    out += [
        f"- {code(qid)} ({md(labels.get(cat, cat))}): {md(why)}" for qid, cat, why in misses[:limit]
    ] or ["No relevant item was missed."]
    if len(misses) > limit:
        out.append(f"- ... and {len(misses) - limit} more; all in results.json")
    out += ["", "## Category observations", ""]
    out += [f"- {line}" for line in observations(result)]
    out += [""]
    out += _roundtrip(result)
    out += _cost(timings)
    out += ["## Conclusion", ""]
    source = [] if rules is None else [f"Decision rules: {rules.describe(code, md)}.", ""]
    if d["rule"] is None:  # no rule written for this system: the figures, not advice
        from recallbench.report.summary import measured_line

        out += [f"**{md(d['recommendation'])}**", "", md(measured_line(result)), "", *source]
        return "\n".join(out)
    out += [f"**Rule {md(d['rule'])} fired: {md(d['recommendation'])}**", ""]
    for r in d["rules"]:
        measured = ", ".join(
            f"{md(name)} = {_fmt(v) if isinstance(v, float) else md(v)}"
            for name, v in r["measured"].items()
        )
        if r["fired"]:
            state = "**fired**"
        elif r["met"]:
            state = "also met, but an earlier rule fired first"
        else:
            state = "not met"
        out.append(
            f"{md(r['rule'])}. {md(r['condition'])}: {state}"
            + (f" ({measured})" if measured else "")
        )
    out += [""] + [f"- {md(g)}" for g in d["guardrails"]] + [""] + source
    return "\n".join(out)


def content_loss_section(system: str, loss: Mapping[str, Any]) -> list[str]:
    """The report's "Store input limit" section: how many stored texts the store cannot have
    seen whole under the limit its system declares, and the share of what it misses."""
    limit = loss["input_limit"]
    parts = []
    if "chars_total" in loss:
        parts.append(
            f"{_fmt(loss['share_chars_unseen'], pct=True)} of all {loss['chars_total']:,} "
            "stored characters"
        )
    if "tokens_total" in loss:
        parts.append(
            f"{_fmt(loss['share_tokens_unseen'], pct=True)} of all {loss['tokens_total']:,} "
            "stored tokens"
        )
    return [
        "## Store input limit",
        "",
        f"{loss['texts_cut']:,} of {loss['texts']:,} stored texts "
        f"({_fmt(loss['share_cut'], pct=True)}) exceed what {md(system)} declares its stores "
        f"keep ({md(limit['described'])}): it cannot have seen them whole"
        + (f"; the part past the limit is {' and '.join(parts)}" if parts else "")
        + ". A cut text is ranked by what the store kept of it.",
        "",
    ]
