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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, inputs_of, require_made_from
from recallbench.buildpaths import safe_child
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
from recallbench.stages.query import query_spans, slice_count

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


def _requery(
    item: Mapping[str, Any],
    done: Mapping[str, Any],
    queries: int,
    slices: int,
    system: str,
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
        tasks.requery_clone,
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
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Round-trip the sampled scopes; return the `roundtrip` envelope and its timing."""
    from recallbench.errors import RecallbenchError
    from recallbench.systems import get_system

    if sample < 1:
        raise RecallbenchError(f"--sample must be at least 1, got {sample}")
    execution = execution or Execution()
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    watch = Stopwatch()
    hyd, runs = hydrate_env["data"], runs_env["data"]
    system = get_system(hyd["system"])
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
    for row in runs["queries"]:
        rows_of.setdefault(row["scope_id"], []).append(row)
    stores, work_root = stores_root(build_dir).resolve(), work.resolve()
    # only the sampled scopes' lines of the spool are read, each by its task
    items = (
        {
            "index": i,
            "ref": ref,
            "directory": str(tasks.worker_dir(stores, i)),
            "kept": kept,
            "expect": {k: v for k, v in runs["scopes"][i].items() if k in ("records", "digest")},
            "work": str(tasks.worker_dir(work_root, i)),
            **expected(rows_of.get(ref["scope_id"], [])),
        }
        for i, ref in scope_refs(suite_env)
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
    slices = slice_count(execution, True, len(chosen))
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
        tasks.roundtrip_scope,
        items,
        system=hyd["system"],
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
        per_query.update(_requery(item, done, queries, slices, hyd["system"], execution, cache))
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
