"""hydrate: a fresh store of the system under test per scope, every memory ingested.

Stores are kept under ``BUILD/stores/<scope index>/`` when the dataset has one scope (the
fixture suite) or when asked (`keep=True`). With many scopes (a LongMemEval file holds
hundreds), keeping every store between two commands would cost gigabytes: then hydrate
records the plan ("transient") and `query` builds each scope's store inside its task,
searches it and removes it. Either way hydrate.json names the system and its
configuration; for kept stores it records each store's record count and content digest,
which every later stage checks before it trusts a store.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import envelope, inputs_of, with_embedder_build
from recallbench.builddir.scopespool import checked_structure, stream_scopes
from recallbench.engine import workerstate
from recallbench.engine.tasks import Execution, Stopwatch, run_tasks, stores_root
from recallbench.engine.vectorprep import ContentLoss, Truncation, cache_spec, counted, vector_cache
from recallbench.systems.base import structured
from recallbench.systems.boundary import system_boundary
from recallbench.systems.registry import resolve_system


def hydrate_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """A worker task: build the scope's store in item["directory"] and keep it; its facts
    and timing."""
    scope = workerstate.task_scope(item)
    directory = Path(item["directory"])
    workerstate.remove_tree(directory)
    where = f"scope {scope.scope_id}"
    inside = workerstate.inside()
    store, timing = workerstate.build_store(scope, directory)
    try:
        facts = workerstate.store_facts(store, where)
    finally:
        workerstate.close(store, where)
    return {
        "index": item["index"],
        "scope_id": scope.scope_id,
        **facts,
        "timing": {**timing, "seconds_inside": workerstate.inside() - inside},
    }


def capability_flags(system: Any) -> dict[str, bool]:
    """What hydrate.json (and the result) records of the system's capabilities
    (`base.capabilities`): clone, embedder, lexical, and `structured` only when the system
    asks for structure (so the result of every other system keeps its bytes)."""
    from recallbench.systems.base import capabilities

    has = capabilities(system)
    flags = {name: name in has for name in ("clone", "embedder", "lexical")}
    if "structured" in has:
        flags["structured"] = True
    return flags


def system_source(system: Any, provided_by: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where the code under test comes from (`recallbench.core.source.installed_source`): a
    plugin's own distribution (`provided_by`: `registry.provider`'s record), or the package
    a built-in system measures (its class's `distribution`: HotMem's systems name
    `hotmem`); None for a built-in that measures recallbench's own code (bm25) or names no
    package."""
    from recallbench.core.source import installed_source

    own = provided_by["distribution"]
    under_test = own if own != "recallbench" else getattr(type(system), "distribution", None)
    return installed_source(under_test) if isinstance(under_test, str) else None


def run_hydrate(
    suite_env: Mapping[str, Any],
    build_dir: Path,
    system_name: str,
    *,
    keep: bool | None = None,
    execution: Execution | None = None,
    system: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build (or plan) every scope's store; return the `hydrate` envelope and its timing.
    `system`: the object of `system_name` already resolved in this process (`run`'s, carried
    across its stages); None: resolved once, here. Either is carried to what needs it."""
    execution = execution or Execution()
    watch = Stopwatch()
    system = resolve_system(system_name, system)
    scopes = suite_env["data"]["counts"]["scopes"]
    keep = scopes == 1 if keep is None else keep
    wants_structure = structured(system)
    if wants_structure:  # a missing or foreign structure spool is refused here in every mode
        checked_structure(suite_env)
    root = stores_root(build_dir)
    if root.exists():
        shutil.rmtree(root)
    stores = None
    timing: dict[str, Any] = {"execution": execution.describe()}
    # the vector cache is checked (or made) in every mode: a transient plan's query stage
    # reads the same cache, and a bad --cache is refused here, not later
    execution, timing["vector_cache"] = vector_cache(execution, system, suite_env, build_dir)
    cache = cache_spec(execution, system, suite_env)
    guard = system_boundary(system, execution.call_timeout)  # the stage's one boundary
    tally = Truncation(system, guard)
    # what the store declares it cannot see of a long text
    loss = ContentLoss(system, guard)
    if keep:
        resolved = root.resolve()  # once, not per scope
        items = (
            {
                "index": i,
                "scope": scope,
                "directory": str(workerstate.store_dir(resolved, i)),
            }
            # a structured system's scopes carry their structure (no other's do)
            for i, scope in counted(stream_scopes(suite_env, wants_structure), tally, loss)
        )
        stores, ingest, inside = [], 0.0, 0.0
        for result in run_tasks(
            hydrate_scope,
            items,
            system=system,
            execution=execution,
            cache=cache,
            total=scopes,
            desc="hydrate",
        ):
            stores.append(
                {
                    "scope_id": result["scope_id"],
                    "records": result["records"],
                    "digest": result["digest"],
                }
            )
            ingest += result["timing"]["ingest_seconds"]
            inside += result["timing"]["seconds_inside"]
        records = sum(s["records"] for s in stores)
        timing.update(
            ingest_seconds=ingest,
            seconds_inside_system=inside,
            records=records,
            records_per_second=records / ingest if ingest > 0 else None,
        )
    made = timing["vector_cache"]
    # transient: count in a pass of its own (prep's count of the same texts when it made
    # the cache just now)
    recount = [t for t in (tally, loss) if t.counting and (t is loss or made is None)]
    if not keep and recount:
        for _ in counted(stream_scopes(suite_env), *recount):
            pass
    from recallbench.systems.registry import provider

    provided_by = provider(system_name)
    data = {
        "system": system.name,
        "configuration": guard.configuration_of(system),
        # which distribution provided the system, where the code under test comes from
        # and the per-call time limit: recorded beside the result document (in the results
        # envelope), never compared by a baseline
        "provider": provided_by,
        **({"source": source} if (source := system_source(system, provided_by)) else {}),
        "call_timeout": execution.call_timeout,
        # the system's BLAS / OpenMP / torch threads per worker (None: the libraries' own)
        "threads": execution.threads,
        "capabilities": capability_flags(system),
        "mode": "kept" if keep else "transient",
        "stores": stores,
        # a transient plan whose cache prep made just now takes prep's count of the same
        # texts by the same system, instead of a second pass over the spool
        "truncation": made["truncation"] if not keep and made is not None else tally.report(),
    }
    if loss.counting:  # only for a system that declares an input limit (others: no key)
        data["content_loss"] = loss.report()
    timing["wall_seconds"] = watch.seconds()
    env = envelope("hydrate", data, inputs_of(suite_env))
    return with_embedder_build(env, cache), timing
