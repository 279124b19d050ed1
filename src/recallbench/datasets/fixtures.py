"""The fixture suite reader: corpus.jsonl + queries.jsonl, one scope, graded relevance.

Every problem is collected as ``FILE:LINE: reason`` (or ``FILE: reason`` for whole-file
rules) so a user sees all of them at once; `load_fixture_scope` raises `ValidationFailed`
when there is any. Each file is read once: its sha256 and its parse come from the same bytes.

The suite is one scope (every memory in one store, every query asked of it), scored at one
level, ``memory``, with graded relevance 0-3. Its measures are Recall@1, Recall@k, MRR@k,
nDCG@k, the false-positive slot rate on no-answer queries and the duplicate-slot rate on
near-duplicate queries; its decision policy is the HotMem rules (`fixture_rules`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from recallbench.datasets.fixture_rules import POLICY_NAME as POLICY_NAME  # its policy
from recallbench.errors import ValidationFailed
from recallbench.ids import id_problem
from recallbench.jsonstrict import loads_object
from recallbench.model import MAX_GRADE, RELEVANT_GRADE, Drop, Level, Memory, Query, Scope

NAME = "fixtures"
LEVEL = "memory"
LEVELS = (Level(LEVEL, "", "one fixture memory"),)
SCOPE_ID = "suite"
#: The eight query categories of the fixture suite, in report order.
CATEGORIES: tuple[str, ...] = (
    "exact_lexical",
    "semantic_paraphrase",
    "identifier_or_entity_name",
    "temporal_or_revision",
    "near_duplicate_diversity",
    "negative_or_no_answer",
    "cross_project_isolation",
    "snapshot_hydration_equivalence",
)
NEGATIVE_CATEGORY = "negative_or_no_answer"
DUPLICATE_CATEGORY = "near_duplicate_diversity"
MIN_QUERIES_PER_CATEGORY = 5
FIXTURE_DIR = Path("benchmarks/retrieval")

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


def iter_jsonl(path: Path, raw: bytes, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each valid JSON-object line of `raw` (the bytes of
    `path`); record problems otherwise (a duplicate key included, see `jsonstrict`)."""
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
            # strict: a repeated key is a problem, not "the last one wins"; a non-object
            # line is refused with what it is ("expected a JSON object, got an array")
            obj = loads_object(text)
        except ValueError as exc:  # DuplicateKey names the key and its JSON path
            problems.append(f"{where}: {exc}")
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
    """Ids follow the id grammar (`recallbench.ids`): they go into TREC run/qrels files and
    Markdown tables. An empty id is reported as an empty field, not here."""
    if not value.strip():
        return []
    problem = id_problem(value)
    return [f"{where}: field '{name}' {value!r} {problem}"] if problem else []


def read_corpus(path: Path, raw: bytes, problems: list[str]) -> list[tuple[int, Memory]]:
    """Parse corpus.jsonl's bytes; append problems; return the memories that parsed cleanly."""
    memories: list[tuple[int, Memory]] = []
    seen_ids: dict[str, int] = {}
    seen_content: dict[str, int] = {}
    for number, obj in iter_jsonl(path, raw, problems):
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
                    text=obj["fact"],
                    units={LEVEL: (obj["memory_id"],)},
                    identifier=obj["identifier"],
                    importance=float(obj["importance"]),
                    tags=tuple(obj["tags"]),
                    duplicate_group=obj.get("duplicate_group"),
                ),
            )
        )
    return memories


def read_queries(
    path: Path, raw: bytes, memory_ids: set[str] | None, problems: list[str]
) -> list[tuple[int, Query]]:
    """Parse queries.jsonl's bytes; check references against `memory_ids` when known."""
    queries: list[tuple[int, Query]] = []
    seen_ids: dict[str, int] = {}
    for number, obj in iter_jsonl(path, raw, problems):
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
                    text=obj["query"],
                    relevance={LEVEL: dict(obj["relevance"])},
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


def _read(path: Path, problems: list[str]) -> tuple[bytes, str, int]:
    """A fixture file's bytes, read once, with their sha256 and size."""
    from recallbench.inputs import input_limit, read_input

    try:
        raw, digest = read_input(path, "fixture file", input_limit("input"))
    except Exception as exc:  # a RecallbenchError naming the path and the cause
        problems.append(str(exc))
        return b"", hashlib.sha256(b"").hexdigest(), 0
    return raw, digest, len(raw)


def load_fixture_scope(corpus_path: Path, queries_path: Path) -> tuple[Scope, list[dict[str, Any]]]:
    """Read both files once, validate everything; return the scope and the files' identity
    ({"role", "name", "size_bytes", "sha256"} each), or raise ValidationFailed."""
    problems: list[str] = []
    corpus_path, queries_path = Path(corpus_path), Path(queries_path)
    corpus_raw, corpus_sha, corpus_size = _read(corpus_path, problems)
    queries_raw, queries_sha, queries_size = _read(queries_path, problems)
    if problems:
        raise ValidationFailed(problems)
    memories = read_corpus(corpus_path, corpus_raw, problems)
    problems.extend(_duplicate_group_problems(corpus_path, memories))
    corpus_ok = not problems
    # Only check references when the corpus parsed cleanly, else every query would echo it.
    known = {m.memory_id for _, m in memories} if corpus_ok else None
    before = len(problems)
    queries = read_queries(queries_path, queries_raw, known, problems)
    if len(problems) == before:  # counts are only meaningful when every line parsed
        problems.extend(_category_problems(queries_path, [q for _, q in queries]))
    if problems:
        raise ValidationFailed(problems)
    scope = Scope(SCOPE_ID, tuple(m for _, m in memories), tuple(q for _, q in queries))
    files = [
        {
            "role": "corpus",
            "name": corpus_path.name,
            "size_bytes": corpus_size,
            "sha256": corpus_sha,
        },
        {
            "role": "queries",
            "name": queries_path.name,
            "size_bytes": queries_size,
            "sha256": queries_sha,
        },
    ]
    return scope, files


def measures(top_k: int, options: Mapping[str, Any], ks: Any = None) -> list[Any]:
    """The `measures.FIXTURES` family at the memory level (see its docstring)."""
    from recallbench.measures import FIXTURES, family_measures

    return family_measures(FIXTURES, LEVELS, top_k, ks, options)


def decide(scores: Mapping[str, Any]) -> dict[str, Any]:
    """The HotMem decision rules of the fixture suite (see `fixture_rules`)."""
    from recallbench.datasets.fixture_rules import decide as rules

    return rules(scores)


class FixtureSource:
    """The committed (or a user's) fixture suite as a dataset source: one scope."""

    name = NAME
    levels = LEVELS
    categories = CATEGORIES
    category_labels = {c: c for c in CATEGORIES}
    drop_rules: Mapping[str, str] = {}
    notes = (
        "Recall and MRR count memories graded 2 or 3 as relevant; nDCG uses the 0-3 grades.",
        "The suite is synthetic and small (one store): a figure here is evidence about "
        "these queries, not about every workload.",
    )
    decide = staticmethod(decide)

    def __init__(self, corpus: Path, queries: Path) -> None:
        self.corpus, self.queries = Path(corpus), Path(queries)
        self.options: dict[str, Any] = {}
        self._files: list[dict[str, Any]] | None = None
        self._scope: Scope | None = None

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.corpus, self.queries) if p.is_file())

    def stream(self, progress: Any = None) -> Iterator[Scope | Drop]:
        scope, self._files = load_fixture_scope(self.corpus, self.queries)
        self._scope = scope
        yield scope

    def identity(self) -> dict[str, Any]:
        assert self._files is not None, "stream() first"
        return {
            "dataset": NAME,
            "files": self._files,
            "known": True,
            "label": "fixture suite (JSONL corpus + graded queries)",
        }

    def summary(self) -> dict[str, Any]:
        scope = self._scope
        if scope is None:
            return {}
        return {
            "duplicate_groups": len(
                {m.duplicate_group for m in scope.memories if m.duplicate_group}
            ),
        }

    def measures(self, top_k: int, ks: Any = None) -> list[Any]:
        return measures(top_k, self.options, ks)


def open_source(paths: Mapping[str, Path], options: Mapping[str, Any]) -> FixtureSource:
    """paths: {"corpus": ..., "queries": ...} (defaults: the committed suite)."""
    unknown = sorted(set(options) - {"unit"})
    if unknown or options.get("unit") not in (None, LEVEL):
        from recallbench.errors import RecallbenchError

        raise RecallbenchError("the fixture suite has no options (no --unit: it has one level)")
    return FixtureSource(
        paths.get("corpus", FIXTURE_DIR / "corpus.jsonl"),
        paths.get("queries", FIXTURE_DIR / "queries.jsonl"),
    )
