"""Read and validate the JSONL fixture suite (corpus.jsonl + queries.jsonl).

Every problem is collected as ``FILE:LINE: reason`` (or ``FILE: reason`` for whole-file
rules) so a user sees all of them at once; `load_fixture_suite` raises `ValidationFailed`
when there is any.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from recallbench.errors import ValidationFailed
from recallbench.suite import (
    CATEGORIES,
    MAX_GRADE,
    MIN_QUERIES_PER_CATEGORY,
    NEGATIVE_CATEGORY,
    RELEVANT_GRADE,
    Memory,
    Query,
    Suite,
)

MEMORY_FIELDS = {
    "memory_id": str,
    "identifier": str,
    "fact": str,
    "importance": float,
    "tags": list,
}
MEMORY_OPTIONAL = {"duplicate_group": str}
QUERY_FIELDS = {"query_id": str, "category": str, "query": str, "relevance": dict, "notes": str}
_TYPE_NAMES = {
    str: "a string",
    float: "a number",
    list: "a list",
    dict: "an object",
    int: "an integer",
}


def iter_jsonl(path: Path, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each valid JSON-object line; record problems otherwise."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        problems.append(f"{path}: cannot read ({exc.strerror or exc})")
        return
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    if not lines:
        problems.append(f"{path}: file is empty")
        return
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{where}: invalid UTF-8 at byte {exc.start}")
            continue
        if not text.strip():
            problems.append(f"{where}: blank line")
            continue
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            problems.append(f"{where}: invalid JSON ({exc.msg})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: expected a JSON object, got {type(obj).__name__}")
            continue
        yield number, obj


def _is_type(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)


def _check_fields(
    obj: dict[str, Any], required: dict[str, type], optional: dict[str, type], where: str
) -> list[str]:
    problems = []
    for name, kind in required.items():
        if name not in obj:
            problems.append(f"{where}: missing field '{name}'")
        elif not _is_type(obj[name], kind):
            problems.append(f"{where}: field '{name}' must be {_TYPE_NAMES[kind]}")
    for name, kind in optional.items():
        if name in obj and obj[name] is not None and not _is_type(obj[name], kind):
            problems.append(f"{where}: field '{name}' must be {_TYPE_NAMES[kind]}")
    for name in sorted(set(obj) - set(required) - set(optional)):
        problems.append(f"{where}: unknown field '{name}'")
    return problems


def _id_problems(value: str, name: str, where: str) -> list[str]:
    """Ids go into TREC run/qrels files: no whitespace, no leading '#'."""
    if value.strip() and any(ch.isspace() for ch in value):
        return [f"{where}: field '{name}' {value!r} contains whitespace"]
    if value.startswith("#"):
        return [f"{where}: field '{name}' {value!r} starts with '#'"]
    return []


def read_corpus(path: Path, problems: list[str]) -> list[tuple[int, Memory]]:
    """Parse corpus.jsonl; append problems; return the memories that parsed cleanly."""
    memories: list[tuple[int, Memory]] = []
    seen_ids: dict[str, int] = {}
    seen_content: dict[str, int] = {}
    for number, obj in iter_jsonl(path, problems):
        where = f"{path}:{number}"
        found = _check_fields(obj, MEMORY_FIELDS, MEMORY_OPTIONAL, where)
        if not found:
            for name in ("memory_id", "identifier", "fact"):
                if not obj[name].strip():
                    found.append(f"{where}: field '{name}' is empty")
            found.extend(_id_problems(obj["memory_id"], "memory_id", where))
            if not 0.0 <= obj["importance"] <= 1.0:
                found.append(f"{where}: importance {obj['importance']} is outside [0, 1]")
            if not all(isinstance(t, str) and t.strip() for t in obj["tags"]):
                found.append(f"{where}: field 'tags' must be a list of non-empty strings")
            group = obj.get("duplicate_group")
            if group is not None and not group.strip():
                found.append(f"{where}: field 'duplicate_group' is empty")
        if not found:
            mid = obj["memory_id"]
            # HotMem's content_hash is sha256(f"{identifier}:{fact}"): compare that string,
            # so ("a:b", "c") and ("a", "b:c") are caught as the same memory too.
            key = f"{obj['identifier']}:{obj['fact']}"
            if mid in seen_ids:
                found.append(
                    f"{where}: duplicate memory_id '{mid}' (first on line {seen_ids[mid]})"
                )
            elif key in seen_content:
                found.append(
                    f"{where}: same identifier and fact as line {seen_content[key]} "
                    "(HotMem would silently replace one with the other)"
                )
            else:
                seen_ids[mid] = number
                seen_content[key] = number
        if found:
            problems.extend(found)
            continue
        memories.append(
            (
                number,
                Memory(
                    memory_id=obj["memory_id"],
                    identifier=obj["identifier"],
                    fact=obj["fact"],
                    importance=float(obj["importance"]),
                    tags=tuple(obj["tags"]),
                    duplicate_group=obj.get("duplicate_group"),
                ),
            )
        )
    return memories


def read_queries(
    path: Path, memory_ids: set[str] | None, problems: list[str]
) -> list[tuple[int, Query]]:
    """Parse queries.jsonl; check references against `memory_ids` when it is known."""
    queries: list[tuple[int, Query]] = []
    seen_ids: dict[str, int] = {}
    for number, obj in iter_jsonl(path, problems):
        where = f"{path}:{number}"
        found = _check_fields(obj, QUERY_FIELDS, {}, where)
        if not found:
            for name in ("query_id", "query"):
                if not obj[name].strip():
                    found.append(f"{where}: field '{name}' is empty")
            found.extend(_id_problems(obj["query_id"], "query_id", where))
            category = obj["category"]
            if category not in CATEGORIES:
                found.append(
                    f"{where}: unknown category '{category}' (expected one of: {', '.join(CATEGORIES)})"
                )
            for mid, grade in obj["relevance"].items():
                if (
                    isinstance(grade, bool)
                    or not isinstance(grade, int)
                    or not 0 <= grade <= MAX_GRADE
                ):
                    found.append(
                        f"{where}: relevance grade for '{mid}' must be an integer 0-{MAX_GRADE}, got {grade!r}"
                    )
                elif memory_ids is not None and mid not in memory_ids:
                    found.append(f"{where}: relevance references unknown memory '{mid}'")
            if category == NEGATIVE_CATEGORY and obj["relevance"]:
                found.append(
                    f"{where}: a {NEGATIVE_CATEGORY} query must have an empty relevance object"
                )
            elif (
                category in CATEGORIES
                and category != NEGATIVE_CATEGORY
                and not any(
                    isinstance(g, int) and g >= RELEVANT_GRADE for g in obj["relevance"].values()
                )
            ):
                found.append(
                    f"{where}: a {category} query needs at least one memory graded {RELEVANT_GRADE} or {MAX_GRADE}"
                )
            qid = obj["query_id"]
            if qid in seen_ids:
                found.append(f"{where}: duplicate query_id '{qid}' (first on line {seen_ids[qid]})")
            else:
                seen_ids[qid] = number
        if found:
            problems.extend(found)
            continue
        queries.append(
            (
                number,
                Query(
                    query_id=obj["query_id"],
                    category=obj["category"],
                    query=obj["query"],
                    relevance={m: g for m, g in obj["relevance"].items()},
                    notes=obj["notes"],
                ),
            )
        )
    return queries


def _category_problems(path: Path, queries: list[Query]) -> list[str]:
    counts = Counter(q.category for q in queries)
    return [
        f"{path}: category '{c}' has {counts[c]} queries; at least {MIN_QUERIES_PER_CATEGORY} are required"
        for c in CATEGORIES
        if counts[c] < MIN_QUERIES_PER_CATEGORY
    ]


def _duplicate_group_problems(path: Path, memories: list[tuple[int, Memory]]) -> list[str]:
    members: dict[str, list[int]] = {}
    for number, memory in memories:
        if memory.duplicate_group:
            members.setdefault(memory.duplicate_group, []).append(number)
    return [
        f"{path}:{lines[0]}: duplicate_group '{group}' has only one memory"
        for group, lines in sorted(members.items())
        if len(lines) < 2
    ]


def load_fixture_suite(corpus_path: Path, queries_path: Path) -> Suite:
    """Read both files, validate everything, return the Suite or raise ValidationFailed."""
    problems: list[str] = []
    memories = read_corpus(Path(corpus_path), problems)
    problems.extend(_duplicate_group_problems(Path(corpus_path), memories))
    corpus_ok = not problems
    # Only check references when the corpus parsed cleanly, else every query would echo it.
    known = {m.memory_id for _, m in memories} if corpus_ok else None
    before = len(problems)
    queries = read_queries(Path(queries_path), known, problems)
    if len(problems) == before:  # counts are only meaningful when every line parsed
        problems.extend(_category_problems(Path(queries_path), [q for _, q in queries]))
    if problems:
        raise ValidationFailed(problems)
    return Suite(memories=tuple(m for _, m in memories), queries=tuple(q for _, q in queries))
