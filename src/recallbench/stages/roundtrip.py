"""snapshot-roundtrip: the system's clone path, checked on the stores the runs came from.

For each scope of the sample: the source store is checked against what hydrate (kept stores)
or query (transient stores, rebuilt here) recorded, packaged with the system's snapshot,
verified, restored into a clean store, and every query of the scope is searched again; the
ranked ids must be identical. Each of the system's own corruptions of the package (a raw
byte change, a content change under a stale manifest, ...) must then be rejected by its
verifier. A dataset with many scopes is sampled: the `sample` scopes with the smallest
sha256(scope id), reported in dataset order. A system without a clone path gets "n/a".
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import envelope, inputs_of, require_made_from
from recallbench.builddir.paths import safe_child
from recallbench.builddir.scopespool import scope_refs
from recallbench.core.model import Query, Scope
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
from recallbench.systems.base import structured
from recallbench.systems.registry import resolve_system

DEFAULT_SAMPLE = 20
ROUNDTRIP_DIR = "roundtrip"
SAMPLE_RULE = "the scopes with the smallest sha256(scope id); all when there are no more"


def sample_scopes(scope_ids: list[str], size: int) -> set[str]:
    """The deterministic sample: `size` scope ids with the smallest sha256 of the id."""
    if size >= len(scope_ids):
        return set(scope_ids)
    ranked = sorted(scope_ids, key=lambda s: (hashlib.sha256(s.encode()).hexdigest(), s))
    return set(ranked[:size])


def expected(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a scope's queries must give again: per query its search limit and ranked hits."""
    return {
        "limits": {r["query_id"]: r["limit"] for r in rows},
        "before": {
            r["query_id"]: [{"memory_id": h["memory_id"], "score": h["score"]} for h in r["hits"]]
            for r in rows
        },
    }


def compare_rankings(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-query drift between two ranked hit lists (rows with memory_id and score)."""
    ids_before = [h["memory_id"] for h in before]
    ids_after = [h["memory_id"] for h in after]
    score_before = {h["memory_id"]: h["score"] for h in before}
    score_after = {h["memory_id"]: h["score"] for h in after}
    common = sorted(set(score_before) & set(score_after))
    return {
        "identical": ids_before == ids_after,
        "same_set": set(ids_before) == set(ids_after),
        "moved_positions": [
            i + 1
            for i in range(max(len(ids_before), len(ids_after)))
            if (ids_before[i] if i < len(ids_before) else None)
            != (ids_after[i] if i < len(ids_after) else None)
        ],
        "only_before": [m for m in ids_before if m not in score_after],
        "only_after": [m for m in ids_after if m not in score_before],
        "max_score_drift": max(
            (abs(score_before[m] - score_after[m]) for m in common), default=0.0
        ),
        "after": ids_after,
    }


def _search_again(
    store: Any,
    scope: Scope,
    queries: Sequence[Query],
    limits: Mapping[str, int],
    before: Mapping[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """Each query's drift between the runs' hits (`before`) and this store's, same limit."""
    guard = workerstate.guard()
    memories = scope.memory_by_id()
    out = {}
    for q in queries:
        where = f"scope {scope.scope_id}, query {q.query_id} (the restored clone)"
        limit = limits[q.query_id]
        hits = guard.hits(workerstate.search(store, q, limit, where), limit, memories, where)
        after = [{"memory_id": h.memory_id, "score": h.score} for h in hits]
        out[q.query_id] = compare_rankings(before[q.query_id], after)
    return out


def requery_clone(item: Mapping[str, Any]) -> dict[str, Any]:
    """A worker task: a slice of a scope's queries searched again on the clone a round trip
    restored (opened read-only by each worker): {"per_query": drift per query}."""
    scope = workerstate.task_scope(item)
    where = f"scope {scope.scope_id} (the restored clone)"
    clone = workerstate.attach(Path(item["clone"]), where)
    try:
        drift = _search_again(clone, scope, scope.queries, item["limits"], item["before"])
    except BaseException:
        workerstate.close_quietly(clone, where)
        raise
    workerstate.close(clone, where)
    return {"per_query": drift}


def roundtrip_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """A worker task: snapshot -> verify -> clean restore -> search again, for one scope;
    then offer each of the system's own corruptions of the package to its verifier.

    The source store is checked first (record count and digest against what hydrate or
    query recorded): a damaged source is refused, never reported as a clone-path failure.
    """
    from recallbench.systems.base import PackageInfo, SnapshotRejected

    scope = workerstate.task_scope(item)
    system, guard = workerstate.system(), workerstate.guard()
    clone_path = system.clone
    where = f"scope {scope.scope_id}"
    work = Path(item["work"])
    workerstate.remove_tree(work)
    work.mkdir(parents=True)
    rerun = "recallbench hydrate" if item["kept"] else "recallbench query"
    if item["kept"]:
        try:
            source = workerstate.attach(Path(item["directory"]), where)
        except FileNotFoundError:
            raise workerstate.StoreDamaged(
                f"{item['directory']}: no store; run `recallbench hydrate` first"
            ) from None
    else:
        source, _ = workerstate.build_store(scope, work / "source")
    try:
        # a kept store is checked against hydrate's digest; a rebuilt one gives its own
        source_facts = workerstate.check_store(
            source, item["expect"], Path(item["directory"]), rerun, where
        )
        start = time.perf_counter()
        package = guard.call("snapshot", where, clone_path.snapshot, source, work / "package")
        snapshot_s = time.perf_counter() - start
        if not isinstance(package, PackageInfo):
            raise guard.failure("snapshot", where, "returned something other than a PackageInfo")
        guard.whole_number(package.records, "snapshot", where)
        guard.whole_number(package.size_bytes, "snapshot", where)
    except BaseException:
        workerstate.close_quietly(source, where)
        raise
    workerstate.close(source, where)
    if not item["kept"]:
        workerstate.remove_tree(work / "source")

    start = time.perf_counter()
    verified = guard.whole_number(
        guard.call("verify", where, clone_path.verify, work / "package", work / "spool"),
        "verify",
        where,
    )
    verify_s = time.perf_counter() - start
    start = time.perf_counter()
    clone_at = f"{where} (the restored clone)"
    clone = guard.call("restore", where, clone_path.restore, work / "package", work / "clone")
    if workerstate.vectors() is not None:  # with a cache, queries take their vectors from it
        workerstate.close(clone, clone_at)
        clone = workerstate.attach(work / "clone", clone_at)
    restore_s = time.perf_counter() - start
    try:
        clone_facts = workerstate.store_facts(clone, clone_at)
        # the first query times the cold start; the rest follow unless other tasks do them
        first, rest = scope.queries[:1], scope.queries[1:]
        per_query = _search_again(clone, scope, first, item["limits"], item["before"])
        cold_start_s = time.perf_counter() - start if first else None
        if item.get("requery", True):
            per_query.update(_search_again(clone, scope, rest, item["limits"], item["before"]))
    except BaseException:
        workerstate.close_quietly(clone, clone_at)
        raise
    workerstate.close(clone, clone_at)

    corruptions = []
    made = guard.call(
        "corruptions", where, clone_path.corruptions, work / "package", work / "corrupted"
    )
    for corruption in made:
        try:
            guard.call(
                f"verify of the {corruption.name} corruption",
                where,
                clone_path.verify,
                corruption.package_dir,
                work / "spool",
            )
            outcome = {"rejected": False, "reason": None}
        except SnapshotRejected as exc:
            outcome = {"rejected": True, "reason": exc.reason}
        corruptions.append(
            {"name": corruption.name, "description": corruption.description, **outcome}
        )
    workerstate.remove_tree(work / "spool")
    return {
        "index": item["index"],
        "scope_id": scope.scope_id,
        "records": {
            "source": item["expect"]["records"],
            "packaged": package.records,
            "verified": verified,
            "clone": clone_facts["records"],
        },
        "clone_digest_matches": clone_facts["digest"] == source_facts["digest"],
        "per_query": per_query,
        "clone": str(work / "clone"),
        "corruptions": corruptions,
        "timing": {
            "package_bytes": package.size_bytes,
            "snapshot_seconds": snapshot_s,
            "verify_seconds": verify_s,
            "restore_seconds": restore_s,
            "cold_start_to_first_query_seconds": cold_start_s,
            "records": package.records,
        },
    }


def _requery(
    item: Mapping[str, Any],
    done: Mapping[str, Any],
    queries: int,
    slices: int,
    system: Any,
    execution: Execution,
    cache: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Search a round-tripped scope's queries after its first (`roundtrip_scope` searched
    that one) again on its clone, in slices; each task reads the scope's line itself."""
    parts = (
        {
            "index": item["index"],
            "ref": item["ref"],
            "queries": (1, queries) if span is None else (1 + span[0], 1 + span[1]),
            "clone": done["clone"],
            "limits": item["limits"],
            "before": item["before"],
        }
        for span in query_spans(queries - 1, slices)
        if queries > 1
    )
    out: dict[str, Any] = {}
    for result in run_tasks(
        requery_clone,
        parts,
        system=system,
        execution=execution,
        cache=cache,
        total=slices,
        desc="snapshot-roundtrip (search again)",
    ):
        out.update(result["per_query"])
    return out


def run_roundtrip(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    runs_env: Mapping[str, Any],
    build_dir: Path,
    *,
    sample: int = DEFAULT_SAMPLE,
    execution: Execution | None = None,
    system: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Round-trip the sampled scopes; return the `roundtrip` envelope and its timing.
    `system`: the object of the system hydrate.json names, already resolved in this process
    (`run`'s); None: resolved once, here."""
    from recallbench.core.errors import RecallbenchError

    if sample < 1:
        raise RecallbenchError(f"--sample must be at least 1, got {sample}")
    execution = execution or Execution()
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    watch = Stopwatch()
    hyd, runs = hydrate_env["data"], runs_env["data"]
    # once: carried to what needs it
    system = resolve_system(hyd["system"], system, named_by="hydrate.json")
    check_same_options(hyd, system, execution.call_timeout)  # transient sources are rebuilt here
    work = safe_child(Path(build_dir), ROUNDTRIP_DIR)
    if work.exists():
        shutil.rmtree(work)
    scope_ids = [s["scope_id"] for s in runs["scopes"]]
    chosen = sample_scopes(scope_ids, sample)
    base = {
        "system": system.name,
        "top_k": runs["top_k"],
        "sample": {
            "scopes_total": len(scope_ids),
            "scopes_sampled": len(chosen) if system.clone is not None else 0,
            "size": sample,
            "rule": SAMPLE_RULE,
            "scope_ids": [s for s in scope_ids if s in chosen] if system.clone else [],
        },
    }
    if system.clone is None:
        data = {**base, "available": False, "reason": f"n/a: {system.name} has no clone path"}
        return envelope("roundtrip", data, inputs_of(suite_env, hydrate_env, runs_env)), {}
    kept = hyd["mode"] == "kept"
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in runs["queries"]:  # only the sampled scopes' rows are kept
        if row["scope_id"] in chosen:
            rows_of.setdefault(row["scope_id"], []).append(row)
    stores, work_root = stores_root(build_dir).resolve(), work.resolve()
    # only the sampled scopes' lines of the spool are read, each by its task
    items = (
        {
            "index": i,
            "ref": ref,
            "directory": str(workerstate.store_dir(stores, i)),
            "kept": kept,
            "expect": {k: v for k, v in runs["scopes"][i].items() if k in ("records", "digest")},
            "work": str(workerstate.store_dir(work_root, i)),
            **expected(rows_of.get(ref["scope_id"], [])),
        }
        for i, ref in scope_refs(suite_env, structured(system))
        if ref["scope_id"] in chosen
    )
    per_query: dict[str, Any] = {}
    records = {"source": 0, "packaged": 0, "verified": 0, "clone": 0}
    corruption: dict[str, dict[str, Any]] = {}
    digests_match = True
    timing = {
        "execution": execution.describe(),
        "package_bytes": 0,
        "snapshot_seconds": 0.0,
        "verify_seconds": 0.0,
        "restore_seconds": 0.0,
        "records": 0,
        "cold_start_to_first_query_seconds": None,
    }
    slices = slice_count(execution, shares_stores(system), len(chosen))
    held: dict[int, dict[str, Any]] = {}  # with slices: the items, to search their rest
    if slices > 1:  # one scope, several workers: the clone is searched again in slices

        def holding(items: Any) -> Any:
            for item in items:
                held[item["index"]] = item
                yield {**item, "requery": False}

        items = holding(items)
    pending_requery: list[dict[str, Any]] = []
    execution, timing["vector_cache"] = vector_cache(execution, system, suite_env, build_dir)
    cache = cache_spec(execution, system, suite_env)
    for result in run_tasks(
        roundtrip_scope,
        items,
        system=system,
        execution=execution,
        cache=cache,
        total=len(chosen),
        desc="snapshot-roundtrip",
    ):
        per_query.update(result["per_query"])
        if slices > 1:
            pending_requery.append(result)
        for key in records:
            records[key] += result["records"][key]
        digests_match = digests_match and result["clone_digest_matches"]
        for c in result["corruptions"]:
            entry = corruption.setdefault(
                c["name"],
                {
                    "name": c["name"],
                    "description": c["description"],
                    "scopes": 0,
                    "rejected": 0,
                    "reasons": set(),
                },
            )
            entry["scopes"] += 1
            entry["rejected"] += int(c["rejected"])
            if c["reason"]:
                entry["reasons"].add(c["reason"])
        t = result["timing"]
        for key in (
            "package_bytes",
            "snapshot_seconds",
            "verify_seconds",
            "restore_seconds",
            "records",
        ):
            timing[key] += t[key]
        if timing["cold_start_to_first_query_seconds"] is None:
            timing["cold_start_to_first_query_seconds"] = t["cold_start_to_first_query_seconds"]
    index = suite_env["data"]["scopes"]
    for done in pending_requery:
        item, queries = held[done["index"]], index[done["index"]]["queries"]
        per_query.update(_requery(item, done, queries, slices, system, execution, cache))
    identical = sum(1 for d in per_query.values() if d["identical"])
    checks = [
        {**c, "reasons": sorted(c["reasons"]), "all_rejected": c["rejected"] == c["scopes"]}
        for c in corruption.values()
    ]
    data = {
        **base,
        "available": True,
        "records": records,
        "clone_digest_matches": digests_match,
        "equivalence": {
            "numerator": identical,
            "denominator": len(per_query),
            "value": identical / len(per_query) if per_query else None,
        },
        "per_query": per_query,
        "corruption_checks": checks,
    }
    for key, seconds in (
        ("snapshot", "snapshot_seconds"),
        ("verify", "verify_seconds"),
        ("restore", "restore_seconds"),
    ):
        timing[f"{key}_records_per_second"] = (
            timing["records"] / timing[seconds] if timing[seconds] > 0 else None
        )
    timing["wall_seconds"] = watch.seconds()
    return envelope("roundtrip", data, inputs_of(suite_env, hydrate_env, runs_env)), timing
