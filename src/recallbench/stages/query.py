"""query: every query of every scope through the system's production search.

The benchmark's core is `search_scope`: for each query of a scope it calls the system's own
`search(text, limit)` through the boundary and records what the scores are computed from.

* Hits: the system returns memories (ids it was given, scores); the boundary checks their
  types, that each id is stored in this scope, finite scores and no repeats.
* Levels: each level's ranking is the memories' dataset ids at that level in order of first
  appearance (`model.level_ranking`); an id's score is its first holder's. The system only
  ever sees `Memory.memory_id` and the memory's text (and identifier, importance, tags); the
  dataset ids behind a memory (its `units`) stay on this side.
* Widening: when a level has fewer than top-k distinct ids (turns of the same session), the
  search is widened (`_widened_search`: limit doubled, up to the store's size) until every
  level has top-k ids or the store is exhausted: the convention of turn-level retrievers in
  the LongMemEval paper. Each row records the final limit.
* Repeats: with `--repeat N` each query is searched N times at that limit; results that
  differ are refused (the system is not deterministic); every search is a latency sample.
* Misses: for each relevant id not ranked, where it ranked in an untimed search of the whole
  store, the identifier of the memory holding it, and (systems with a lexical matcher)
  whether that matcher matched it: facts that explain a miss, never scored.

Each task (`query_scope`, a worker task) reads its own scope from validate's spool (the
parent hands out only where each scope's line lies; several scopes per task when there are
many). Kept stores (see hydrate) are opened read-only and checked first (record count and
content digest through the system's own API); transient stores are built, searched and
removed inside the task, in the worker's own directory (`recallbench.engine.workerstate`).
The parent keeps the rows on disk as they come back (`queryrows.RowSpool`), so its memory
does not grow with queries x top-k; the envelope's `queries` reads them back one at a time,
and runs.json is written from them in pieces. runs.json holds, per query, the ranked hits,
each level's ranking and gold, and the facts that explain misses; latencies, the time inside
the system and the harness's parts go to the timing sidecar.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import (
    envelope,
    inputs_of,
    require_made_from,
    with_embedder_build,
)
from recallbench.builddir.paths import safe_child
from recallbench.builddir.queryrows import RowSpool
from recallbench.builddir.scopespool import scope_refs
from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Memory, Query, Scope, level_firsts, level_ranking
from recallbench.engine import workerstate
from recallbench.engine.tasks import (
    Execution,
    Stopwatch,
    check_same_options,
    query_spans,
    run_tasks,
    shares_stores,
    slice_count,
    stores_root,
)
from recallbench.engine.vectorprep import cache_spec, vector_cache
from recallbench.metrics.arithmetic import percentile
from recallbench.systems.base import structured
from recallbench.systems.registry import resolve_system

#: Per-call search limit (the scope document's MAX_SEARCH_LIMIT).
MAX_SEARCH_LIMIT = 10_000
WORK_DIR = "work"
#: tasks per worker taken ahead of the one whose result is due: a query task is a scope's
#: place in the spool (a few numbers), so a deep window costs nothing and keeps every worker
#: busy while the head of the order is still running
QUERY_WINDOW = 16
#: at most this many scopes go to a worker as one task (see `batch_size`)
QUERY_BATCH = 4
#: the parts of the harness's own time within a query task, in its timing (the query
#: sidecar sums them): reading and checking the scope's spool line, the vector cache's
#: lookups (called by the system, not counted as its time), and handing the previous
#: transient store to the worker's removal thread (see `transient_store`)
HARNESS_PARTS = ("seconds_reading_scope", "seconds_in_cache_lookups", "seconds_removing_store")


def latency_summary(latency_ms: Mapping[str, list[float]]) -> dict[str, Any]:
    samples = [x for xs in latency_ms.values() for x in xs]
    return {
        "samples": len(samples),
        "p50_ms": percentile(samples, 50),
        "p95_ms": percentile(samples, 95),
        "note": "local diagnostic data from this machine, not a cross-machine performance guarantee",
    }


def batch_size(execution: Execution, tasks_total: int) -> int:
    """Scopes per task sent to a worker: up to QUERY_BATCH when there are many more tasks
    than workers (fewer round trips through the parent, whose time per task then bounds
    how many workers it can feed), one otherwise (so the work still spreads evenly)."""
    if execution.executor == "local" and execution.workers == 1:
        return 1  # everything runs in this process: nothing to send
    return max(1, min(QUERY_BATCH, tasks_total // (execution.workers * QUERY_WINDOW)))


def _widened_search(
    store: Any,
    query: Query,
    memories: Mapping[str, Memory],
    levels: Sequence[str],
    top_k: int,
    count: int,
    where: str,
) -> tuple[list[Any], int, list[float]]:
    """Search with limit top-k, doubling it until every level has top-k distinct ids or the
    store is exhausted; (hits, final limit, latencies in ms of the timed searches)."""
    guard = workerstate.guard()
    limit = max(1, min(top_k, count)) if count else top_k
    latencies = []
    while True:
        start = time.perf_counter()
        hits = workerstate.search(store, query, limit, where)
        latencies.append((time.perf_counter() - start) * 1000.0)
        # the boundary checks types, ids stored in this scope, finite scores, no repeats
        hits = guard.hits(hits, limit, memories, where)
        ids = [h.memory_id for h in hits]
        short = any(len(level_ranking(ids, memories, lv)) < top_k for lv in levels)
        if not short or len(hits) < limit or limit >= count:
            return hits, limit, latencies
        limit = min(count, limit * 2)


def search_scope(
    store: Any, scope: Scope, levels: Sequence[str], top_k: int, repeat: int
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every query of the scope: ranked hits, each level's ranking and gold, the facts that
    explain misses (where a missed id ranked in a search of the whole store, and whether the
    system's lexical matcher matched it). Returns (rows, latency samples in ms per query).

    The benchmark's core: see the module's docstring for what each step records."""
    system, guard = workerstate.system(), workerstate.guard()
    memories = scope.memory_by_id()
    in_scope = f"scope {scope.scope_id}"
    count = guard.whole_number(guard.call("count", in_scope, store.count), "count", in_scope)
    progress = workerstate.progress()
    holders_at: dict[str, dict[str, list[Memory]]] = {}  # per level, made at the first miss
    rows, latencies = [], {}
    for q in scope.queries:
        where = f"scope {scope.scope_id}, query {q.query_id}"
        hits, limit, samples = _widened_search(store, q, memories, levels, top_k, count, where)
        for _ in range(repeat - 1):
            start = time.perf_counter()
            again = workerstate.search(store, q, limit, where)
            samples.append((time.perf_counter() - start) * 1000.0)
            again = guard.hits(again, limit, memories, where)
            if again != hits:
                raise RecallbenchError(
                    f"query {q.query_id}: results differ between repeats; the system is not deterministic"
                )
        ids = [h.memory_id for h in hits]
        per_level = {}
        for level in levels:
            firsts = level_firsts(ids, memories, level)  # each id's first holder, ranked
            ranking = list(firsts)[:top_k]
            per_level[level] = {
                "ranking": ranking,
                "scores": [hits[firsts[unit]].score for unit in ranking],
                "gold": dict(q.relevance.get(level, {})),
            }
        missed = {
            level: sorted(q.relevant(level) - set(per_level[level]["ranking"])) for level in levels
        }
        row: dict[str, Any] = {
            "query_id": q.query_id,
            "scope_id": scope.scope_id,
            "category": q.category,
            "limit": limit,
            "hits": [
                {
                    "memory_id": h.memory_id,
                    "score": h.score,
                    "identifier": h.identifier,
                    "group": memories[h.memory_id].duplicate_group,
                }
                for h in hits
            ],
            "levels": per_level,
            "missed": {},
        }
        lexical = None
        if getattr(system, "lexical", False):  # a diagnostic, untimed, never scored
            matcher, matched = guard.lexical(
                guard.call("lexical_matches", where, store.lexical_matches, q.text), memories, where
            )
            lexical = (matcher, set(matched))
            row["lexical"] = {"matcher": matcher, "matched": len(matched)}
        if any(missed.values()):
            # untimed: where did the missed ids rank in a search of the whole store?
            if count <= limit:
                deep = ids
            else:
                deeper = workerstate.search(store, q, count, where)
                deep = [h.memory_id for h in guard.hits(deeper, count, memories, where)]
            for level, gone in missed.items():
                deep_ranking = level_ranking(deep, memories, level)
                rank_of = {unit: i + 1 for i, unit in enumerate(deep_ranking)}
                entries = []
                if gone and level not in holders_at:
                    holders_at[level] = scope.holders(level)
                for unit in gone:
                    holders = holders_at[level].get(unit, [])
                    entry = {
                        "id": unit,
                        "grade": q.relevance[level][unit],
                        "rank": rank_of.get(unit),
                        "of": len(deep_ranking),
                        "identifier": holders[0].identifier if holders else None,
                    }
                    if lexical is not None:
                        entry["lexical_match"] = any(m.memory_id in lexical[1] for m in holders)
                    entries.append(entry)
                if entries:
                    row["missed"][level] = entries
        rows.append(row)
        latencies[q.query_id] = samples
        if progress is not None:
            progress(1)
    return rows, latencies


def query_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """A worker task: search every query of one scope. Open the kept store (checking it is
    the one hydrate recorded) or build a transient one, search, close (and delete a
    transient store).

    The store's facts: a kept store's record count and digest (checked against hydrate's);
    a transient store's record count (its content is the spool's, which suite.json digests).
    """
    from recallbench.systems.base import HarnessCallbacks

    started = time.perf_counter()
    scope = workerstate.task_scope(item)
    reading = time.perf_counter() - started
    lookups = HarnessCallbacks.seconds
    inside = workerstate.inside()
    directory = Path(item["directory"])
    where = f"scope {scope.scope_id}"
    timing: dict[str, Any] = {}
    removing = 0.0
    if item["kept"]:
        try:
            store = workerstate.attach(directory, where)
        except FileNotFoundError:
            raise workerstate.StoreDamaged(
                f"{directory}: no store; run `recallbench hydrate` first"
            ) from None
        try:
            facts = workerstate.check_store(
                store, item["expect"], directory, "recallbench hydrate", where
            )
        except BaseException:
            workerstate.close_quietly(store, where)
            raise
    else:
        start = time.perf_counter()
        directory = workerstate.transient_store(directory)
        removing = time.perf_counter() - start
        store, timing = workerstate.build_store(scope, directory)
        facts = {"records": timing["records"]}
    try:
        rows, latencies = search_scope(store, scope, item["levels"], item["top_k"], item["repeat"])
    except BaseException:
        workerstate.close_quietly(store, where)
        raise
    workerstate.close(store, where)
    timing["store_bytes"] = workerstate.directory_bytes(directory)  # untimed, after the searches
    return {
        "index": item["index"],
        "scope_id": scope.scope_id,
        "store": facts,
        "rows": rows,
        "latency_ms": latencies,
        "timing": {
            **timing,
            "seconds_inside": workerstate.inside() - inside,
            "seconds_task": time.perf_counter() - started,
            "seconds_reading_scope": reading,
            "seconds_in_cache_lookups": HarnessCallbacks.seconds - lookups,
            "seconds_removing_store": removing,
        },
    }


def run_query(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    build_dir: Path,
    *,
    top_k: int,
    repeat: int = 1,
    execution: Execution | None = None,
    ks: Sequence[int] | None = None,
    system: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Search every scope's queries; return the `runs` envelope and its timing. `ks`: the
    run's own cutoffs (`--k`, each at most top_k), recorded for `score`. `system`: the
    object of the system hydrate.json names, already resolved in this process (`run`'s);
    None: resolved once, here."""
    if not 1 <= top_k <= MAX_SEARCH_LIMIT:
        raise RecallbenchError(f"--top-k must be between 1 and {MAX_SEARCH_LIMIT}, got {top_k}")
    if ks is not None and not all(1 <= k <= top_k for k in ks):
        raise RecallbenchError(
            f"--k {','.join(map(str, ks))}: every k must be between 1 and --top-k {top_k}"
        )
    if repeat < 1:
        raise RecallbenchError(f"--repeat must be at least 1, got {repeat}")
    require_made_from(hydrate_env, suite_env)
    if ks:  # refused here, not after the searches, when the dataset's family takes no cutoffs
        from recallbench.datasets.base import family_measures, suite_family

        suite = suite_env["data"]
        family_measures(suite_family(suite), suite["levels"], top_k, ks, suite["options"])
    execution = execution or Execution()
    watch = Stopwatch()
    hyd = hydrate_env["data"]
    # once: carried to what needs it
    system = resolve_system(hyd["system"], system, named_by="hydrate.json")
    check_same_options(hyd, system, execution.call_timeout)
    kept = hyd["mode"] == "kept"
    levels = [lv["name"] for lv in suite_env["data"]["levels"]]
    root = stores_root(build_dir) if kept else safe_child(Path(build_dir), WORK_DIR)
    counts = suite_env["data"]["counts"]
    slices = slice_count(execution, kept and shares_stores(system), counts["scopes"])
    index = suite_env["data"]["scopes"]
    root = root.resolve()  # once: resolving a path costs a system call per component
    # each task reads its own scope from the spool: the parent hands out only where it lies
    items = (
        {
            "index": i,
            "ref": ref,
            "queries": span,
            # a kept store's directory; for transient stores the root of the workers' own
            "directory": str(workerstate.store_dir(root, i) if kept else root),
            "kept": kept,
            "expect": hyd["stores"][i] if kept else None,
            "levels": levels,
            "top_k": top_k,
            "repeat": repeat,
        }
        for i, ref in scope_refs(suite_env, structured(system))
        for span in query_spans(index[i]["queries"], slices)
    )
    batch = batch_size(execution, counts["scopes"] * slices)
    execution, made = vector_cache(execution, system, suite_env, build_dir)
    cache = cache_spec(execution, system, suite_env)
    # the rows go to disk as each task's come back: never all in memory (see `RowSpool`)
    rows, scopes, latency = RowSpool(Path(build_dir)), [], {}
    inside = task_seconds = ingest = 0.0
    store_bytes: dict[str, int] = {}  # per scope (a scope's slices each build its store)
    harness = dict.fromkeys(HARNESS_PARTS, 0.0)
    try:
        for result in run_tasks(
            query_scope,
            items,
            system=system,
            execution=execution,
            cache=cache,
            total=counts["scopes"] * slices,
            desc="query",
            query_total=counts["queries"],
            window=QUERY_WINDOW,
            batch=batch,
        ):
            for row in result["rows"]:
                rows.add(row)
            if not scopes or scopes[-1]["scope_id"] != result["scope_id"]:
                scopes.append({"scope_id": result["scope_id"], **result["store"]})
            latency.update(result["latency_ms"])
            inside += result["timing"]["seconds_inside"]
            task_seconds += result["timing"]["seconds_task"]
            ingest += result["timing"].get("ingest_seconds", 0.0)
            store_bytes[result["scope_id"]] = max(
                store_bytes.get(result["scope_id"], 0), result["timing"].get("store_bytes", 0)
            )
            for part in HARNESS_PARTS:
                harness[part] += result["timing"][part]
    finally:
        if not kept:
            workerstate.remove_tree(root)
    data = {
        "system": system.name,
        "top_k": top_k,
        **({"ks": sorted(set(ks))} if ks else {}),
        "levels": levels,
        "store_mode": hyd["mode"],
        "call_timeout": execution.call_timeout,
        "threads": execution.threads,
        "scopes": scopes,
        "queries": rows.rows(),
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
        # each scope's store directory on disk after its searches, summed over the scopes
        # (a server's own files count where the system keeps them in the store directory)
        "store_bytes": sum(store_bytes.values()),
        "harness_overhead_in_tasks": (task_seconds - inside) / inside if inside else None,
        "harness_overhead_end_to_end": (wall * workers - inside) / inside if inside else None,
        "share_inside_system": inside / (wall * workers) if wall else None,
        # parts of the harness's time within the tasks, summed over workers (seconds)
        **{part: harness[part] for part in HARNESS_PARTS},
    }
    env = envelope("runs", data, inputs_of(suite_env, hydrate_env))
    return with_embedder_build(env, cache), timing
