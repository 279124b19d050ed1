"""What a command prints on the terminal about a result: the headline table, the line naming
the files written and the closing "N queries scored in X s" line (or all of it as one JSON
object). `recallbench report`, `run`, `compare` and `scripts/retrieval_eval.py` print these
same lines.

Every string taken from data (category labels, system names, paths) goes through
`recallbench.core.escape.terminal` here, where it meets the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.core.escape import path_text, terminal
from recallbench.metrics.measures import RELEVANT_GRADE, select

#: the headline table's columns at most
HEADLINE_COLUMNS = 6


def headline_measures(result: Mapping[str, Any]) -> list[str]:
    """The table's columns: the primary level's recall at every cutoff the run scored
    (recall@1, @5, @10 on LongMemEval), then its other mean measures at the run's top-k,
    then the rest, at most `HEADLINE_COLUMNS` (pooled slot rates are not means and are left
    out). The primary level is the first level with a measure scored (a preset may score
    turn measures only)."""
    k = result["run"]["top_k"]
    scored = {m["level"] for m in result["run"]["measures"]}
    levels = [level["name"] for level in result["dataset"]["levels"]]
    primary = next((name for name in levels if name in scored), levels[0])
    measures = [m for m in result["run"]["measures"] if m["level"] == primary and not m["pooled"]]
    recalls = select(measures, stem="recall", prefix="", rel=RELEVANT_GRADE)
    names = sorted(recalls, key=lambda n: next(m["k"] for m in measures if m["name"] == n))
    names += [m["name"] for m in measures if m["k"] == k and m["name"] not in names]
    names += [m["name"] for m in measures if m["name"] not in names]  # e.g. --measure's
    return names[:HEADLINE_COLUMNS]


def headline_rows(
    result: Mapping[str, Any],
) -> list[tuple[str | None, str, int, dict[str, float | None]]]:
    """(category or None for the overall row, label, n, {measure: value}) for the overall
    row and each category, raw (unescaped)."""
    names = headline_measures(result)
    labels = result["dataset"]["category_labels"]
    rows = [(None, "overall", result["counts"]["queries"], result["metrics"]["overall"])]
    rows += [
        (
            c,
            labels.get(c, c),
            result["counts"]["per_category"].get(c, {}).get("scored", 0),
            result["metrics"]["per_category"][c],
        )
        for c in result["dataset"]["categories"]
    ]
    return [
        (category, label, n, {name: cells[name]["value"] for name in names})
        for category, label, n, cells in rows
    ]


def headline_intervals(result: Mapping[str, Any]) -> dict[str | None, dict[str, Any]]:
    """The headline measures' 95% intervals, overall (None) and per category
    (`result.system_intervals`)."""
    from recallbench.report.result import system_intervals

    return system_intervals(result, headline_measures(result))


def summary_table(result: Mapping[str, Any]) -> str:
    """A compact table of the primary level's headline measures per category, each mean
    with its 95% interval (`result.system_intervals`), with the number of scored queries of each row (`n`). Labels are
    escaped for the terminal, so a label cannot move the cursor or break the table's
    alignment."""
    from recallbench.report.result import interval_text

    names = [f"{terminal(n)} [95% CI]" for n in headline_measures(result)]
    intervals = headline_intervals(result)
    rows = [
        (terminal(label), n, [interval_text(intervals[category][m]) for m in values])
        for category, label, n, values in headline_rows(result)
    ]
    width = max(12, *(len(label) for label, _, _ in rows))
    columns = [  # a long name or interval widens its column
        max(12, len(name), *(len(cells[i]) for _, _, cells in rows)) for i, name in enumerate(names)
    ]
    lines = [
        f"{'category':<{width}}  {'n':>5}  "
        + "  ".join(f"{n:>{w}}" for n, w in zip(names, columns, strict=True))
    ]
    for label, n, cells in rows:
        lines.append(
            f"{label:<{width}}  {n:>5}  "
            + "  ".join(f"{c:>{w}}" for c, w in zip(cells, columns, strict=True))
        )
    return "\n".join(lines)


def scored_queries(result: Mapping[str, Any]) -> tuple[int, int, str]:
    """(scored queries, queries read, the primary level's name): the closing line's figures."""
    counts = result["counts"]
    return counts["queries"], counts["queries_raw"], result["dataset"]["levels"][0]["name"]


def closing_line(results: Sequence[Mapping[str, Any]], seconds: float, *, ran: bool = True) -> str:
    """ "N queries scored in X s": N the primary level's scored queries (of one result, or
    of each of several on one dataset), X the command's wall seconds. `ran`: False when the
    command only read saved results (nothing was scored by it)."""
    n, raw, level = scored_queries(results[0])
    dropped = f", {raw - n} of {raw} dropped before scoring" if raw != n else ""
    where = f"{terminal(level)} level{dropped}"
    if not ran:
        return (
            f"{n} queries compared across {len(results)} saved results in {seconds:.1f} s ({where})"
        )
    each = f" by each of {len(results)} systems" if len(results) > 1 else ""
    return f"{n} queries scored{each} in {seconds:.1f} s ({where})"


def files_line(files: Sequence[Path | str], note: str | None = None) -> str:
    """One line naming every file written, then `note` (paths escaped: a path is data)."""
    if not files:
        return "wrote no file: give --output, --report or --build-dir to keep the result"
    return (
        "wrote " + ", ".join(terminal(f) for f in files) + (f"; {terminal(note)}" if note else "")
    )


def closing_json(
    result: Mapping[str, Any],
    decision: Mapping[str, Any] | None,
    files: Sequence[Path | str],
    seconds: float,
    headline: str | None = None,
) -> dict[str, Any]:
    """The closing summary as one JSON-ready object (`--json`): the dataset, the system, the
    scored queries and their level, the headline figures per row (overall, then each
    category, with n), the files written, the decision and the wall seconds."""
    n, raw, level = scored_queries(result)
    intervals = headline_intervals(result)
    return {
        "dataset": result["dataset"]["dataset"],
        "system": result["system"]["name"],
        "level": level,
        "queries_scored": n,
        "queries_read": raw,
        "seconds": round(seconds, 3),
        "measures": headline_measures(result),
        "figures": [
            {
                "category": category,
                "label": label,
                "n": count,
                "values": values,
                "ci95": {
                    name: None if i is None or i.low is None else [i.low, i.high]
                    for name, i in intervals[category].items()
                },
            }
            for category, label, count, values in headline_rows(result)
        ],
        "files": [path_text(f) for f in files],  # valid text, even for a non-UTF-8 path
        "decision": None
        if decision is None
        else {
            "rule": decision["rule"],
            "action": decision["action"],
            "recommendation": decision["recommendation"],
            "headline": headline,
        },
    }


def measured_line(result: Mapping[str, Any]) -> str:
    """The report's conclusion when no rule applies: the measured headline figures (the
    overall row of the table, with its level and n) and the round trip, not advice. Plain
    text; its callers escape it for their output."""
    from recallbench.report.figures import value_text

    n, _, level = scored_queries(result)
    overall = next(values for category, _, _, values in headline_rows(result) if category is None)
    figures = ", ".join(f"{name} {value_text(v)}" for name, v in overall.items())
    rt = result["roundtrip"]
    trip = (
        f"round trip {rt['equivalence']['numerator']}/{rt['equivalence']['denominator']} "
        "queries identical"
        if rt["available"]
        else f"round trip {rt['reason']}"
    )
    return f"Measured ({level} level, {n} scored queries): {figures}; {trip}."
