"""query: every query of every scope through the system's production search.

Each task reads its own scope from validate's spool (the parent hands out only where each
scope's line lies; several scopes per task when there are many). Kept stores (see hydrate)
are opened read-only and checked first (record count and content digest through the
system's own API); transient stores are built, searched and removed inside the task, in the
worker's own directory. runs.json holds, per query, the ranked hits, each level's ranking
and gold, and the facts that explain misses; latencies, the time inside the system and the
harness's parts go to the timing sidecar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, inputs_of, require_made_from, with_embedder_build
from recallbench.buildpaths import safe_child
from recallbench.errors import RecallbenchError
from recallbench.metrics import percentile
from recallbench.spool import scope_refs
from recallbench.stages import tasks
from recallbench.stages.execution import (
    Execution,
    Stopwatch,
    cache_spec,
    run_tasks,
    vector_cache,
)
from recallbench.stages.hydrate import stores_root

#: Per-call search limit (the scope document's MAX_SEARCH_LIMIT).
MAX_SEARCH_LIMIT = 10_000
WORK_DIR = "work"
#: tasks per worker taken ahead of the one whose result is due: a query task is a scope's
#: place in the spool (a few numbers), so a deep window costs nothing and keeps every worker
#: busy while the head of the order is still running
QUERY_WINDOW = 16
#: at most this many scopes go to a worker as one task (see `batch_size`)
QUERY_BATCH = 4


def latency_summary(latency_ms: Mapping[str, list[float]]) -> dict[str, Any]:
    samples = [x for xs in latency_ms.values() for x in xs]
    return {
        "samples": len(samples),
        "p50_ms": percentile(samples, 50),
        "p95_ms": percentile(samples, 95),
        "note": "local diagnostic data from this machine, not a cross-machine performance guarantee",
    }


def slice_count(execution: Execution, kept: bool, scopes: int) -> int:
    """How many slices each scope's queries are cut into: with several workers and fewer
    scopes than workers, a kept (read-only) store is searched by every worker, each taking
    a contiguous slice of the queries; otherwise one task per scope."""
    if kept and execution.workers > 1 and scopes < execution.workers:
        return execution.workers * 2
    return 1


def batch_size(execution: Execution, tasks_total: int) -> int:
    """Scopes per task sent to a worker: up to QUERY_BATCH when there are many more tasks
    than workers (fewer round trips through the parent, whose time per task then bounds
    how many workers it can feed), one otherwise (so the work still spreads evenly)."""
    if execution.executor == "local" and execution.workers == 1:
        return 1  # everything runs in this process: nothing to send
    return max(1, min(QUERY_BATCH, tasks_total // (execution.workers * QUERY_WINDOW)))


def query_spans(queries: int, slices: int) -> list[tuple[int, int] | None]:
    """`queries` cut into at most `slices` contiguous (start, stop) spans, in order; [None]
    (all of them, one task) when there is nothing to cut."""
    if slices <= 1 or queries <= 1:
        return [None]
    size = -(-queries // slices)
    return [(i, min(i + size, queries)) for i in range(0, queries, size)]


def run_query(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    build_dir: Path,
    *,
    top_k: int = 5,
    repeat: int = 1,
    execution: Execution | None = None,
    ks: Sequence[int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Search every scope's queries; return the `runs` envelope and its timing. `ks`: the
    run's own cutoffs (`--k`, each at most top_k), recorded for `score`."""
    if not 1 <= top_k <= MAX_SEARCH_LIMIT:
        raise RecallbenchError(f"--top-k must be between 1 and {MAX_SEARCH_LIMIT}, got {top_k}")
    if ks is not None and not all(1 <= k <= top_k for k in ks):
        raise RecallbenchError(
            f"--k {','.join(map(str, ks))}: every k must be between 1 and --top-k {top_k}"
        )
    if repeat < 1:
        raise RecallbenchError(f"--repeat must be at least 1, got {repeat}")
    require_made_from(hydrate_env, suite_env)
    if ks:  # refused here, not after the searches, when the dataset takes no cutoffs
        from recallbench.datasets.base import dataset_measures

        suite = suite_env["data"]
        dataset_measures(suite["dataset"], top_k, suite["options"], ks)
    from recallbench.systems import get_system

    execution = execution or Execution()
    watch = Stopwatch()
    hyd = hydrate_env["data"]
    system = get_system(hyd["system"])
    kept = hyd["mode"] == "kept"
    levels = [lv["name"] for lv in suite_env["data"]["levels"]]
    root = stores_root(build_dir) if kept else safe_child(Path(build_dir), WORK_DIR)
    counts = suite_env["data"]["counts"]
    slices = slice_count(execution, kept, counts["scopes"])
    index = suite_env["data"]["scopes"]
    root = root.resolve()  # once: resolving a path costs a system call per component
    # each task reads its own scope from the spool: the parent hands out only where it lies
    items = (
        {
            "index": i,
            "ref": ref,
            "queries": span,
            # a kept store's directory; for transient stores the root of the workers' own
            "directory": str(tasks.worker_dir(root, i) if kept else root),
            "kept": kept,
            "expect": hyd["stores"][i] if kept else None,
            "levels": levels,
            "top_k": top_k,
            "repeat": repeat,
        }
        for i, ref in scope_refs(suite_env)
        for span in query_spans(index[i]["queries"], slices)
    )
    batch = batch_size(execution, counts["scopes"] * slices)
    execution, made = vector_cache(execution, system, suite_env, build_dir)
    cache = cache_spec(execution, system, suite_env)
    rows, scopes, latency = [], [], {}
    inside = task_seconds = ingest = 0.0
    harness = dict.fromkeys(tasks.HARNESS_PARTS, 0.0)
    try:
        for result in run_tasks(
            tasks.query_scope,
            items,
            system=hyd["system"],
            execution=execution,
            cache=cache,
            total=counts["scopes"] * slices,
            desc="query",
            query_total=counts["queries"],
            window=QUERY_WINDOW,
            batch=batch,
        ):
            rows.extend(result["rows"])
            if not scopes or scopes[-1]["scope_id"] != result["scope_id"]:
                scopes.append({"scope_id": result["scope_id"], **result["store"]})
            latency.update(result["latency_ms"])
            inside += result["timing"]["seconds_inside"]
            task_seconds += result["timing"]["seconds_task"]
            ingest += result["timing"].get("ingest_seconds", 0.0)
            for part in tasks.HARNESS_PARTS:
                harness[part] += result["timing"][part]
    finally:
        if not kept:
            tasks.remove_tree(root)
    data = {
        "system": system.name,
        "top_k": top_k,
        **({"ks": sorted(set(ks))} if ks else {}),
        "levels": levels,
        "store_mode": hyd["mode"],
        "call_timeout": execution.call_timeout,
        "scopes": scopes,
        "queries": rows,
    }
    wall = watch.seconds()
    workers = execution.workers
    timing = {
        "execution": execution.describe(),
        "vector_cache": made,
        "scopes_per_task": batch,
        "repeat": repeat,
        "latency": latency_summary(latency),
        "wall_seconds": wall,
        "seconds_inside_system": inside,
        "seconds_in_tasks": task_seconds,
        "ingest_seconds": ingest if not kept else None,
        "harness_overhead_in_tasks": (task_seconds - inside) / inside if inside else None,
        "harness_overhead_end_to_end": (wall * workers - inside) / inside if inside else None,
        "share_inside_system": inside / (wall * workers) if wall else None,
        # parts of the harness's time within the tasks, summed over workers (seconds)
        **{part: harness[part] for part in tasks.HARNESS_PARTS},
    }
    env = envelope("runs", data, inputs_of(suite_env, hydrate_env))
    return with_embedder_build(env, cache), timing
