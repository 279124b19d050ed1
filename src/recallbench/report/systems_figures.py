"""Every system's figures on one dataset, as a Markdown table, from one `recallbench compare`
output (its JSON): the table of `docs/stores.md`, checked by `tests/systems/test_stores_figures.py`.

    recallbench compare --system hotmem --system bm25 ... --output compare.json
    python -m recallbench.report.systems_figures compare.json

Each figure is a mean over the queries that have gold (`n` in the header; queries without
gold, the fixtures' no-answer category, are left out as `compare` does), at the run's top-k.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from recallbench.metrics.measures import RELEVANT_GRADE, select

#: the columns, as (stem, k): recall@1, recall@5, mrr@5, ndcg@5 at the primary level
METRICS = (("recall", 1), ("recall", 5), ("mrr", 5), ("ndcg", 5))


def _metric_names(doc: Mapping[str, Any]) -> list[str]:
    first = list(doc["comparisons"][0]["metrics"])
    chosen = [
        name
        for stem, k in METRICS
        for name in select(first, stem=stem, k=k, prefix="", rel=RELEVANT_GRADE)
    ]
    return chosen or sorted(first)


def figures_table(doc: Mapping[str, Any]) -> str:
    """One row per system of the compare document (its order), one column per metric."""
    doc = doc.get("data", doc)
    comparisons = doc["comparisons"]
    if not comparisons:
        raise ValueError("the compare output holds no comparison (give two systems or more)")
    names = _metric_names(doc)
    overall = comparisons[0]["metrics"][names[0]]["overall"]
    queries = overall["queries"]
    rows: list[tuple[str, dict[str, float]]] = [
        (
            comparisons[0]["reference"],
            {m: comparisons[0]["metrics"][m]["overall"]["reference_mean"] for m in names},
        )
    ]
    for c in comparisons:
        rows.append(
            (c["challenger"], {m: c["metrics"][m]["overall"]["challenger_mean"] for m in names})
        )
    header = " | ".join(f"{m} (mean, n = {queries})" for m in names)
    lines = [
        f"| system | {header} |",
        "|---|" + "---|" * len(names),
    ]
    for label, values in rows:
        cells = " | ".join(f"{values[m]:.3f}" for m in names)
        lines.append(f"| `{label}` | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m recallbench.report.systems_figures COMPARE.json", file=sys.stderr)
        return 2
    sys.stdout.write(figures_table(orjson.loads(Path(argv[0]).read_bytes())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
