"""The figures of a result as the reports write them, shared by the report's sections
(`report.run_sections`), compare and the baseline: `value_text`, `cell_text`,
`format_setting`, `column_groups`, `rate_rows`, `worst_queries`, `search_depth_note`,
`is_generated`. report.md itself is `run_sections.render_markdown`.

Everything a figure needs (its metric name, its denominator) comes from the result. Nothing
here escapes: every string reaches an output through the section renderers
(`report.sections`), which apply `recallbench.core.escape`'s rule for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.metrics.measures import select, value_of

#: a metric table holds at most this many measure columns (wider ones are split by cutoff
#: k), so it fits a 1280 px window
MAX_COLUMNS = 5


def value_text(x: float | None, pct: bool = False) -> str:
    """A figure as the reports write it: `0.433`, `100.0%` (`pct`), `n/a` for None."""
    if x is None:
        return "n/a"
    return f"{x * 100:.1f}%" if pct else f"{x:.3f}"


def cell_text(
    cell: Mapping[str, Any] | None, measure: Mapping[str, Any], interval: Any = None
) -> str:
    """One aggregate cell as table text: the value, its 95% interval when given
    (`result.system_intervals`) and the counts behind it."""
    if not cell or cell["value"] is None:
        return "n/a"
    if measure["pooled"]:
        return f"{value_text(cell['value'], pct=True)} ({cell['numerator']}/{cell['denominator']})"
    value = value_text(cell["value"])
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
