"""Compare a run's result with a committed baseline, for any dataset.

A baseline (benchmarks/retrieval/baseline.json for the fixture suite) is the result document
(the `data` of results.json) of a run of the unchanged system. The result holds no
timestamps, timings, paths, host or version data (those live in the timing sidecars and the
envelope), so it is compared as it is: any difference in ordered ids, grades, scores,
measures, round-trip equivalence or decision is a mismatch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from recallbench.errors import GateFailed, RecallbenchError
from recallbench.report.result import RESULT_SCHEMA


def normalize(result: dict[str, Any]) -> dict[str, Any]:
    """The comparable form of a result: the result document itself (an envelope's data)."""
    return result["data"] if result.get("artifact") == "results" else result


def load_result(path: Path) -> dict[str, Any]:
    """Read a baseline (a result document) or a results.json envelope; return the document."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise RecallbenchError(f"{path}: not found") from None
    except orjson.JSONDecodeError as exc:
        raise RecallbenchError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(doc, dict) and doc.get("artifact") == "results":
        from recallbench.artifacts import check_envelope

        doc = check_envelope(doc, "results", str(path), "recallbench report")["data"]
    if not isinstance(doc, dict) or doc.get("schema") != RESULT_SCHEMA:
        raise RecallbenchError(
            f"{path}: not a {RESULT_SCHEMA} document (schema version 2); regenerate it "
            "with `make baseline` or `recallbench report`"
        )
    return doc


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int = 40) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                out.append(f"{path}.{key}: added")
            elif key not in b:
                out.append(f"{path}.{key}: removed")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}")


def differences(baseline: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Paths that differ between the normalized baseline and the normalized result."""
    baseline, result = normalize(baseline), normalize(result)  # normalize is idempotent
    source = lambda r: (r["dataset"]["dataset"], r["dataset"]["options"])  # noqa: E731
    if source(baseline) != source(result):
        (b_name, b_opts), (r_name, r_opts) = source(baseline), source(result)
        return [
            f"$.dataset: the baseline was made from dataset {b_name} {b_opts or ''}, "
            f"this result from {r_name} {r_opts or ''}".replace("  ", " ").strip()
        ]
    base_k, k = baseline["run"]["top_k"], result["run"]["top_k"]
    if base_k != k:  # every metric name differs; one line says why
        return [f"$.run.top_k: the baseline was made with top-k {base_k}, this run used {k}"]
    out: list[str] = []
    _diff(baseline, result, "$", out)
    return out


def category_table(baseline: dict[str, Any], result: dict[str, Any]) -> str:
    """Category-level before/after values for every metric, as aligned text."""
    baseline, result = normalize(baseline), normalize(result)
    if baseline["run"]["top_k"] != result["run"]["top_k"]:
        return "  (not comparable: different top-k)"
    names = [m["name"] for m in result["run"]["measures"]]
    rows = []
    for cat in ["overall", *result["metrics"]["per_category"]]:
        before = (
            baseline["metrics"]["overall"]
            if cat == "overall"
            else baseline["metrics"]["per_category"].get(cat, {})
        )
        after = (
            result["metrics"]["overall"]
            if cat == "overall"
            else result["metrics"]["per_category"][cat]
        )
        for n in names:
            b = (before.get(n) or {}).get("value")
            a = (after.get(n) or {}).get("value")
            if a != b:
                rows.append(f"  {cat:<32} {n:<26} {_num(b):>8} -> {_num(a):>8}")
    return "\n".join(rows) if rows else "  (no metric changed; ids, scores or other fields did)"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def gate(baseline_path: Path, result: dict[str, Any]) -> None:
    """Raise GateFailed (exit 3) when `result` differs from the baseline at `baseline_path`,
    after printing the category-level before/after values and the differing paths to stderr."""
    base = load_result(baseline_path)
    diffs = differences(base, result)
    if not diffs:
        return
    print("category-level before -> after:\n" + category_table(base, result), file=sys.stderr)
    print("differences:\n" + "\n".join(f"  {d}" for d in diffs), file=sys.stderr)
    raise GateFailed(
        f"result differs from {baseline_path} in {len(diffs)} place(s); if intended, "
        "run `make baseline` and explain the change"
    )
