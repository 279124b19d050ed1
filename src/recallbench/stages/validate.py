"""validate: read a dataset through its reader, check everything, write the suite artifact.

The suite artifact (suite.json) records the dataset's identity (files and sha256), the
reader options, levels, categories, drop rules with every drop and its reason, the scope
index (scope id, memories, queries, where its line of the spool lies) and counts. Beside it,
validate writes the scope spool (``scopes.jsonl``, see `recallbench.builddir.scopespool`):
every scope as one line of plain JSON, exactly what a worker needs; where the dataset has
structure, the structure spool beside it (``scopes-structure.jsonl``), read only for a
structured system. The data file is read once, here; later stages read the spools, whose
digests suite.json records, and never parse the data file again.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import envelope
from recallbench.builddir.scopespool import STRUCTURE_SPOOL, ValidateSpools
from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Drop, Scope
from recallbench.datasets.base import dataset_policy_name, open_source


def _id_problem(value: str) -> str | None:
    from recallbench.core.ids import id_problem

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
    *,
    spool: Path,
) -> dict[str, Any]:
    """Stream the dataset once; return the `suite` envelope (or raise on bad input).

    The scope spool (and the structure spool, when the dataset has structure) is written
    to a temp file beside `spool`; the envelope's ``spool_tmp`` (``structure_tmp``) names
    it and `publish_suite` moves it into place with suite.json.
    """
    writers = ValidateSpools(spool)
    try:
        return _validate(dataset, paths, options, progress, writers)
    except BaseException:
        writers.abort()
        raise


def place_spool(env: dict[str, Any]) -> None:
    """Move the spools validate wrote (`spool_tmp` and `structure_tmp`, taken out of
    `env`) into place (each place checked again: never a link, `paths.check_target`).
    A suite without structure removes a structure spool an earlier validate left there."""
    from recallbench.builddir.paths import check_target

    moves = [(Path(env.pop("spool_tmp")), Path(env["spool_path"]))]
    structure = Path(env["spool_path"]).with_name(STRUCTURE_SPOOL)
    if "structure_tmp" in env:
        moves.append((Path(env.pop("structure_tmp")), structure))
    try:
        for _, final in moves:
            check_target(final)
    except BaseException:
        for tmp, _ in moves:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, final in moves:
        os.replace(tmp, final)
    if len(moves) == 1 and (structure.is_symlink() or structure.is_file()):
        structure.unlink()  # a link is removed, never followed


def publish_suite(env: dict[str, Any], suite_path: Path) -> None:
    """Move the spool into place, then write suite.json (a crash between the two leaves an
    old suite.json whose spool digest no longer matches: refused, never mixed)."""
    from recallbench.builddir.artifacts import dumps, publish

    place_spool(env)
    publish({Path(suite_path): dumps(env)})


def _validate(
    dataset: str,
    paths: Mapping[str, Path],
    options: Mapping[str, Any] | None,
    progress: Callable[[int], Any] | None,
    writers: ValidateSpools,
) -> dict[str, Any]:
    source = open_source(dataset, paths, options)
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
        places = writers.add(item)
        for query in item.queries:
            raw[query.category] += 1
            scored[query.category] += 1
        memories += len(item.memories)
        scopes.append(
            {
                "scope_id": item.scope_id,
                "memories": len(item.memories),
                "queries": len(item.queries),
                **places,
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
        "decision_policy": dataset_policy_name(dataset),
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
        **writers.close(),
    }
    inputs = {f["role"]: f["sha256"] for f in identity["files"]}
    env = envelope("suite", data, inputs)
    # absolute, not resolved: a link in its place is refused, never followed
    env["spool_path"] = os.path.abspath(writers.scopes.final)
    env.update(writers.temps())
    return env
