"""The comparison document as text: the terminal's headlines (`headline`) and the sections
of compare.md and compare.html (`compare_sections`, written once, rendered by
`report.sections`). compare.md is `render_markdown`: its heading, the dataset's line and
the vector caches, written here, then those sections.

It reads only the document `recallbench.commands.compare.compare_results` builds
(compare.json)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.metrics.measures import preferred_measures
from recallbench.metrics.stats import ALPHA, at_floor
from recallbench.report.figures import format_setting
from recallbench.report.sections import Section, table, to_markdown


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def signed(x: float | None) -> str:
    """A difference as text: `+0.152`, or `n/a`."""
    return _f(x, signed=True)


def _ceil4(x: float) -> float:
    """x rounded up at the fourth decimal (a floor shown as "p < 0.0001" stays true)."""
    return math.ceil(x * 10_000 - 1e-9) / 10_000


def p_text(figures: Mapping[str, Any], key: str = "p_value") -> str:
    """A p-value as text: `0.0132`; `< 0.0001` when a random test reached its floor (the
    true p may be smaller; an adjusted p from such a p is a bound too); `n/a`."""
    p = figures.get(key)
    if p is None:
        return "n/a"
    floor = figures.get("p_floor")
    if at_floor(figures["p_value"], floor):
        bound = floor if key == "p_value" else p
        return f"< {_ceil4(bound):.4f}"
    return f"{p:.4f}"


def ci_text(ci: Sequence[float] | None) -> str:
    return "n/a" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def correction_name(doc: Mapping[str, Any]) -> str:
    """The correction as a column names it: Holm, BH, or none."""
    method = doc["statistics"]["correction"]
    return {"holm": "Holm", "bh": "BH", "none": "uncorrected"}[method]


def headline_metric(doc: Mapping[str, Any], pair: Mapping[str, Any]) -> str:
    """The measure a challenger's headline reports: nDCG@k, else recall@k, else the first."""
    names = list(pair["metrics"])
    preferred = preferred_measures(names, doc["top_k"])
    return (preferred or names)[0]


def headline(doc: dict[str, Any]) -> str:
    """One line per challenger, "challenger vs reference": nDCG@k (else recall@k, else the
    first measure): the reference's and the challenger's means with their 95% intervals,
    the difference (challenger - reference), its CI, p and adjusted p, W/T/L (wins are the
    challenger's), n and the MDE. For the terminal: labels are escaped
    (`escape.terminal`)."""
    from recallbench.core.escape import terminal

    lines = []
    adjusted = correction_name(doc)
    for pair in doc["comparisons"]:
        metric = headline_metric(doc, pair)
        o = pair["metrics"][metric]["overall"]
        ref_i = doc["means"][pair["reference"]].get(metric)
        ch_i = doc["means"][pair["challenger"]].get(metric)
        p = p_text(o)
        extra = "" if adjusted == "uncorrected" else f", p {adjusted} {p_text(o, 'p_adjusted')}"
        lines.append(
            f"{terminal(pair['challenger'])} vs {terminal(pair['reference'])}: {terminal(metric)} "
            f"{_mean_ci(ref_i, o['reference_mean'])} -> {_mean_ci(ch_i, o['challenger_mean'])} "
            f"({_f(o['mean_difference'], signed=True)}, 95% CI {ci_text(o['ci95'])}, "
            f"p {p}{extra}, W/T/L {o['wins']}/{o['ties']}/{o['losses']}, n={o['queries']}, "
            f"MDE {_f(o['mde'])})"
        )
    return "\n".join(lines)


def _mean_ci(record: Mapping[str, Any] | None, mean: float | None) -> str:
    """`0.648 [0.571, 0.722]` from an interval record, else the mean alone."""
    if record is None or record.get("ci95") is None:
        return _f(mean)
    low, high = record["ci95"]
    return f"{_f(mean)} [{low:.3f}, {high:.3f}]"


def _settings(system: Mapping[str, Any]) -> dict[str, str]:
    """A system's configuration as {key: value text} (the functions' source left out)."""
    return {
        k: format_setting(v)
        for k, v in system.items()
        if k not in ("label", "name") and not k.endswith("function")
    }


def differing_keys(doc: Mapping[str, Any]) -> list[str]:
    """The configuration keys whose value differs between the compared systems (or that
    some lack), in first-seen order."""
    settings = [_settings(s) for s in doc["systems"]]
    keys = list(dict.fromkeys(k for s in settings for k in s))
    return [k for k in keys if len({s.get(k) for s in settings}) > 1]


def _config_text(system: Mapping[str, Any], differing: Sequence[str]) -> str:
    """`key value; ...`, each key that differs between the systems marked `≠`."""
    return "; ".join(
        f"{'≠ ' if k in differing else ''}{k.replace('_', ' ')} {v}"
        for k, v in _settings(system).items()
    )


#: the decision table's cost columns: (compare.json key, column head, format)
COST_COLUMNS = (
    ("ingest_records_per_second", "ingest (records/s)", ",.0f"),
    ("query_p50_ms", "query p50 (ms)", ".2f"),
    ("query_p95_ms", "query p95 (ms)", ".2f"),
    ("cold_start_ms", "cold start (ms)", ",.1f"),
    ("store_mb", "store on disk (MB)", ",.2f"),
    ("peak_rss_mib", "peak RSS (MiB)", ",.0f"),
    ("wall_seconds", "wall (s)", ",.1f"),
)


def _cost_cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _group_of(doc: Mapping[str, Any], label: str) -> list[str]:
    return next((g for g in doc["rankings"]["groups"] if label in g), [label])


def decision_sections(doc: Mapping[str, Any]) -> list[Section]:
    """The tables a deployer reads first: one row per system with its headline measures
    and their 95% intervals and the systems it ranks identically to; then, when the
    systems ran here, one row per system of its cost (local diagnostics). Below them: the
    groups retrieval cannot separate and what each embedder never saw."""
    labels = [s["label"] for s in doc["systems"]]
    metrics = list(doc["comparisons"][0]["metrics"]) if doc["comparisons"] else []
    shown = headline_columns(doc, metrics)[:3]
    cost = doc.get("cost")
    named = {lab: f"{lab} (reference)" if lab == labels[0] else lab for lab in labels}
    rows = [
        [
            named[lab],
            *(_interval_cell(doc["means"][lab].get(m)) for m in shown),
            ", ".join(x for x in _group_of(doc, lab) if x != lab) or "none",
        ]
        for lab in labels
    ]
    n = doc["rankings"]["queries"]
    after = [
        f"{', '.join(group)}: identical rankings on {n:,} of {n:,} queries; retrieval cannot "
        "choose between them" + (": compare their cost." if cost is not None else ".")
        for group in doc["rankings"]["groups"]
    ]
    for t in doc.get("truncation", []):
        embedder = f" ({t['embedder']})" if t.get("embedder") else ""
        after.append(
            f"{', '.join(t['systems'])}{embedder}: {t['texts_over_limit']:,} of {t['texts']:,} "
            f"stored texts exceed the embedder's {t['max_tokens']}-token window; the model "
            f"never saw {t['share_unseen_of_long_texts']:.1%} of their tokens "
            f"({t['share_unseen']:.1%} of all stored tokens): a long text is ranked by its "
            "opening only."
        )
    if cost is None:
        after.append("Cost is measured only when compare runs the systems, not for saved results.")
    out = [
        Section(
            "decision",
            "Which system: retrieval",
            (
                "Each system's headline means over the scored queries with their 95% "
                "interval (Wilson's when every per-query value is 0 or 1, else a percentile "
                "bootstrap over queries), and the systems whose rankings are identical to it "
                "on every query.",
            ),
            table(["system", *(f"{m} [95% CI]" for m in shown), "same rankings as"], rows),
            after=tuple(after),
        )
    ]
    if cost is not None:
        out.append(
            Section(
                "cost",
                "Which system: cost",
                (
                    "Local diagnostics, measured on this machine in this run, not results "
                    f"({cost['repeat']} timed search(es) per query).",
                ),
                table(
                    ["system", *(head for _, head, _ in COST_COLUMNS)],
                    [
                        [
                            named[lab],
                            *(
                                _cost_cell(cost["systems"][lab].get(key), fmt)
                                for key, _, fmt in COST_COLUMNS
                            ),
                        ]
                        for lab in labels
                    ],
                    numeric=range(1, len(COST_COLUMNS) + 1),
                ),
                bullets=tuple(cost["figures"][key] for key, _, _ in COST_COLUMNS),
                level=3,
            )
        )
    return out


def compare_sections(doc: Mapping[str, Any]) -> list[Section]:
    """The comparison's sections, written once for compare.md, compare.html and the
    terminal: the decision table, one section per challenger (overall tests, then per
    category and the pooled rates; one line when it ranks exactly as the reference), the
    configurations with the keys that differ marked, "Reading this"."""
    metrics = list(doc["comparisons"][0]["metrics"]) if doc["comparisons"] else []
    differing = differing_keys(doc)
    out = decision_sections(doc)
    adjusted = correction_name(doc)
    for n, pair in enumerate(doc["comparisons"], start=1):
        ref, ch = pair["reference"], pair["challenger"]
        same = pair["identical_rankings"]
        if same["identical"] == same["queries"]:
            out.append(
                Section(
                    f"pair-{n}",
                    f"{ch} against {ref}",
                    (
                        f"{ch} returned the same ids in the same order as {ref} on every one "
                        f"of the {same['queries']:,} queries: every measure is equal and there "
                        "is nothing to test.",
                    ),
                )
            )
            continue
        rows = []
        for metric, m in pair["metrics"].items():
            o = m["overall"]
            rows.append(
                [
                    metric,
                    str(o["queries"]),
                    _f(o["reference_mean"]),
                    _f(o["challenger_mean"]),
                    _f(o["mean_difference"], signed=True),
                    ci_text(o["ci95"]),
                    p_text(o),
                    p_text(o, "p_adjusted"),
                    _f(o["mde"]),
                    f"{o['wins']} / {o['ties']} / {o['losses']}",
                    o["test"] or "none (fewer than 2 queries)",
                ]
            )
        out.append(
            Section(
                f"pair-{n}",
                f"{ch} against {ref}",
                (f"Identical rankings on {same['identical']:,} of {same['queries']:,} queries.",),
                table(
                    [
                        "metric",
                        "n",
                        ref,
                        ch,
                        "difference",
                        "95% CI (bootstrap)",
                        "p (sign-flip)",
                        f"p ({adjusted})",
                        "MDE (80% power)",
                        "wins / ties / losses",
                        "test",
                    ],
                    rows,
                ),
            )
        )
        labels_of = doc["dataset"].get("category_labels", {})
        first = pair["metrics"][metrics[0]]["per_category"] if metrics else {}
        category_rows = []
        for cat in first:
            cells = []
            for metric in metrics:
                c = pair["metrics"][metric]["per_category"][cat]
                cells.append(
                    "n/a"
                    if not c["queries"]
                    else f"{_f(c['reference_mean'])} → {_f(c['challenger_mean'])} "
                    f"({c['wins']}/{c['ties']}/{c['losses']}; p {p_text(c)}, "
                    f"{adjusted} {p_text(c, 'p_adjusted')})"
                )
            category_rows.append([labels_of.get(cat, cat), str(_category_n(pair, cat)), *cells])
        out.append(
            Section(
                f"pair-{n}-categories",
                f"{ch} against {ref}, per category",
                (
                    f"Means {ref} → {ch}; wins / ties / losses of {ch}; p of the sign-flip "
                    f"test in the category, then adjusted ({adjusted}) over every challenger "
                    "x measure x category.",
                ),
                table(["category", "n", *metrics], category_rows),
                level=3,
            )
        )
        if pair["rates"]:
            out.append(
                Section(
                    f"pair-{n}-rates",
                    f"{ch} against {ref}, pooled slot rates",
                    ("No test: they are counts over slots, not per-query values.",),
                    bullets=tuple(
                        f"{name}: {ref} {r['reference']['numerator']}/"
                        f"{r['reference']['denominator']}, {ch} {r['challenger']['numerator']}/"
                        f"{r['challenger']['denominator']}"
                        for name, r in pair["rates"].items()
                    ),
                    level=3,
                )
            )
    out.append(
        Section(
            "systems",
            "Systems and their configuration",
            (
                "Keys marked ≠ differ between the systems: "
                + (", ".join(k.replace("_", " ") for k in differing) or "none")
                + ".",
            ),
            table(
                ["label", "system", "configuration"],
                [[s["label"], s["name"], _config_text(s, differing)] for s in doc["systems"]],
            ),
        )
    )
    out.append(Section("reading", "Reading this", bullets=tuple(reading_notes(doc))))
    return out


def _category_n(pair: Mapping[str, Any], cat: str) -> int:
    return max(m["per_category"][cat]["queries"] for m in pair["metrics"].values())


def _interval_cell(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "n/a"
    return _mean_ci(record, record["mean"])


def headline_columns(doc: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    """The measures of the means table: the preferred ones at top-k first, at most five."""
    preferred = preferred_measures(metrics, doc["top_k"])
    return list(dict.fromkeys([*preferred, *metrics]))[:5]


def reading_notes(doc: Mapping[str, Any]) -> list[str]:
    """ "Reading this", written from the document: the dataset and its n, the tests, the
    correction and what it did, the random test's floor, the MDE in words, and what the
    figures do not prove."""
    st = doc["statistics"]
    name = doc["dataset"]["name"]
    pairs = doc["comparisons"]
    overall = [m["overall"] for p in pairs for m in p["metrics"].values()]
    cats = [c for p in pairs for m in p["metrics"].values() for c in m["per_category"].values()]
    ns = sorted({o["queries"] for o in overall})
    cat_ns = sorted({c["queries"] for c in cats if c["queries"]})
    notes = [
        f"{name}: {doc['dataset']['queries']:,} scored queries; each overall row pairs "
        + (f"{ns[0]:,}" if len(ns) == 1 else f"{ns[0]:,} to {ns[-1]:,}")
        + " queries (those where the measure applies to both systems)"
        + (
            f"; a category row pairs {cat_ns[0]:,} to {cat_ns[-1]:,}."
            if len(cat_ns) > 1
            else (f"; a category row pairs {cat_ns[0]:,}." if cat_ns else ".")
        ),
        "p is the two-sided paired sign-flip (randomization) test of a zero mean difference "
        "over the queries where the systems differ; the interval is a paired bootstrap "
        "percentile interval of the mean difference; each system's own interval is Wilson's "
        "when every per-query value is 0 or 1, else a percentile bootstrap.",
    ]
    method = st["correction"]
    for family, f in st["families"].items():
        members = overall if family == "overall" else cats
        tested = [x for x in members if x["p_value"] is not None and x["wins"] + x["losses"]]
        if not tested:
            continue
        before = sum(x["p_value"] < ALPHA for x in tested)
        after = sum(x["p_adjusted"] < ALPHA for x in tested)
        where = "overall rows" if family == "overall" else "category rows"
        if method == "none":
            notes.append(
                f"No correction for multiple comparisons ({where}: {len(tested)} tests, "
                f"{before} with p < {ALPHA}): with several tests, one small p can be chance."
            )
        else:
            notes.append(
                f"{correction_name(doc)} correction over the {len(tested)} tests of the "
                f"{where} ({f['of']}): {before} with p < {ALPHA} before, {after} after."
            )
    random_tests = [x for x in overall + cats if x["p_floor"] is not None]
    if random_tests:
        floor = random_tests[0]["p_floor"]
        notes.append(
            f"{len(random_tests)} tests had more than {st['exact_limit']} non-zero differences "
            f"and drew {doc['resamples']:,} random sign patterns: their p cannot go below "
            f"{floor:.6f}, shown as p < {_ceil4(floor):.4f}; the others are exact."
        )
    else:
        notes.append(
            f"Every test is exact (at most {st['exact_limit']} non-zero differences each)."
        )
    for pair in pairs:
        metric = headline_metric(doc, pair)
        o = pair["metrics"][metric]["overall"]
        if o["mde"] is not None:
            notes.append(
                f"With {o['queries']:,} queries, {pair['challenger']} against "
                f"{pair['reference']} could detect a difference of {o['mde']:.3f} in "
                f"{metric} or more (80% power, alpha {ALPHA}, two-sided); a smaller true "
                "difference would often go unseen, so a large p is not evidence of equality."
            )
    if name == "fixtures":
        notes.append(
            "A fixture suite is small and hand-written: a difference there is a reason to "
            "look at the queries that moved, not a ranking of systems."
        )
    else:
        notes.append(
            f"A difference is about this {name} file, its unit and options, and this top-k "
            f"({doc['top_k']}); it is not a ranking of systems in general."
        )
    return notes


def render_markdown(
    doc: dict[str, Any], headline_only: bool = False, plots: Sequence[tuple[str, str]] = ()
) -> str:
    """The comparison as Markdown, from the document alone (`headline_only`: one line per
    challenger, for the terminal); `plots` are (path relative to compare.md, caption) of the
    images it links to (the forest plot, the bars)."""
    from recallbench.core.escape import markdown as md

    if headline_only:
        return headline(doc)
    files = ", ".join(md(f["name"]) for f in doc["dataset"]["files"])
    out = [
        "# Systems side by side",
        "",
        f"Dataset: {md(doc['dataset']['name'])} ({files}; {md(doc['dataset']['label'])}), "
        f"{doc['dataset']['queries']} scored queries, top-{doc['top_k']}. "
        f"Seed {doc['seed']}, {doc['resamples']} resamples; p adjusted by "
        f"{md(correction_name(doc))}.",
        "",
    ]
    if doc.get("vectors"):
        out += ["Learned vectors (one cache per embedder, each distinct text embedded once):", ""]
        out += [
            f"- {md(v['system'])}: {md(v['embedder_identity'])}, cache {md(v['cache'])}"
            for v in doc["vectors"]
        ]
        out.append("")
    for note in doc.get("notes", []):
        out += [f"Note: {md(note)}", ""]
    if plots:
        out += [line for path, text in plots for line in (f"![{md(text)}]({path})", "")]
    out.append(to_markdown(compare_sections(doc)))
    return "\n".join(out)
