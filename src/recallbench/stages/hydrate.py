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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, inputs_of, with_embedder_build
from recallbench.spool import stream_scopes
from recallbench.stages import tasks
from recallbench.stages.execution import (
    Execution,
    Stopwatch,
    cache_spec,
    run_tasks,
    vector_cache,
)

STORES_DIR = "stores"


def stores_root(build_dir: Path) -> Path:
    """BUILD/stores (refused when it is a symlink: stores never live outside the build dir)."""
    from recallbench.buildpaths import safe_child

    return safe_child(Path(build_dir), STORES_DIR)


class Truncation:
    """Counts, scope by scope as the stage streams them, how many stored texts exceed the
    system's embedder input limit and the share of their tokens the model never sees.
    `report()` is None when the system has no embedder or no limit."""

    COUNTS = ("texts", "texts_over_limit", "tokens_total", "tokens_unseen", "tokens_of_long_texts")

    def __init__(self, system: Any) -> None:
        embedder = getattr(system, "embedder", None)
        limited = embedder is not None and getattr(embedder, "max_tokens", None) is not None
        self._embedder = embedder if limited else None
        self._name = getattr(system, "name", "?")
        self._total: dict[str, Any] = {}

    @property
    def counting(self) -> bool:
        return self._embedder is not None

    def add(self, scope: Mapping[str, Any]) -> None:
        if self._embedder is None:
            return
        from recallbench.boundary import Boundary
        from recallbench.systems.base import truncation_report

        guard = Boundary(self._name)
        part = guard.call(
            "token_counts",
            f"scope {scope['scope_id']}",
            truncation_report,
            self._embedder,
            [m["text"] for m in scope["memories"]],
        )
        for key in self.COUNTS:
            self._total[key] = self._total.get(key, 0) + part[key]
        self._total["max_tokens"] = part["max_tokens"]

    def report(self) -> dict[str, Any] | None:
        from recallbench.systems.base import truncation_shares

        return truncation_shares(self._total) if self._total else None


def counted(items: Iterator[tuple[int, dict[str, Any]]], tally: Truncation) -> Iterator[Any]:
    """The (index, scope) items, each counted by `tally` as it passes."""
    for index, scope in items:
        tally.add(scope)
        yield index, scope


def run_hydrate(
    suite_env: Mapping[str, Any],
    build_dir: Path,
    system_name: str,
    *,
    keep: bool | None = None,
    execution: Execution | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build (or plan) every scope's store; return the `hydrate` envelope and its timing."""
    from recallbench.systems import get_system

    execution = execution or Execution()
    watch = Stopwatch()
    system = get_system(system_name)
    scopes = suite_env["data"]["counts"]["scopes"]
    keep = scopes == 1 if keep is None else keep
    root = stores_root(build_dir)
    if root.exists():
        shutil.rmtree(root)
    stores = None
    timing: dict[str, Any] = {"execution": execution.describe()}
    # the vector cache is checked (or made) in every mode: a transient plan's query stage
    # reads the same cache, and a bad --cache is refused here, not later
    execution, timing["vector_cache"] = vector_cache(execution, system, suite_env, build_dir)
    cache = cache_spec(execution, system, suite_env)
    tally = Truncation(system)
    if keep:
        resolved = root.resolve()  # once, not per scope
        items = (
            {
                "index": i,
                "scope": scope,
                "directory": str(tasks.worker_dir(resolved, i)),
            }
            for i, scope in counted(stream_scopes(suite_env), tally)
        )
        stores, ingest, inside = [], 0.0, 0.0
        for result in run_tasks(
            tasks.hydrate_scope,
            items,
            system=system_name,
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
    if not keep and tally.counting and made is None:  # transient: count in a pass of its own
        for _ in counted(stream_scopes(suite_env), tally):
            pass
    from recallbench.boundary import Boundary
    from recallbench.systems.registry import provider

    guard = Boundary(system_name)
    data = {
        "system": system.name,
        "configuration": guard.configuration(
            guard.call("configuration", None, system.configuration)
        ),
        # which distribution provided the system, and the per-call time limit: recorded
        # beside the result document (in the results envelope), never compared by a baseline
        "provider": provider(system_name),
        "call_timeout": execution.call_timeout,
        "capabilities": {
            "clone": system.clone is not None,
            "embedder": system.embedder is not None,
            "lexical": bool(system.lexical),
        },
        "mode": "kept" if keep else "transient",
        "stores": stores,
        # a transient plan whose cache prep made just now takes prep's count of the same
        # texts by the same system, instead of a second pass over the spool
        "truncation": made["truncation"] if not keep and made is not None else tally.report(),
    }
    timing["wall_seconds"] = watch.seconds()
    env = envelope("hydrate", data, inputs_of(suite_env))
    return with_embedder_build(env, cache), timing
