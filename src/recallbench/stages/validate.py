"""validate: read a dataset through its reader, check everything, write the suite artifact.

The suite artifact (suite.json) records the dataset's identity (files and sha256), the
reader options, levels, categories, drop rules with every drop and its reason, the scope
index (scope id, memories, queries) and counts. It does not copy the data: later stages
stream the scopes again from the same files (`scopes_of`), which must still have the
digests recorded here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope
from recallbench.datasets.base import dataset_policy, open_source
from recallbench.errors import ArtifactError, RecallbenchError
from recallbench.model import Drop, Scope


def _id_problem(value: str) -> str | None:
    from recallbench.ids import id_problem

    return id_problem(value)


def check_scope(scope: Scope, levels: list[str], seen_queries: dict[str, str]) -> None:
    """Ids follow the grammar and are unique; every graded id exists in the scope."""
    where = f"scope {scope.scope_id!r}"
    problem = _id_problem(scope.scope_id)
    if problem:
        raise RecallbenchError(f"{where}: scope id {problem}")
    memory_ids: set[str] = set()
    units: dict[str, set[str]] = {level: set() for level in levels}
    for memory in scope.memories:
        if memory.memory_id in memory_ids:
            raise RecallbenchError(f"{where}: memory id {memory.memory_id!r} appears twice")
        memory_ids.add(memory.memory_id)
        for level, ids in memory.units.items():
            units.setdefault(level, set()).update(ids)
    for level, ids in units.items():
        for unit in ids:
            problem = _id_problem(unit)
            if problem:
                raise RecallbenchError(f"{where}: {level} id {unit!r}: {problem}")
    for query in scope.queries:
        problem = _id_problem(query.query_id)
        if problem:
            raise RecallbenchError(f"{where}: query id {query.query_id!r}: {problem}")
        if query.query_id in seen_queries:
            raise RecallbenchError(
                f"{where}: query id {query.query_id!r} also in scope {seen_queries[query.query_id]!r}"
            )
        seen_queries[query.query_id] = scope.scope_id
        for level, grades in query.relevance.items():
            unknown = sorted(set(grades) - units.get(level, set()))
            if unknown:
                raise RecallbenchError(
                    f"{where}: query {query.query_id!r} grades {level} {unknown[0]!r}, "
                    "which no memory of its scope holds"
                )


def run_validate(
    dataset: str,
    paths: Mapping[str, Path],
    options: Mapping[str, Any] | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Stream the dataset once; return the `suite` envelope (or raise on bad input)."""
    source = open_source(dataset, paths, options)
    source.strict_keys = True  # a repeated key in one object is an error, not last-wins
    levels = [level.name for level in source.levels]
    raw: Counter[str] = Counter()
    scored: Counter[str] = Counter()
    dropped: dict[str, Counter[str]] = {}
    drops: list[dict[str, Any]] = []
    scopes: list[dict[str, Any]] = []
    seen_queries: dict[str, str] = {}
    memories = 0
    for item in source.stream(progress):
        if isinstance(item, Drop):
            raw[item.category] += 1
            dropped.setdefault(item.category, Counter())[item.reason] += 1
            drops.append(item.to_dict())
            continue
        check_scope(item, levels, seen_queries)
        for query in item.queries:
            raw[query.category] += 1
            scored[query.category] += 1
        memories += len(item.memories)
        scopes.append(
            {
                "scope_id": item.scope_id,
                "memories": len(item.memories),
                "queries": len(item.queries),
            }
        )
    for drop in drops:
        if drop["query_id"] in seen_queries:
            raise RecallbenchError(f"query id {drop['query_id']!r} is both scored and dropped")
    if not scopes:
        raise RecallbenchError(f"{dataset}: no query left to score after the drops")
    identity = source.identity()
    categories = list(source.categories)
    categories += sorted(c for c in raw if c not in categories)
    by_reason: Counter[str] = Counter(d["reason"] for d in drops)
    policy = dataset_policy(dataset)
    data = {
        "dataset": dataset,
        "identity": identity,
        "options": dict(source.options),
        "levels": [
            {"name": lv.name, "prefix": lv.prefix, "description": lv.description}
            for lv in source.levels
        ],
        "categories": categories,
        "category_labels": {c: source.category_labels.get(c, c) for c in categories},
        "drop_rules": dict(source.drop_rules),
        "notes": list(source.notes),
        "decision_policy": None if policy is None else f"{dataset} rules",
        "counts": {
            "scopes": len(scopes),
            "memories": memories,
            "queries_raw": sum(raw.values()),
            "queries": sum(scored.values()),
            "dropped": dict(sorted(by_reason.items())),
            "per_category": {
                c: {
                    "raw": raw[c],
                    "scored": scored[c],
                    "dropped": dict(sorted(dropped.get(c, Counter()).items())),
                }
                for c in categories
            },
        },
        "drops": drops,
        "scopes": scopes,
        "summary": source.summary(),
    }
    inputs = {f["role"]: f["sha256"] for f in identity["files"]}
    env = envelope("suite", data, inputs)
    env["source_paths"] = {role: str(Path(p).resolve()) for role, p in paths.items()}
    return env


def source_of(suite_env: Mapping[str, Any]) -> Any:
    """The dataset source a suite artifact was made from, opened again on the same files."""
    data = suite_env["data"]
    paths = {role: Path(p) for role, p in suite_env.get("source_paths", {}).items()}
    for role, path in paths.items():
        if not path.is_file():
            raise ArtifactError(
                f"{path}: the {role} file validate read is gone; run `recallbench validate` again"
            )
    return open_source(data["dataset"], paths, data["options"])


def scopes_of(
    suite_env: Mapping[str, Any], progress: Callable[[int], Any] | None = None
) -> Iterator[tuple[int, Scope]]:
    """(index, scope) for every scope of the suite, streamed again from the source files.

    After the last scope, the files' digests must still be those validate recorded
    (an ArtifactError otherwise: their content changed since).
    """
    source = source_of(suite_env)
    index = 0
    for item in source.stream(progress):
        if isinstance(item, Drop):
            continue
        yield index, item
        index += 1
    expected = {f["role"]: f["sha256"] for f in suite_env["data"]["identity"]["files"]}
    actual = {f["role"]: f["sha256"] for f in source.identity()["files"]}
    if actual != expected or index != suite_env["data"]["counts"]["scopes"]:
        changed = sorted(r for r in expected if actual.get(r) != expected[r]) or ["data"]
        raise ArtifactError(
            f"{suite_env['source_paths'].get(changed[0], changed[0])} changed after validation; "
            "run `recallbench validate` again"
        )
