"""The sections of `run`'s report, built once as data from the result and the timings.

`run_sections` lists them in order; report.md is `sections.to_markdown` of the list and
report.html draws the same list (`sections.html_sections`; the Cost section and the
"Generated" line are local, so the page's bytes stay a function of the result). Each
builder takes the result (and what else it names) and returns one `Section` (or a few, for
the metric tables) with its figures already formatted; escaping is the renderers' job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from recallbench.metrics.measures import RELEVANT_GRADE, from_record, select, value_of
from recallbench.report.figures import cell_text, format_setting, value_text
from recallbench.report.sections import (
    LIST_LIMIT,
    Block,
    Bullets,
    Code,
    Cut,
    Figure,
    Lines,
    Lit,
    Para,
    Section,
    Span,
    Strong,
    Text,
    capped,
    fmt,
    spans_of,
    table,
    to_markdown,
)

#: a metric table holds at most this many measure columns (wider ones are split by cutoff
#: k), so it fits a 1280 px window
MAX_COLUMNS = 5


def joined(items: Sequence[Text], sep: str = ", ") -> tuple[Span, ...]:
    """The texts one after another with `sep` (the builder's wording) between them."""
    out: list[Span] = []
    for i, item in enumerate(items):
        if i:
            out.append(Lit(sep))
        out.extend(item if isinstance(item, tuple) else (item,))
    return tuple(out)


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


def primary_ranked(result: Mapping[str, Any]) -> list[str]:
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
    """The `n` graded queries lowest on the `primary_ranked` measures (ties: by id)."""
    names = primary_ranked(result)

    def number(q: Mapping[str, Any], name: str) -> float:
        v = value_of(q["metrics"].get(name))
        return 1.0 if v is None else v

    graded = [q for q in result["queries"] if q["expected"]]
    return sorted(graded, key=lambda q: (*(number(q, m) for m in names), q["query_id"]))[:n]


def head_section(result: Mapping[str, Any], generated_at: str, version: str) -> Section:
    """The report's title, the synthetic-data banner, when and by what it was made."""
    body: list[Block] = []
    if is_generated(result):
        body.append(
            Para(
                fmt(
                    "{s}: {label}. These figures test the tooling, not a system's quality on "
                    "a benchmark.",
                    s=Strong("Synthetic data"),
                    label=result["dataset"]["identity"]["label"],
                ),
                quote=True,
            )
        )
    body.append(
        Para(
            fmt("Generated {when} by recallbench {version}.", when=generated_at, version=version),
            local=True,
        )
    )
    return Section("report", "Retrieval quality report", level=1, body=tuple(body))


def configuration_section(result: Mapping[str, Any], source: str = "") -> Section:
    """The system's configuration, where its code came from, the dataset and the run."""
    ds, counts, system = result["dataset"], result["counts"], result["system"]
    rows: list[tuple[Text, Text]] = [
        ("system" if key == "name" else key.replace("_", " "), format_setting(v))
        for key, v in sorted(system.items(), key=lambda kv: (kv[0] != "name", kv[0]))
    ]
    if source:
        rows.append(("system source", source))
    rows.append(("dataset", fmt("{d}: {label}", d=ds["dataset"], label=ds["identity"]["label"])))
    files = [
        fmt(
            "{name} ({size:,} bytes, sha256 {sha}...)",
            name=f["name"],
            size=f["size_bytes"],
            sha=f["sha256"][:12],
        )
        for f in ds["identity"]["files"]
    ]
    rows.append(("files", joined(files)))
    if ds["options"]:
        rows.append(("reader options", format_setting(ds["options"])))
    rows.append(
        (
            "scopes / memories / queries",
            fmt(
                "{s} / {m} / {q} scored of {raw}",
                s=counts["scopes"],
                m=counts["memories"],
                q=counts["queries"],
                raw=counts["queries_raw"],
            ),
        )
    )
    rows.append(
        (
            "top-k / stores",
            fmt("{k} / {mode}", k=result["run"]["top_k"], mode=result["run"]["store_mode"]),
        )
    )
    body: list[Block] = [table(("setting", "value"), rows)]
    if not ds["identity"]["known"]:
        body.append(Para(fmt("Warning: {label}.", label=ds["identity"]["label"]), quote=True))
    depth_note = search_depth_note(result)
    if depth_note:
        body.append(Para(fmt("Warning: {note}.", note=depth_note), quote=True))
    return Section("configuration", "Configuration", body=tuple(body))


def dataset_section(result: Mapping[str, Any]) -> Section:
    """The reader's notes, the queries dropped before scoring and the dataset's figures."""
    ds, counts = result["dataset"], result["counts"]
    body: list[Block] = [Bullets(tuple(ds["notes"]))]
    if counts["dropped"]:
        body.append(Para("Dropped before scoring (not in any denominator):"))
        drops = [
            fmt(
                "{reason}: {n} ({rule}): {ids}",
                reason=reason,
                n=n,
                rule=ds["drop_rules"].get(reason, reason),
                ids=Cut(tuple(x["query_id"] for x in result["drops"] if x["reason"] == reason)),
            )
            for reason, n in counts["dropped"].items()
        ]
        body.append(Bullets(tuple(drops)))
    if result["summary"]:
        # in key order: `run`'s result has the reader's order, the one read back from
        # results.json sorted keys; both write the same report
        summary = sorted(result["summary"].items())
        rows = [(key.replace("_", " "), format_setting(v)) for key, v in summary]
        body.append(table(("dataset figure", "value"), rows))
    return Section("dataset", "Dataset", body=tuple(body))


def metrics_sections(
    result: Mapping[str, Any], plots: Sequence[tuple[str, str]] = ()
) -> list[Section]:
    """The Metrics section (what a cell holds, the measures' definitions), then per level
    the means, overall and per category, in tables of at most `MAX_COLUMNS`
    measures, the pooled slot rates apart (`slot_rates_section`), and the plots after the
    last table."""
    from recallbench.report.result import mean_measures, system_intervals

    definitions: dict[str, str] = {}
    for m in result["run"]["measures"]:
        definitions.setdefault(from_record(m).at_k, m["definition"])
    out = [
        Section(
            "metrics",
            "Metrics",
            paragraphs=(
                fmt(
                    "Each mean is over the queries its row applies to ({n}); {found} are the "
                    "pooled relevant items behind a recall mean; rates are pooled slot counts. "
                    "{na}: no query in that row has the measure (never a made-up 0). "
                    "Definitions:",
                    n=Code("n"),
                    found=Code("found a/b"),
                    na=Code("n/a"),
                ),
            ),
            body=(
                Bullets(
                    tuple(fmt("{at}: {d}", at=Code(at), d=d) for at, d in definitions.items()),
                    fold="Definitions of the measures",
                ),
            ),
        )
    ]
    measures = result["run"]["measures"]
    labels = result["dataset"]["category_labels"]
    counts = result["counts"]["per_category"]
    intervals = system_intervals(result, mean_measures(result))
    overall = result["metrics"]["overall"]
    for level in result["dataset"]["levels"]:
        groups = column_groups(
            [m for m in measures if m["level"] == level["name"] and not m["pooled"]]
        )
        for cols in groups:
            title = f"{level['name']} level ({level['description'] or level['name']})"
            if len(groups) > 1:
                title += ", k = " + ", ".join(dict.fromkeys(str(m["k"]) for m in cols))
            rows: list[list[Text]] = [
                [
                    Strong("overall"),
                    str(result["counts"]["queries"]),
                    *(
                        Lit(cell_text(overall[m["name"]], m, intervals[None][m["name"]]))
                        for m in cols
                    ),
                ]
            ]
            for cat in result["dataset"]["categories"]:
                cells = result["metrics"]["per_category"][cat]
                rows.append(
                    [
                        labels.get(cat, cat),
                        str(counts.get(cat, {}).get("scored", 0)),
                        *(
                            Lit(cell_text(cells[m["name"]], m, intervals[cat][m["name"]]))
                            for m in cols
                        ),
                    ]
                )
            header = ("category", "queries", *(m["name"] for m in cols))
            out.append(Section(f"metrics-{len(out)}", title, table=table(header, rows), level=3))
    out += slot_rates_section(result)
    if plots:
        last = out[-1]
        figures = tuple(Figure(path, caption) for path, caption in plots)
        out[-1] = replace(last, body=last.body + figures)
    return out


def slot_rates_section(result: Mapping[str, Any]) -> list[Section]:
    """The pooled slot rates (false positives on no-answer queries, duplicate slots), kept
    apart from the means: per rate its level, the categories it was measured on (those whose
    cell has slots), the queries and slots behind it and what its value means (none without
    a pooled measure)."""
    labels = result["dataset"]["category_labels"]
    counts = result["counts"]["per_category"]
    rows: list[list[Text]] = []
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
        measured_on = ", ".join(labels.get(c, c) for c in cats) or "no query"
        rows.append(
            [
                m["name"],
                m["level"],
                fmt("{on} ({n} queries)", on=measured_on, n=queries),
                Lit(cell_text(cell, m)),
                (
                    "share of returned slots holding an ungraded id; on no-answer queries "
                    "every returned item is one, so 100% means the system returned results "
                    "where nothing was to be found (lower is better)"
                    if no_answer
                    else f"{m['definition']}; lower is better"
                ),
            ]
        )
    if not rows:
        return []
    header = ("rate", "level", "measured on", "value (slots)", "what it counts")
    return [
        Section(
            "slot-rates",
            "Slot rates (pooled over returned slots, not means: not in the rows above)",
            table=table(header, rows),
            level=3,
        )
    ]


def truncation_section(result: Mapping[str, Any]) -> list[Section]:
    """How much of the stored texts the embedder never saw (none when all fit)."""
    t = result["truncation"]
    if not t:
        return []
    text = Lit(
        f"{t['texts_over_limit']} of {t['texts']} stored texts exceed the embedder's "
        f"{t['max_tokens']}-token window: the model never saw "
        f"{value_text(t['share_unseen_of_long_texts'], pct=True)} of their tokens "
        f"({t['tokens_unseen']:,} of {t['tokens_of_long_texts']:,}; "
        f"{value_text(t['share_unseen'], pct=True)} of all {t['tokens_total']:,} stored tokens). "
        "A long text is ranked by its opening only."
    )
    return [Section("embedder-limit", "Embedder input limit", paragraphs=(text,))]


def content_loss_section(result: Mapping[str, Any]) -> list[Section]:
    """The "Store input limit" section: how many stored texts the store cannot have seen
    whole under the limit its system declares, and the share of what it misses (none
    without a declared limit)."""
    loss = result.get("content_loss")
    if not loss:
        return []
    parts = []
    if "chars_total" in loss:
        parts.append(
            f"{value_text(loss['share_chars_unseen'], pct=True)} of all {loss['chars_total']:,} "
            "stored characters"
        )
    if "tokens_total" in loss:
        parts.append(
            f"{value_text(loss['share_tokens_unseen'], pct=True)} of all {loss['tokens_total']:,} "
            "stored tokens"
        )
    text = fmt(
        "{cut:,} of {texts:,} stored texts ({share}) exceed what {system} declares its stores "
        "keep ({limit}): it cannot have seen them whole{past}. A cut text is ranked by what "
        "the store kept of it.",
        cut=loss["texts_cut"],
        texts=loss["texts"],
        share=Lit(value_text(loss["share_cut"], pct=True)),
        system=result["system"]["name"],
        limit=loss["input_limit"]["described"],
        past=Lit(f"; the part past the limit is {' and '.join(parts)}" if parts else ""),
    )
    return [Section("store-limit", "Store input limit", paragraphs=(text,))]


def worst_queries_section(result: Mapping[str, Any]) -> Section:
    """The five graded queries ranked worst by the primary measure at top-k."""
    labels = result["dataset"]["category_labels"]
    names = primary_ranked(result)[:1]
    rows = []
    for q in worst_queries(result):
        value = value_of(q["metrics"].get(names[0])) if names else None
        expected = Cut(tuple(fmt("{i} ({g})", i=i, g=g) for i, g in q["expected"].items()), 5)
        returned = joined([fmt("{i} ({g})", i=h["id"], g=h["grade"]) for h in q["returned"]])
        category = labels.get(q["category"], q["category"])
        rows.append([q["query_id"], category, Lit(value_text(value)), expected, returned])
    header = (
        "query",
        "category",
        names[0] if names else "score",
        "expected (grade)",
        "returned (grade)",
    )
    return Section("worst", "Five worst queries", table=table(header, rows))


def misses_section(result: Mapping[str, Any]) -> Section:
    """Why each relevant item was missed: one bullet per reason, the first
    `3 * LIST_LIMIT` (every one is in results.json)."""
    title = "Why relevant items were missed"
    labels = result["dataset"]["category_labels"]
    misses = [(q, why) for q in result["queries"] for why in q["why_missed"]]
    if not misses:
        return Section("missed", title, paragraphs=("No relevant item was missed.",))
    shown, more = capped(misses, 3 * LIST_LIMIT)
    bullets: list[Text] = [
        fmt(
            "{query} ({category}): {why}",
            query=Code(q["query_id"]),
            category=labels.get(q["category"], q["category"]),
            why=why,
        )
        for q, why in shown
    ]
    if more:
        bullets.append(Lit(more))
    return Section("missed", title, bullets=tuple(bullets))


def observations(result: Mapping[str, Any]) -> list[Text]:
    """Per category: the primary recall with its counts, the queries that missed, the slot
    rates that apply, and how often the system's lexical matcher matched anything."""
    k = result["run"]["top_k"]
    labels = result["dataset"]["category_labels"]
    measures = {m["name"]: m for m in result["run"]["measures"]}
    recall = next(
        iter(select(result["run"]["measures"], stem="recall", k=k, prefix="", rel=RELEVANT_GRADE)),
        None,
    )
    lines: list[Text] = []
    for cat in result["dataset"]["categories"]:
        cells = result["metrics"]["per_category"][cat]
        in_cat = [q for q in result["queries"] if q["category"] == cat]
        if not in_cat:
            continue
        parts: list[Text] = [
            fmt("{label} ({n} queries):", label=Strong(labels.get(cat, cat)), n=len(in_cat))
        ]
        if recall and cells[recall]["value"] is not None:
            pooled = cells[recall]["pooled"] or {}
            parts.append(
                fmt(
                    "{name} {value} ({a}/{b} relevant found);",
                    name=recall,
                    value=Lit(value_text(cells[recall]["value"])),
                    a=Lit(str(pooled.get("numerator"))),
                    b=Lit(str(pooled.get("denominator"))),
                )
            )
        missed = [q["query_id"] for q in in_cat if q["missed"]]
        if any(q["expected"] for q in in_cat):
            parts.append(
                fmt("queries missing a relevant item: {ids}.", ids=Cut(tuple(missed)))
                if missed
                else "no relevant item missed."
            )
        for name, m in measures.items():
            cell = cells[name]
            if m["pooled"] and cell["denominator"]:
                parts.append(
                    fmt(
                        "{name}: {a}/{b} slots ({pct}).",
                        name=name,
                        a=cell["numerator"],
                        b=cell["denominator"],
                        pct=Lit(value_text(cell["value"], pct=True)),
                    )
                )
        lexical = [q["lexical_matches"] for q in in_cat if q["lexical_matches"]]
        if lexical:
            hit = sum(1 for x in lexical if x["count"])
            parts.append(
                fmt(
                    "{matcher} matched any memory for {hit} of {n} queries.",
                    matcher=lexical[0]["matcher"],
                    hit=hit,
                    n=len(in_cat),
                )
            )
        lines.append(joined(parts, " "))
    return lines


def observations_section(result: Mapping[str, Any]) -> Section:
    return Section("observations", "Category observations", bullets=tuple(observations(result)))


def roundtrip_section(result: Mapping[str, Any]) -> Section:
    """Snapshot -> verify -> clean hydrate: whether the clone answers as the source did,
    what drifted, and whether the system's verifier rejected each corrupted package."""
    rt = result["roundtrip"]
    title = "Snapshot -> verify -> clean hydrate"
    if not rt["available"]:
        return Section("roundtrip", title, paragraphs=(fmt("{reason}.", reason=rt["reason"]),))
    body: list[Block] = []
    sample = rt["sample"]
    if sample["scopes_sampled"] < sample["scopes_total"]:
        body.append(
            Para(
                fmt(
                    "Sampled {n} of {total} scopes ({rule}): {ids}.",
                    n=sample["scopes_sampled"],
                    total=sample["scopes_total"],
                    rule=sample["rule"],
                    ids=Cut(tuple(sample["scope_ids"])),
                )
            )
        )
    eq, rec = rt["equivalence"], rt["records"]
    body.append(
        Para(
            fmt(
                "Logical top-{k} equivalence: {n}/{d} queries identical ({pct}). Records: "
                "source {source}, packaged {packaged}, verified {verified}, clone {clone}; clone "
                "content digest {digest} the source's.",
                k=result["run"]["top_k"],
                n=eq["numerator"],
                d=eq["denominator"],
                pct=Lit(value_text(eq["value"], pct=True)),
                digest=Lit("matches") if rt["clone_digest_matches"] else Strong("differs from"),
                **{key: rec[key] for key in ("source", "packaged", "verified", "clone")},
            )
        )
    )
    drift = rt["drift"]
    if drift:
        shown, more = capped(list(drift.items()))
        items: list[Text] = [
            fmt(
                "{q}: positions {moved} changed, max score drift {d}, now {now}",
                q=Code(qid),
                moved=d["moved_positions"] or "none",
                d=Lit(f"{d['max_score_drift']:.4f}"),
                now=Cut(tuple(d["after"])),
            )
            for qid, d in shown
        ]
        if more:
            items.append(Lit(more))
        body.append(Bullets(tuple(items)))
    else:
        body.append(Para("No query changed order or score after the round trip."))
    body.append(Para("Corrupted copies of the package, offered to the system's own verifier:"))
    checks = []
    for c in rt["corruption_checks"]:
        verdict = (
            fmt(
                "rejected in {r}/{s} scopes ({reasons})",
                r=c["rejected"],
                s=c["scopes"],
                reasons=Code(", ".join(c["reasons"])),
            )
            if c["all_rejected"]
            else fmt(
                "{a} in {n}/{s} scopes",
                a=Strong("accepted"),
                n=c["scopes"] - c["rejected"],
                s=c["scopes"],
            )
        )
        checks.append(
            fmt(
                "{name} ({desc}): {verdict}", name=c["name"], desc=c["description"], verdict=verdict
            )
        )
    body.append(Bullets(tuple(checks)))
    return Section("roundtrip", title, body=tuple(body))


def cost_section(timings: Mapping[str, Any]) -> Section:
    """The local timings (ingest, round trip, latency, wall time, overhead): Markdown only."""
    hyd, runs, rt = (timings.get(k) or {} for k in ("hydrate", "runs", "roundtrip"))
    rows: list[tuple[Text, Text]] = []
    if hyd.get("records_per_second"):
        rows.append(("hydrate (ingest)", Lit(f"{hyd['records_per_second']:.0f} records/s")))
    elif runs.get("ingest_seconds"):
        rows.append(
            ("ingest into transient stores (inside query)", Lit(f"{runs['ingest_seconds']:.2f} s"))
        )
    if rt.get("snapshot_records_per_second"):
        rows += [
            ("snapshot", Lit(f"{rt['snapshot_records_per_second']:.0f} records/s")),
            ("verify", Lit(f"{rt['verify_records_per_second']:.0f} records/s")),
            (
                "clean hydrate from package",
                Lit(f"{rt['restore_records_per_second']:.0f} records/s"),
            ),
            ("package size", Lit(f"{rt['package_bytes']} bytes")),
        ]
        if rt.get("cold_start_to_first_query_seconds") is not None:
            cold = rt["cold_start_to_first_query_seconds"] * 1000
            rows.append(("cold start to first query", Lit(f"{cold:.1f} ms")))
    lat = runs.get("latency")
    if lat and lat.get("samples"):
        rows.append(
            (
                "query latency p50 / p95",
                Lit(
                    f"{lat['p50_ms']:.2f} / {lat['p95_ms']:.2f} ms "
                    f"({lat['samples']} samples, repeat {runs.get('repeat', 1)})"
                ),
            )
        )
    if runs.get("wall_seconds") is not None:
        ex = runs.get("execution", {})
        rows.append(
            (
                "query stage wall time",
                fmt(
                    "{wall} ({executor} executor, {workers} worker(s))",
                    wall=Lit(f"{runs['wall_seconds']:.2f} s"),
                    executor=ex.get("executor", "local"),
                    workers=Lit(str(ex.get("workers", 1))),
                ),
            )
        )
    if runs.get("harness_overhead_end_to_end") is not None:
        rows.append(
            (
                "harness overhead (wall x workers vs time inside the system)",
                Lit(f"{runs['harness_overhead_end_to_end'] * 100:.1f}%"),
            )
        )
    title = "Cost (local diagnostic data, not a cross-machine guarantee)"
    if not rows:
        return Section(
            "cost", title, paragraphs=("No timing sidecar matches these artifacts.",), local=True
        )
    return Section("cost", title, table=table(("figure", "value"), rows), local=True)


def conclusion_section(result: Mapping[str, Any], rules: Any = None) -> Section:
    """The decision: the rule that fired and every rule's state with the figures it read,
    the guardrails; without a rule for the system, the measured figures. `rules`: where
    the rules came from (`systems.rules.RulesSource`), named last."""
    from recallbench.report.summary import measured_line

    d = result["decision"]
    source = (
        [] if rules is None else [Para(fmt("Decision rules: {src}.", src=spans_of(rules.describe)))]
    )
    if d["rule"] is None:  # no rule written for this system: the figures, not advice
        body: list[Block] = [
            Para(Strong(d["recommendation"])),
            Para(measured_line(result)),
            *source,
        ]
        return Section("conclusion", "Conclusion", body=tuple(body))
    lines: list[Text] = []
    for r in d["rules"]:
        measured = joined(
            [
                fmt("{name} = {v}", name=name, v=Lit(value_text(v)) if isinstance(v, float) else v)
                for name, v in r["measured"].items()
            ]
        )
        if r["fired"]:
            state: Text = Strong("fired")
        elif r["met"]:
            state = "also met, but an earlier rule fired first"
        else:
            state = "not met"
        line = fmt(
            "{rule}. {condition}: {state}", rule=r["rule"], condition=r["condition"], state=state
        )
        lines.append(line + ((Lit(" ("), *measured, Lit(")")) if measured else ()))
    headline = Strong(fmt("Rule {rule} fired: {rec}", rule=d["rule"], rec=d["recommendation"]))
    body = [Para(headline), Lines(tuple(lines)), Bullets(tuple(d["guardrails"])), *source]
    return Section("conclusion", "Conclusion", body=tuple(body))


def run_sections(
    result: Mapping[str, Any],
    timings: Mapping[str, Any],
    generated_at: str,
    version: str,
    plots: Sequence[tuple[str, str]] = (),
    rules: Any = None,
    source: str = "",
) -> list[Section]:
    """Every section of `run`'s report, in order: report.md is their Markdown
    (`render_markdown`), report.html draws them too (`html.render_report_page`)."""
    return [
        head_section(result, generated_at, version),
        configuration_section(result, source),
        dataset_section(result),
        *metrics_sections(result, plots),
        *truncation_section(result),
        *content_loss_section(result),
        worst_queries_section(result),
        misses_section(result),
        observations_section(result),
        roundtrip_section(result),
        cost_section(timings),
        conclusion_section(result, rules),
    ]


def render_markdown(
    result: Mapping[str, Any],
    timings: Mapping[str, Any],
    generated_at: str,
    version: str,
    plots: Sequence[tuple[str, str]] = (),
    rules: Any = None,
    source: str = "",
) -> str:
    """report.md: the sections of `run_sections` (built from the result document and the
    timings) as Markdown (`sections.to_markdown`). `plots` are (path relative to the
    report, caption) of the images the Metrics section links to; `rules` (a
    `systems.rules.RulesSource`, None when no rule applies) is where the decision rules
    came from, which the Conclusion names; `source`: where the code under test came from
    (`source.describe_source`)."""
    return to_markdown(run_sections(result, timings, generated_at, version, plots, rules, source))
