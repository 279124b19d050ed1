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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from recallbench.errors import RecallbenchError
from recallbench.escape import markdown as md
from recallbench.escape import path_text
from recallbench.measures import preferred_measures
from recallbench.report.markdown import format_setting
from recallbench.report.result import (
    RESULT_SCHEMA,
    RESULT_SCHEMA_VERSION,
    mean_measures,
    per_query_values,
)
from recallbench.stagework import Execution

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


@dataclass
class SystemRuns:
    """What `run_compared` produced: each system's result document (in order), the
    embedder build behind each (None without a learned embedder), which vector cache each
    system read, and the local timing (per system: wall seconds, texts embedded)."""

    results: list[dict[str, Any]]
    builds: list[dict[str, Any] | None]
    vectors: list[dict[str, Any]]
    timing: dict[str, Any]


def run_compared(
    dataset: str,
    paths: Mapping[str, Path],
    systems: Sequence[str],
    *,
    options: Mapping[str, Any] | None = None,
    top_k: int = 5,
    parent: Path | None = None,
    say: Callable[[str], Any] | None = None,
    execution: Execution | None = None,
    on_run: Callable[[Any], Any] | None = None,
    ks: Sequence[int] | None = None,
    measures: Sequence[str] | None = None,
) -> SystemRuns:
    """Each system's pipeline on the dataset, in order, each in a temporary directory
    (under `parent` when given) that is removed afterwards.

    Systems whose embedder has one identity share one vector cache: the `--cache` given
    (`execution.cache`) when it was made by that embedder, else one made once for the
    whole comparison under `parent/vectors/` (or a temporary directory), so each distinct
    text is embedded once per embedder, however many systems use it. `on_run` sees each
    `pipeline.Run` while its directory (and the validated spool in it) is still there.
    `ks`, `measures`: every run's cutoffs (`--k`) and measures (`--measure`)."""
    import tempfile
    import time
    from dataclasses import replace

    from recallbench.cache import read_manifest
    from recallbench.embedding import needs_cache
    from recallbench.pipeline import run_pipeline
    from recallbench.systems import get_system

    execution = execution or Execution()
    given = None
    if execution.cache is not None:
        given = read_manifest(Path(execution.cache)).get("embedder_identity")
    out = SystemRuns([], [], [], {"systems": [], "texts_embedded": {}})
    with tempfile.TemporaryDirectory(prefix="compare-vectors-", dir=parent) as scratch:
        shared = Path(parent) / "vectors" if parent is not None else Path(scratch)
        for n, name in enumerate(systems, start=1):
            system = get_system(name)
            identity = system.embedder.identity() if needs_cache(system) else None
            if identity is not None and identity == given:
                chosen, source = execution, "given (--cache)"
            else:
                chosen = replace(execution, cache=None, cache_root=shared)
                source = "made in this run" if identity is not None else None
            if say is not None:
                say(f"running {name} ({n} of {len(systems)}) ...")
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="compare-", dir=parent) as work:
                run = run_pipeline(
                    dataset,
                    paths,
                    Path(work),
                    options=options,
                    system=name,
                    top_k=top_k,
                    execution=chosen,
                    ks=ks,
                    measures=measures,
                )
                if on_run is not None:
                    on_run(run)
            made = run.timings.get("hydrate", {}).get("vector_cache")
            out.results.append(run.result)
            out.builds.append(run.envelopes["results"].get("embedder_build"))
            if identity is not None:
                earlier = [v for v in out.vectors if v["embedder_identity"] == identity]
                out.vectors.append(
                    {"system": name, "embedder_identity": identity, "cache": source}
                    if not earlier
                    else {**earlier[0], "system": name}
                )
                embedded = out.timing["texts_embedded"]
                embedded[identity] = embedded.get(identity, 0) + (
                    made["texts_embedded"] if made else 0
                )
            out.timing["systems"].append(
                {
                    "system": name,
                    "wall_seconds": time.perf_counter() - started,
                    "texts_embedded": made["texts_embedded"] if made else 0,
                }
            )
    return out


def result_labels(paths: Sequence[Path], results: Sequence[Any]) -> list[str]:
    """The label of each saved result: its system's name; where two results share a name,
    the name with the result's directory (`hotmem (old)`, for BUILD/results.json) or file
    stem, and the full path when even that ties. A path's bytes that are not UTF-8 show as
    ``\\xNN`` (`escape.path_text`: a label is text in JSON documents)."""
    names = [_system_name(r) or _place(p) for p, r in zip(paths, results, strict=True)]
    labels = list(names)
    for name in set(names):
        tied = [i for i, n in enumerate(names) if n == name]
        if len(tied) < 2:
            continue
        places = [_place(paths[i]) for i in tied]
        if len(set(places)) < len(places):
            places = [path_text(paths[i]) for i in tied]
        for i, place in zip(tied, places, strict=True):
            labels[i] = f"{name} ({place})" if place != name else place
    return labels


def _system_name(result: Any) -> str | None:
    system = result.get("system") if isinstance(result, dict) else None
    name = system.get("name") if isinstance(system, dict) else None
    return name if isinstance(name, str) and name else None


def _place(path: Path) -> str:
    path = Path(path)
    return path_text(path.parent.name if path.stem == "results" else path.stem)


def reference_first(labels: Sequence[str], reference: str, what: str) -> list[int]:
    """The order that puts `reference` first and keeps the others' order (indices into
    `labels`); a one-line error naming the choices when it is not one of them."""
    if reference not in labels:
        raise RecallbenchError(
            f"--reference {reference}: not one of the {what} ({', '.join(labels)})"
        )
    first = labels.index(reference)
    return [first, *(i for i in range(len(labels)) if i != first)]


def build_notes(labels: Sequence[str], builds: Sequence[dict[str, Any] | None]) -> list[str]:
    """A sentence when results' learned vectors come from different embedder builds
    (device, torch version, CPU capability): their scores may then differ in the last
    bits (docs/performance.md gives the measured tolerance), and a near-tie may order
    differently; none when every build is the same or there is none."""
    known = [(lab, b) for lab, b in zip(labels, builds, strict=True) if b]
    if len({repr(sorted(b.items())) if isinstance(b, dict) else repr(b) for _, b in known}) < 2:
        return []
    described = "; ".join(f"{lab}: {describe_build(b)}" for lab, b in known)
    return [
        f"The learned vectors come from different embedder builds ({described}): scores may "
        "differ in the last bits and near-ties may order differently (see the measured "
        "tolerance in docs/performance.md); compare figures, not bytes."
    ]


def describe_build(build: Any) -> str:
    if isinstance(build, list):
        return " + ".join(describe_build(b) for b in build)
    return f"{build.get('device')}, torch {build.get('torch')}, CPU {build.get('cpu_capability')}"


#: what a comparison reads from a result document: (path, type), every list item checked
#: against the entries under "[]" (a saved results.json of another schema, or one missing a
#: field, is refused in one line instead of a KeyError)
_READS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("system", dict),
    ("dataset", dict),
    ("dataset.dataset", str),
    ("dataset.identity", dict),
    ("dataset.identity.label", str),
    ("dataset.identity.files", list),
    ("dataset.identity.files[].sha256", str),
    ("dataset.options", dict),
    ("dataset.categories", list),
    ("dataset.category_labels", dict),
    ("counts", dict),
    ("counts.queries", int),
    ("run", dict),
    ("run.top_k", int),
    ("run.measures", list),
    ("run.measures[].name", str),
    ("run.measures[].pooled", bool),
    ("metrics", dict),
    ("metrics.overall", dict),
    ("queries", list),
    ("queries[].query_id", str),
    ("queries[].category", str),
    ("queries[].metrics", dict),
)


def _missing(doc: Any, path: str, kind: type | tuple[type, ...]) -> str | None:
    """The first place along `path` (`a.b[].c`) where `doc` lacks it or has another type."""
    head, _, rest = path.partition(".")
    items = head.endswith("[]")
    key = head.removesuffix("[]")
    if not isinstance(doc, dict) or key not in doc:
        return key
    value = doc[key]
    if items:
        if not isinstance(value, list):
            return key
        for i, item in enumerate(value):
            inner = _missing(item, rest, kind)
            if inner is not None:
                return f"{key}[{i}].{inner}"
        return None
    if rest:
        inner = _missing(value, rest, kind)
        return None if inner is None else f"{key}.{inner}"
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return key
    return None


def check_result(result: Any, label: str) -> dict[str, Any]:
    """`result` if it is a result document this version can compare: its schema and schema
    version, and every field a comparison reads (one-line `RecallbenchError` otherwise)."""
    if not isinstance(result, dict) or result.get("schema") != RESULT_SCHEMA:
        raise RecallbenchError(
            f"{label}: not a {RESULT_SCHEMA} document; compare reads the results.json of "
            "`recallbench report`"
        )
    version = result.get("schema_version")
    if version != RESULT_SCHEMA_VERSION:
        raise RecallbenchError(
            f"{label}: result schema version {version!r}, this recallbench reads version "
            f"{RESULT_SCHEMA_VERSION}; make it again with `recallbench report`"
        )
    for path, kind in _READS:
        where = _missing(result, path, kind)
        if where is not None:
            raise RecallbenchError(
                f"{label}: the result has no readable {where} (a comparison needs {path}); "
                "make it again with `recallbench report`"
            )
    absent = sorted(
        {m["name"] for m in result["run"]["measures"] if m["pooled"]}
        - set(result["metrics"]["overall"])
    )
    if absent:
        raise RecallbenchError(f"{label}: metrics.overall has no {absent[0]}, a pooled measure")
    return result


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
    results: list[dict[str, Any]],
    labels: list[str],
    *,
    seed: int = 0,
    resamples: int = 10_000,
    vectors: Sequence[Mapping[str, Any]] = (),
    builds: Sequence[dict[str, Any] | None] = (),
) -> dict[str, Any]:
    """The comparison document: every challenger against the first result (the reference).

    `vectors`: which vector cache each system read (`SystemRuns.vectors`); `builds`: the
    embedder build behind each result, for the note when they differ (`build_notes`)."""
    if len(results) < 2:
        raise RecallbenchError("compare needs at least two results")
    if len(set(labels)) != len(labels):
        raise RecallbenchError(f"labels must be distinct, got {labels}")
    for result, label in zip(results, labels, strict=True):
        check_result(result, label)
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
        "vectors": [dict(v) for v in vectors],
        "notes": build_notes(labels, builds) if builds else [],
        "comparisons": pairs,
    }


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def headline(doc: dict[str, Any]) -> str:
    """One line per challenger, "challenger vs reference": nDCG@k (else recall@k, else the
    first measure): the reference's and the challenger's means, the difference (challenger -
    reference), CI, p and W/T/L (wins are the challenger's). For the terminal: labels are
    escaped (`escape.terminal`)."""
    from recallbench.escape import terminal

    lines = []
    k = doc["top_k"]
    for pair in doc["comparisons"]:
        names = list(pair["metrics"])
        preferred = preferred_measures(names, k)
        metric = (preferred or names)[0]
        o = pair["metrics"][metric]["overall"]
        ci = "n/a" if o["ci95"] is None else f"[{o['ci95'][0]:+.3f}, {o['ci95'][1]:+.3f}]"
        p = "n/a" if o["p_value"] is None else f"{o['p_value']:.4f}"
        lines.append(
            f"{terminal(pair['challenger'])} vs {terminal(pair['reference'])}: {terminal(metric)} "
            f"{_f(o['reference_mean'])} -> "
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
    files = ", ".join(md(f["name"]) for f in doc["dataset"]["files"])
    out = [
        "# Systems side by side",
        "",
        f"Dataset: {md(doc['dataset']['name'])} ({files}; {md(doc['dataset']['label'])}), "
        f"{doc['dataset']['queries']} scored queries, top-{doc['top_k']}. "
        f"Seed {doc['seed']}, {doc['resamples']} resamples.",
        "",
        "| label | system | configuration |",
        "|---|---|---|",
    ]
    out += [
        f"| {md(s['label'])} | {md(s['name'])} | "
        + "; ".join(
            md(f"{k.replace('_', ' ')} {format_setting(v)}")
            for k, v in s.items()
            if k not in ("label", "name") and not k.endswith("function")
        )
        + " |"
        for s in doc["systems"]
    ]
    if doc.get("vectors"):
        out += [
            "",
            "Learned vectors (one cache per embedder, each distinct text embedded once):",
            "",
        ]
        out += [
            f"- {md(v['system'])}: {md(v['embedder_identity'])}, cache {md(v['cache'])}"
            for v in doc["vectors"]
        ]
    for note in doc.get("notes", []):
        out += ["", f"Note: {md(note)}"]
    if plots:
        out += ["", *(line for path, text in plots for line in (f"![{md(text)}]({path})", ""))]
    for pair in doc["comparisons"]:
        ref, ch = md(pair["reference"]), md(pair["challenger"])
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
                f"| {md(metric)} | {o['queries']} | {_f(o['reference_mean'])} | {_f(o['challenger_mean'])} "
                f"| {_f(o['mean_difference'], signed=True)} | {ci} | {p} | {o['wins']} / {o['ties']} / {o['losses']} |"
            )
        out += ["", "Per category (means; wins / ties / losses of the challenger):", ""]
        metrics = list(pair["metrics"])
        out.append("| category | " + " | ".join(md(x) for x in metrics) + " |")
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
            out.append(f"| {md(label)} | " + " | ".join(cells) + " |")
        out += [
            "",
            "Pooled slot rates (no test: they are counts over slots, not per-query values):",
            "",
        ]
        for name, r in pair["rates"].items():
            a, b = r["reference"], r["challenger"]
            out.append(
                f"- {md(name)}: {ref} {a['numerator']}/{a['denominator']}, {ch} {b['numerator']}/{b['denominator']}"
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
