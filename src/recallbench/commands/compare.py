"""Systems side by side: paired statistics over per-query metrics of two or more results.

Every result must come from the same dataset (same files' sha256, same reader options) and
the same top-k, so a query of one system pairs with the same query of the other (a fixture
query, a LongMemEval question, a LoCoMo question). For each challenger against the
reference (the first result), each per-query metric, overall and in each category:

- mean of each system over the queries the metric applies to, and the mean difference
  d = mean(challenger - reference);
- per-query wins / ties / losses (challenger above / equal to / below the reference);
- a paired sign-flip test of mean(d) = 0, two-sided, over the non-zero differences: exact
  when there are at most 2**20 sign patterns, else `resamples` random ones, with the
  p-value's floor recorded (`recallbench.metrics.stats.sign_flip`);
- a paired bootstrap 95% percentile interval of mean(d);
- the minimum detectable difference at 80% power, alpha 0.05 (`stats.minimum_detectable`);
- the p-value adjusted for multiple comparisons over its family (Holm by default): the
  overall tests of every challenger x metric are one family, the per-category tests another.
And each system's own means with 95% intervals (`report.result.system_intervals`).

Every random figure draws from a stream of its own, seeded by `seed` and the figure's names
(`stats.stream`): a pair's figures never depend on the other systems compared, nor on
their order; only the adjusted p-values depend on the family's size, which is recorded.

The command's work, without its options and printing, is here too (`run_comparison`): run
each system through the in-process chain (`run_compared`) or read saved results, compare
them (`compare_results`), write compare.json, compare.md, compare.html and the plots, and
apply the `--fail-if-worse` gates (`gate_failures`); the text of the comparison is
`recallbench.report.comparison`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recallbench.core.errors import RecallbenchError
from recallbench.core.escape import path_text
from recallbench.engine.tasks import Execution
from recallbench.metrics import stats
from recallbench.report.comparison import (
    ci_text,
    correction_name,
    p_text,
    render_markdown,
    signed,
)
from recallbench.report.result import (
    RESULT_SCHEMA,
    RESULT_SCHEMA_VERSION,
    mean_measures,
    per_query_values,
    system_intervals,
)

COMPARE_SCHEMA = "recallbench.comparison"
COMPARE_SCHEMA_VERSION = 2
#: the level of the tests, the intervals and the gate
ALPHA = stats.ALPHA
#: compare's exit code when `--fail-if-worse` finds a challenger significantly worse
GATE_EXIT = 4


def paired_stats(
    reference: Sequence[float],
    challenger: Sequence[float],
    *,
    resamples: int,
    seed: int = 0,
    names: Sequence[str] = (),
) -> dict[str, Any]:
    """Means, mean difference, W/T/L, the sign-flip test, the bootstrap interval of the
    mean difference, sd(d) and the MDE for paired values; the random figures draw from
    `stats.stream(seed, kind, *names)`, `names` naming the figure (reference, challenger,
    metric, level). `p_adjusted` is filled in over the family by `compare_results`."""
    a, b = np.asarray(reference, dtype=float), np.asarray(challenger, dtype=float)
    n = len(a)
    d = b - a
    sd = stats.difference_sd(d)
    out: dict[str, Any] = {
        "queries": n,
        "reference_mean": float(a.mean()) if n else None,
        "challenger_mean": float(b.mean()) if n else None,
        "mean_difference": float(d.mean()) if n else None,
        "wins": int((d > 0).sum()),
        "ties": int((d == 0).sum()),
        "losses": int((d < 0).sum()),
        "p_value": None,
        "p_floor": None,
        "p_adjusted": None,
        "ci95": None,
        "test": None,
        "sd_difference": sd,
        "mde": None if not sd else stats.minimum_detectable(sd, n),
    }
    if n < 2:
        return out
    if not d.any():  # identical on every query: nothing to test, nothing to resample
        out.update(p_value=1.0, ci95=[0.0, 0.0], test="identical on every query")
        return out
    test = stats.sign_flip(d, resamples=resamples, rng=stats.stream(seed, "sign-flip", *names))
    low, high = stats.bootstrap_interval(
        d, resamples=resamples, rng=stats.stream(seed, "bootstrap", *names)
    )
    out.update(p_value=test.p_value, p_floor=test.floor, ci95=[low, high], test=test.name())
    return out


@dataclass
class SystemRuns:
    """What `run_compared` produced: each system's result document (in order: kept on disk,
    each read back when asked for, `report.spooled.SpooledResults`), the embedder build
    behind each (None without a learned embedder), which vector cache each system read, the
    local timing (per system: wall seconds, texts embedded), the texts of the validated
    data for compare.html (on disk, read scope by scope, `report.html.SpooledTexts`) and
    each system's cost (`cost_of`: local diagnostics, measured in this run)."""

    results: Sequence[dict[str, Any]]
    builds: list[dict[str, Any] | None]
    vectors: list[dict[str, Any]]
    timing: dict[str, Any]
    texts: Any = None
    costs: list[dict[str, Any]] = field(default_factory=list)


#: what each cost figure is, with its unit (compare.json's `cost.figures`; the tables'
#: column heads)
COST_FIGURES = {
    "ingest_records_per_second": "ingest (records/s): stored records over the seconds "
    "inside the system's ingest calls",
    "query_p50_ms": "query latency p50 (ms): the median of every timed search",
    "query_p95_ms": "query latency p95 (ms)",
    "cold_start_ms": "cold start (ms): restoring a snapshot into a fresh store until its "
    "first query is answered (the round trip's sample)",
    "store_mb": "store on disk (MB): each scope's store directory after its searches, summed",
    "peak_rss_mib": "peak RSS (MiB): the largest resident memory of the compare process and "
    "its children while this system ran, sampled every 50 ms",
    "wall_seconds": "wall (s): this system's whole chain, validate to decide",
}


def cost_of(run: Any, wall_seconds: float, peak_bytes: int | None) -> dict[str, Any]:
    """One system's cost from its run's timing sidecars (`COST_FIGURES`): None for a figure
    the run did not measure (no clone: no cold start)."""
    timings = run.timings
    hydrate, runs, trip = (timings.get(k) or {} for k in ("hydrate", "runs", "roundtrip"))
    rate = hydrate.get("records_per_second")
    if rate is None and runs.get("ingest_seconds"):  # transient stores: built by query
        records = sum(s["records"] for s in run.envelopes["runs"]["data"]["scopes"])
        rate = records / runs["ingest_seconds"]
    latency = runs.get("latency") or {}
    cold = trip.get("cold_start_to_first_query_seconds")
    stored = runs.get("store_bytes")
    return {
        "ingest_records_per_second": rate,
        "query_p50_ms": latency.get("p50_ms"),
        "query_p95_ms": latency.get("p95_ms"),
        "latency_samples": latency.get("samples"),
        "cold_start_ms": None if cold is None else cold * 1000.0,
        "store_mb": None if stored is None else stored / 1e6,
        "peak_rss_mib": None if not peak_bytes else peak_bytes / 2**20,
        "wall_seconds": wall_seconds,
    }


def run_compared(
    dataset: str,
    paths: Mapping[str, Path],
    systems: Sequence[str],
    *,
    options: Mapping[str, Any] | None = None,
    top_k: int | None = None,
    parent: Path | None = None,
    say: Callable[[str], Any] | None = None,
    execution: Execution | None = None,
    on_run: Callable[[Any], Any] | None = None,
    ks: Sequence[int] | None = None,
    measures: Sequence[str] | None = None,
    repeat: int = 1,
) -> SystemRuns:
    """Each system's pipeline on the dataset, in order, each in a temporary directory
    (under `parent` when given) that is removed afterwards; `repeat`: timed searches per
    query (latency samples). Each system's cost is measured as it runs (`cost_of`).

    Systems whose embedder has one identity share one vector cache: the `--cache` given
    (`execution.cache`) when it was made by that embedder, else one made once for the
    whole comparison under `parent/vectors/` (or a temporary directory), so each distinct
    text is embedded once per embedder, however many systems use it. `on_run` sees each
    `pipeline.Run` while its directory (and the validated spool in it) is still there.
    `top_k`, `ks`, `measures`: every run's results per query (None: as `run_pipeline`
    resolves it), cutoffs (`--k`) and measures (`--measure`).

    Memory does not grow with the systems: each run is let go when the next starts, its
    result kept on disk (`SpooledResults`), the validated spool kept once for the texts
    (`SpooledTexts`), both in a directory of their own under `parent` (``compare-XXXXXXXX``,
    removed when they are no longer used)."""
    import tempfile
    import time
    from dataclasses import replace

    from recallbench.commands.pipeline import run_pipeline
    from recallbench.core.embedding import needs_cache
    from recallbench.core.peakrss import PeakRSS
    from recallbench.engine.vectorcache import read_manifest
    from recallbench.report.html import SpooledTexts
    from recallbench.report.spooled import Scratch, SpooledResults
    from recallbench.systems.registry import resolve_system

    execution = execution or Execution()
    given = None
    if execution.cache is not None:
        given = read_manifest(Path(execution.cache)).get("embedder_identity")
    kept = Scratch(parent)
    out = SystemRuns(SpooledResults(kept), [], [], {"systems": [], "texts_embedded": {}})
    with tempfile.TemporaryDirectory(prefix="compare-vectors-", dir=parent) as scratch:
        shared = Path(parent) / "vectors" if parent is not None else Path(scratch)
        for n, name in enumerate(systems, start=1):
            system = resolve_system(name)  # once per compare: its run and identity use it
            identity = system.embedder.identity() if needs_cache(system) else None
            if identity is not None and identity == given:
                chosen, source = execution, "given (--cache)"
            else:
                chosen = replace(execution, cache=None, cache_root=shared)
                source = "made in this run" if identity is not None else None
            if say is not None:
                say(f"running {name} ({n} of {len(systems)}) ...")
            started = time.perf_counter()
            with (
                tempfile.TemporaryDirectory(prefix="compare-", dir=parent) as work,
                PeakRSS() as peak,
            ):
                run = run_pipeline(
                    dataset,
                    paths,
                    Path(work),
                    options=options,
                    system=system,
                    top_k=top_k,
                    repeat=repeat,
                    execution=chosen,
                    ks=ks,
                    measures=measures,
                )
                wall = time.perf_counter() - started
                if on_run is not None:
                    on_run(run)
                suite = run.envelopes["suite"]
                if out.texts is None:
                    out.texts = SpooledTexts(suite["data"]["levels"][0]["name"])
                out.texts.keep(suite, run.result, kept.path / f"spool-{n:04d}.jsonl", kept)
            out.costs.append(cost_of(run, wall, peak.bytes))
            made = run.timings.get("hydrate", {}).get("vector_cache")
            out.results.append(run.result)  # type: ignore[attr-defined]
            out.builds.append(run.envelopes["results"].get("embedder_build"))
            run.close()
            del run, system  # let go before the next system runs: its result is on disk
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
                    "wall_seconds": wall,
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
    correction: str = "holm",
    vectors: Sequence[Mapping[str, Any]] = (),
    builds: Sequence[dict[str, Any] | None] = (),
    costs: Sequence[Mapping[str, Any]] | None = None,
    repeat: int = 1,
) -> dict[str, Any]:
    """The comparison document: every challenger against the first result (the reference),
    overall and per category, with p-values adjusted over their family by `correction`
    (`holm`, `bh` or `none`); each system's own means with 95% intervals; which systems
    rank identically (`identical_rankings`); what each embedder never saw (`truncation`);
    and, when the systems ran here, their cost (`costs`, `SystemRuns.costs`: local
    diagnostics, the one part of the document that differs between two runs; `repeat`: the
    timed searches per query behind the latencies).

    `vectors`: which vector cache each system read (`SystemRuns.vectors`); `builds`: the
    embedder build behind each result, for the note when they differ (`build_notes`)."""
    if len(results) < 2:
        raise RecallbenchError("compare needs at least two results")
    if len(set(labels)) != len(labels):
        raise RecallbenchError(f"labels must be distinct, got {labels}")
    if correction not in stats.CORRECTIONS:
        raise RecallbenchError(f"correction {correction!r}: one of {', '.join(stats.CORRECTIONS)}")
    for result, label in zip(results, labels, strict=True):
        check_result(result, label)
    _check_comparable(results, labels)
    ref = results[0]
    k = ref["run"]["top_k"]
    metrics = mean_measures(ref)
    pooled = [m["name"] for m in ref["run"]["measures"] if m["pooled"]]
    categories = ref["dataset"]["categories"]
    category_of = {q["query_id"]: q["category"] for q in ref["queries"]}
    rankings = identical_rankings(results, labels)
    pairs = []
    for label, challenger in zip(labels[1:], results[1:], strict=True):
        per_metric = {}
        for metric in metrics:
            a_all, b_all = per_query_values(ref, metric), per_query_values(challenger, metric)
            ids = [q for q in a_all if a_all[q] is not None and b_all.get(q) is not None]
            levels = {"overall": ids}
            levels.update(
                (f"category:{cat}", [q for q in ids if category_of[q] == cat]) for cat in categories
            )
            figures = {
                level: paired_stats(
                    [a_all[q] for q in chosen],
                    [b_all[q] for q in chosen],
                    resamples=resamples,
                    seed=seed,
                    names=(labels[0], label, metric, level),
                )
                for level, chosen in levels.items()
            }
            per_metric[metric] = {
                "overall": figures["overall"],
                "per_category": {cat: figures[f"category:{cat}"] for cat in categories},
            }
        rates = {
            name: {
                "reference": ref["metrics"]["overall"][name],
                "challenger": challenger["metrics"]["overall"][name],
            }
            for name in pooled
        }
        pairs.append(
            {
                "reference": labels[0],
                "challenger": label,
                "identical_rankings": next(
                    {"identical": p["identical"], "queries": p["queries"]}
                    for p in rankings["pairs"]
                    if p["systems"] == [labels[0], label]
                ),
                "metrics": per_metric,
                "rates": rates,
            }
        )
    overall_family = [m["overall"] for p in pairs for m in p["metrics"].values()]
    category_family = [
        c for p in pairs for m in p["metrics"].values() for c in m["per_category"].values()
    ]
    families = {}
    for name, family in (("overall", overall_family), ("per_category", category_family)):
        # a row where the systems agree on every query tests nothing: p 1, outside the family
        tested = [f for f in family if f["p_value"] is not None and f["wins"] + f["losses"]]
        for f in family:
            if f["p_value"] is not None and not f["wins"] + f["losses"]:
                f["p_adjusted"] = 1.0
        for f, adjusted in zip(
            tested, stats.adjust([f["p_value"] for f in tested], correction), strict=True
        ):
            f["p_adjusted"] = adjusted
        families[name] = {"tests": len(tested)}
    intervals = [
        {
            metric: (None if i is None else i.record())
            for metric, i in system_intervals(
                r, metrics, seed=seed, resamples=resamples, categories=False
            )[None].items()
        }
        for r in results
    ]
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "systems": [{"label": lab, **r["system"]} for lab, r in zip(labels, results, strict=True)],
        "means": {lab: i for lab, i in zip(labels, intervals, strict=True)},
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
        "statistics": {
            "alpha": ALPHA,
            "power": stats.POWER,
            "streams": stats.STREAM_RULE,
            "exact_limit": stats.EXACT_LIMIT,
            "test": "two-sided paired sign-flip over the non-zero differences: exact over "
            f"every pattern when there are at most {stats.EXACT_LIMIT} of them, else "
            f"{resamples} random patterns, p >= 1/({resamples} + 1)",
            "interval": "95% percentile bootstrap of the mean difference",
            "system_interval": "95%: Wilson's when every per-query value is 0 or 1, else "
            "percentile bootstrap",
            "mde": "(t_{0.975,n-1} + t_{0.80,n-1}) sd(d) / sqrt(n)",
            "correction": correction,
            "families": {
                "overall": {
                    **families["overall"],
                    "of": "every challenger x measure where the two differ, over all queries",
                },
                "per_category": {
                    **families["per_category"],
                    "of": "every challenger x measure x category where the two differ",
                },
            },
        },
        "vectors": [dict(v) for v in vectors],
        "notes": build_notes(labels, builds) if builds else [],
        "rankings": rankings,
        "truncation": truncation_groups(results, labels, vectors),
        "cost": None
        if costs is None
        else {
            "label": "local diagnostics: measured on this machine in this run, not a result; "
            "the only part of compare.json that differs between two runs",
            "repeat": repeat,
            "figures": dict(COST_FIGURES),
            "systems": {lab: dict(c) for lab, c in zip(labels, costs, strict=True)},
        },
        "comparisons": pairs,
    }


def _rankings(result: Mapping[str, Any]) -> dict[str, list[str]]:
    """query id -> the ids the system returned at the primary level, best first."""
    return {q["query_id"]: [h["id"] for h in q["returned"]] for q in result["queries"]}


def identical_rankings(
    results: Sequence[Mapping[str, Any]], labels: Sequence[str]
) -> dict[str, Any]:
    """Which systems rank alike: every pair's count of queries with identical rankings (the
    same ids in the same order), and the groups of systems identical on every query
    (connected through such pairs: their measures are equal and retrieval cannot choose
    between them), in the systems' order. Each result is read once (a compare's results
    are read back from disk)."""
    rankings = [_rankings(r) for r in results]
    pairs, parent = [], list(range(len(results)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, ra in enumerate(rankings):
        for j in range(i + 1, len(rankings)):
            rb = rankings[j]
            same = sum(rb.get(q) == ids for q, ids in ra.items())
            pairs.append({"systems": [labels[i], labels[j]], "identical": same, "queries": len(ra)})
            if same == len(ra):
                parent[root(j)] = root(i)
    groups: dict[int, list[str]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(root(i), []).append(label)
    return {
        "queries": len(rankings[0]),
        "pairs": pairs,
        "groups": [g for g in groups.values() if len(g) > 1],
    }


def truncation_groups(
    results: Sequence[Mapping[str, Any]],
    labels: Sequence[str],
    vectors: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """What the embedders never saw, one entry per embedder (the systems that share it and
    the same counts): its identity when known, the stored texts longer than its input
    window and the shares of tokens it never saw (`result["truncation"]`). Systems without
    a learned embedder's report are left out."""
    identity = {v["system"]: v.get("embedder_identity") for v in vectors}
    out: list[dict[str, Any]] = []
    for label, result in zip(labels, results, strict=True):
        t = result.get("truncation")
        if not t:
            continue
        name = result["system"].get("name")
        key = {"embedder": identity.get(label, identity.get(name)), **t}
        for group in out:
            if {k: v for k, v in group.items() if k != "systems"} == key:
                group["systems"].append(label)
                break
        else:
            out.append({"systems": [label], **key})
    return out


def fail_if_worse(worse: Sequence[str], message: str) -> None:
    """A `--fail-if-worse` gate's end (compare and check-baseline): each finding
    (`gate_failures`) on stderr as `worse: ...`, then `WorseThanReference` (exit 4) with
    `message`; nothing when none fired."""
    if not worse:
        return
    import sys

    from recallbench.core.errors import WorseThanReference
    from recallbench.core.escape import terminal

    for line in worse:
        print(f"worse: {terminal(line)}", file=sys.stderr)
    raise WorseThanReference(message)


def decision_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decision table as JSON rows (`--json`): per system its headline means with their
    intervals, the systems it ranks identically to, and its cost (None for saved results)."""
    groups = doc["rankings"]["groups"]
    cost = doc.get("cost") or {}
    return [
        {
            "system": s["label"],
            "means": doc["means"][s["label"]],
            "same_rankings_as": [
                x for g in groups if s["label"] in g for x in g if x != s["label"]
            ],
            "cost": (cost.get("systems") or {}).get(s["label"]),
        }
        for s in doc["systems"]
    ]


def gate_failures(doc: Mapping[str, Any], gates: Sequence[tuple[str, float]]) -> list[str]:
    """The `--fail-if-worse MEASURE:MARGIN` findings: one line per challenger and gated
    measure where the challenger is significantly worse than the reference after the
    correction (adjusted p < alpha) and the whole 95% interval of (challenger - reference)
    lies below -MARGIN. A measure not compared is a one-line error naming the choices."""
    from recallbench.core.escape import terminal

    names = list(doc["comparisons"][0]["metrics"]) if doc["comparisons"] else []
    out = []
    for measure, margin in gates:
        if measure not in names:
            raise RecallbenchError(
                f"--fail-if-worse {measure}: not a compared measure; one of {', '.join(names)}"
            )
        for pair in doc["comparisons"]:
            o = pair["metrics"][measure]["overall"]
            if o["ci95"] is None or o["p_adjusted"] is None:
                continue
            if o["p_adjusted"] < ALPHA and o["ci95"][1] < -margin:
                out.append(
                    f"{terminal(pair['challenger'])} is worse than {terminal(pair['reference'])} "
                    f"on {measure} by more than {margin:g}: {signed(o['mean_difference'])}, "
                    f"95% CI {ci_text(o['ci95'])}, p {correction_name(doc)} "
                    f"{p_text(o, 'p_adjusted')}"
                )
    return out


def power_table(
    results: list[dict[str, Any]],
    labels: list[str],
    *,
    effect: float | None,
    measures: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Per challenger and measure (every mean measure, or `measures`): the paired queries n,
    the observed mean difference and sd(d), the minimum detectable difference at n (80%
    power, alpha 0.05, two-sided) and, given `effect`, the questions that effect needs at
    the observed sd(d) (`stats.questions_needed`)."""
    for result, label in zip(results, labels, strict=True):
        check_result(result, label)
    _check_comparable(results, labels)
    ref = results[0]
    names = mean_measures(ref)
    unknown = [m for m in measures if m not in names]
    if unknown:
        raise RecallbenchError(
            f"--measure {unknown[0]}: not a measure of these results; one of {', '.join(names)}"
        )
    rows = []
    for label, challenger in zip(labels[1:], results[1:], strict=True):
        for metric in measures or names:
            a_all, b_all = per_query_values(ref, metric), per_query_values(challenger, metric)
            d = [
                b_all[q] - a for q, a in a_all.items() if a is not None and b_all.get(q) is not None
            ]
            sd = stats.difference_sd(d)
            rows.append(
                {
                    "reference": labels[0],
                    "challenger": label,
                    "measure": metric,
                    "queries": len(d),
                    "mean_difference": float(np.mean(d)) if d else None,
                    "sd_difference": sd,
                    "mde": stats.minimum_detectable(sd, len(d)) if sd else None,
                    "effect": effect,
                    "queries_needed": (
                        stats.questions_needed(sd, effect) if sd and effect else None
                    ),
                }
            )
    return rows


@dataclass
class Compared:
    """What `recallbench compare` made: the comparison document, the labels (the
    reference first) and results in that order, the files written (for the files line)
    and the --fail-if-worse findings."""

    doc: dict[str, Any]
    labels: list[str]
    #: the result documents (after a run, kept on disk: `report.spooled.SpooledResults`)
    results: Sequence[Any]
    written: list[Path | str]
    worse: list[str]

    def closing_json(self, seconds: float) -> dict[str, Any]:
        """`compare --json`'s one object: the reference, each system's headline figures,
        the decision table, the identical rankings, the truncation, the challenger lines,
        the notes, the gate's findings, the files and the seconds."""
        from recallbench.report.summary import closing_json

        return {
            "reference": self.labels[0],
            "systems": [
                {"label": label, **closing_json(result, None, [], seconds)}
                for label, result in zip(self.labels, self.results, strict=True)
            ],
            "decision_table": decision_rows(self.doc),
            "identical_rankings": self.doc["rankings"]["groups"],
            "truncation": self.doc["truncation"],
            "comparisons": render_markdown(self.doc, headline_only=True).splitlines(),
            "notes": list(self.doc["notes"]),
            "worse": self.worse,
            "files": [path_text(f) for f in self.written],
            "seconds": round(seconds, 3),
        }


def run_comparison(
    build_dir: Path,
    *,
    saved: Sequence[Path] = (),
    dataset: str = "fixtures",
    paths: Mapping[str, Path] | None = None,
    options: Mapping[str, Any] | None = None,
    systems: Sequence[str] = (),
    reference: str | None = None,
    top_k: int | None = None,
    ks: Sequence[int] | None = None,
    measures: Sequence[str] | None = None,
    repeat: int = 1,
    execution: Execution | None = None,
    seed: int = 0,
    resamples: int = 10_000,
    correction: str = "holm",
    gates: Sequence[tuple[str, float]] = (),
    output: Path | None = None,
    report_path: Path | None = None,
    say: Callable[[str], Any] | None = None,
) -> Compared:
    """`recallbench compare` without its options and printing: compare the `saved` results
    (results.json files or baselines, read by `result.load_result_envelope`) or, without
    them, run `systems` (none: the core systems) on the dataset's `paths`, with `reference`
    first; then write compare.json (`output`), compare.md (`report_path`), its plots and
    compare.html with its data files (None: each under `build_dir`), together, and the
    timing sidecar of a run. The outputs are checked before any work (before a saved result
    is read)."""
    from recallbench.builddir.artifacts import dumps, publish
    from recallbench.commands.outputpaths import check_compare_outputs
    from recallbench.report.html import render_compare_page, texts_beside
    from recallbench.report.plots import caption, compare_plots
    from recallbench.report.result import load_result_envelope
    from recallbench.stages.report import html_path

    execution = execution or Execution()
    result_files = list(saved)
    paths = dict(paths or {})
    check_compare_outputs(build_dir, output, report_path, result_files, paths, execution.cache)
    vectors: list[dict[str, Any]] = []
    timing: dict[str, Any] | None = None
    costs: list[dict[str, Any]] | None = None
    if saved:
        envelopes = [load_result_envelope(path) for path in result_files]
        results = [env["data"] for env in envelopes]
        builds = [env.get("embedder_build") for env in envelopes]
        texts = [texts_beside(path, env) for path, env in zip(result_files, envelopes, strict=True)]
        labels = result_labels(result_files, results)
        if reference is not None:
            order = reference_first(labels, reference, "--result labels")
            results, builds, texts, labels = (
                [seq[i] for i in order] for seq in (results, builds, texts, labels)
            )
    else:
        from recallbench.systems.registry import core_system_names

        labels = list(dict.fromkeys(systems or core_system_names()))
        if reference is not None:
            labels = [reference, *(name for name in labels if name != reference)]
        Path(build_dir).mkdir(parents=True, exist_ok=True)
        runs = run_compared(
            dataset,
            paths,
            labels,
            options=options,
            top_k=top_k,
            parent=build_dir,
            say=say,
            execution=execution,
            ks=ks,
            measures=measures,
            repeat=repeat,
        )
        results, builds, vectors, timing = runs.results, runs.builds, runs.vectors, runs.timing
        costs = runs.costs
        texts = runs.texts  # on disk, read scope by scope (no merged copy in memory)
    doc = compare_results(
        results,
        labels,
        seed=seed,
        resamples=resamples,
        correction=correction,
        vectors=vectors,
        builds=builds,
        costs=costs,
        repeat=repeat,
    )
    output = output or build_dir / "compare.json"
    report_path = report_path or build_dir / "compare.md"
    plots = compare_plots(doc)  # beside compare.md, where its links point
    markdown = render_markdown(doc, plots=[(name, caption(name)) for name in plots])
    sidecar = {}
    if timing is not None:  # local diagnostic, like every stage's timing sidecar
        sidecar[build_dir / "timings" / "compare.json"] = dumps(
            {"label": "local diagnostic: wall time on this machine, not a result", **timing}
        )
    # compare.html beside it, its data files in compare-data/
    made = render_compare_page(doc, results, texts, plots=plots, scratch=build_dir)
    page = html_path(report_path)
    try:
        publish(
            {
                **sidecar,
                output: dumps(doc),
                report_path: markdown.encode("utf-8"),
                **made.files(page),
                **{report_path.parent / name: svg for name, svg in plots.items()},
            }
        )
    finally:
        made.data.close()
    plotted = ", ".join(str(report_path.parent / name) for name in plots)
    written: list[Path | str] = [output, report_path, page, *([plotted] if plotted else [])]
    if made.data.names:  # compare.html's data files, which travel with it
        written.append(f"{page.parent / made.data_dir}/")
    return Compared(doc, labels, results, written, gate_failures(doc, gates))
