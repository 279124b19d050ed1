"""validate: read a dataset through its reader, check everything, write the suite artifact.

The suite artifact (suite.json) records the dataset's identity (files and sha256), the
reader options, levels, categories, drop rules with every drop and its reason, the scope
index (scope id, memories, queries) and counts. Beside it, validate writes the scope spool
(``scopes.jsonl.gz``): every scope as one line of plain JSON, exactly what a worker needs.
The data file is read once, here; later stages stream the spool (`scope_items`), whose
sha256 suite.json records, and never parse the data file again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from recallbench.artifacts import create_temp, envelope
from recallbench.datasets.base import dataset_policy, dataset_policy_name, open_source
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


SPOOL = "scopes.jsonl.gz"


class _SpoolWriter:
    """Scopes as gzip'd JSON lines in a temp file beside the spool's final path."""

    def __init__(self, final: Path) -> None:
        self.final = Path(final)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = create_temp(self.final)
        self.tmp = Path(tmp)
        self._raw = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=1, mtime=0)

    def add(self, scope: Scope) -> None:
        from recallbench.stages.tasks import scope_to_item

        self._gz.write(orjson.dumps(scope_to_item(scope)) + b"\n")

    def close(self) -> dict[str, Any]:
        from recallbench.artifacts import _file_mode

        self._gz.close()
        self._raw.close()
        os.chmod(self.tmp, _file_mode())
        return {"file": SPOOL, "sha256": _sha256(self.tmp), "bytes": self.tmp.stat().st_size}

    def abort(self) -> None:
        self._gz.close()
        self._raw.close()
        self.tmp.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run_validate(
    dataset: str,
    paths: Mapping[str, Path],
    options: Mapping[str, Any] | None = None,
    progress: Callable[[int], Any] | None = None,
    *,
    spool: Path,
) -> dict[str, Any]:
    """Stream the dataset once; return the `suite` envelope (or raise on bad input).

    The scope spool is written to a temp file beside `spool`; the envelope's
    ``spool_tmp`` names it and `publish_suite` moves it into place with suite.json.
    """
    writer = _SpoolWriter(spool)
    try:
        return _validate(dataset, paths, options, progress, writer)
    except BaseException:
        writer.abort()
        raise


def publish_suite(env: dict[str, Any], suite_path: Path) -> None:
    """Move the spool into place, then write suite.json (a crash between the two leaves an
    old suite.json whose spool digest no longer matches: refused, never mixed)."""
    from recallbench.artifacts import dumps, publish

    tmp = Path(env.pop("spool_tmp"))
    os.replace(tmp, env["spool_path"])
    publish({Path(suite_path): dumps(env)})


def _validate(
    dataset: str,
    paths: Mapping[str, Path],
    options: Mapping[str, Any] | None,
    progress: Callable[[int], Any] | None,
    writer: _SpoolWriter,
) -> dict[str, Any]:
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
        writer.add(item)
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
        "decision_policy": None if policy is None else dataset_policy_name(dataset),
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
        "spool": writer.close(),
    }
    inputs = {f["role"]: f["sha256"] for f in identity["files"]}
    env = envelope("suite", data, inputs)
    env["spool_path"] = str(writer.final.resolve())
    env["spool_tmp"] = str(writer.tmp)
    return env


def scope_items(suite_env: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, scope as plain data, as workers take it) for every scope of the suite,
    streamed from validate's spool.

    The spool's sha256 must be the one suite.json records (checked as it is read; an
    ArtifactError at the end otherwise), so every stage sees exactly the validated scopes.
    """
    spool = suite_env["data"]["spool"]
    path = Path(suite_env.get("spool_path") or "")
    rerun = "run `recallbench validate` again"
    if not path.is_file():
        raise ArtifactError(f"{path}: the scope spool validate wrote is missing; {rerun}")
    digest = hashlib.sha256()

    class _Hashing:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def read(self, size: int = -1) -> bytes:
            chunk = self.handle.read(size)
            digest.update(chunk)
            return chunk

    index = 0
    with open(path, "rb") as handle:
        hashing = _Hashing(handle)
        try:
            raw = gzip.GzipFile(fileobj=hashing, mode="rb")  # type: ignore[arg-type]
            # GzipFile's own readline is Python-level and slow; a C buffer reads lines fast
            with io.BufferedReader(raw, buffer_size=1 << 20) as lines:  # type: ignore[arg-type]
                for line in lines:
                    yield index, orjson.loads(line)
                    index += 1
        except (OSError, EOFError, orjson.JSONDecodeError) as exc:
            raise ArtifactError(f"{path}: damaged scope spool ({exc}); {rerun}") from None
        while hashing.read(1 << 20):
            pass
    if digest.hexdigest() != spool["sha256"] or index != suite_env["data"]["counts"]["scopes"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {rerun}")
