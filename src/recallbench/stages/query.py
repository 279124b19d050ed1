"""query: every suite query through the system's production search, ranked ids kept."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, require_made_from
from recallbench.errors import RecallbenchError
from recallbench.stages.validate import suite_of
from recallbench.suite import Suite
from recallbench.systems import get_system
from recallbench.systems.base import Hit, Store


def hits_to_rows(hits: list[Hit], grades: dict[str, int]) -> list[dict[str, Any]]:
    """Ranked hits as artifact rows, each with its graded relevance (0 when ungraded)."""
    return [
        {
            "memory_id": h.memory_id,
            "identifier": h.identifier,
            "score": h.score,
            "grade": grades.get(h.memory_id, 0),
        }
        for h in hits
    ]


def search_all(
    store: Store, suite: Suite, top_k: int, repeat: int = 1
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Run every query `repeat` times; return per-query rows and latencies in ms.

    Raises RecallbenchError when repeats of one query disagree (a nondeterministic system).
    Each row also carries `full_ranking`: for a query that misses a relevant memory, the ids of
    an untimed search over the whole store (to say where the missed memory ranked); otherwise
    the top-k ids. `lexical` names the system's lexical matcher and the ids it matched (a
    diagnostic, untimed).
    """
    depth = store.count()
    rows, latencies = [], {}
    for q in suite.queries:
        first: list[Hit] | None = None
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            hits = store.search(q.query, top_k)
            samples.append((time.perf_counter() - start) * 1000.0)
            if first is None:
                first = hits
            elif hits != first:
                raise RecallbenchError(
                    f"query {q.query_id}: results differ between repeats; the system is not deterministic"
                )
        top_ids = [h.memory_id for h in first or []]
        # Only a query that misses a relevant memory needs the deeper, untimed diagnostic search.
        missing = q.relevant_ids - set(top_ids)
        full = (
            [h.memory_id for h in store.search(q.query, depth)]
            if missing and depth > top_k
            else top_ids
        )
        matcher, matched = store.lexical_matches(q.query)
        rows.append(
            {
                "query_id": q.query_id,
                "category": q.category,
                "hits": hits_to_rows(first or [], q.relevance),
                "full_ranking": full,
                "lexical": {"matcher": matcher, "matched": matched},
            }
        )
        latencies[q.query_id] = samples
    return rows, latencies


def run_query(
    suite_env: dict[str, Any],
    hydrate_env: dict[str, Any],
    store_dir: Path,
    top_k: int = 5,
    repeat: int = 1,
) -> dict[str, Any]:
    """Search every query against the hydrated store; return the `runs` envelope."""
    if top_k < 1:
        raise RecallbenchError(f"--top-k must be at least 1, got {top_k}")
    if repeat < 1:
        raise RecallbenchError(f"--repeat must be at least 1, got {repeat}")
    require_made_from(hydrate_env, suite_env)
    suite = suite_of(suite_env)
    system = get_system(hydrate_env["data"]["system"])
    try:
        store = system.attach(Path(store_dir))
    except FileNotFoundError:
        raise RecallbenchError(f"{store_dir}: no store; run `recallbench hydrate` first") from None
    try:
        if store.count() != hydrate_env["data"]["records"]:
            raise RecallbenchError(
                f"{store_dir}: store holds {store.count()} records, hydrate.json says "
                f"{hydrate_env['data']['records']}; run `recallbench hydrate` again"
            )
        rows, latencies = search_all(store, suite, top_k, repeat)
    finally:
        store.close()
    data = {
        "system": system.name,
        "top_k": top_k,
        "repeat": repeat,
        "queries": rows,
        "latency_ms": latencies,
    }
    inputs = {"suite": suite_env["fingerprint"], "hydrate": hydrate_env["fingerprint"]}
    return envelope("runs", data, inputs)
