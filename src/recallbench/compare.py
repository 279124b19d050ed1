"""Systems side by side: paired statistics over per-query metrics of two or more results.

Every result must come from the same dataset (same files' sha256, same reader options) and
the same top-k, so a query of one system pairs with the same query of the other (a fixture
query, a LongMemEval question, a LoCoMo question). For each challenger against the
reference (the first result) and each per-query metric:

- mean of each system over the queries the metric applies to, and the mean difference
  d = mean(challenger - reference);
- per-query wins / ties / losses (challenger above / equal to / below the reference);
- a paired randomization (sign-flip) test of mean(d) = 0, two-sided: exact when there are at
  most 2**14 sign patterns, else `resamples` random ones (scipy.stats.permutation_test);
- a paired bootstrap 95% percentile confidence interval of mean(d) (scipy.stats.bootstrap).
Randomness comes from one seeded numpy Generator, so the output is reproducible.
No correction for multiple comparisons is applied; the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from recallbench.errors import RecallbenchError
from recallbench.ids import md_cell
from recallbench.report.markdown import format_setting
from recallbench.report.result import mean_measures, per_query_values

COMPARE_SCHEMA = "recallbench.comparison"
COMPARE_SCHEMA_VERSION = 1
EXACT_LIMIT = 2**14


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(y - x, axis=axis)


def paired_stats(
    reference: list[float], challenger: list[float], *, resamples: int, rng: np.random.Generator
) -> dict[str, Any]:
    """Means, mean difference, W/T/L, sign-flip p-value and bootstrap CI for paired values."""
    a, b = np.asarray(reference, dtype=float), np.asarray(challenger, dtype=float)
    n = len(a)
    d = b - a
    out: dict[str, Any] = {
        "queries": n,
        "reference_mean": float(a.mean()) if n else None,
        "challenger_mean": float(b.mean()) if n else None,
        "mean_difference": float(d.mean()) if n else None,
        "wins": int((d > 0).sum()),
        "ties": int((d == 0).sum()),
        "losses": int((d < 0).sum()),
        "p_value": None,
        "ci95": None,
        "test": None,
    }
    if n < 2:
        return out
    if not d.any():  # identical on every query: nothing to test, nothing to resample
        out.update(p_value=1.0, ci95=[0.0, 0.0], test="identical on every query")
        return out
    exact = 2**n <= EXACT_LIMIT
    perm = stats.permutation_test(
        (a, b),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=EXACT_LIMIT if exact else resamples,
        alternative="two-sided",
        random_state=rng,
    )
    boot = stats.bootstrap(
        (a, b),
        _mean_diff,
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=0.95,
        method="percentile",
        random_state=rng,
    )
    out.update(
        p_value=float(perm.pvalue),
        ci95=[float(boot.confidence_interval.low), float(boot.confidence_interval.high)],
        test="exact sign-flip" if exact else f"sign-flip, {resamples} random resamples",
    )
    return out


def run_systems(
    dataset: str,
    paths: Mapping[str, Path],
    systems: Sequence[str],
    *,
    options: Mapping[str, Any] | None = None,
    top_k: int = 5,
    parent: Path | None = None,
    say: Callable[[str], Any] | None = None,
    on_run: Callable[[Any], Any] | None = None,
) -> list[dict[str, Any]]:
    """Each system's result document on the dataset, in order, each run in a temporary
    directory (under `parent` when given) that is removed afterwards; `on_run` sees each
    `pipeline.Run` while its directory (and the validated spool in it) is still there."""
    import tempfile

    from recallbench.pipeline import run_pipeline

    results = []
    for name in systems:
        if say is not None:
            say(f"running {name} ...")
        with tempfile.TemporaryDirectory(prefix="compare-", dir=parent) as work:
            run = run_pipeline(
                dataset, paths, Path(work), options=options, system=name, top_k=top_k
            )
            if on_run is not None:
                on_run(run)
            results.append(run.result)
    return results


def _check_comparable(results: list[dict[str, Any]], labels: list[str]) -> None:
    ref = results[0]

    def source(r: dict[str, Any]) -> tuple:
        d = r["dataset"]
        return (d["dataset"], [f["sha256"] for f in d["identity"]["files"]], d["options"])

    for label, r in zip(labels[1:], results[1:], strict=True):
        if source(r) != source(ref):
            raise RecallbenchError(
                f"{label}: made from another dataset, file or reader options than {labels[0]}; "
                "compare like with like"
            )
        if r["run"]["top_k"] != ref["run"]["top_k"]:
            raise RecallbenchError(
                f"{label}: top-k {r['run']['top_k']} differs from {labels[0]}'s {ref['run']['top_k']}"
            )


def compare_results(
    results: list[dict[str, Any]], labels: list[str], *, seed: int = 0, resamples: int = 10_000
) -> dict[str, Any]:
    """The comparison document: every challenger against the first result (the reference)."""
    if len(results) < 2:
        raise RecallbenchError("compare needs at least two results")
    if len(set(labels)) != len(labels):
        raise RecallbenchError(f"labels must be distinct, got {labels}")
    _check_comparable(results, labels)
    rng = np.random.default_rng(seed)
    ref = results[0]
    k = ref["run"]["top_k"]
    metrics = mean_measures(ref)
    pooled = [m["name"] for m in ref["run"]["measures"] if m["pooled"]]
    categories = ref["dataset"]["categories"]
    category_of = {q["query_id"]: q["category"] for q in ref["queries"]}
    pairs = []
    for label, challenger in zip(labels[1:], results[1:], strict=True):
        per_metric = {}
        for metric in metrics:
            a_all, b_all = per_query_values(ref, metric), per_query_values(challenger, metric)
            ids = [q for q in a_all if a_all[q] is not None and b_all.get(q) is not None]
            overall = paired_stats(
                [a_all[q] for q in ids], [b_all[q] for q in ids], resamples=resamples, rng=rng
            )
            by_category = {}
            for cat in categories:
                cat_ids = [q for q in ids if category_of[q] == cat]
                a, b = np.array([a_all[q] for q in cat_ids]), np.array([b_all[q] for q in cat_ids])
                d = b - a
                by_category[cat] = {
                    "queries": len(cat_ids),
                    "reference_mean": float(a.mean()) if cat_ids else None,
                    "challenger_mean": float(b.mean()) if cat_ids else None,
                    "wins": int((d > 0).sum()),
                    "ties": int((d == 0).sum()),
                    "losses": int((d < 0).sum()),
                }
            per_metric[metric] = {"overall": overall, "per_category": by_category}
        rates = {
            name: {
                "reference": ref["metrics"]["overall"][name],
                "challenger": challenger["metrics"]["overall"][name],
            }
            for name in pooled
        }
        pairs.append(
            {"reference": labels[0], "challenger": label, "metrics": per_metric, "rates": rates}
        )
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "systems": [{"label": lab, **r["system"]} for lab, r in zip(labels, results, strict=True)],
        "dataset": {
            "name": ref["dataset"]["dataset"],
            "label": ref["dataset"]["identity"]["label"],
            "files": ref["dataset"]["identity"]["files"],
            "options": ref["dataset"]["options"],
            "queries": ref["counts"]["queries"],
            "category_labels": ref["dataset"]["category_labels"],
        },
        "top_k": k,
        "seed": seed,
        "resamples": resamples,
        "comparisons": pairs,
    }


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def headline(doc: dict[str, Any]) -> str:
    """One line per challenger: nDCG@k (else recall@k, else the first measure): means,
    difference, CI, p and W/T/L."""
    lines = []
    k = doc["top_k"]
    for pair in doc["comparisons"]:
        names = list(pair["metrics"])
        preferred = [n for n in (f"ndcg@{k}", f"recall@{k}") if n in names]
        metric = (preferred or names)[0]
        o = pair["metrics"][metric]["overall"]
        ci = "n/a" if o["ci95"] is None else f"[{o['ci95'][0]:+.3f}, {o['ci95'][1]:+.3f}]"
        p = "n/a" if o["p_value"] is None else f"{o['p_value']:.4f}"
        lines.append(
            f"{pair['challenger']} vs {pair['reference']}: {metric} {_f(o['reference_mean'])} -> "
            f"{_f(o['challenger_mean'])} ({_f(o['mean_difference'], signed=True)}, 95% CI {ci}, "
            f"p {p}, W/T/L {o['wins']}/{o['ties']}/{o['losses']}, n={o['queries']})"
        )
    return "\n".join(lines)


def render_markdown(
    doc: dict[str, Any], headline_only: bool = False, plots: Sequence[tuple[str, str]] = ()
) -> str:
    """The comparison as Markdown, from the document alone (`headline_only`: one line per
    challenger, for the terminal); `plots` are (path relative to compare.md, caption) of the
    images it links to (the forest plot, the bars)."""
    if headline_only:
        return headline(doc)
    files = ", ".join(md_cell(f["name"]) for f in doc["dataset"]["files"])
    out = [
        "# Systems side by side",
        "",
        f"Dataset: {md_cell(doc['dataset']['name'])} ({files}; {md_cell(doc['dataset']['label'])}), "
        f"{doc['dataset']['queries']} scored queries, top-{doc['top_k']}. "
        f"Seed {doc['seed']}, {doc['resamples']} resamples.",
        "",
        "| label | system | configuration |",
        "|---|---|---|",
    ]
    out += [
        f"| {md_cell(s['label'])} | {md_cell(s['name'])} | "
        + "; ".join(
            f"{k.replace('_', ' ')} {format_setting(v)}"
            for k, v in s.items()
            if k not in ("label", "name") and not k.endswith("function")
        )
        + " |"
        for s in doc["systems"]
    ]
    if plots:
        out += ["", *(line for path, text in plots for line in (f"![{text}]({path})", ""))]
    for pair in doc["comparisons"]:
        ref, ch = pair["reference"], pair["challenger"]
        out += [
            "",
            f"## {ch} against {ref}",
            "",
            f"| metric | n | {ref} | {ch} | difference | 95% CI (bootstrap) | p (sign-flip) | wins / ties / losses |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for metric, m in pair["metrics"].items():
            o = m["overall"]
            ci = "n/a" if o["ci95"] is None else f"[{o['ci95'][0]:+.3f}, {o['ci95'][1]:+.3f}]"
            p = "n/a" if o["p_value"] is None else f"{o['p_value']:.4f}"
            out.append(
                f"| {metric} | {o['queries']} | {_f(o['reference_mean'])} | {_f(o['challenger_mean'])} "
                f"| {_f(o['mean_difference'], signed=True)} | {ci} | {p} | {o['wins']} / {o['ties']} / {o['losses']} |"
            )
        out += ["", "Per category (means; wins / ties / losses of the challenger):", ""]
        metrics = list(pair["metrics"])
        out.append("| category | " + " | ".join(metrics) + " |")
        out.append("|---|" + "---|" * len(metrics))
        for cat in pair["metrics"][metrics[0]]["per_category"]:
            cells = []
            for metric in metrics:
                c = pair["metrics"][metric]["per_category"][cat]
                cells.append(
                    "n/a"
                    if not c["queries"]
                    else f"{_f(c['reference_mean'])} → {_f(c['challenger_mean'])} ({c['wins']}/{c['ties']}/{c['losses']})"
                )
            label = doc["dataset"].get("category_labels", {}).get(cat, cat)
            out.append(f"| {md_cell(label)} | " + " | ".join(cells) + " |")
        out += [
            "",
            "Pooled slot rates (no test: they are counts over slots, not per-query values):",
            "",
        ]
        for name, r in pair["rates"].items():
            a, b = r["reference"], r["challenger"]
            out.append(
                f"- {name}: {ref} {a['numerator']}/{a['denominator']}, {ch} {b['numerator']}/{b['denominator']}"
            )
    out += [
        "",
        "## Reading this",
        "",
        "- p is the two-sided paired sign-flip (randomization) test of a zero mean difference; "
        "the interval is a paired bootstrap percentile interval of the mean difference.",
        "- No correction for multiple comparisons: with several metrics, one small p can be chance.",
        "- A few dozen queries detect only large differences: a large p is not evidence that two "
        "systems are equal, and per-category rows (5-8 queries) carry no test at all.",
        "- On the committed fixture suite (small, synthetic, written by us) a difference is a "
        "reason to look, not a ranking of systems.",
        "",
    ]
    return "\n".join(out)
