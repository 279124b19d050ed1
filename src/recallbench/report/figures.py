"""How the reports write a figure: `value_text` (a value; also the terminal summary and the
plots), `cell_text` (an aggregate cell with its interval and counts) and `format_setting` (a
configuration value; also compare and `recallbench baseline`). The report's sections are
`report.run_sections`.
Everything a figure needs (its metric name, its denominator) comes from the result. Nothing
here escapes: every string reaches an output through the section renderers
(`report.sections`), which apply `recallbench.core.escape`'s rule for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
