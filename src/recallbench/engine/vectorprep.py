"""Making a vector cache: every distinct memory and query text of a validated dataset
embedded once, in fixed batches, so per-run work needs no model. The work of `recallbench
prep` (`stages.prep`), and of a stage that finds its system needs a cache (`vector_cache`).

This is the one path every learned vector recallbench computes takes (vectors made elsewhere
come in through `import_vector_cache`, `recallbench prep --import`, into the same rows).
`recallbench prep --cache DIR` makes a cache explicitly; a stage whose system's embedder is
not batch-invariant (a learned model: its vectors depend in the last bits on the texts
embedded with them) makes one in `BUILD/vectors/` itself when no `--cache` is given
(`vector_cache`). Either way the vectors come from the same batches, so a run with and
without `--cache`, with any number of workers and on any engine, gives the same bytes on one
machine.

The batches are fixed by the set of distinct texts alone:

* distinct texts (by sha256) in order of first appearance in validate's spool (queries,
  then memories, scope after scope), which also gives each text its row;
* cut into windows of `WINDOW` texts; within a window, sorted by token count (the model's
  own tokenizer, capped at its input limit; ties by row), which keeps padding small;
* each window cut, in that order, into batches of at most `BATCH_TEXTS` texts and at most
  `BATCH_TOKENS` padded tokens (texts x the batch's longest text, capped), each embedded as
  one forward pass (a worker task, `embed_batches`, embeds a group of them): long texts go
  in small batches, short ones in large ones;
* then the forms a store embeds (its `text_transform`: mem0 strips its queries) that are no
  text of the spool, by first appearance, in windows of their own, batched alike: the
  texts' batches never depend on a transform, so the cache a stage made for one store
  takes another store's forms by adding them alone (`make_vector_cache(extend=True)`).

Which worker, engine or device embeds a batch never changes the batch, nor does the order
in which the batches are handed out: a window's batches go out costliest first (padded
tokens), so the last tasks of a run are short ones and no worker idles long at the end.
Each text is tokenized once here (its count both sorts it and feeds `Truncation`, which
counts what the embedder never sees; hydrate counts it too).

How the batches are embedded (`embedding_plan`, said on stderr and kept in the timing, never
in the manifest): the workers asked for, never more than the batches there are (a process or
thread that would embed nothing never starts, so no process loads the model for nothing)
nor, on the local engine, more than this machine's cores. Locally that is one process
embedding that many batches at a time, each on a thread of its own
(`workerstate.embedding_threads`): one model load and one copy of the model (the figures
that chose this over a process per batch: docs/performance.md). On Ray, an actor per worker.
Every batch's forward pass runs on one torch thread (MiniLM fixes
`torch.set_num_threads(1)`; an embedding thread runs its ops in its own thread), whichever
process or thread runs it: the arithmetic of a batch is the same everywhere, which is what
keeps the bytes identical. (torch's intra-op threads would split a batch's work by thread
count; that they gave the same bytes on this machine is a property of its BLAS, not a
guarantee, so prep never uses them.) Each process starts loading the model when it starts
(`workerstate.init_worker` with `preload`, on a thread) while the spool is read and
tokenized; with more than one thread the embedding runs in a process of its own and this one
never imports torch.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.builddir.scopespool import stream_scopes
from recallbench.core import progress
from recallbench.core.errors import RecallbenchError
from recallbench.engine import workerstate
from recallbench.engine.tasks import Execution, run_tasks
from recallbench.systems.boundary import Boundary, system_boundary
from recallbench.systems.registry import resolve_system

#: where a stage keeps the vector caches it makes itself (`vector_cache`), in the build dir
VECTORS_DIR = "vectors"


#: padded tokens per forward pass at most (texts x the batch's longest text, capped at the
#: model's limit). A fixed count of texts (32, what a plain sentence-transformers encode
#: uses) puts 32 texts of 256 tokens in one pass; this budget puts 8. Measured on the
#: generated LoCoMo file (1,865 texts, one torch thread, the same process, alternated): the
#: forward passes took 28.3-29.8 s in these batches against 34.5-35.3 s in batches of 32
#: (docs/performance.md, "Fourth pass")
BATCH_TOKENS = 2048
#: texts per forward pass at most (short texts: the budget alone would make huge batches)
BATCH_TEXTS = 64
#: distinct texts sorted by length together
WINDOW = 4096
#: what the manifest records of the batching (a cache made otherwise is another cache)
BATCHING = {
    "order": "distinct texts by first appearance; windows sorted by token count, then row",
    "batch_tokens": BATCH_TOKENS,
    "batch_texts": BATCH_TEXTS,
    "window": WINDOW,
}
#: where the forms a store embeds (its `text_transform`) go, as the manifest records it
FORMS = (
    "after every text's row: each form that is no text of the spool, by first appearance, "
    "in windows of their own"
)


@dataclass
class _Window:
    """Rows first..first+len(keys)-1, embedded as `pending` batches; `vectors` by position."""

    first: int
    keys: list[bytes]
    pending: int
    vectors: list[bytes | None]
    dimension: int = 0


def plan_batches(
    texts: list[str],
    first_row: int,
    token_counts: list[int],
    cap: int | None,
    *,
    sort_by_length: bool = True,
) -> list[list[int]]:
    """One window's batches: positions into `texts` (rows first_row...), sorted by token
    count (capped at the model's limit: longer texts are truncated to it) then by row, cut
    in that order into batches of at most BATCH_TEXTS texts and BATCH_TOKENS padded tokens
    (a text longer than the budget is a batch of its own). `sort_by_length=False` keeps
    row order (for the benchmark that measures what sorting saves; such a cache records
    its other batching)."""
    limit = cap if cap is not None else max(token_counts, default=0)
    order = list(range(len(texts)))
    if sort_by_length:
        order.sort(key=lambda i: (min(token_counts[i], limit), i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        tokens = min(token_counts[i], limit)
        widest = max(longest, tokens)
        if current and (len(current) >= BATCH_TEXTS or (len(current) + 1) * widest > BATCH_TOKENS):
            batches.append(current)
            current, widest = [], tokens
        current.append(i)
        longest = widest
    if current:
        batches.append(current)
    return batches


def distinct_texts(
    suite_env: Mapping[str, Any], transforms: Mapping[str, str] | None = None
) -> int:
    """How many distinct texts (by sha256: the cache's key) validate's spool holds, queries
    and memories, with the forms a store's `text_transform` adds: the rows prep embeds, so
    its progress bar's total (one pass over the spool, which costs a small fraction of
    embedding it)."""
    from recallbench.core.embedding import transformed
    from recallbench.engine.vectorcache import text_key

    keys: set[bytes] = set()
    for _, scope in stream_scopes(suite_env):
        for role, text, _ in scope_texts(scope):
            keys.add(text_key(text))
            if transforms:
                keys.add(text_key(transformed(transforms, role, text)))
    return len(keys)


def dispatch_order(
    batches: Sequence[Sequence[int]], token_counts: Sequence[int], cap: int | None
) -> list[int]:
    """The order in which a window's batches are handed out: costliest first (texts x the
    longest text's tokens, capped), ties by position. It never changes a batch, only when
    it runs: the long batches start early and the short ones fill the end of the run."""
    limit = cap if cap is not None else max(token_counts, default=0)

    def cost(index: int) -> int:
        batch = batches[index]
        return len(batch) * max((min(token_counts[i], limit) for i in batch), default=0)

    return sorted(range(len(batches)), key=lambda index: (-cost(index), index))


#: what keeps a batch's bytes whoever embeds it (said with the plan)
IDENTITY = "each batch on one torch thread: identical by construction"
#: `RECALLBENCH_EMBEDDING_PLAN=processes` makes a local plan of one process per worker (one
#: thread each) instead of one process with a thread per worker (a diagnostic, to compare)
PLAN_ENV = "RECALLBENCH_EMBEDDING_PLAN"


@dataclass(frozen=True)
class EmbeddingPlan:
    """How the batches are embedded: `processes`, each loading the model once and embedding
    `threads` batches at a time (each batch on a thread of its own, with one torch thread),
    and why."""

    processes: int
    requested: int
    reason: str
    threads: int = 1

    @property
    def summary(self) -> str:
        processes = f"{self.processes} process{'es' if self.processes > 1 else ''}"
        return f"{processes} x {self.threads} thread{'s' if self.threads > 1 else ''}"

    def describe(self, torch_threads: int | None) -> dict[str, Any]:
        return {
            "processes": self.processes,
            "threads_per_process": self.threads,
            "workers_requested": self.requested,
            # what each batch's forward pass runs on, whichever thread runs it
            "torch_threads_per_batch": torch_threads,
            "identity": IDENTITY,
            "reason": self.reason,
            "summary": self.summary,
        }


def machine_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def embedding_plan(
    execution: Execution,
    batches: int,
    cores: int | None = None,
    prefer: str | None = None,
    *,
    thread_safe: bool = True,
) -> EmbeddingPlan:
    """How `batches` batches (at least that many) are embedded: the workers asked for,
    capped at the batches and, locally, at the cores; locally one process with that many
    threads (one model load) when the embedder is `thread_safe` (`prefer="processes"` or
    $RECALLBENCH_EMBEDDING_PLAN=processes: a process per worker instead), on Ray an actor
    per worker. The vectors never depend on it: every batch's forward pass runs on one
    torch thread whoever runs it."""
    cores = machine_cores() if cores is None else cores
    prefer = prefer or os.environ.get(PLAN_ENV) or "threads"
    if prefer not in ("threads", "processes"):
        raise RecallbenchError(f"{PLAN_ENV}: threads or processes, not {prefer!r}")
    requested = execution.workers
    budget, reasons = requested, []
    if execution.executor == "local" and budget > cores:
        budget = cores
        reasons.append(f"--workers {requested} capped at this machine's {cores} core(s)")
    if budget > max(batches, 1):
        budget = max(batches, 1)
        reasons.append(f"only {batches} batch(es) to embed")
    if execution.executor != "local" or budget == 1:
        return EmbeddingPlan(budget, requested, "; ".join(reasons) or "as asked")
    if prefer == "processes":
        reasons.append(f"a process per worker (${PLAN_ENV}=processes)")
        return EmbeddingPlan(budget, requested, "; ".join(reasons))
    if not thread_safe:
        reasons.append("a process per worker (the embedder does not say it is thread-safe)")
        return EmbeddingPlan(budget, requested, "; ".join(reasons))
    reasons.append(f"one model load, {budget} batches at a time")
    return EmbeddingPlan(1, requested, "; ".join(reasons), threads=budget)


def grouped(batches: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    """Consecutive batches (in dispatch order: of like cost) in groups of `size`, each group
    one task whose batches a worker embeds at once (`embed_batches`)."""
    while group := list(itertools.islice(batches, size)):
        yield group


def make_vector_cache(
    suite_env: Mapping[str, Any],
    cache_dir: Path,
    system: Any,
    *,
    execution: Execution | None = None,
    sort_by_length: bool = True,
    extend: bool = False,
) -> dict[str, Any]:
    """Write the cache for `system` (the stage's system object, or a name: `recallbench
    prep` resolves it here, once); return its manifest (with `timing`, a local diagnostic).

    Its rows: every distinct text of the spool (queries, then memories, scope after
    scope), then each form the store embeds (its `text_transform`) that is not among the
    texts, in windows of their own (`FORMS`); the scopes' rows are the texts' rows. So the
    texts' batches never depend on the transforms, and the forms' only on the texts and the
    transforms.

    `extend`: when `cache_dir` holds a cache of this source, embedder and batching made for
    other transforms (`extendable`), its texts' rows are copied and only the forms of both
    its transforms and the system's are embedded: the rows a cache made at once for those
    transforms holds. Otherwise (and always without `extend`) every row is embedded.

    The previous cache in `cache_dir`, if any, stays valid until the new one is complete
    (see `recallbench.engine.vectorcache.CacheWriter`)."""
    from recallbench.core.embedding import text_transforms, thread_safe
    from recallbench.engine.vectorcache import CacheWriter, text_key

    execution = execution or Execution()
    system = embedding_system(system)
    embedder = system.embedder
    cap = getattr(embedder, "max_tokens", None)
    writer = CacheWriter(Path(cache_dir), embedder.identity())
    try:  # read under the writer's lock: no other prep replaces it meanwhile
        kept = _kept_texts(Path(cache_dir), embedder, suite_env) if extend else None
    except BaseException:
        writer.abort()
        raise
    transforms = text_transforms(embedder)  # {} for a store that embeds texts as given
    if kept is not None:
        transforms = joined_transforms(kept.get("text_transforms"), transforms) or {}
    boundary = system_boundary(system, execution.call_timeout)
    tally = Truncation(system, boundary)  # counted on the same pass over the spool
    rows: dict[bytes, int] = {}  # text key -> its row, in order of first appearance
    windows: deque[_Window] = deque()
    placed: deque[tuple[_Window, list[int]]] = deque()  # each batch's window and positions
    counts = {"seen": 0, "tokens": 0, "tokens_embedded": 0, "embedded": 0, "forms": 0}
    started = time.perf_counter()
    inside = 0.0
    builds: list[dict[str, Any]] = []
    loads: dict[int, float] = {}  # each embedding process's model load, seconds

    row_tokens: list[int] = []  # each text's token count, by row (tokenized once)

    def window_batches(pending: _Pending) -> Iterator[list[str]]:
        texts, tokens = pending.texts, pending.tokens
        window = _Window(len(rows) - len(texts), pending.keys, 0, [None] * len(texts))
        counts["embedded"] += len(texts)
        counts["tokens"] += sum(tokens)
        counts["tokens_embedded"] += sum(min(n, cap) if cap else n for n in tokens)
        batches = plan_batches(texts, window.first, tokens, cap, sort_by_length=sort_by_length)
        window.pending = len(batches)
        windows.append(window)
        for index in dispatch_order(batches, tokens, cap):
            positions = batches[index]
            placed.append((window, positions))
            yield [texts[i] for i in positions]

    def token_counts(scope: Mapping[str, Any], new: list[str]) -> list[int]:
        if not new:
            return []
        where = f"scope {scope['scope_id']}"
        return [int(n) for n in boundary.call("token_counts", where, embedder.token_counts, new)]

    def text_batches() -> Iterator[list[str]]:
        """The texts' rows: each distinct text once, and every scope's rows."""
        pending = _Pending()
        for scope, scope_rows, fresh in text_rows(suite_env, rows, counts):
            new = [text for _, text, _ in fresh]
            for text in new:
                pending.add(text_key(text), text)
            counted = token_counts(scope, new)
            pending.tokens.extend(counted)
            row_tokens.extend(counted)
            memories = scope_rows[len(scope["queries"]) :]
            tally.add_counts([row_tokens[row] for row in memories])
            writer.add_scope(scope_rows)
            if len(pending.texts) >= WINDOW:
                yield from window_batches(pending)
                pending = _Pending()
        if pending.texts:
            yield from window_batches(pending)

    def form_batches() -> Iterator[list[str]]:
        """The forms' rows, after every text's: each form the store embeds (its
        `text_transform`) that is no text of the spool, once (looked up by its sha256)."""
        if not transforms:
            return
        pending = _Pending()
        for scope, fresh in form_rows(suite_env, transforms, rows):
            new = [form for _, form in fresh]
            for form in new:
                pending.add(text_key(form), form)
            pending.tokens.extend(token_counts(scope, new))
            counts["forms"] += len(new)
            if len(pending.texts) >= WINDOW:
                yield from window_batches(pending)
                pending = _Pending()
        if pending.texts:
            yield from window_batches(pending)

    def flush() -> None:
        """Write every finished window at the head, in row order."""
        while windows and windows[0].pending == 0:
            window = windows.popleft()
            writer.add(window.keys, b"".join(window.vectors), window.dimension)  # type: ignore[arg-type]

    try:
        if kept is not None:  # the texts' rows as they are, the scopes' rows with them
            _copy_texts(Path(cache_dir), kept, writer, rows)
            counts["seen"] = kept["texts"]["seen"]
            builds.extend(_builds(kept.get("embedder_build")))
        # the plan, from the count of distinct texts (one pass over the spool, reading and
        # hashing: a small fraction of tokenizing it): never more processes or threads than
        # batches, so none loads the model for nothing; the workers start (and start
        # loading the model) before the spool is read again for the batches
        total = distinct_texts(suite_env, transforms) - len(rows)
        # at least this many batches (each holds BATCH_TEXTS texts at most)
        plan = embedding_plan(
            execution, -(-total // BATCH_TEXTS), thread_safe=thread_safe(embedder)
        )
        if total:
            what = "texts" if kept is None else f"forms ({', '.join(transforms.values())})"
            progress.say(f"embedding {total:,} {what}: {plan.summary} ({IDENTITY})")
        work = (
            form_batches() if kept is not None else itertools.chain(text_batches(), form_batches())
        )
        for result in run_tasks(
            embed_batches,
            grouped(work, plan.threads),
            system=system,
            execution=replace(execution, workers=plan.processes),
            # the workers load the model while this process reads and tokenizes the spool
            preload=total > 0,
            own_process=plan.threads > 1,
            cache=None,
            total=total,
            desc=f"prep {system.name}",
            unit="text",
            weight=lambda result: result["texts"],
        ):
            for part in result["batches"]:
                window, positions = placed.popleft()
                size = part["dimension"] * 4
                blob = part["blob"]
                if len(blob) != size * len(positions):
                    raise RecallbenchError(
                        f"{system.name}: the embedder returned {len(blob) // max(size, 1)} "
                        f"vectors for {len(positions)} texts"
                    )
                window.dimension = part["dimension"]
                for n, i in enumerate(positions):
                    window.vectors[i] = blob[n * size : (n + 1) * size]
                window.pending -= 1
            inside += result["seconds_inside"]
            if result.get("build") and result["build"] not in builds:
                builds.append(result["build"])
            if result.get("model_load"):
                loads[result["model_load"]["pid"]] = result["model_load"]["seconds"]
            flush()
    except BaseException:
        writer.abort()
        raise
    wall = time.perf_counter() - started
    build = builds[0] if len(builds) == 1 else None
    forms = counts["forms"]  # every form is embedded anew (`_copy_texts` copies texts only)
    manifest = writer.finish(
        {
            "source": cache_source(suite_env),
            "batching": BATCHING
            if sort_by_length
            else {**BATCHING, "order": "distinct texts by first appearance (not sorted)"},
            "embedder_build": builds[0] if len(builds) == 1 else builds or None,
            "truncation": tally.report() if kept is None else kept.get("truncation"),
            "system": system.name,
            "texts": {"seen": counts["seen"], "distinct": len(rows)},
            "recallbench_version": __version__,
            **(
                {"text_transforms": transforms, "forms": {"rows": forms, "order": FORMS}}
                if transforms
                else {}
            ),
        }
    )
    embedded = counts["embedded"]
    return {
        **manifest,
        "timing": {
            "wall_seconds": wall,
            # summed over the threads that embed at once
            "seconds_inside_system": inside,
            # each process's import and load of the model (on a thread, while the spool was
            # read and tokenized), the longest first
            "model_load_seconds": sorted(loads.values(), reverse=True),
            "execution": execution.describe(),
            "plan": plan.describe(build.get("torch_threads") if build else None),
            # the rows embedded now (the texts' rows kept from the cache are not counted)
            "texts_embedded": embedded,
            "texts_kept": 0 if kept is None else len(rows) - embedded,
            "tokens": counts["tokens"],
            "tokens_embedded": counts["tokens_embedded"],
            "texts_per_second": embedded / wall if wall > 0 else None,
            "tokens_per_second": counts["tokens_embedded"] / wall if wall > 0 else None,
        },
    }


def import_vector_cache(
    suite_env: Mapping[str, Any], cache_dir: Path, system: Any, source: Path
) -> dict[str, Any]:
    """Write a vector cache from a file of vectors made elsewhere (`recallbench prep
    --import`; its format: `recallbench.engine.vectorcache.read_import`), for `system` (an
    object or a name, resolved here once), whose embedder's identity is the name the file
    declares: the rows and scopes prep makes (every distinct
    text, then the forms its store embeds, `FORMS`), each text's vector found by its
    sha256, else by the id of the query or memory holding it. Every text a store of the
    system will ask for must have one (one line naming the first that has none). Returns
    the manifest, with `imported` (the file, its sha256, the embedder, dimension and
    normalization, how many of its vectors were used)."""
    from recallbench.core.embedding import text_transforms
    from recallbench.engine.vectorcache import CacheWriter, read_import, text_key

    system = embedding_system(system)
    embedder = system.embedder
    identity = system_boundary(system).call("identity", None, embedder.identity)
    vectors = read_import(Path(source))
    if vectors.embedder != identity:
        raise RecallbenchError(
            f"{source}: vectors of embedder {vectors.embedder!r}, but {system.name} embeds with "
            f"{identity!r}; import them for the system whose embedder that is"
        )
    transforms = text_transforms(embedder)
    writer = CacheWriter(Path(cache_dir), identity)
    rows: dict[bytes, int] = {}
    counts = {"seen": 0}
    forms = 0
    used: set[tuple[str, str]] = set()
    #: (query_id or memory_id, the id) -> the text its vector went to
    text_of_id: dict[tuple[str, str], str] = {}

    def vector(scope_id: str, role: str, text: str, holder: str | None) -> bytes:
        key = text_key(text)
        blob = vectors.by_key.get(key)
        found = ("text_sha256", key.hex())
        if blob is None and holder is not None:
            kind = "query_id" if role == "query" else "memory_id"
            blob = vectors.by_id[kind].get(holder)
            found = (kind, holder)
            if blob is not None and text_of_id.setdefault(found, text) != text:
                raise RecallbenchError(
                    f"{source}: {role} id {holder!r} holds two different texts (one in "
                    f"scope {scope_id}); give their vectors by text_sha256"
                )
        if blob is None:
            what = f"{role} {holder!r}" if holder is not None else f"the {role} form"
            raise RecallbenchError(
                f"{source}: no vector for {what} of scope {scope_id} (text sha256 {key.hex()})"
            )
        used.add(found)
        return blob

    def add(scope: Mapping[str, Any], fresh: Sequence[tuple[str, str, str | None]]) -> None:
        if fresh:
            keys = [text_key(text) for _, text, _ in fresh]
            blobs = [vector(scope["scope_id"], *item) for item in fresh]
            writer.add(keys, b"".join(blobs), vectors.dimension)

    try:
        for scope, scope_rows, fresh in text_rows(suite_env, rows, counts):
            add(scope, fresh)
            writer.add_scope(scope_rows)
        for scope, fresh_forms in form_rows(suite_env, transforms, rows) if transforms else ():
            add(scope, [(role, form, None) for role, form in fresh_forms])
            forms += len(fresh_forms)
        imported = {
            "file": Path(source).name,
            "sha256": vectors.sha256,
            "embedder": vectors.embedder,
            "dimension": vectors.dimension,
            "normalized": vectors.normalized,
            "vectors_in_file": vectors.count,
            "vectors_used": len(used),
        }
        return writer.finish(
            {
                "source": cache_source(suite_env),
                "batching": None,  # not embedded here: see `imported`
                "imported": imported,
                "embedder_build": None,
                "truncation": None,
                "system": system.name,
                "texts": {"seen": counts["seen"], "distinct": len(rows)},
                "recallbench_version": __version__,
                **(
                    {"text_transforms": transforms, "forms": {"rows": forms, "order": FORMS}}
                    if transforms
                    else {}
                ),
            }
        )
    except BaseException:
        writer.abort()
        raise


def embedding_system(system: Any) -> Any:
    """The system whose embedder makes a cache: `system` itself, or the system of that name
    (resolved once, here); one line when it has no embedder."""
    system = resolve_system(system)
    if system.embedder is None:
        raise RecallbenchError(f"{system.name} has no embedder: it needs no vector cache")
    return system


@dataclass
class _Pending:
    """The rows of the next window: their texts, keys and token counts."""

    texts: list[str] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, key: bytes, text: str) -> None:
        self.keys.append(key)
        self.texts.append(text)


def scope_texts(scope: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(role, text, the id of the query or memory holding it) of a scope's texts in spool
    order: its queries', then its memories'."""
    return [("query", q["text"], q["query_id"]) for q in scope["queries"]] + [
        ("memory", m["text"], m["memory_id"]) for m in scope["memories"]
    ]


def text_rows(
    suite_env: Mapping[str, Any], rows: dict[bytes, int], counts: dict[str, int]
) -> Iterator[tuple[Mapping[str, Any], list[int], list[tuple[str, str, str]]]]:
    """The texts' rows of a cache, scope by scope: (scope, its rows: its queries' then its
    memories', the texts given a row now as (role, text, holder)). Each distinct text (by
    sha256, `rows`: key -> row) gets the next row at its first appearance;
    `counts["seen"]` counts the texts read. Prep and `prep --import` lay rows out so."""
    from recallbench.engine.vectorcache import text_key

    for _, scope in stream_scopes(suite_env):
        scope_rows, new = [], []
        for role, text, holder in scope_texts(scope):
            counts["seen"] += 1
            key = text_key(text)
            row = rows.get(key)
            if row is None:
                row = rows[key] = len(rows)
                new.append((role, text, holder))
            scope_rows.append(row)
        yield scope, scope_rows, new


def form_rows(
    suite_env: Mapping[str, Any], transforms: Mapping[str, str], rows: dict[bytes, int]
) -> Iterator[tuple[Mapping[str, Any], list[tuple[str, str]]]]:
    """The forms' rows, after every text's (`FORMS`), scope by scope: (scope, the forms
    given a row now as (role, form)): each form a store embeds (its `text_transform`) that
    is no text of the spool and had no row, in order of first appearance."""
    from recallbench.core.embedding import transformed
    from recallbench.engine.vectorcache import text_key

    for _, scope in stream_scopes(suite_env):
        new = []
        for role, text, _ in scope_texts(scope):
            form = transformed(transforms, role, text)
            key = text_key(form)
            if form != text and key not in rows:
                rows[key] = len(rows)
                new.append((role, form))
        yield scope, new


def joined_transforms(
    recorded: Mapping[str, str] | None, needed: Mapping[str, str]
) -> dict[str, str] | None:
    """The transforms of a cache holding the forms of both: None when one role would need
    two (a cache records one transform per role)."""
    out = dict(recorded or {})
    for role, name in needed.items():
        if out.setdefault(role, name) != name:
            return None
    return dict(sorted(out.items()))


def current_layout(manifest: Mapping[str, Any]) -> bool:
    """Whether a cache's rows are the ones this recallbench makes: in these batches, its
    forms (if any) in rows of their own after the texts' (`FORMS`; an older recallbench
    placed them among the texts, in other batches)."""
    if manifest.get("batching") != BATCHING:
        return False
    return not manifest.get("text_transforms") or isinstance(manifest.get("forms"), dict)


def extendable(manifest: Mapping[str, Any], embedder: Any) -> bool:
    """Whether a cache (checked to be of this source and embedder) keeps its texts' rows
    when the forms `embedder`'s store needs are added: of the `current_layout`, with
    transforms that join the store's."""
    from recallbench.core.embedding import text_transforms

    if not current_layout(manifest):
        return False
    return joined_transforms(manifest.get("text_transforms"), text_transforms(embedder)) is not None


def _kept_texts(
    directory: Path, embedder: Any, suite_env: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The manifest of the cache in `directory` whose texts' rows a new cache keeps (its
    files' sha256 checked: they are copied), or None (none there, or not `extendable`)."""
    from recallbench.engine.vectorcache import check_manifest, read_manifest

    try:
        manifest = read_manifest(directory)
        check_manifest(
            directory,
            manifest,
            embedder_identity=embedder.identity(),
            source=cache_source(suite_env),
        )
    except RecallbenchError:
        return None
    return manifest if extendable(manifest, embedder) else None


def _copy_texts(
    directory: Path, manifest: Mapping[str, Any], writer: Any, rows: dict[bytes, int]
) -> None:
    """Copy the texts' rows and every scope's rows of the cache `manifest` describes into
    `writer`; `rows` gets each text's key."""
    from recallbench.engine.vectorcache import VectorCache

    cache = VectorCache(directory, manifest)
    try:
        forms = manifest["forms"]["rows"] if manifest.get("forms") else 0
        for keys, blob in cache.row_blocks(cache.count - forms):
            rows.update((key, len(rows) + n) for n, key in enumerate(keys))
            writer.add(keys, blob, cache.dimension)
        for index in range(cache.scopes):
            writer.add_scope(cache.rows_of_scope(index))
    finally:
        cache.close()


def _builds(recorded: Any) -> list[dict[str, Any]]:
    """A manifest's `embedder_build` as a list (one build, several, or none)."""
    if isinstance(recorded, list):
        return list(recorded)
    return [recorded] if recorded else []


def embed_batches(group: list[list[str]]) -> dict[str, Any]:
    """A worker task: embed fixed batches at once, each on a thread of its own (one batch:
    on this thread), each one forward pass with the system's own embedder; per batch its
    float32 bytes, row after row; the build that made them (device, torch, CPU)."""
    from recallbench.core.embedding import embedder_build

    started = time.perf_counter()
    load = workerstate.embedder_ready()
    system = workerstate.system()
    inside_before = workerstate.inside()
    if len(group) == 1:
        parts = [_embed_one(group[0])]
    else:
        parts = list(workerstate.embedding_threads(len(group)).map(_embed_one, group))
    return {
        "batches": parts,
        "texts": sum(len(texts) for texts in group),
        "build": embedder_build(system.embedder),
        "model_load": None if load is None else {"pid": os.getpid(), "seconds": load},
        # summed over the threads that embedded at once
        "seconds_inside": workerstate.inside() - inside_before,
        "seconds_task": time.perf_counter() - started,
    }


def _embed_one(texts: list[str]) -> dict[str, Any]:
    """One batch, one forward pass: {"blob", "dimension", "texts"}."""
    from recallbench.engine.vectorcache import pack_vectors

    guard = workerstate.guard()
    where = f"{len(texts)} texts"
    vectors = guard.vectors(
        guard.call("embed_texts", where, workerstate.system().embedder.embed_texts, texts),
        texts,
        where,
    )
    return {
        "blob": pack_vectors(vectors),
        "dimension": len(vectors[0]) if vectors else 0,
        "texts": len(texts),
    }


def vector_cache(
    execution: Execution, system: Any, suite_env: Mapping[str, Any], build_dir: Path
) -> tuple[Execution, dict[str, Any] | None]:
    """The execution with the vector cache this stage's system reads, and what making it
    cost and counted (None when nothing was embedded now).

    `--cache DIR` is used as given (and checked by `cache_spec`). Otherwise a system whose
    embedder is not batch-invariant (`recallbench.core.embedding.needs_cache`) gets the cache of
    its embedder under `cache_root` (default BUILD/vectors/<embedder>/): reused when it was
    made for this validation and embedder, made here (`make_vector_cache`, the same batches as `recallbench
    prep`) otherwise. Systems that embed inline identically, or embed nothing, get none.
    """
    from dataclasses import replace

    from recallbench.core.embedding import cache_dir_name, covers, needs_cache, text_transforms

    if execution.cache is not None or not needs_cache(system):
        return execution, None
    from recallbench.builddir.paths import safe_child
    from recallbench.core.errors import RecallbenchError
    from recallbench.engine.vectorcache import check_manifest, read_manifest

    root = execution.cache_root or safe_child(Path(build_dir), VECTORS_DIR)
    directory = Path(root) / cache_dir_name(system.embedder.identity())
    chosen = replace(execution, cache=directory)
    try:
        manifest = read_manifest(directory)
        check_manifest(
            directory,
            manifest,
            embedder_identity=system.embedder.identity(),
            source=cache_source(suite_env),
            verify_files=False,  # `cache_spec` checks the files' sha256 next
        )
        if current_layout(manifest) and covers(
            manifest.get("text_transforms"), text_transforms(system.embedder)
        ):
            return chosen, None
        # made without the forms this store embeds (`text_transform`): they are added, the
        # texts' rows kept; made in other batches (an older recallbench's: its vectors
        # differ in the last bits): ours to remake
        extend = extendable(manifest, system.embedder)
    except RecallbenchError:
        extend = False  # none yet, or made for other data: ours to remake
    manifest = make_vector_cache(suite_env, directory, system, execution=execution, extend=extend)
    return chosen, {
        "directory": str(directory),
        "embedder_identity": manifest["embedder_identity"],
        # prep's count of what the model never sees, made on its pass over the spool
        "truncation": manifest["truncation"],
        **manifest["timing"],
    }


def cache_spec(
    execution: Execution, system: Any, suite_env: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The vector cache as workers open it, after one full check (files' sha256) here; with
    the build that made its vectors (`embedder_build`, from its manifest)."""
    if execution.cache is None:
        return None
    from recallbench.core.errors import RecallbenchError
    from recallbench.engine.vectorcache import check_manifest, read_manifest

    if getattr(system, "embedder", None) is None:
        raise RecallbenchError(f"--cache: {system.name} has no embedder; it needs no vectors")
    spec = {
        "directory": str(Path(execution.cache).resolve()),
        "embedder_identity": system.embedder.identity(),
        "source": cache_source(suite_env),
    }
    directory = Path(spec["directory"])
    manifest = read_manifest(directory)
    # the manifest and the files' sha256, checked without loading the keys (workers do)
    check_manifest(
        directory,
        manifest,
        embedder_identity=spec["embedder_identity"],
        source=spec["source"],
    )
    return {**spec, "embedder_build": manifest.get("embedder_build")}


def cache_source(suite_env: Mapping[str, Any]) -> dict[str, Any]:
    """What a vector cache is made for: the dataset, its files' digests, the reader options
    and the scope spool validate made of them (the cache's rows follow its scopes)."""
    data = suite_env["data"]
    return {
        "dataset": data["dataset"],
        "files": [{"role": f["role"], "sha256": f["sha256"]} for f in data["identity"]["files"]],
        "options": data["options"],
        "spool_sha256": data["spool"]["sha256"],
    }


class Truncation:
    """Counts, scope by scope as the stage streams them, how many stored texts exceed the
    system's embedder input limit and the share of their tokens the model never sees, its
    token counts called through `guard` (the caller's boundary around `system`).
    `report()` is None when the system has no embedder or no limit."""

    COUNTS = ("texts", "texts_over_limit", "tokens_total", "tokens_unseen", "tokens_of_long_texts")

    def __init__(self, system: Any, guard: Boundary) -> None:
        embedder = getattr(system, "embedder", None)
        limited = embedder is not None and getattr(embedder, "max_tokens", None) is not None
        self._embedder = embedder if limited else None
        self._guard = guard
        self._total: dict[str, Any] = {}

    @property
    def counting(self) -> bool:
        return self._embedder is not None

    def add(self, scope: Mapping[str, Any]) -> None:
        if self._embedder is None:
            return
        from recallbench.systems.base import truncation_report

        part = self._guard.call(
            "token_counts",
            f"scope {scope['scope_id']}",
            truncation_report,
            self._embedder,
            [m["text"] for m in scope["memories"]],
        )
        self._sum(part)

    def add_counts(self, token_counts: Sequence[int]) -> None:
        """Add stored texts by their token counts (what `add` would count of them)."""
        if self._embedder is None:
            return
        from recallbench.systems.base import truncation_counts

        self._sum(truncation_counts(int(self._embedder.max_tokens), token_counts))

    def _sum(self, part: Mapping[str, Any]) -> None:
        for key in self.COUNTS:
            self._total[key] = self._total.get(key, 0) + part[key]
        self._total["max_tokens"] = part["max_tokens"]

    def report(self) -> dict[str, Any] | None:
        from recallbench.systems.base import truncation_shares

        return truncation_shares(self._total) if self._total else None


class ContentLoss:
    """Counts, scope by scope as the stage streams them, the stored texts a system's stores
    cannot have seen whole under the input limit the system declares (`System.input_limit`,
    `base.content_cuts`), its token counts called through `guard` (the caller's boundary
    around `system`). `report()` is None when it declares none."""

    def __init__(self, system: Any, guard: Boundary) -> None:
        from recallbench.systems.base import declared_input_limit

        self._limit = declared_input_limit(system)
        self._guard = guard
        self._total: dict[str, int] = {}

    @property
    def counting(self) -> bool:
        return self._limit is not None

    def add(self, scope: Mapping[str, Any]) -> None:
        if self._limit is None:
            return
        from recallbench.systems.base import CONTENT_COUNTS, content_cuts

        part = self._guard.call(
            "input_limit.token_counts",
            f"scope {scope['scope_id']}",
            content_cuts,
            self._limit,
            [m["text"] for m in scope["memories"]],
        )
        for key in CONTENT_COUNTS:
            if key in part:
                self._total[key] = self._total.get(key, 0) + part[key]

    def report(self) -> dict[str, Any] | None:
        from recallbench.systems.base import content_loss_report

        if self._limit is None:
            return None
        return content_loss_report(self._limit, self._total or {"texts": 0, "texts_cut": 0})


def counted(items: Iterator[tuple[int, dict[str, Any]]], *tallies: Any) -> Iterator[Any]:
    """The (index, scope) items, each counted by every tally (`Truncation`, `ContentLoss`)
    as it passes."""
    for index, scope in items:
        for tally in tallies:
            tally.add(scope)
        yield index, scope
