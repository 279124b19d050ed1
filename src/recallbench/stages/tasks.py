"""What a worker does for one scope: build or open its store, search, round-trip.

Worker-local state (the system under test, the vector cache) is built once per worker by
`init_worker`; tasks are module-level functions of plain data, so any executor (in process,
local processes, Ray) runs them and returns results in scope order.

Every call into the system goes through the worker's `recallbench.boundary.Boundary`
(`_guard()`): whatever it raises, hangs on or returns wrongly is one line naming the
system, the call and the scope or query.

The system only ever sees `Memory.memory_id` and the memory's text (and identifier,
importance, tags); the dataset ids behind a memory (its `units`) stay on this side.

Searching a query at several levels: the system returns memories; each level's ranking is
the memories' ids at that level in order of first appearance (`model.level_ranking`). When a
level has fewer than top-k distinct ids (turns of the same session), the search is widened
(limit doubled, up to the store's size) until every level has top-k ids or the store is
exhausted: the convention of turn-level retrievers in the LongMemEval paper.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.boundary import Boundary
from recallbench.errors import RecallbenchError
from recallbench.model import Memory, Query, Scope, level_ranking

_STATE: dict[str, Any] = {}
if hasattr(os, "register_at_fork"):  # a forked worker builds its own state (init_worker)
    os.register_at_fork(after_in_child=_STATE.clear)

#: the parts of the harness's own time within a query task, in its timing (the query
#: sidecar sums them): reading and checking the scope's spool line, the vector cache's
#: lookups (called by the system, not counted as its time), and handing the previous
#: transient store to the worker's removal thread (see `transient_store`)
HARNESS_PARTS = ("seconds_reading_scope", "seconds_in_cache_lookups", "seconds_removing_store")


class StoreDamaged(RecallbenchError):
    """The store on disk is not the store the upstream artifact describes."""


def scope_to_item(scope: Scope) -> dict[str, Any]:
    """A scope as plain picklable data."""
    return {
        "scope_id": scope.scope_id,
        "memories": [m.to_dict() for m in scope.memories],
        "queries": [q.to_dict() for q in scope.queries],
    }


def scope_from_item(raw: Mapping[str, Any], span: Sequence[int] | None = None) -> Scope:
    """A scope from plain data; with `span` (start, stop), only those of its queries."""
    queries = raw["queries"] if span is None else raw["queries"][span[0] : span[1]]
    return Scope(
        raw["scope_id"],
        tuple(Memory.from_dict(m) for m in raw["memories"]),
        tuple(Query.from_dict(q) for q in queries),
    )


def scope_of(item: Mapping[str, Any]) -> Scope:
    """A task's scope: given as plain data (item["scope"]) or read here from its line of the
    spool (item["ref"], see `recallbench.spool`); item["queries"], when there, is the
    (start, stop) slice of its queries the task searches."""
    if "ref" in item:
        from recallbench.spool import read_scope

        raw = read_scope(item["ref"])
    else:
        raw = item["scope"]
    by_position = _STATE.get("scope_lookup")
    if by_position is not None and "index" in item:  # the whole scope, in spool order
        by_position.use(
            item["index"],
            [q["text"] for q in raw["queries"]],
            [m["text"] for m in raw["memories"]],
        )
    return scope_from_item(raw, item.get("queries"))


def init_worker(config: Mapping[str, Any]) -> None:
    """Build this worker's system and open the vector cache when `config` names one.

    config: {"system": name, "cache": None | {"directory", "embedder_identity", "source"},
    "device": where a learned embedder computes (auto, cpu, cuda),
    "call_timeout": None | seconds per call into the system}
    """
    from recallbench.embedding import use_device
    from recallbench.systems import get_system

    close_worker()
    system = get_system(config["system"])
    guard = Boundary(config["system"], config.get("call_timeout"))
    if getattr(system, "embedder", None) is not None:
        use_device(system.embedder, config.get("device") or "auto")
    cache = scope_lookup = None
    if config.get("cache"):
        from recallbench.cache import ScopeLookup, VectorCache

        spec = config["cache"]
        # the parent verified the files' sha256 once; workers check sizes and identity
        cache = VectorCache.open(
            Path(spec["directory"]),
            embedder_identity=spec["embedder_identity"],
            source=spec["source"],
            verify_files=False,
        )
        scope_lookup = ScopeLookup(cache)
    from recallbench.systems.base import timed_lookup

    lookup = timed_lookup(scope_lookup) if scope_lookup is not None else None
    _STATE.update(
        system=system,
        guard=guard,
        cache=cache,
        scope_lookup=scope_lookup,
        lookup=lookup,
        progress=None,
    )


def close_worker() -> None:
    finish_removals()
    cache = _STATE.get("cache")
    if cache is not None:
        cache.close()
    _STATE.clear()


def run_batch(batch: Mapping[str, Any]) -> list[Any]:
    """Several consecutive items as one task: batch["fn"] over batch["items"], in order."""
    fn = batch["fn"]
    return [fn(item) for item in batch["items"]]


def set_progress(callback: Callable[[int], Any] | None) -> None:
    """In-process executors only: called with 1 per query searched (a progress bar)."""
    _STATE["progress"] = callback


def _system() -> Any:
    return _STATE["system"]


def _guard() -> Boundary:
    return _STATE["guard"]


def _inside() -> float:
    """The system's `seconds_inside()`, through the boundary."""
    guard = _guard()
    return guard.seconds(guard.call("seconds_inside", None, _system().seconds_inside))


def _close(store: Any, where: str) -> None:
    _guard().call("close", where, store.close)


def _vectors() -> Any:
    """The vector cache's lookup, timed as the harness's work (never the system's)."""
    return _STATE.get("lookup")


def attach(directory: Path, where: str) -> Any:
    """Reopen a kept store; queries take their vectors from the cache when there is one
    (FileNotFoundError when there is no store)."""
    vectors = _vectors()
    kwargs = {} if vectors is None else {"vectors": vectors}
    return _guard().call(
        "attach", where, _system().attach, directory, passthrough=(FileNotFoundError,), **kwargs
    )


def remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def transient_dir(root: Path) -> Path:
    """This worker's directory for transient stores under `root` (its two store
    directories alternate there, see `transient_store`)."""
    slot = _STATE.get("slot")
    if slot is None:
        slot = _STATE["slot"] = f"worker-{os.getpid()}-{os.urandom(4).hex()}"
    return Path(root) / slot


def transient_store(root: Path) -> Path:
    """Where this worker builds its next transient store, once the previous one (closed by
    now) is handed to the worker's removal thread.

    Two directories alternate: while a store is built and searched in one, the other one's
    store is removed on the removal thread. Unlinking a store's files is kernel work that
    releases the GIL, so it overlaps the system's own work (it is handed over after the task
    has read its scope, so it overlaps the system's ingest, not the reading). A directory's
    removal has finished before it is used again.
    """
    pending = _STATE.pop("removing", None)
    if pending is not None:
        pending.result()
    previous = _STATE.pop("used", None)
    if previous is not None:
        remover = _STATE.get("remover")
        if remover is None:
            from concurrent.futures import ThreadPoolExecutor

            remover = _STATE["remover"] = ThreadPoolExecutor(1, thread_name_prefix="recallbench-rm")
        _STATE["removing"] = remover.submit(_empty_store_dir, previous)
    name = "b" if previous is not None and previous.name == "a" else "a"
    directory = _STATE["used"] = transient_dir(root) / name
    return directory


def _empty_store_dir(directory: Path) -> None:
    """Remove what a store directory holds, in as few system calls as it allows (each one
    hands the GIL back and forth with the worker's main thread): list it, unlink its files."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(directory, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:  # a subdirectory
            shutil.rmtree(path, ignore_errors=True)


def finish_removals() -> None:
    """Wait for the pending removal, remove the last store, stop the removal thread."""
    pending = _STATE.pop("removing", None)
    if pending is not None:
        pending.result()
    last = _STATE.pop("used", None)
    if last is not None:
        _empty_store_dir(last)
    remover = _STATE.pop("remover", None)
    if remover is not None:
        remover.shutdown(wait=True)


def store_facts(store: Any, where: str) -> dict[str, Any]:
    """What identifies a store's content, read through the system's own API."""
    guard = _guard()
    return {
        "records": guard.whole_number(guard.call("count", where, store.count), "count", where),
        "digest": guard.text(guard.call("digest", where, store.digest), "digest", where),
    }


def check_store(
    store: Any, expect: Mapping[str, Any], where: Path, rerun: str, scope: str
) -> dict[str, Any]:
    """The store's facts; refuse a store whose record count or content digest differs
    from `expect` (the digest only when `expect` has one)."""
    facts = store_facts(store, scope)
    if facts["records"] != expect["records"]:
        raise StoreDamaged(
            f"{where}: store holds {facts['records']} records, hydrate.json says "
            f"{expect['records']}; run `{rerun}` again"
        )
    if expect.get("digest") is not None and facts["digest"] != expect["digest"]:
        raise StoreDamaged(
            f"{where}: store content differs from what hydrate recorded (digest); run `{rerun}` again"
        )
    return facts


def build_store(scope: Scope, directory: Path) -> tuple[Any, dict[str, Any]]:
    """A fresh store in `directory` holding every memory of the scope; (store, timing)."""
    from recallbench.systems.base import StoreRecord

    system, guard = _system(), _guard()
    where = f"scope {scope.scope_id}"
    records = [
        StoreRecord(m.memory_id, m.identifier, m.text, m.importance, m.tags) for m in scope.memories
    ]
    start = time.perf_counter()
    store = guard.call("open_store", where, system.open_store, directory, vectors=_vectors())
    try:
        stored = guard.call("ingest", where, store.ingest, records)
        seconds = time.perf_counter() - start
        # validate made the ids unique: a shortfall is the store's
        stored = guard.ingested(stored, len(records), where)
    except BaseException:
        with contextlib.suppress(Exception):
            _close(store, where)
        raise
    return store, {"ingest_seconds": seconds, "records": stored}


def hydrate_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """Build the scope's store in item["directory"] and keep it; its facts and timing."""
    scope = scope_of(item)
    directory = Path(item["directory"])
    remove_tree(directory)
    where = f"scope {scope.scope_id}"
    inside = _inside()
    store, timing = build_store(scope, directory)
    try:
        facts = store_facts(store, where)
    finally:
        _close(store, where)
    return {
        "index": item["index"],
        "scope_id": scope.scope_id,
        **facts,
        "timing": {**timing, "seconds_inside": _inside() - inside},
    }


def _widened_search(
    store: Any,
    query: Query,
    memories: Mapping[str, Memory],
    levels: Sequence[str],
    top_k: int,
    count: int,
    where: str,
) -> tuple[list[Any], int, list[float]]:
    """Search with limit top-k, doubling it until every level has top-k distinct ids or the
    store is exhausted; (hits, final limit, latencies in ms of the timed searches)."""
    guard = _guard()
    limit = max(1, min(top_k, count)) if count else top_k
    latencies = []
    while True:
        start = time.perf_counter()
        hits = guard.call("search", where, store.search, query.text, limit)
        latencies.append((time.perf_counter() - start) * 1000.0)
        # the boundary checks types, ids stored in this scope, finite scores, no repeats
        hits = guard.hits(hits, limit, memories, where)
        ids = [h.memory_id for h in hits]
        short = any(len(level_ranking(ids, memories, lv)) < top_k for lv in levels)
        if not short or len(hits) < limit or limit >= count:
            return hits, limit, latencies
        limit = min(count, limit * 2)


def search_scope(
    store: Any, scope: Scope, levels: Sequence[str], top_k: int, repeat: int
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every query of the scope: ranked hits, each level's ranking and gold, the facts that
    explain misses (where a missed id ranked in a search of the whole store, and whether the
    system's lexical matcher matched it). Returns (rows, latency samples in ms per query)."""
    system, guard = _system(), _guard()
    memories = scope.memory_by_id()
    in_scope = f"scope {scope.scope_id}"
    count = guard.whole_number(guard.call("count", in_scope, store.count), "count", in_scope)
    progress = _STATE.get("progress")
    holders_at: dict[str, dict[str, list[Memory]]] = {}  # per level, made at the first miss
    rows, latencies = [], {}
    for q in scope.queries:
        where = f"scope {scope.scope_id}, query {q.query_id}"
        hits, limit, samples = _widened_search(store, q, memories, levels, top_k, count, where)
        for _ in range(repeat - 1):
            start = time.perf_counter()
            again = guard.call("search", where, store.search, q.text, limit)
            samples.append((time.perf_counter() - start) * 1000.0)
            again = guard.hits(again, limit, memories, where)
            if again != hits:
                raise RecallbenchError(
                    f"query {q.query_id}: results differ between repeats; the system is not deterministic"
                )
        ids = [h.memory_id for h in hits]
        per_level = {}
        for level in levels:
            ranking, scores = [], []
            for h in hits:
                for unit in memories[h.memory_id].units.get(level, ()):
                    if unit not in ranking:
                        ranking.append(unit)
                        scores.append(h.score)
            per_level[level] = {
                "ranking": ranking[:top_k],
                "scores": scores[:top_k],
                "gold": dict(q.relevance.get(level, {})),
            }
        missed = {
            level: sorted(q.relevant(level) - set(per_level[level]["ranking"])) for level in levels
        }
        row: dict[str, Any] = {
            "query_id": q.query_id,
            "scope_id": scope.scope_id,
            "category": q.category,
            "limit": limit,
            "hits": [
                {
                    "memory_id": h.memory_id,
                    "score": h.score,
                    "identifier": h.identifier,
                    "group": memories[h.memory_id].duplicate_group,
                }
                for h in hits
            ],
            "levels": per_level,
            "missed": {},
        }
        lexical = None
        if getattr(system, "lexical", False):  # a diagnostic, untimed, never scored
            matcher, matched = guard.lexical(
                guard.call("lexical_matches", where, store.lexical_matches, q.text), memories, where
            )
            lexical = (matcher, set(matched))
            row["lexical"] = {"matcher": matcher, "matched": len(matched)}
        if any(missed.values()):
            # untimed: where did the missed ids rank in a search of the whole store?
            if count <= limit:
                deep = ids
            else:
                deeper = guard.call("search", where, store.search, q.text, count)
                deep = [h.memory_id for h in guard.hits(deeper, count, memories, where)]
            for level, gone in missed.items():
                deep_ranking = level_ranking(deep, memories, level)
                entries = []
                if gone and level not in holders_at:
                    holders_at[level] = scope.holders(level)
                for unit in gone:
                    holders = holders_at[level].get(unit, [])
                    entry = {
                        "id": unit,
                        "grade": q.relevance[level][unit],
                        "rank": deep_ranking.index(unit) + 1 if unit in deep_ranking else None,
                        "of": len(deep_ranking),
                        "identifier": holders[0].identifier if holders else None,
                    }
                    if lexical is not None:
                        entry["lexical_match"] = any(m.memory_id in lexical[1] for m in holders)
                    entries.append(entry)
                if entries:
                    row["missed"][level] = entries
        rows.append(row)
        latencies[q.query_id] = samples
        if progress is not None:
            progress(1)
    return rows, latencies


def query_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """Search every query of one scope: open the kept store (checking it is the one hydrate
    recorded) or build a transient one, search, close (and delete a transient store).

    The store's facts: a kept store's record count and digest (checked against hydrate's);
    a transient store's record count (its content is the spool's, which suite.json digests).
    """
    from recallbench.systems.base import HarnessCallbacks

    started = time.perf_counter()
    scope = scope_of(item)
    reading = time.perf_counter() - started
    lookups = HarnessCallbacks.seconds
    inside = _inside()
    directory = Path(item["directory"])
    where = f"scope {scope.scope_id}"
    timing: dict[str, Any] = {}
    removing = 0.0
    if item["kept"]:
        try:
            store = attach(directory, where)
        except FileNotFoundError:
            raise StoreDamaged(f"{directory}: no store; run `recallbench hydrate` first") from None
        try:
            facts = check_store(store, item["expect"], directory, "recallbench hydrate", where)
        except BaseException:
            with contextlib.suppress(Exception):
                _close(store, where)
            raise
    else:
        start = time.perf_counter()
        directory = transient_store(directory)
        removing = time.perf_counter() - start
        store, timing = build_store(scope, directory)
        facts = {"records": timing["records"]}
    try:
        rows, latencies = search_scope(store, scope, item["levels"], item["top_k"], item["repeat"])
    except BaseException:
        with contextlib.suppress(Exception):
            _close(store, where)
        raise
    _close(store, where)
    return {
        "index": item["index"],
        "scope_id": scope.scope_id,
        "store": facts,
        "rows": rows,
        "latency_ms": latencies,
        "timing": {
            **timing,
            "seconds_inside": _inside() - inside,
            "seconds_task": time.perf_counter() - started,
            "seconds_reading_scope": reading,
            "seconds_in_cache_lookups": HarnessCallbacks.seconds - lookups,
            "seconds_removing_store": removing,
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
    guard = _guard()
    memories = scope.memory_by_id()
    out = {}
    for q in queries:
        where = f"scope {scope.scope_id}, query {q.query_id} (the restored clone)"
        limit = limits[q.query_id]
        hits = guard.hits(
            guard.call("search", where, store.search, q.text, limit), limit, memories, where
        )
        after = [{"memory_id": h.memory_id, "score": h.score} for h in hits]
        out[q.query_id] = compare_rankings(before[q.query_id], after)
    return out


def requery_clone(item: Mapping[str, Any]) -> dict[str, Any]:
    """A slice of a scope's queries searched again on the clone a round trip restored
    (opened read-only by each worker): {"per_query": drift per query}."""
    scope = scope_of(item)
    where = f"scope {scope.scope_id} (the restored clone)"
    clone = attach(Path(item["clone"]), where)
    try:
        drift = _search_again(clone, scope, scope.queries, item["limits"], item["before"])
    except BaseException:
        with contextlib.suppress(Exception):
            _close(clone, where)
        raise
    _close(clone, where)
    return {"per_query": drift}


def roundtrip_scope(item: Mapping[str, Any]) -> dict[str, Any]:
    """snapshot -> verify -> clean restore -> search again, for one scope; then offer each of
    the system's own corruptions of the package to its verifier.

    The source store is checked first (record count and digest against what hydrate or
    query recorded): a damaged source is refused, never reported as a clone-path failure.
    """
    from recallbench.systems.base import PackageInfo, SnapshotRejected

    scope = scope_of(item)
    system, guard = _system(), _guard()
    clone_path = system.clone
    where = f"scope {scope.scope_id}"
    work = Path(item["work"])
    remove_tree(work)
    work.mkdir(parents=True)
    rerun = "recallbench hydrate" if item["kept"] else "recallbench query"
    if item["kept"]:
        try:
            source = attach(Path(item["directory"]), where)
        except FileNotFoundError:
            raise StoreDamaged(
                f"{item['directory']}: no store; run `recallbench hydrate` first"
            ) from None
    else:
        source, _ = build_store(scope, work / "source")
    try:
        # a kept store is checked against hydrate's digest; a rebuilt one gives its own
        source_facts = check_store(source, item["expect"], Path(item["directory"]), rerun, where)
        start = time.perf_counter()
        package = guard.call("snapshot", where, clone_path.snapshot, source, work / "package")
        snapshot_s = time.perf_counter() - start
        if not isinstance(package, PackageInfo):
            raise guard.failure("snapshot", where, "returned something other than a PackageInfo")
        guard.whole_number(package.records, "snapshot", where)
        guard.whole_number(package.size_bytes, "snapshot", where)
    except BaseException:
        with contextlib.suppress(Exception):
            _close(source, where)
        raise
    _close(source, where)
    if not item["kept"]:
        remove_tree(work / "source")

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
    if _vectors() is not None:  # with a cache, queries take their vectors from it (as in query)
        _close(clone, clone_at)
        clone = attach(work / "clone", clone_at)
    restore_s = time.perf_counter() - start
    try:
        clone_facts = store_facts(clone, clone_at)
        # the first query times the cold start; the rest follow unless other tasks do them
        first, rest = scope.queries[:1], scope.queries[1:]
        per_query = _search_again(clone, scope, first, item["limits"], item["before"])
        cold_start_s = time.perf_counter() - start if first else None
        if item.get("requery", True):
            per_query.update(_search_again(clone, scope, rest, item["limits"], item["before"]))
    except BaseException:
        with contextlib.suppress(Exception):
            _close(clone, clone_at)
        raise
    _close(clone, clone_at)

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
    remove_tree(work / "spool")
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


def embed_batch(texts: list[str]) -> dict[str, Any]:
    """Prep: embed one fixed batch with the system's own embedder (one forward pass);
    float32 bytes, row after row, and the build that made them (device, torch, CPU)."""
    from recallbench.cache import pack_vectors
    from recallbench.embedding import embedder_build

    started = time.perf_counter()
    system, guard = _system(), _guard()
    inside_before = _inside()
    where = f"{len(texts)} texts"
    vectors = guard.vectors(
        guard.call("embed_texts", where, system.embedder.embed_texts, texts), texts, where
    )
    dimension = len(vectors[0]) if vectors else 0
    return {
        "blob": pack_vectors(vectors),
        "dimension": dimension,
        "texts": len(texts),
        "build": embedder_build(system.embedder),
        "seconds_inside": _inside() - inside_before,
        "seconds_task": time.perf_counter() - started,
    }


def worker_dir(root: Path, index: int) -> Path:
    """The directory of scope `index`'s store under `root`."""
    return Path(root) / f"{index:05d}"
