"""The seam between stages and a system under test: a small core plus optional capabilities.

A stage never imports a memory system directly. It asks the registry for a `System`, opens a
fresh `Store` in a directory, ingests `StoreRecord`s and searches. That is the whole core:

* `System`: `name`, `configuration()`, `open_store()`, `attach()`, `seconds_inside()`;
* `Store`: `ingest()`, `search()`, `count()`, `digest()`, `close()`.

Capabilities are attributes a stage checks before using them (None / False when absent; the
stage then reports "n/a: <system> has no clone path" rather than failing):

* `System.clone` (`ClonePath`): snapshot -> verify -> restore, and the system's own
  `corruptions` of a package for the tamper check;
* `System.embedder` (`Embedder`): vectors for the prep cache (`open_store(vectors=...)`), the
  model's maximum input length and token counts (`truncation_report`);
* `System.lexical`: `Store.lexical_matches()` exists (diagnostics for "why missed");
* `System.structured` (plugin API 1.1): the system wants structure. Its records then carry
  the dataset's turns (`Turn`) and session date where the dataset has them, and its
  stores' `search` is called with `query_date=` (the question's date, or None). A system
  without the attribute gets neither: records as before, `search(query, limit)`;
* `System.input_limit` (`InputLimit`, plugin API 1.1): what its stores see of a text (at
  most so many characters or tokens); runs report the share cut (`content_loss_report`);
* `System.setup()` (plugin API 1.1): called once in each worker process, through the
  boundary, before any store is opened there (load a model once per process).

This module is what a plugin implements and what the harness calls; the helpers the
built-in systems share (and a plugin may use) are in `recallbench.systems.packaging`. A
plugin imports both from `recallbench.plugin`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Turn as Turn  # a structured record's turn (the seam's name)


@dataclass(frozen=True)
class StoreRecord:
    """One memory as the system sees it. `memory_id` must be opaque to the system.

    `turns` and `session_date` (plugin API 1.1) are filled only for a system that declares
    `structured = True`, and only where the dataset has them: the memory's turns (`Turn`:
    text, role or speaker, turn id = 1-based position in its session, timestamp) and its
    session's date, verbatim as the dataset writes it. Otherwise `()` and None."""

    memory_id: str
    identifier: str
    text: str
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    turns: tuple[Turn, ...] = ()
    session_date: str | None = None


@dataclass(frozen=True)
class Hit:
    """One ranked search result, in the order the system returned it."""

    memory_id: str
    score: float
    identifier: str


@dataclass(frozen=True)
class PackageInfo:
    """What a snapshot produced: records exported and package size in bytes (all files)."""

    records: int
    size_bytes: int


@dataclass(frozen=True)
class Corruption:
    """A damaged copy of a package (`package_dir`, under the caller's work directory)."""

    name: str
    description: str
    package_dir: Path


class SnapshotRejected(RecallbenchError):
    """The system's verification refused a package; `reason` is the system's own code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class MissingVector(RecallbenchError):
    """A store opened with a vector cache was asked to embed a text that is not cached."""


#: text -> vector; a store opened with one embeds nothing itself.
VectorLookup = Callable[[str], Sequence[float]]


class HarnessCallbacks:
    """Seconds the harness spends in callbacks a system calls back into (the vector cache's
    lookups, see `timed_lookup`): `TimedCalls._inside` subtracts them from the system's
    time, so the harness's own work is never counted as the system's."""

    seconds: float = 0.0


def timed_lookup(lookup: VectorLookup) -> VectorLookup:
    """`lookup`, its time counted as the harness's (`HarnessCallbacks`)."""

    def timed(text: str) -> Sequence[float]:
        start = time.perf_counter()
        try:
            return lookup(text)
        finally:
            HarnessCallbacks.seconds += time.perf_counter() - start

    return timed


class TimedCalls:
    """Mixin for systems: `_inside()` times a block as the system's own work, less the time
    the block spent in the harness's callbacks (`HarnessCallbacks`).

    `seconds_inside()` is this instance's total; `process_seconds_inside` (per class) adds
    up every instance in the process, for overhead figures in benchmarks.
    """

    process_seconds_inside: float = 0.0
    _seconds_inside: float = 0.0

    @contextlib.contextmanager
    def _inside(self) -> Iterator[None]:
        callbacks = HarnessCallbacks.seconds
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start - (HarnessCallbacks.seconds - callbacks)
            self._seconds_inside += elapsed
            type(self).process_seconds_inside += elapsed

    def seconds_inside(self) -> float:
        return self._seconds_inside


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class Store(Protocol):
    def ingest(self, records: Sequence[StoreRecord]) -> int:
        """Store all records; return how many the store now holds. Ids must be new."""

    def search(self, query: str, limit: int) -> list[Hit]:
        """The system's production search, at most `limit` results in its own order.

        `limit` is how many hits the harness asks for, which may exceed the run's top-k: the
        query stage widens it (doubling it) until every level of the dataset has k ids
        among the hits. The harness passes `query` and `limit` by position, so a store may
        name the parameter as it likes (`top_k` in plugins written before it was named
        `limit`). A `structured` system's stores are called as `search(query, limit,
        query_date=DATE)` (DATE: the question's date as the dataset writes it, or None)."""

    def count(self) -> int:
        """Records held now."""

    def digest(self) -> str:
        """sha256 hex over the content read back through the system's own API.

        Equal for the same records whatever the ingest order; differs when a record is
        missing or changed. Stages record it at hydrate and compare it later, so a damaged
        store (a record deleted, a killed hydrate) is detected.
        """

    def close(self) -> None: ...

    # optional (plugin API 1.1): `texts()` -> iterable of (memory id, text), every record's
    # text read back through the store's own API; `recallbench check-plugin` compares them
    # with the texts ingested (without it: the digest with `records_digest` of them)


@runtime_checkable
class LexicalStore(Store, Protocol):
    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """(name of the system's lexical matcher, ids it matches for `query`, sorted), through
        the system's own code. Diagnostic only: explains misses, never used for scoring."""


class ClonePath(Protocol):
    """The system's snapshot -> verify -> restore path and its own tamper cases."""

    def snapshot(self, store: Any, package_dir: Path) -> PackageInfo:
        """Write a package of `store` into `package_dir` (created; must not exist)."""

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        """Verify a package; return its record count or raise SnapshotRejected."""

    def restore(self, package_dir: Path, directory: Path) -> Store:
        """Verify and hydrate the package into a fresh store in `directory`."""

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        """Damaged copies of a good package, each in a new subdirectory of `work_dir`.

        At least `raw_byte` (one payload byte flipped) and `stale_manifest` (the payload's
        content changed consistently, the manifest left as it was), so the system's own
        integrity check is exercised, not only a compressor's. Names may carry a suffix
        (`stale_manifest:bm25`) when a system composes others.
        """


class Embedder(Protocol):
    """A system's embedder, for the prep cache and truncation diagnostics.

    Optional (absent means None; an embedder without it works as before):
    `text_transform`, what the store does to a text before it embeds it: a name of
    `recallbench.core.embedding.TEXT_TRANSFORMS` (`"strip"`) for every text, or a mapping of
    role (`"memory"`, `"query"`) to a name, e.g. `{"query": "strip"}` for a store whose
    search strips its query. Prep then embeds each text in that form too, and the store
    asks the vector cache for that form (`adapters.VectorSource.check(text, role)`).
    """

    #: the model's maximum input length in tokens (None: no limit)
    max_tokens: int | None

    def identity(self) -> str:
        """A key that changes whenever stored or query vectors would change."""

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts exactly as the system's stores would."""

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text takes in the model's input, before any truncation."""


class System(Protocol):
    #: short, stable name used in artifacts, e.g. "hotmem" or "bm25"
    name: str
    #: capabilities: None / False when the system has none
    clone: ClonePath | None
    embedder: Embedder | None
    lexical: bool
    #: optional (absent: False): records carry turns and dates, searches the query's date
    structured: bool
    #: optional (absent: None): what its stores see of a text (`InputLimit`)
    input_limit: InputLimit | None
    # optional (plugin API 1.1): `setup()`, called once in each worker process (through the
    # boundary, after its thread settings, before any store is opened there): load a model
    # once per process there, not in every `open_store`

    def configuration(self) -> dict[str, Any]:
        """The configuration actually in use, read from the system (never retyped). It must
        not depend on `setup()`: the harness may read it before or after (hydrate records it
        from the parent's object, which `setup()` has run on with one in-process worker and
        not with worker processes), and the two must record the same configuration."""

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> Store:
        """A fresh, empty store inside `directory` (FileExistsError if one is there).

        Directories are reused: a store may be opened where an earlier store of this process
        was closed and deleted (a worker's transient stores alternate between two), so a
        store keeps nothing per path after `close()` (`recallbench check-plugin`'s
        `path-reuse` check). With `vectors`, the store takes every vector (stored texts and
        queries) from the lookup instead of embedding; systems without an embedder ignore
        it."""

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> Store:
        """Reopen the store a previous `open_store` left in `directory` (FileNotFoundError).

        `vectors` as for `open_store` (queries then take their vectors from the lookup); it is
        only passed when a vector cache is in use, so a plugin may omit the parameter."""

    def seconds_inside(self) -> float:
        """Wall time spent inside the system's own calls so far (for overhead figures)."""


def capabilities(system: System) -> list[str]:
    """The capability names a system has: `clone`, `embedder`, `lexical`, `structured` (in
    that order)."""
    out = []
    if getattr(system, "clone", None) is not None:
        out.append("clone")
    if getattr(system, "embedder", None) is not None:
        out.append("embedder")
    if getattr(system, "lexical", False):
        out.append("lexical")
    if structured(system):
        out.append("structured")
    return out


def structured(system: Any) -> bool:
    """Whether `system` asks for structured records (`System.structured`, absent: no)."""
    return getattr(system, "structured", False) is True


# --------------------------------------------------------------------------- diagnostics


def truncation_report(embedder: Embedder | None, texts: Sequence[str]) -> dict[str, Any] | None:
    """How much of `texts` the embedder's model never sees (None: no embedder or no limit).

    `texts_over_limit`: texts longer than `max_tokens`; `tokens_unseen`: the tokens past the
    limit, summed over those texts; `share_unseen_of_long_texts` = tokens_unseen / the
    tokens of those texts; `share_unseen` = tokens_unseen / tokens_total, over all texts. Token counts include the model's special tokens (for BERT-style models, [CLS]
    and [SEP] count toward the limit, as they do in the model).
    """
    if embedder is None or embedder.max_tokens is None:
        return None
    limit = int(embedder.max_tokens)
    counts = [int(c) for c in embedder.token_counts(texts)]
    return truncation_shares(truncation_counts(limit, counts))


def truncation_counts(limit: int, token_counts: Sequence[int]) -> dict[str, int]:
    """The counts behind `truncation_report` of texts with these token counts under `limit`
    (summable over scopes; `truncation_shares` adds the shares)."""
    over = [c for c in token_counts if c > limit]
    return {
        "max_tokens": limit,
        "texts": len(token_counts),
        "texts_over_limit": len(over),
        "tokens_total": sum(token_counts),
        "tokens_unseen": sum(c - limit for c in over),
        "tokens_of_long_texts": sum(over),
    }


def truncation_shares(counts: Mapping[str, Any]) -> dict[str, Any]:
    """`counts` (as `truncation_report` gives them, or their sums over scopes) with the two
    shares worked out from them."""
    unseen, long, total = (
        counts["tokens_unseen"],
        counts["tokens_of_long_texts"],
        counts["tokens_total"],
    )
    return {
        **counts,
        "share_unseen_of_long_texts": unseen / long if long else 0.0,
        "share_unseen": unseen / total if total else 0.0,
    }


@dataclass(frozen=True)
class InputLimit:
    """What a system's stores see of a memory's text (plugin API 1.1): a system declares it
    as its optional `input_limit` (absent or None: every text whole).

    `chars`: the store keeps (or looks at) at most this many characters of a text;
    `tokens`: at most this many tokens of its internal model `model` (its identity, e.g.
    ``"BAAI/bge-small-en-v1.5"``), counted by `token_counts` (texts -> tokens each, as the
    model counts them; required with `tokens`). A text longer than either is one the store
    cannot have seen whole: runs report their share (hydrate's `content_loss`), and
    `recallbench check-plugin` accepts such a text read back altered (any other alteration
    fails it)."""

    chars: int | None = None
    tokens: int | None = None
    model: str | None = None
    token_counts: Callable[[Sequence[str]], Sequence[int]] | None = None

    def __post_init__(self) -> None:
        for name in ("chars", "tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"InputLimit.{name} must be a whole number, not {value!r}")
            if value is not None and value < 1:
                raise ValueError(f"InputLimit.{name} must be at least 1, not {value}")
        if self.chars is None and self.tokens is None:
            raise ValueError("InputLimit needs chars or tokens")
        if self.tokens is not None and self.token_counts is None:
            raise ValueError("InputLimit(tokens=...) needs token_counts (texts -> tokens each)")


def describe_input_limit(limit: InputLimit) -> str:
    """The limit in words: "1,000 characters", "512 tokens of BAAI/bge-small-en-v1.5"."""
    parts = []
    if limit.chars is not None:
        parts.append(f"{limit.chars:,} characters")
    if limit.tokens is not None:
        parts.append(f"{limit.tokens:,} tokens" + (f" of {limit.model}" if limit.model else ""))
    return " and ".join(parts)


def content_cuts(limit: InputLimit, texts: Sequence[str]) -> dict[str, Any]:
    """Which of `texts` the store cannot have seen whole under `limit` (`cut`: their
    positions) and the counts of what it misses: `texts`, `texts_cut`, and per unit
    declared the total and the part past the limit (`chars_total`, `chars_unseen`;
    `tokens_total`, `tokens_unseen`)."""
    cut: set[int] = set()
    counts: dict[str, Any] = {"texts": len(texts)}
    if limit.chars is not None:
        lengths = [len(t) for t in texts]
        cut.update(i for i, n in enumerate(lengths) if n > limit.chars)
        counts["chars_total"] = sum(lengths)
        counts["chars_unseen"] = sum(n - limit.chars for n in lengths if n > limit.chars)
    if limit.tokens is not None and limit.token_counts is not None:
        tokens = [int(n) for n in limit.token_counts(list(texts))]
        if len(tokens) != len(texts):
            raise RecallbenchError(
                f"input_limit.token_counts returned {len(tokens)} counts for {len(texts)} texts"
            )
        cut.update(i for i, n in enumerate(tokens) if n > limit.tokens)
        counts["tokens_total"] = sum(tokens)
        counts["tokens_unseen"] = sum(n - limit.tokens for n in tokens if n > limit.tokens)
    counts["texts_cut"] = len(cut)
    return {"cut": sorted(cut), **counts}


def declared_input_limit(system: Any) -> InputLimit | None:
    """The system's `input_limit` (None when it declares none; a RecallbenchError naming the
    system when it is not an `InputLimit`)."""
    limit = getattr(system, "input_limit", None)
    if limit is not None and not isinstance(limit, InputLimit):
        raise RecallbenchError(
            f"system '{getattr(system, 'name', '?')}': input_limit is {type(limit).__name__}, "
            "not a recallbench.plugin.InputLimit"
        )
    return limit


#: the counts of `content_cuts` that add up over scopes
CONTENT_COUNTS = (
    "texts",
    "texts_cut",
    "chars_total",
    "chars_unseen",
    "tokens_total",
    "tokens_unseen",
)


def content_loss_report(limit: InputLimit, counts: Mapping[str, Any]) -> dict[str, Any]:
    """What a run records of a declared input limit: the limit (`chars`, `tokens`, `model`,
    `described`), the counts of `content_cuts` (or their sums over scopes) and the shares:
    `share_cut` = texts the store cannot have seen whole / texts, and per unit declared the
    share of all stored characters (tokens) past the limit."""
    out: dict[str, Any] = {
        "input_limit": {
            "chars": limit.chars,
            "tokens": limit.tokens,
            "model": limit.model,
            "described": describe_input_limit(limit),
        },
        **{key: counts[key] for key in CONTENT_COUNTS if key in counts},
    }
    out["share_cut"] = out["texts_cut"] / out["texts"] if out["texts"] else 0.0
    for unit in ("chars", "tokens"):
        if f"{unit}_total" in out:
            total = out[f"{unit}_total"]
            out[f"share_{unit}_unseen"] = out[f"{unit}_unseen"] / total if total else 0.0
    return out
