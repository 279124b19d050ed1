"""`recallbench check-plugin NAME`: the contract every system keeps, run against any
installed system (a plugin as its author installed it, or a built-in).

Each check is a function of a `Context` (the system's name, the data, a scratch directory)
that returns a note or raises `CheckFailed` with one line saying what is wrong; `run_checks`
runs every check that applies to the system and reports one `Outcome` per check. The
checkout's contract test (`tests/systems/test_systems_contract.py`) runs these same
functions over every registered system, on its own small data (`contract_data`).

The checks: the system is listed with the capabilities it has; its configuration is a JSON
object; a fresh store is empty; ingest counts and refuses a repeated id; two stores give the
same order, searched twice; memory ids are opaque; attach reopens the same store; the
digest ignores ingest order and sees a missing record; a store opened at the path of one
that was closed and deleted is a fresh store (**paths are reused**: recallbench builds a
worker's transient stores in two directories in turn, so a store must keep nothing per
path after `close()`); the rankings are the same in a fresh process with another
`PYTHONHASHSEED`; the texts read back are the texts ingested (`Store.texts()` when the
store has it, else its digest against `records_digest` of the texts), except where the
system declares what it keeps (`System.input_limit`); and, when the system has them, its
lexical matcher, embedder (a vector cache feeds its stores), clone path and structured
search.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from recallbench.core.errors import RecallbenchError
from recallbench.systems.base import Hit, StoreRecord, describe_input_limit

#: how many results each search asks for
TOP_K = 5
#: how far a learned embedder's inline vectors may move a score from the cached vectors'
#: (other batch shapes, other CPU kernels): measured about 2e-7, stated in docs/performance.md
INLINE_SCORE_TOLERANCE = 1e-4
#: the lengths (characters) of the long texts the content check adds to the data
LONG_TEXTS = (1_500, 6_000, 24_000)
#: the session and question dates the structured check hands over
SESSION_DATE = "2023/05/20 (Sat) 02:21"
QUESTION_DATE = "2023/05/30 (Tue) 23:40"


class CheckFailed(Exception):
    """A check's one-line finding: what the system did and what the contract asks."""


@dataclass(frozen=True)
class CheckData:
    """What the checks ingest and search: records (more than five) and query texts."""

    label: str
    records: tuple[StoreRecord, ...]
    queries: tuple[str, ...]

    def to_json(self) -> bytes:
        from recallbench.systems.packaging import record_json

        return orjson.dumps(
            {
                "label": self.label,
                "records": [record_json(r) for r in self.records],
                "queries": list(self.queries),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> CheckData:
        from recallbench.systems.packaging import _record_from_json

        doc = orjson.loads(raw)
        records = tuple(_record_from_json(r) for r in doc["records"])
        return cls(doc["label"], records, tuple(doc["queries"]))


#: the contract test's small data: twelve memories (two with one text) and six queries
CONTRACT_TEXTS = (
    ("acme-finance", "Invoices above EUR 5,000 need two-person approval before payment."),
    ("acme-finance", "Expense reports are due on the fifth working day of each month."),
    ("acme-ops", "The staging database is refreshed from production every Sunday night."),
    ("acme-ops", "On-call engineers rotate weekly; the handover happens on Monday at 10:00."),
    ("acme-ops", "Backups of the billing database are kept for ninety days."),
    ("acme-people", "New hires receive a laptop and a security badge on their first day."),
    ("acme-people", "Parental leave is sixteen weeks at full pay."),
    ("acme-travel", "Train travel is preferred over flights for trips under four hours."),
    ("acme-travel", "Hotel bookings go through the travel desk, never a personal card."),
    ("acme-dup-a", "The office plants are watered on Tuesdays."),
    ("acme-dup-b", "The office plants are watered on Tuesdays."),
    ("acme-misc", "Résumé screening uses a rubric; café vouchers are issued on Fridays."),
)
CONTRACT_QUERIES = (
    "who approves large invoices",
    "when is the staging database refreshed",
    "database backups retention",
    "leave for new parents",
    "watering the plants",
    "zzzz qqqq",
)


def contract_data() -> CheckData:
    """The contract test's data (`CONTRACT_TEXTS`, `CONTRACT_QUERIES`), opaque ids."""
    records = tuple(
        StoreRecord(f"zz-opaque-{i:02d}", ident, text, 0.5, ("t",))
        for i, (ident, text) in enumerate(CONTRACT_TEXTS)
    )
    return CheckData("the contract's 12 memories and 6 queries", records, CONTRACT_QUERIES)


def fixture_data(paths: Mapping[str, Path]) -> CheckData:
    """The fixture suite (`paths`: its corpus and queries files) as check data: every memory
    of its one scope, every query text."""
    from recallbench.core.model import Scope
    from recallbench.datasets.base import open_source

    scopes = [s for s in open_source("fixtures", paths).stream() if isinstance(s, Scope)]
    memories = [m for s in scopes for m in s.memories]
    queries = tuple(q.text for s in scopes for q in s.queries)
    if len(memories) < 6 or not queries:
        raise RecallbenchError("check-plugin needs at least 6 memories and one query")
    from recallbench.engine.workerstate import store_records

    records = tuple(r for s in scopes for r in store_records(s, with_structure=False))
    label = f"the fixture suite's {len(records)} memories and {len(queries)} queries"
    return CheckData(label, records, queries)


def long_records(records: Sequence[StoreRecord]) -> list[StoreRecord]:
    """Texts of `LONG_TEXTS` characters made of the records' texts in turn (the content
    check's: a store that cuts texts shows it on these)."""
    out = []
    for n, size in enumerate(LONG_TEXTS, 1):
        parts, length, i = [], 0, 0
        while length < size:
            text = records[i % len(records)].text
            parts.append(text)
            length += len(text) + 1
            i += 1
        text = " ".join(parts)[:size]
        out.append(StoreRecord(f"check-long-{n}", records[0].identifier, text, 0.5, ()))
    return out


# --------------------------------------------------------------------------- the context


@dataclass
class Context:
    """One check's view: the system's name and a fresh instance, the data, a scratch
    directory, and the stores it opened (closed when the check ends)."""

    name: str
    data: CheckData
    work: Path
    system: Any = None
    opened: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.system is None:
            self.system = self.fresh_system()

    def fresh_system(self) -> Any:
        """A new instance of the system, its optional `setup()` done (as a worker does)."""
        from recallbench.systems import get_system

        system = get_system(self.name)
        setup = getattr(system, "setup", None)
        if callable(setup):
            setup()
        return system

    def open(self, directory: Path, system: Any = None, **kwargs: Any) -> Any:
        store = (system or self.system).open_store(directory, **kwargs)
        self.opened.append(store)
        return store

    def attach(self, directory: Path, system: Any = None) -> Any:
        store = (system or self.system).attach(directory)
        self.opened.append(store)
        return store

    def build(
        self, directory: Path, records: Sequence[StoreRecord] | None = None, **kwargs: Any
    ) -> Any:
        """A store in `directory` holding `records` (default: the data's), its count checked."""
        records = list(self.data.records if records is None else records)
        system = kwargs.pop("system", None)
        store = self.open(directory, system, **kwargs)
        held = store.ingest(records)
        if held != len(records):
            raise CheckFailed(
                f"ingest of {len(records)} records into a fresh store returned {held!r}"
            )
        return store

    def search_all(self, store: Any, queries: Sequence[str] | None = None) -> list[list[Hit]]:
        return [search(store, q) for q in (self.data.queries if queries is None else queries)]

    def rankings(self, hits: list[list[Hit]]) -> list[Any]:
        """The hit lists as the system promises to repeat them: exactly, or up to the order of
        tied hits for a system whose every build walks an HNSW graph of random levels
        (`clone_rebuilds_index`)."""
        if getattr(self.system, "clone_rebuilds_index", False):
            return [tie_sets(h) for h in hits]
        return hits

    def close_all(self) -> None:
        for store in reversed(self.opened):
            with contextlib.suppress(Exception):
                store.close()
        self.opened.clear()


def search(store: Any, query: str, limit: int = TOP_K) -> list[Hit]:
    """One search, `query` and `limit` passed by position (as the harness passes them: a
    store may name its parameter `top_k`); its result checked to be a list of at most
    `limit` `Hit`s."""
    hits = store.search(query, limit)
    if not isinstance(hits, list) or not all(isinstance(h, Hit) for h in hits):
        raise CheckFailed(f"search({query!r}) returned {type(hits).__name__}, not a list of Hit")
    if len(hits) > limit:
        raise CheckFailed(f"search({query!r}, {limit}) returned {len(hits)} hits")
    return hits


def tie_sets(hits: list[Hit]) -> list[tuple[float, frozenset[tuple[str, str]]]]:
    """Hits as (score, the hits of that score) in rank order: a ranking up to tie order."""
    out: list[tuple[float, frozenset[tuple[str, str]]]] = []
    for score in dict.fromkeys(h.score for h in hits):
        out.append(
            (score, frozenset((h.memory_id, h.identifier) for h in hits if h.score == score))
        )
    return out


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def raises(kind: type[BaseException], message: str, fn: Callable[..., Any], *args: Any) -> None:
    """`fn(*args)` must raise `kind`; CheckFailed (with `message`) when it returns."""
    try:
        fn(*args)
    except kind:
        return
    raise CheckFailed(message)


def first_difference(a: Sequence[Any], b: Sequence[Any], queries: Sequence[str]) -> str:
    """Which queries' results differ: how many, and the first one."""
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if not differ:
        return "no query differs"
    return f"{len(differ)} of {len(a)} queries (first: {queries[differ[0]]!r})"


# --------------------------------------------------------------------------- the checks


def check_listed(ctx: Context) -> str | None:
    """`recallbench systems` lists it, available, with the capabilities it has."""
    from recallbench.systems.base import capabilities
    from recallbench.systems.registry import describe_system

    row = describe_system(ctx.name)
    expect(row is not None and row["available"], "not listed as available by recallbench systems")
    assert row is not None
    expect(
        row["capabilities"] == capabilities(ctx.system),
        f"listed with capabilities {row['capabilities']}, has {capabilities(ctx.system)}",
    )
    expect(isinstance(ctx.system.lexical, bool), "`lexical` must be True or False")
    expect(
        bool(row["description"]) and "\n" not in row["description"],
        "its description (`description` or the class docstring) must be one non-empty line",
    )
    return None


def check_configuration(ctx: Context) -> str | None:
    """`configuration()` is a non-empty JSON object."""
    config = ctx.system.configuration()
    expect(isinstance(config, dict) and bool(config), "configuration() is not a non-empty dict")
    try:
        same = orjson.loads(orjson.dumps(config)) == config
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise CheckFailed(f"configuration() is not JSON ({exc})") from None
    expect(same, "configuration() does not survive a JSON round trip")
    return None


def check_fresh_store(ctx: Context) -> str | None:
    """A fresh store is empty; a second open of its directory is refused; attach reopens it;
    attaching where no store is raises FileNotFoundError."""
    raises(
        FileNotFoundError,
        "attach() of a directory holding no store must raise FileNotFoundError",
        ctx.attach,
        ctx.work / "nothing",
    )
    store = ctx.open(ctx.work / "s")
    expect(store.count() == 0, f"a fresh store counts {store.count()!r} records")
    expect(search(store, "anything at all") == [], "a fresh store's search returned hits")
    other = ctx.open(ctx.work / "t")
    expect(store.digest() == other.digest(), "two fresh stores have different digests")
    store.close()
    raises(
        FileExistsError,
        "open_store() where a store already is must raise FileExistsError",
        ctx.open,
        ctx.work / "s",
    )
    expect(ctx.attach(ctx.work / "s").count() == 0, "attach() of an empty store counts records")
    return None


def check_ingest(ctx: Context) -> str | None:
    """Ingest returns how many records the store holds; a repeated id is refused."""
    recs = list(ctx.data.records)
    store = ctx.open(ctx.work / "s")
    held = store.ingest(recs[:5])
    expect(held == 5, f"ingest of 5 records into a fresh store returned {held!r}")
    held = store.ingest(recs[5:])
    expect(held == len(recs), f"ingest of {len(recs) - 5} more returned {held!r}, not {len(recs)}")
    expect(store.count() == len(recs), f"count() is {store.count()!r} after {len(recs)} records")
    raises(
        RecallbenchError,
        "ingest of an id the store already holds must raise RecallbenchError",
        store.ingest,
        [StoreRecord(recs[0].memory_id, "other", "a brand new text")],
    )
    before = ctx.system.seconds_inside()
    search(store, ctx.data.queries[0])
    expect(ctx.system.seconds_inside() >= before, "seconds_inside() went down after a search")
    return None


def check_same_order(ctx: Context) -> str | None:
    """Two stores of the same records (another system instance) give the same results, and
    a store searched twice gives them again."""
    first = ctx.rankings(ctx.search_all(ctx.build(ctx.work / "a")))
    second = ctx.build(ctx.work / "b", system=ctx.fresh_system())
    again = ctx.rankings(ctx.search_all(second))
    queries = ctx.data.queries
    expect(
        again == first,
        "two stores of the same records differ: " + first_difference(first, again, queries),
    )
    twice = ctx.rankings(ctx.search_all(second))
    expect(
        twice == first,
        "one store searched twice differs: " + first_difference(first, twice, queries),
    )
    expect(any(first), "the searches found nothing at all")
    return None


def check_ids_opaque(ctx: Context) -> str | None:
    """The store hands back exactly the ids it was given and ranks the same whatever they
    look like (the two id schemes sort alike, so ties break alike)."""
    recs = ctx.data.records
    plain = [f"zz-opaque-{i:04d}" for i in range(len(recs))]
    odd = [f"Ω {i:04d} / 'q\"; DROP TABLE memories; --" for i in range(len(recs))]

    def renamed(ids: list[str]) -> list[StoreRecord]:
        return [
            StoreRecord(i, r.identifier, r.text, r.importance, r.tags)
            for i, r in zip(ids, recs, strict=True)
        ]

    a = ctx.build(ctx.work / "a", renamed(plain))
    b = ctx.build(ctx.work / "b", renamed(odd), system=ctx.fresh_system())
    identifier = {i: r.identifier for i, r in zip(plain, recs, strict=True)}
    rebuilt = getattr(ctx.system, "clone_rebuilds_index", False)  # HNSW of random levels
    for q in ctx.data.queries:
        hits_a, hits_b = search(a, q), search(b, q)
        unknown = [h.memory_id for h in hits_b if h.memory_id not in odd]
        expect(not unknown, f"search({q!r}) returned id {unknown[:1]} it was never given")
        rank_a = [(-h.score, plain.index(h.memory_id)) for h in hits_a]
        rank_b = [(-h.score, odd.index(h.memory_id)) for h in hits_b]
        if rebuilt:  # two graphs of one index: tied hits may come in either order
            rank_a, rank_b = sorted(rank_a), sorted(rank_b)
        expect(rank_a == rank_b, f"search({q!r}) ranks differently when only the ids differ")
        expect(
            [h.score for h in hits_a] == [h.score for h in hits_b],
            f"search({q!r}) scores differently when only the ids differ",
        )
        expect(
            [h.identifier for h in hits_a] == [identifier[h.memory_id] for h in hits_a],
            f"search({q!r}) returned identifiers other than the records'",
        )
        if ctx.system.lexical:
            _, matched = b.lexical_matches(q)
            expect(set(matched) <= set(odd), "lexical_matches returned ids it was never given")
    return None


def check_attach(ctx: Context) -> str | None:
    """A closed store reopened by another system instance holds the same records and answers
    the same."""
    store = ctx.build(ctx.work / "s")
    hits, digest = ctx.search_all(store), store.digest()
    store.close()
    again = ctx.attach(ctx.work / "s", ctx.fresh_system())
    count = len(ctx.data.records)
    expect(again.count() == count, f"reopened, the store counts {again.count()!r}, not {count}")
    expect(again.digest() == digest, "reopened, the store's digest changed")
    expect(ctx.search_all(again) == hits, "reopened, the store answers differently")
    return None


def check_digest(ctx: Context) -> str | None:
    """The digest is a sha256 hex that ignores ingest order and sees a missing record."""
    recs = list(ctx.data.records)
    full = ctx.build(ctx.work / "full", recs).digest()
    expect(isinstance(full, str) and len(full) == 64, f"digest() returned {full!r}")
    shuffled = ctx.build(ctx.work / "shuffled", list(reversed(recs))).digest()
    expect(shuffled == full, "the digest depends on the order of ingest")
    missing = ctx.build(ctx.work / "missing", recs[:3] + recs[4:]).digest()
    expect(missing != full, "the digest does not change when a record is missing")
    return None


def check_path_reuse(ctx: Context) -> str | None:
    """A store opened where one was closed and deleted (in this process, by this system) is
    a fresh store: recallbench reuses store directories, so a store keeps nothing per path
    after `close()` (no connection, no client, no cache)."""
    recs = list(ctx.data.records)
    half = recs[: len(recs) // 2]
    place = ctx.work / "reused"
    first = ctx.build(place, recs)
    ctx.search_all(first)
    first.close()
    shutil.rmtree(place)
    hint = "; keep nothing per path after close() (recallbench reuses store directories)"
    try:
        store = ctx.open(place)
        held = store.count()
        expect(held == 0, f"a new store where a deleted one was holds {held!r} records" + hint)
        stored = store.ingest(half)
        expect(
            stored == len(half) and store.count() == len(half),
            f"a new store where a deleted one was reports {stored!r} records after ingesting "
            f"{len(half)}" + hint,
        )
        hits = ctx.rankings(ctx.search_all(store))
        digest = store.digest()
    except CheckFailed:
        raise
    except Exception as exc:
        from recallbench.systems.boundary import describe_exception

        raise CheckFailed(
            f"a new store where a deleted one was {describe_exception(exc)}" + hint
        ) from None
    elsewhere = ctx.build(ctx.work / "elsewhere", half)
    expect(
        digest == elsewhere.digest(),
        "a new store where a deleted one was holds other content than the same records "
        "in a new directory" + hint,
    )
    expected = ctx.rankings(ctx.search_all(elsewhere))
    expect(
        hits == expected,
        "a new store where a deleted one was answers differently from one in a new "
        "directory: " + first_difference(expected, hits, ctx.data.queries) + hint,
    )
    return None


def check_other_process(ctx: Context) -> str | None:
    """The same records give the same results in a fresh Python process with another
    `PYTHONHASHSEED` (a store that orders by `set` or `hash()` does not)."""
    mine = ctx.rankings(ctx.search_all(ctx.build(ctx.work / "here")))
    seed = other_hash_seed()
    theirs = ctx.rankings(rankings_in_a_process(ctx.name, ctx.data, ctx.work / "there", seed))
    expect(
        theirs == mine,
        f"results differ in a fresh process with PYTHONHASHSEED={seed}: "
        + first_difference(mine, theirs, ctx.data.queries)
        + " (a store must not depend on set order or hash())",
    )
    return f"PYTHONHASHSEED={seed} there"


def other_hash_seed() -> str:
    """A PYTHONHASHSEED other than this process's: one more than a fixed one, else 1 (this
    process's seed is then random, or 0 with hash randomization off)."""
    current = os.environ.get("PYTHONHASHSEED", "")
    if current.isdigit():
        return str((int(current) + 1) % 4294967296)
    return "1"


def rankings_in_a_process(name: str, data: CheckData, work: Path, seed: str) -> list[list[Hit]]:
    """The hit lists of `data` searched in a new store built in a fresh process
    (`python -m recallbench.commands.checkplugin`) with PYTHONHASHSEED=`seed`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "data.json").write_bytes(data.to_json())
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "recallbench.commands.checkplugin", name, str(work)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
        raise CheckFailed(f"the second process failed: {lines[-1]}")
    raw = orjson.loads((work / "hits.json").read_bytes())
    return [[Hit(h[0], h[1], h[2]) for h in hits] for hits in raw]


def check_content(ctx: Context) -> str | None:
    """The texts read back are the texts ingested (long ones included), except where the
    system declares what it keeps (`input_limit`)."""
    from recallbench.systems.base import content_cuts, declared_input_limit
    from recallbench.systems.packaging import records_digest

    recs = [*ctx.data.records, *long_records(ctx.data.records)]
    store = ctx.build(ctx.work / "s", recs)
    limit = declared_input_limit(ctx.system)
    declared = content_cuts(limit, [r.text for r in recs]) if limit is not None else None
    read_back = getattr(store, "texts", None)
    if not callable(read_back):
        if store.digest() == records_digest((r.memory_id, r.text) for r in recs):
            return "by its digest; give the store texts() to compare each text"
        raise CheckFailed(
            f"the store's digest is not records_digest of the {len(recs)} texts ingested: it "
            "altered texts, or its digest covers more than (id, text); give the store "
            "texts() so each text is compared"
        )
    held = dict(read_back())
    ingested = {r.memory_id: r.text for r in recs}
    missing = sorted(set(ingested) - set(held))
    expect(not missing, f"texts() reads back {len(held)} of {len(recs)} texts ingested")
    altered = [i for i, text in ingested.items() if held[i] != text]
    allowed = set() if declared is None else {recs[n].memory_id for n in declared["cut"]}
    undeclared = [i for i in altered if i not in allowed]
    if undeclared:
        first = undeclared[0]
        raise CheckFailed(
            f"store altered {len(altered)} of {len(recs)} texts (first: {first!r}, "
            f"{len(ingested[first]):,} characters ingested, {len(held[first]):,} read back); "
            + (
                f"its declared limit ({describe_input_limit(limit)}) does not explain "
                f"{len(undeclared)} of them"
                if limit is not None
                else "declare what it keeps (System.input_limit) or keep texts whole"
            )
        )
    if altered:
        return (
            f"cut {len(altered)} of {len(recs)} texts to its declared {describe_input_limit(limit)}"
        )
    return None


def check_lexical(ctx: Context) -> str | None:
    """`lexical_matches` names its matcher and returns sorted ids it was given: some for a
    word of a stored text, none for words no text holds."""
    store = ctx.build(ctx.work / "s")
    ids = {r.memory_id for r in ctx.data.records}
    word = max((w for w in ctx.data.records[0].text.split() if w.isalpha()), key=len, default="the")
    matcher, matched = store.lexical_matches(word)  # as written: some matchers keep case
    expect(bool(matcher) and isinstance(matcher, str), "lexical_matches names no matcher")
    expect(matched == sorted(matched), "lexical_matches returned ids out of order")
    expect(set(matched) <= ids, "lexical_matches returned ids it was never given")
    expect(bool(matched), f"lexical_matches({word!r}) matched nothing")
    expect(store.lexical_matches("zzzz qqqq")[1] == [], "lexical_matches('zzzz qqqq') matched")
    return None


def check_embedder(ctx: Context) -> str | None:
    """Stores opened with a vector lookup take every vector from it (the same results,
    twice; a text no one cached raises MissingVector) and answer as the inline embedder
    does (exactly, or within `INLINE_SCORE_TOLERANCE` for a learned one)."""
    from recallbench.core.embedding import batch_invariant, embedder_build, needs_cache
    from recallbench.systems.base import MissingVector, truncation_report

    embedder = ctx.system.embedder
    expect(
        embedder.identity() == ctx.fresh_system().embedder.identity(),
        "two instances' embedders have different identities",
    )
    expect(needs_cache(ctx.system) is not batch_invariant(embedder), "needs_cache disagrees")
    texts = [r.text for r in ctx.data.records] + list(ctx.data.queries)
    cache = dict(zip(texts, embedder.embed_texts(texts), strict=True))
    expect(len({len(v) for v in cache.values()}) == 1, "embed_texts gave vectors of two sizes")

    def lookup(text: str) -> Sequence[float]:
        if text not in cache:
            raise MissingVector(f"no cached vector for {text!r}")
        return cache[text]

    cached = ctx.build(ctx.work / "cached", system=ctx.fresh_system(), vectors=lookup)
    again = ctx.build(ctx.work / "again", system=ctx.fresh_system(), vectors=lookup)
    first = ctx.search_all(cached)
    expect(
        ctx.rankings(first) == ctx.rankings(ctx.search_all(again)),
        "two stores given the same vectors answer differently",
    )
    raises(
        MissingVector,
        "a store given a vector lookup must raise MissingVector for a query no one cached "
        "(it embedded the query itself)",
        cached.search,
        "a query nobody cached",
        TOP_K,
    )
    plain = ctx.search_all(ctx.build(ctx.work / "plain"))
    if batch_invariant(embedder):  # inline embedding is the same computation
        expect(first == plain, "cached vectors and inline embedding give other results")
    else:  # another batch shape, other kernels: equal only up to the last bits
        close_hits(first, plain, INLINE_SCORE_TOLERANCE)
        build = embedder_build(embedder)
        expect(
            build is not None and build.get("device") in ("cpu", "cuda"),
            "a learned embedder must say where it computes (build_info()['device'])",
        )
    stored = [r.text for r in ctx.data.records]
    counts = embedder.token_counts(stored)
    expect(len(counts) == len(stored) and all(c > 0 for c in counts), "token_counts is wrong")
    report = truncation_report(embedder, stored)
    expect((report is None) == (embedder.max_tokens is None), "max_tokens and report disagree")
    return None


def close_hits(a: list[list[Hit]], b: list[list[Hit]], tol: float) -> None:
    """Same hit lists up to `tol` in each score; two ids may trade places only when their
    scores are within `tol` of each other (a near-tie decided by the last bits)."""
    for hits_a, hits_b in zip(a, b, strict=True):
        expect(len(hits_a) == len(hits_b), "cached and inline vectors give other hit counts")
        for x, y in zip(hits_a, hits_b, strict=True):
            expect(abs(x.score - y.score) <= tol, f"cached and inline scores differ: {x}, {y}")
            if x.memory_id != y.memory_id:
                tied = [h.score for h in hits_a if h.memory_id in (x.memory_id, y.memory_id)]
                expect(
                    max(tied, default=x.score) - min(tied, default=x.score) <= tol,
                    f"cached and inline vectors rank otherwise: {x}, {y}",
                )


def check_clone(ctx: Context) -> str | None:
    """snapshot -> verify -> restore gives a store with the same records and answers; every
    corruption the system makes (at least `raw_byte` and `stale_manifest`) is rejected by
    both verify and restore; the good package survives."""
    from recallbench.systems.base import PackageInfo, SnapshotRejected

    clone, work = ctx.system.clone, ctx.work
    count = len(ctx.data.records)
    store = ctx.build(work / "source")
    info = clone.snapshot(store, work / "pkg")
    expect(isinstance(info, PackageInfo), "snapshot() did not return a PackageInfo")
    expect(info.records == count and info.size_bytes > 0, f"snapshot() returned {info}")
    expect(clone.verify(work / "pkg", work / "work") == count, "verify() miscounts a package")
    restored = clone.restore(work / "pkg", work / "clone")
    ctx.opened.append(restored)
    expect(restored.count() == count, f"the restored store counts {restored.count()!r}")
    expect(restored.digest() == store.digest(), "the restored store's digest differs")
    expect(
        ctx.rankings(ctx.search_all(restored)) == ctx.rankings(ctx.search_all(store)),
        "the restored store answers differently",
    )
    corruptions = clone.corruptions(work / "pkg", work / "corrupt")
    names = [c.name for c in corruptions]
    expect(any(n.startswith("raw_byte") for n in names), f"no raw_byte corruption in {names}")
    expect(any(n.startswith("stale_manifest") for n in names), f"no stale_manifest in {names}")
    expect(len(set(names)) == len(names), f"corruption names repeat: {names}")
    for c in corruptions:
        expect(c.package_dir.is_relative_to(work / "corrupt"), f"{c.name}: outside work_dir")
        try:
            clone.verify(c.package_dir, work / "verify" / c.package_dir.name)
        except SnapshotRejected as rejected:
            expect(bool(rejected.reason), f"{c.name}: rejected without a reason code")
        else:
            raise CheckFailed(f"verify() accepted the corrupted package {c.name}")
        raises(
            SnapshotRejected,
            f"restore() accepted the corrupted package {c.name}",
            clone.restore,
            c.package_dir,
            work / "restore" / c.package_dir.name,
        )
    expect(clone.verify(work / "pkg", work / "work2") == count, "the good package was damaged")
    return None


def check_structured(ctx: Context) -> str | None:
    """A structured system ingests records carrying turns and a session date, and searches
    with `query_date=` (a date, or None) as it does without."""
    from recallbench.core.model import Turn

    recs = [
        StoreRecord(
            r.memory_id,
            r.identifier,
            r.text,
            r.importance,
            r.tags,
            (Turn(r.text, role="user", turn_id="1"),),
            SESSION_DATE,
        )
        for r in ctx.data.records
    ]
    store = ctx.build(ctx.work / "s", recs)
    for date in (QUESTION_DATE, None):
        hits = store.search(ctx.data.queries[0], TOP_K, query_date=date)
        expect(isinstance(hits, list) and len(hits) <= TOP_K, "search(query_date=) is wrong")
    return None


@dataclass(frozen=True)
class Check:
    """One check: its name (`check-plugin`'s lines), the function (its docstring says what
    it checks), what an `ok` line says, and when it applies (None: always; else the
    capability it needs)."""

    name: str
    run: Callable[[Context], str | None]
    summary: str
    needs: str | None = None


CHECKS: tuple[Check, ...] = (
    Check("listed", check_listed, "listed as available, with the capabilities it has"),
    Check("configuration", check_configuration, "configuration() is a JSON object"),
    Check("fresh-store", check_fresh_store, "a fresh store is empty; open twice refused"),
    Check("ingest", check_ingest, "ingest counts; a repeated id is refused"),
    Check("same-order", check_same_order, "two stores, and one searched twice, agree"),
    Check("opaque-ids", check_ids_opaque, "ids come back as given and do not change ranks"),
    Check("attach", check_attach, "attach reopens the same store"),
    Check("digest", check_digest, "the digest ignores order and sees a missing record"),
    Check("path-reuse", check_path_reuse, "a store where a deleted one was is fresh"),
    Check("other-process", check_other_process, "the same results in a fresh process"),
    Check("content", check_content, "the texts read back are the texts ingested"),
    Check("lexical", check_lexical, "lexical_matches", "lexical"),
    Check("embedder", check_embedder, "a vector cache feeds its stores", "embedder"),
    Check("clone", check_clone, "the clone path round-trips; corruptions rejected", "clone"),
    Check("structured", check_structured, "structured records and query_date", "structured"),
)
CHECK_NAMES = tuple(c.name for c in CHECKS)


def check_named(name: str) -> Check:
    return next(c for c in CHECKS if c.name == name)


@dataclass(frozen=True)
class Outcome:
    """A check's result: `status` is ``ok``, ``FAIL`` or ``n/a``; `detail` one line."""

    check: str
    status: str
    detail: str

    def line(self) -> str:
        from recallbench.core.escape import terminal

        return terminal(f"{self.status:<4}  {self.check}: {self.detail}")


def run_check(check: Check, name: str, data: CheckData, work: Path, system: Any = None) -> str:
    """Run one check in `work` (a new directory); its note ('' when none). Raises
    `CheckFailed` with one line, whatever the system raised turned into one."""
    from recallbench.systems.boundary import describe_exception

    work.mkdir(parents=True, exist_ok=False)
    ctx = Context(name, data, work, system)
    try:
        return check.run(ctx) or ""
    except (CheckFailed, KeyboardInterrupt):
        raise
    except BaseException as exc:  # the system's own failure (SystemExit too): one line
        raise CheckFailed(describe_exception(exc)) from None
    finally:
        ctx.close_all()


def applies(check: Check, system: Any) -> bool:
    from recallbench.systems.base import capabilities

    return check.needs is None or check.needs in capabilities(system)


def run_checks(
    name: str,
    system: Any,
    data: CheckData,
    work: Path,
    only: Sequence[str] | None = None,
) -> Iterator[Outcome]:
    """Every check (or those named in `only`) on system `name`, each in a directory of its
    own under `work`: one `Outcome` each, as it finishes. `system`: an instance of `name`
    the caller resolved, to read its capabilities; each check still runs on fresh
    instances of its own."""
    for check in CHECKS:
        if only and check.name not in only:
            continue
        if not applies(check, system):
            yield Outcome(check.name, "n/a", f"{name} has no {check.needs} capability")
            continue
        try:
            note = run_check(check, name, data, work / check.name)
        except CheckFailed as failed:
            yield Outcome(check.name, "FAIL", str(failed).strip().splitlines()[0])
            continue
        yield Outcome(check.name, "ok", check.summary + (f" ({note})" if note else ""))


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A temporary directory for the checks' stores, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="recallbench-check-")
    try:
        yield Path(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _child(argv: Sequence[str]) -> int:
    """`python -m recallbench.commands.checkplugin NAME WORK`: build a store of WORK/data.json's
    records in WORK/store, search its queries, write the hits to WORK/hits.json."""
    name, work = argv[0], Path(argv[1])
    data = CheckData.from_json((work / "data.json").read_bytes())
    ctx = Context(name, data, work)
    try:
        hits = ctx.search_all(ctx.build(work / "store"))
    finally:
        ctx.close_all()
    (work / "hits.json").write_bytes(
        orjson.dumps([[[h.memory_id, h.score, h.identifier] for h in q] for q in hits])
    )
    return 0


if __name__ == "__main__":  # the second process of `check_other_process`
    sys.exit(_child(sys.argv[1:]))
