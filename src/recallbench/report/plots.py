"""Plots of a result document and of a comparison document, as deterministic SVG bytes.

Pure functions: a document in, SVG bytes out (nothing is read or written here, except by the
`python -m recallbench.report.plots` entry point that regenerates the docs' baseline plots):

- `category_bars`: the headline measures (primary level, the run's top-k, means) per
  category, each bar annotated with its value and the queries behind it (n);
- `recall_at_k`: recall@k against k = 1 .. top-k per category at the primary level: the
  scored recall@k cells at their ks, the same `measures.Recall` value and aggregation over each
  query's ranking and gold in the result between them (the scores hold only their ks); a
  second level (LongMemEval's or LoCoMo's turns) is drawn at the ks it was scored at, since
  the result keeps per-query rankings of the primary level only;
- `compare_forest`: each challenger's paired mean difference against the reference per
  metric, overall with its 95% bootstrap interval and a star where the sign-flip p < 0.05,
  per category as a point (the comparison tests only the overall rows);
- `compare_bars`: each system's overall means side by side.

Determinism: every figure is drawn from matplotlib's default style plus `STYLE`, so no
matplotlibrc changes it; text is measured with the DejaVu Sans bundled with matplotlib and
kept as text (svg.fonttype none); the SVG hash salt is fixed and no date is written. The same
document gives byte-identical files with the same matplotlib version; another version may
lay out or serialize differently (the SVG's creator line names the version), which is why
results.json lists the plots beside its fingerprinted data, not in it.

Text: every figure is drawn with mathtext off (``text.parse_math`` False in `STYLE`, for
every text object: titles, labels, legends, tick labels, annotations), so a ``$`` in a
category label, a system or a directory name is a dollar sign ("$5 or $10" is drawn as
written, "$x$" is not math and cannot raise a mathtext error); every string from a document
passes through `recallbench.core.escape.plot_text` (control characters and line breaks as
``U+XXXX``) where it is drawn.

matplotlib is imported with MPLCONFIGDIR pointed at `BUILD/.cache/matplotlib` when the
command has a build directory (`recallbench.report.cache_matplotlib_in`), else at a
temporary directory (unless MPLCONFIGDIR is set or matplotlib is already imported), so it
neither reads the user's matplotlibrc nor leaves a font cache in the home directory:
recallbench writes only where it is told to. The font list is the only file matplotlib
keeps there; reusing it saves rebuilding it in every process that draws (what that costs:
docs/performance.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _import_matplotlib() -> None:
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    from recallbench.report import matplotlib_cache

    with contextlib.ExitStack() as stack:
        where = matplotlib_cache()
        if where is not None:
            from recallbench.builddir.paths import make_dirs
            from recallbench.core.errors import RecallbenchError

            try:
                make_dirs(where)  # never through a link (checked by `claimed_build_dir`)
            except (OSError, RecallbenchError):
                where = None  # not writable: a temporary directory will do
        if where is None:
            where = stack.enter_context(tempfile.TemporaryDirectory(prefix="recallbench-mpl-"))
        os.environ["MPLCONFIGDIR"] = str(where)
        try:
            import matplotlib.font_manager  # noqa: F401  (reads or builds its font list there)
        finally:
            os.environ.pop("MPLCONFIGDIR", None)


_import_matplotlib()

import matplotlib.style  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from recallbench.core.escape import plot_text as pt  # noqa: E402
from recallbench.metrics.measures import RELEVANT_GRADE, Recall, select  # noqa: E402
from recallbench.report import COMPARE_PLOTS_DIR, REPORT_PLOTS_DIR  # noqa: E402, F401
from recallbench.report.figures import value_text  # noqa: E402

#: file name -> the Markdown image text of each plot
CAPTIONS = {
    "category-bars.svg": "Headline measures per category (value and queries n per bar)",
    "recall-at-k.svg": "Recall@k against k per category",
    "forest.svg": "Paired differences against the reference with 95% bootstrap intervals",
    "bars.svg": "Overall means of each system side by side",
}

STYLE: dict[str, Any] = {
    "svg.hashsalt": "recallbench",
    "svg.fonttype": "none",
    "svg.id": None,
    "text.parse_math": False,  # a "$" from data is a dollar sign, never mathtext
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.fontsize": 8,
}
#: Okabe-Ito, colour-blind safe (yellow last: it is hard to see on white)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999933", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.style.context(["default", STYLE]):
        yield


def _svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def headline_measures(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The primary level's mean measures at the run's top-k (or, for a result made before
    every dataset scored at its top-k, the largest k scored below it)."""
    primary = result["dataset"]["levels"][0]["name"]
    means = [m for m in result["run"]["measures"] if m["level"] == primary and not m["pooled"]]
    if not means:
        return []
    top_k = result["run"]["top_k"]
    k = max([m["k"] for m in means if m["k"] <= top_k] or [m["k"] for m in means])
    return [m for m in means if m["k"] == k]


def _grouped_hbars(
    ax: Any,
    groups: Sequence[str],
    series: Sequence[str],
    values: Sequence[Sequence[float | None]],
    notes: Sequence[Sequence[str]],
) -> None:
    """Horizontal bars: one group per row (top to bottom), one bar per series, each bar
    annotated with its note; a missing value is a note at zero."""
    n = len(series)
    height = 0.84 / n
    for j, name in enumerate(series):
        ys = [i + (j - (n - 1) / 2) * height for i in range(len(groups))]
        vals = [row[j] for row in values]
        ax.barh(ys, [v or 0.0 for v in vals], height=height * 0.92, color=_color(j), label=pt(name))
        for y, v, row in zip(ys, vals, notes, strict=True):
            ax.text((v or 0.0) + 0.01, y, row[j], va="center", ha="left", fontsize=6.5)
    ax.set_yticks(range(len(groups)), [pt(g) for g in groups])
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlim(0, 1.3)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.grid(axis="x")
    ax.tick_params(axis="y", length=0)


def category_bars(result: Mapping[str, Any]) -> bytes:
    """The headline measures per category (overall first), with each bar's n."""
    measures = headline_measures(result)
    labels = result["dataset"]["category_labels"]
    cats = result["dataset"]["categories"]
    rows = [("overall", result["metrics"]["overall"])] + [
        (labels.get(c, c), result["metrics"]["per_category"][c]) for c in cats
    ]
    names = [m["name"] for m in measures]
    values = [[cells[n]["value"] for n in names] for _, cells in rows]
    notes = [
        [
            "n/a"
            if cells[n]["value"] is None
            else f"{cells[n]['value']:.3f} (n={cells[n]['denominator']})"
            for n in names
        ]
        for _, cells in rows
    ]
    level = result["dataset"]["levels"][0]["name"]
    k = measures[0]["k"] if measures else result["run"]["top_k"]
    with _style():
        height = 1.0 + len(rows) * (0.17 * max(1, len(names)) + 0.2)
        fig = Figure(figsize=(7.0, height), layout="constrained")
        ax = fig.add_subplot()
        if names:
            _grouped_hbars(ax, [r[0] for r in rows], names, values, notes)
            ax.get_yticklabels()[0].set_fontweight("bold")
            fig.legend(loc="outside lower center", ncols=min(len(names), 5))
        ax.set_xlabel(
            pt(f"mean over the queries each measure applies to (n); {level} level, k={k}")
        )
        fig.suptitle(
            pt(
                f"{result['system']['name']} on {result['dataset']['dataset']}: "
                "headline measures per category"
            ),
            fontsize=9.5,
        )
        return _svg(fig)


#: up to this top-k the primary-level curve runs to top-k; a deeper run (a whole-store
#: search, e.g. the longmemeval-paper preset at turn unit) stops at its longest ranking
PLOT_DEPTH = 100


def plot_depth(result: Mapping[str, Any]) -> int:
    """The last k of the primary-level curve: top-k, or for a run deeper than `PLOT_DEPTH`
    the longest returned ranking (at least `PLOT_DEPTH`; beyond it every curve is flat)."""
    top_k = result["run"]["top_k"]
    if top_k <= PLOT_DEPTH:
        return top_k
    longest = max((len(q["returned"]) for q in result["queries"]), default=0)
    return min(top_k, max(PLOT_DEPTH, longest))


def recall_curves(result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Primary-level recall@k for k = 1 .. `plot_depth` (top-k): {"overall" | category:
    {"n": queries with a relevant unit, "recall": [mean at k=1, ...]}} (recall is None for a
    row without such queries). Where the result holds the scored recall@k cell, that is the
    point; between the scored ks the point is the same measure value (`measures.Recall`) and
    its own aggregation over each query's ranking, as `score` computes a cell."""
    top_k = plot_depth(result)
    primary = result["dataset"]["levels"][0]["name"]
    recalls = set(
        select(
            result["run"]["measures"], stem="recall", level=primary, prefix="", rel=RELEVANT_GRADE
        )
    )
    scored = {m["k"]: m["name"] for m in result["run"]["measures"] if m["name"] in recalls}
    rows: dict[str, list[dict[str, Any]]] = {"overall": list(result["queries"])}
    rows.update({c: [] for c in result["dataset"]["categories"]})
    for q in result["queries"]:
        rows.setdefault(q["category"], []).append(q)
    out = {}
    for row, queries in rows.items():
        cells = (
            result["metrics"]["overall"]
            if row == "overall"
            else result["metrics"]["per_category"].get(row, {})
        )
        points: list[float | None] = []
        n = 0
        for k in range(1, top_k + 1):
            if k in scored and scored[k] in cells:
                cell = cells[scored[k]]
            else:
                measure = Recall(primary, k)
                cell = measure.aggregate(
                    _per_query(measure(_ranking(q), q["expected"])) for q in queries
                )
            n = cell["queries"]
            points.append(cell["value"])
        out[row] = {"n": n, "recall": points if n else None}
    return out


def _ranking(q: Mapping[str, Any]) -> list[str]:
    """A result query's ranking at the primary level (the ids it returned, best first)."""
    return [h["id"] for h in q["returned"]]


def _per_query(value: Any) -> Any:
    return value.to_dict() if hasattr(value, "to_dict") else value


def _other_levels(result: Mapping[str, Any]) -> list[tuple[str, list[int], dict[int, str]]]:
    """(level, scored ks, {k: recall measure name}) of every non-primary level with recall
    measures (selected by their fields: stem recall, the level, the default threshold)."""
    out = []
    for level in result["dataset"]["levels"][1:]:
        names = select(
            result["run"]["measures"],
            stem="recall",
            level=level["name"],
            prefix=level["prefix"],
            rel=RELEVANT_GRADE,
        )
        by_k = {m["k"]: m["name"] for m in result["run"]["measures"] if m["name"] in names}
        if by_k:
            out.append((level["name"], sorted(by_k), by_k))
    return out


def recall_at_k(result: Mapping[str, Any]) -> bytes:
    """Recall@k against k for each category (and overall) at the primary level; other levels
    (turns) in a second panel at the ks they were scored at."""
    top_k = plot_depth(result)
    labels = result["dataset"]["category_labels"]
    curves = recall_curves(result)
    primary = result["dataset"]["levels"][0]["name"]
    others = _other_levels(result)
    cats = [c for c in result["dataset"]["categories"] if curves[c]["n"]]
    skipped = [labels.get(c, c) for c in result["dataset"]["categories"] if not curves[c]["n"]]
    ks = list(range(1, top_k + 1))
    with _style():
        fig = Figure(figsize=(7.0 if not others else 9.0, 4.2), layout="constrained")
        axes = fig.subplots(1, 1 + len(others), sharey=True, squeeze=False)[0]
        ax = axes[0]
        for i, c in enumerate(cats):
            ax.plot(
                ks,
                curves[c]["recall"],
                color=_color(i),
                marker=MARKERS[i % len(MARKERS)],
                markersize=3.5,
                linewidth=1.2,
                label=pt(f"{labels.get(c, c)} (n={curves[c]['n']})"),
            )
        if curves["overall"]["n"]:
            ax.plot(
                ks,
                curves["overall"]["recall"],
                color="black",
                linewidth=2.2,
                linestyle="--",
                label=f"overall (n={curves['overall']['n']})",
            )
        ax.set_title(pt(f"{primary} level, every k"))
        for ax, (level, level_ks, recall_names) in zip(axes[1:], others, strict=True):
            for i, c in enumerate(cats):
                cells = result["metrics"]["per_category"][c]
                ax.plot(
                    level_ks,
                    [cells[recall_names[k]]["value"] for k in level_ks],
                    color=_color(i),
                    marker=MARKERS[i % len(MARKERS)],
                    markersize=3.5,
                    linewidth=1.0,
                    linestyle=":",
                )
            overall = result["metrics"]["overall"]
            ax.plot(
                level_ks,
                [overall[recall_names[k]]["value"] for k in level_ks],
                color="black",
                linewidth=2.2,
                linestyle=":",
            )
            ax.set_title(pt(f"{level} level, scored at k = {', '.join(map(str, level_ks))}"))
        for ax in axes:
            ax.set_xlim(0.5, top_k + 0.5)
            ax.set_xticks(ks if top_k <= 20 else [k for k in ks if k == 1 or k % 5 == 0])
            ax.set_ylim(-0.02, 1.04)
            ax.grid(True)
            ax.set_xlabel("k")
        axes[0].set_ylabel("recall@k (mean fractional recall)")
        handles, _ = axes[0].get_legend_handles_labels()
        if skipped:  # named in the legend, drawn nowhere
            note = "not drawn (no relevant unit):\n" + "\n".join(pt(x) for x in skipped)
            handles.append(Line2D([], [], linestyle="none", label=note))
        fig.legend(handles=handles, loc="outside right center")
        title = f"{result['system']['name']} on {result['dataset']['dataset']}: recall@k against k"
        fig.suptitle(pt(title), fontsize=9.5)
        return _svg(fig)


def report_plots(result: Mapping[str, Any]) -> dict[str, bytes]:
    """file (relative to the report's directory) -> SVG bytes, in the report's order."""
    return {
        f"{REPORT_PLOTS_DIR}/category-bars.svg": category_bars(result),
        f"{REPORT_PLOTS_DIR}/recall-at-k.svg": recall_at_k(result),
    }


def plot_list(plots: Mapping[str, bytes]) -> list[dict[str, str]]:
    """[{"file", "sha256"}] of rendered plots, as results.json lists them."""
    return [{"file": f, "sha256": hashlib.sha256(svg).hexdigest()} for f, svg in plots.items()]


def caption(file: str) -> str:
    return CAPTIONS.get(Path(file).name, Path(file).stem)


# --- the comparison --------------------------------------------------------------------


def _compare_rows(doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    pair = doc["comparisons"][0]
    metrics = list(pair["metrics"])
    categories = list(pair["metrics"][metrics[0]]["per_category"]) if metrics else []
    return metrics, categories


def compare_forest(doc: Mapping[str, Any]) -> bytes:
    """Per metric: each challenger's mean difference against the reference, overall with its
    95% bootstrap interval (a star where the adjusted p < 0.05), per category as a hollow
    point."""
    from recallbench.report.comparison import correction_name

    metrics, categories = _compare_rows(doc)
    pairs = doc["comparisons"]
    rows = ["overall", *categories]
    correction = correction_name(doc) if "statistics" in doc else "uncorrected"
    ncols = max(1, min(4, len(metrics)))
    nrows = max(1, math.ceil(len(metrics) / ncols))
    step = 0.8 / len(pairs)
    with _style():
        row_height = 0.12 * len(pairs) + 0.16
        fig = Figure(
            figsize=(1.9 + 2.1 * ncols, 1.0 + nrows * (0.5 + len(rows) * row_height)),
            layout="constrained",
        )
        axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
        for ax, metric in zip(axes, metrics, strict=False):
            reach = 0.05
            ax.axvline(0, color="#444444", linewidth=0.8)
            ax.axhline(0.5, color="#bbbbbb", linewidth=0.6, linestyle=":")
            for j, pair in enumerate(pairs):
                color = _color(j + 1)  # colour 0 is the reference's in the bars
                offset = (j - (len(pairs) - 1) / 2) * step
                m = pair["metrics"][metric]
                o = m["overall"]
                if o["mean_difference"] is not None:
                    d = o["mean_difference"]
                    lo, hi = o["ci95"] if o["ci95"] is not None else (d, d)
                    reach = max(reach, abs(lo), abs(hi))
                    adjusted = o.get("p_adjusted", o["p_value"])
                    significant = adjusted is not None and adjusted < 0.05
                    ax.errorbar(
                        [d],
                        [offset],
                        xerr=[[d - lo], [hi - d]],
                        fmt="*" if significant else "o",
                        markersize=8 if significant else 4,
                        color=color,
                        ecolor=color,
                        elinewidth=1.2,
                        capsize=2.5,
                    )
                for i, cat in enumerate(categories, start=1):
                    c = m["per_category"][cat]
                    if not c["queries"]:
                        continue
                    d = c["challenger_mean"] - c["reference_mean"]
                    reach = max(reach, abs(d))
                    ax.plot(
                        [d],
                        [i + offset],
                        marker="o",
                        markersize=4,
                        markerfacecolor="white",
                        markeredgecolor=color,
                        linestyle="none",
                    )
            ax.set_xlim(-reach * 1.15, reach * 1.15)
            ax.set_title(pt(metric))
            ax.grid(axis="x")
            ax.tick_params(axis="y", length=0)
        for ax in axes[len(metrics) :]:
            ax.set_visible(False)
        axes[0].set_yticks(range(len(rows)), [pt(r) for r in rows])
        axes[0].set_ylim(len(rows) - 0.5, -0.5)
        axes[0].get_yticklabels()[0].set_fontweight("bold")
        for ax in axes[(nrows - 1) * ncols :]:
            ax.set_xlabel("challenger − reference")
        handles = [
            Line2D(
                [], [], color=_color(j + 1), marker="o", linestyle="-", label=pt(p["challenger"])
            )
            for j, p in enumerate(pairs)
        ]
        handles += [
            Line2D([], [], color="#444444", marker="o", linestyle="-", label="overall, 95% bootstrap CI"),
            Line2D([], [], color="#444444", marker="*", markersize=8, linestyle="none", label=f"sign-flip p < 0.05 ({correction})"),
            Line2D([], [], color="#444444", marker="o", markerfacecolor="white", linestyle="none", label="category (no interval)"),
        ]  # fmt: skip
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
        fig.suptitle(
            pt(
                f"{doc['dataset']['name']}, top-{doc['top_k']}: paired difference against "
                f"{pairs[0]['reference']} ({doc['dataset']['queries']} queries, seed {doc['seed']})"
            ),
            fontsize=9.5,
        )
        return _svg(fig)


def compare_bars(doc: Mapping[str, Any]) -> bytes:
    """Each system's overall mean of the decision table's headline measures (at most four),
    side by side, with its 95% interval; the legend above the bars."""
    from recallbench.report.comparison import headline_columns

    metrics, _ = _compare_rows(doc)
    metrics = headline_columns(doc, metrics)[:4]
    pairs = doc["comparisons"]
    systems = [pairs[0]["reference"], *(p["challenger"] for p in pairs)]
    values, errors, groups = [], [], []
    for metric in metrics:
        row = [pairs[0]["metrics"][metric]["overall"]["reference_mean"]]
        row += [p["metrics"][metric]["overall"]["challenger_mean"] for p in pairs]
        values.append(row)
        errors.append([(doc["means"][s].get(metric) or {}).get("ci95") for s in systems])
        groups.append(f"{metric} (n={pairs[0]['metrics'][metric]['overall']['queries']})")
    blank = [["" for _ in row] for row in values]  # each value is written past its interval
    with _style():
        height = 1.0 + len(groups) * (0.16 * len(systems) + 0.2)
        fig = Figure(figsize=(8.0, max(height, 0.3 * len(systems) + 1.2)), layout="constrained")
        ax = fig.add_subplot()
        _grouped_hbars(ax, groups, systems, values, blank)
        n = len(systems)
        step = 0.84 / n
        for j in range(n):
            for i, row in enumerate(errors):
                ci, v = row[j], values[i][j]
                y = i + (j - (n - 1) / 2) * step
                if ci is not None and v is not None:
                    ax.errorbar(
                        [v], [y], xerr=[[v - ci[0]], [ci[1] - v]], fmt="none",
                        ecolor="#333333", elinewidth=0.8, capsize=1.5,
                    )  # fmt: skip
                end = max(v or 0.0, ci[1] if ci is not None else 0.0)
                ax.text(end + 0.01, y, value_text(v), va="center", ha="left", fontsize=6.5)
        ax.set_xlabel("overall mean over the paired queries (n), with its 95% interval")
        fig.legend(loc="outside right upper", ncols=1)
        fig.suptitle(
            pt(f"{doc['dataset']['name']}, top-{doc['top_k']}: overall means"), fontsize=9.5
        )
        return _svg(fig)


def compare_plots(doc: Mapping[str, Any]) -> dict[str, bytes]:
    """file (relative to compare.md's directory) -> SVG bytes."""
    return {
        f"{COMPARE_PLOTS_DIR}/forest.svg": compare_forest(doc),
        f"{COMPARE_PLOTS_DIR}/bars.svg": compare_bars(doc),
    }
