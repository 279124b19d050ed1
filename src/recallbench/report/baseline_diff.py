"""A result against its baseline, as sections (`report.sections`): the story check-baseline
prints, and the block for a pull request (`markdown_block`), from one builder.

In order: what changed in the recorded configuration; per headline measure, the value of
each category before -> after, better or worse, with the paired test against the baseline's
per-query values (p, adjusted p, 95% interval, MDE, wins/ties/losses); the queries that
won and lost; the decision before -> after; the true count of differing values (the list
may be cut, the count never); one next step. The block for a pull request holds the same
sections but the list of values and the next step, and adds the run's provenance.

It reads a `baseline.BaselineDiff` only; every string is escaped by the renderer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.metrics.measures import value_of
from recallbench.metrics.stats import ALPHA
from recallbench.report.comparison import _f, ci_text, correction_name, p_text, signed
from recallbench.report.sections import Section, table, to_markdown

#: differing values listed on the terminal (the count above the list is never cut)
LISTED = 20
#: queries listed as lost (or won) before "... and N more"
QUERIES_LISTED = 20


def _aggregate(doc: Mapping[str, Any], level: str, measure: str) -> float | None:
    metrics = doc["metrics"]
    cells = metrics["overall"] if level == "overall" else metrics["per_category"].get(level, {})
    return value_of(cells.get(measure))


def verdict(before: float | None, after: float | None, figures: Mapping[str, Any] | None) -> str:
    """`better`, `worse` (higher is better for a mean measure) or `same`, with
    `(significant)` when the adjusted p of the paired test is below alpha; `n/a` when
    either value is missing."""
    if before is None or after is None:
        return "n/a"
    if abs(after - before) < 1e-12:
        return "same"
    word = "better" if after > before else "worse"
    adjusted = figures.get("p_adjusted") if figures else None
    return f"{word} (significant)" if adjusted is not None and adjusted < ALPHA else word


def _figures(found: Any, measure: str, level: str) -> Mapping[str, Any] | None:
    if found.comparison is None:
        return None
    m = found.comparison["comparisons"][0]["metrics"].get(measure)
    if m is None:
        return None
    return m["overall"] if level == "overall" else m["per_category"].get(level)


def configuration_section(found: Any) -> Section:
    """(1) What the result records differently about how it was made, and where this run's
    system came from (the baseline records its version only)."""
    bullets = list(found.changes) or [
        "none recorded: the system's settings, the dataset and the run's settings are the "
        "baseline's (the change is in code or data the result does not record)"
    ]
    source = (found.envelope.get("provenance") or {}).get("system_source")
    if source:
        from recallbench.core.source import describe_source

        bullets.append(f"this run's system: {describe_source(source)}")
    return Section("configuration", "What changed in the configuration", bullets=tuple(bullets))


def measure_sections(found: Any) -> list[Section]:
    """(2) One table per headline measure: overall, then each category, the baseline's
    value -> this run's, better or worse, and the paired test (when there is one)."""
    out = []
    doc, base = found.result, found.baseline
    labels = doc["dataset"].get("category_labels", {})
    levels = ["overall", *doc["dataset"]["categories"]]
    adjusted = correction_name(found.comparison) if found.comparison else "Holm"
    for n, measure in enumerate(found.headline):
        rows = []
        for level in levels:
            before, after = _aggregate(base, level, measure), _aggregate(doc, level, measure)
            fig = _figures(found, measure, level)
            rows.append(
                [
                    labels.get(level, level),
                    str(fig["queries"]) if fig else "n/a",
                    _f(before),
                    _f(after),
                    "n/a" if before is None or after is None else signed(after - before),
                    verdict(before, after, fig),
                    p_text(fig) if fig else "n/a",
                    p_text(fig, "p_adjusted") if fig else "n/a",
                    ci_text(fig["ci95"]) if fig else "n/a",
                    _f(fig["mde"]) if fig else "n/a",
                    f"{fig['wins']}/{fig['ties']}/{fig['losses']}" if fig else "n/a",
                ]
            )
        if found.comparison is None:
            paragraphs: tuple[str, ...] = (f"No paired test: {found.not_compared}",)
        elif n == 0:
            paragraphs = (
                "The baseline -> this run. p: the paired sign-flip test over the queries "
                f"(the baseline's per-query values are the reference), then adjusted "
                f"({adjusted}); significant: adjusted p < {ALPHA}. 95% CI: of the "
                "difference; MDE: the smallest difference these queries detect at 80% "
                "power; W/T/L: the queries this run wins, ties, loses.",
            )
        else:
            paragraphs = ()
        out.append(
            Section(
                f"measure-{measure}",
                f"{measure} by category",
                paragraphs,
                table(
                    [
                        "category",
                        "n",
                        "baseline",
                        "this run",
                        "difference",
                        "verdict",
                        "p",
                        f"p ({adjusted})",
                        "95% CI",
                        "MDE",
                        "W/T/L",
                    ],
                    rows,
                    numeric=(1, 2, 3, 4, 6, 7, 9),
                ),
                level=3,
            )
        )
    others = other_changes(found)
    if others:
        out.append(
            Section(
                "other-measures",
                "Other measures that changed",
                bullets=tuple(others),
                level=3,
            )
        )
    return out


def other_changes(found: Any) -> list[str]:
    """The measures outside the headline whose value changed, overall and per category."""
    doc, base = found.result, found.baseline
    labels = doc["dataset"].get("category_labels", {})
    out = []
    for m in doc["run"]["measures"]:
        name = m["name"]
        if name in found.headline:
            continue
        for level in ["overall", *doc["dataset"]["categories"]]:
            before, after = _aggregate(base, level, name), _aggregate(doc, level, name)
            if before == after:
                continue
            change = "" if before is None or after is None else f" ({signed(after - before)})"
            out.append(f"{name} {labels.get(level, level)}: {_f(before)} -> {_f(after)}{change}")
    return out


def query_changes(found: Any) -> dict[str, Any]:
    """Which queries differ: every query whose entry changed, those whose ranking (returned
    ids, in order) changed, and per query the headline measures before -> after, split
    into lost (the first headline measure lower) and won (higher)."""
    from recallbench.report.result import per_query_values

    base = {q["query_id"]: q for q in found.baseline["queries"]}
    changed, reranked = [], []
    for q in found.result["queries"]:
        then = base.get(q["query_id"])
        if then != q:
            changed.append(q["query_id"])
            ids = [h.get("id") for h in q.get("returned", [])]
            if then is None or ids != [h.get("id") for h in then.get("returned", [])]:
                reranked.append(q["query_id"])
    values = {
        m: (per_query_values(found.baseline, m), per_query_values(found.result, m))
        for m in found.headline
    }
    category = {q["query_id"]: q["category"] for q in found.result["queries"]}
    lost, won = [], []
    if found.headline:
        before, after = values[found.headline[0]]
        for qid in category:
            a, b = before.get(qid), after.get(qid)
            if a is None or b is None or a == b:
                continue
            (lost if b < a else won).append((b - a, qid))
    lost.sort()
    won.sort(key=lambda x: (-x[0], x[1]))
    return {
        "changed": changed,
        "reranked": reranked,
        "lost": [qid for _, qid in lost],
        "won": [qid for _, qid in won],
        "values": values,
        "category": category,
    }


def _query_line(found: Any, qid: str, q: Mapping[str, Any]) -> str:
    labels = found.result["dataset"].get("category_labels", {})
    cat = q["category"].get(qid, "")
    moves = "; ".join(
        f"{m} {_f(before.get(qid))} -> {_f(after.get(qid))}"
        for m, (before, after) in q["values"].items()
    )
    return f"{qid} ({labels.get(cat, cat)}): {moves}"


def _listed(items: Sequence[str], limit: int, rest: str) -> list[str]:
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit} more {rest}")
    return shown


def queries_section(found: Any) -> Section:
    """(3) The queries that changed: how many, W/T/L on the headline measures, the lost
    ones with their ids (and the won ones)."""
    q = query_changes(found)
    total = len(found.result["queries"])
    paragraphs = [
        f"{len(q['changed'])} of {total} queries differ from the baseline; "
        f"{len(q['reranked'])} return other ids or another order (the others changed "
        "scores or other recorded values only)."
    ]
    for measure in found.headline:
        fig = _figures(found, measure, "overall")
        if fig is not None:
            paragraphs.append(
                f"{measure} per query: this run wins {fig['wins']}, ties {fig['ties']}, "
                f"loses {fig['losses']} (W/T/L {fig['wins']}/{fig['ties']}/{fig['losses']})."
            )
    bullets: list[str] = []
    if found.headline:
        first = found.headline[0]
        lost = [f"lost: {_query_line(found, qid, q)}" for qid in q["lost"]]
        won = [f"won: {_query_line(found, qid, q)}" for qid in q["won"]]
        bullets += _listed(lost, QUERIES_LISTED, f"lost on {first}")
        bullets += _listed(won, QUERIES_LISTED // 2, f"won on {first}")
        if not lost and not won:
            paragraphs.append(f"No query's {first} changed.")
    return Section("queries", "Queries that changed", tuple(paragraphs), bullets=tuple(bullets))


def decision_section(found: Any) -> Section:
    """(4) The decision before -> after (`found.decisions`: each one's line), and each rule
    whose measured evidence changed."""
    before, after = found.baseline.get("decision") or {}, found.result.get("decision") or {}
    was, now = found.decisions
    bullets = [f"unchanged: {now}"] if was == now else [f"baseline: {was}", f"this run: {now}"]
    old_rules = {r.get("rule"): r for r in before.get("rules", []) if isinstance(r, Mapping)}
    # the rules' evidence compares like with like only when the runs pair query by query
    for rule in after.get("rules", []) if found.comparison is not None else []:
        if not isinstance(rule, Mapping):
            continue
        then = old_rules.get(rule.get("rule"), {})
        moved = [
            f"{key} {_number(then.get('measured', {}).get(key))} -> {_number(value)}"
            for key, value in (rule.get("measured") or {}).items()
            if then.get("measured", {}).get(key) != value
        ]
        if then.get("met") != rule.get("met"):
            moved.append(f"met {then.get('met')} -> {rule.get('met')}")
        if moved:
            bullets.append(
                f"rule {rule.get('rule')} ({rule.get('condition', '')}): {', '.join(moved)}"
            )
    return Section("decision", "Decision", bullets=tuple(bullets))


def _label(key: str) -> str:
    return key.replace("_", " ")


def _number(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def where_counts(differences: Sequence[str]) -> str:
    """The differing values by part of the result: `380 in queries (57 queries), 40 in
    metrics, ...`."""
    parts: Counter[str] = Counter()
    queries = set()
    for path in differences:
        head = path.removeprefix("$.").split(":", 1)[0]
        part = head.split(".", 1)[0].split("[", 1)[0]
        parts[part] += 1
        if part == "queries" and head.startswith("queries["):
            queries.add(head.split("]", 1)[0])
    return ", ".join(
        f"{n:,} in {part}" + (f" ({len(queries):,} queries)" if part == "queries" else "")
        for part, n in parts.most_common()
    )


def values_differ(n: int) -> str:
    """`1 value differs`, `454 values differ`."""
    return "1 value differs" if n == 1 else f"{n:,} values differ"


def count_section(found: Any) -> Section:
    """(5) The true count of differing values, by part, then the first `LISTED` of them."""
    n = len(found.differences)
    shown = found.differences[:LISTED]
    more = n - len(shown)
    return Section(
        "differences",
        values_differ(n),
        (
            f"{values_differ(n)} from {found.where}: {where_counts(found.differences)}."
            + (f" The first {len(shown)}:" if more else ""),
        ),
        bullets=tuple(shown),
        after=(f"... and {more:,} more (every one counted above).",) if more else (),
    )


def next_step(found: Any, markdown: Path | None = None) -> str:
    """(6) One next step: compare like with like, look at the losses, or update the
    baseline (`found.update`: how) and paste the block into the pull request."""
    if found.comparison is None:  # reached only when the result differs
        return (
            "Next: run with the baseline's dataset and top-k to see what changed query by "
            "query; if the new protocol is intended, write the baseline again and say why "
            "in the pull request."
        )
    if found.worse:
        return (
            "Next: a --fail-if-worse gate fired (the `worse:` lines name the measure): look at "
            "the lost queries above (report.html shows each one's ranking) before changing "
            "the baseline."
        )
    for measure in found.headline:
        fig = _figures(found, measure, "overall")
        if verdict(*_overall(found, measure), fig) == "worse (significant)":
            return (
                f"Next: this run is significantly worse on {measure}: look at the lost "
                "queries above (report.html shows each one's ranking) before changing the "
                "baseline."
            )
    update = found.update or f"write {found.where} again from this run"
    block = (
        "paste the block below"
        if markdown is not None
        else "paste the block `recallbench check-baseline --markdown FILE` writes"
    )
    return (
        f"Next: if the change is intended, {update}, commit it with the change and {block} "
        "into the pull request's description."
    )


def _overall(found: Any, measure: str) -> tuple[float | None, float | None]:
    return _aggregate(found.baseline, "overall", measure), _aggregate(
        found.result, "overall", measure
    )


def comparison_sections(found: Any) -> list[Section]:
    """(2) and (3): the category tables and the queries that changed; when the two cannot
    be paired query by query (another dataset or top-k), one section saying why."""
    if found.comparison is None:
        return [
            Section(
                "not-compared",
                "Not compared query by query",
                (f"{found.not_compared}: no category table, no test, no query list.",),
            )
        ]
    return [*measure_sections(found), queries_section(found)]


def terminal_sections(found: Any, markdown: Path | None = None) -> list[Section]:
    """The story check-baseline prints when the result differs, in order (1)-(6)."""
    return [
        configuration_section(found),
        *comparison_sections(found),
        decision_section(found),
        count_section(found),
        Section(
            "next",
            "Next step",
            (next_step(found, markdown),),
            after=(
                (f"The block for the pull request's description: {markdown}",)
                if markdown is not None
                else ()
            ),
        ),
    ]


def provenance_section(found: Any) -> Section:
    """Where the figures come from: recallbench's version, the system's version and source,
    the dataset's files with their sha256, the baseline, the statistics."""
    from recallbench import __version__

    env, doc = found.envelope, found.result
    provenance = env.get("provenance") or {}
    made_by = env.get("recallbench_version")
    bullets = [
        f"recallbench {made_by or __version__}"
        + (f" (checked with {__version__})" if made_by and made_by != __version__ else "")
    ]
    source = provenance.get("system_source")
    system = doc["system"]
    if source:
        from recallbench.core.source import describe_source

        bullets.append(f"system: {system.get('name')}, {describe_source(source)}")
    else:
        given = provenance.get("system") or {}  # a plugin's distribution, else the result's
        version = (
            f"{given['distribution']} {given['version']}"
            if given.get("distribution") not in (None, "recallbench")
            else ", ".join(f"{_label(k)} {v}" for k, v in system.items() if k.endswith("_version"))
        )
        bullets.append(f"system: {system.get('name')}" + (f", {version}" if version else ""))
    ds = doc["dataset"]
    bullets.append(
        f"dataset: {ds['dataset']} ({ds['identity'].get('label', '')}), "
        f"{doc['counts']['queries']} scored queries, top-{doc['run']['top_k']}"
    )
    bullets += [
        f"{f['name']}: sha256 {f['sha256']}, {f.get('size_bytes', 0):,} bytes"
        for f in ds["identity"]["files"]
    ]
    bullets.append(f"baseline: {found.where}")
    if found.comparison is not None:
        c = found.comparison
        bullets.append(
            "statistics: two-sided paired sign-flip test per measure and category (exact up "
            f"to {c['statistics']['exact_limit']} non-zero differences), p adjusted by "
            f"{correction_name(c)} over the overall rows and apart over the category rows, "
            f"95% bootstrap interval of the difference, MDE at 80% power; seed {c['seed']}, "
            f"{c['resamples']:,} resamples"
        )
    return Section("provenance", "Provenance", bullets=tuple(bullets), level=3)


def markdown_block(found: Any) -> str:
    """The block for a pull request's description: a heading and one line of what was
    compared, then the configuration change, the per-category tables with significance,
    the queries that changed, the decision before and after and the provenance (or, when
    the result matches, that it does)."""
    from recallbench.core.escape import markdown as md

    doc = found.result
    what = (
        f"{doc['system'].get('name')} on {doc['dataset']['dataset']} against the baseline "
        f"{found.where}"
    )
    out = ["## recallbench: this run against the baseline", ""]
    if found.matches:
        out += [
            md(f"{what}: the result matches; no ranking, score, measure or decision changed."),
            "",
        ]
        sections = [decision_section(found), provenance_section(found)]
    else:
        out += [md(f"{what}: {values_differ(len(found.differences))}."), ""]
        sections = [
            configuration_section(found),
            *comparison_sections(found),
            decision_section(found),
            provenance_section(found),
        ]
    out.append(to_markdown([_level(s, 3) for s in sections]))
    return "\n".join(out)


def _level(section: Section, level: int) -> Section:
    from dataclasses import replace

    return replace(section, level=max(section.level, level))
