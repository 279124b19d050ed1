"""prep: embed every distinct memory and query text of a validated dataset once, into a
vector cache that hydrate/query/snapshot-roundtrip read, so per-run work needs no model.

This is the one path every learned vector takes. `recallbench prep --cache DIR` makes a
cache explicitly; a stage whose system's embedder is not batch-invariant (a learned model:
its vectors depend in the last bits on the texts embedded with them) makes one in
`BUILD/vectors/` itself when no `--cache` is given (`execution.vector_cache`). Either way the
vectors come from the same batches, so a run with and without `--cache`, with any number
of workers and on any engine, gives the same bytes on one machine.

The batches are fixed by the set of distinct texts alone:

* distinct texts (by sha256) in order of first appearance in validate's spool (queries,
  then memories, scope after scope), which also gives each text its row;
* cut into windows of `WINDOW` texts; within a window, sorted by token count (the model's
  own tokenizer, capped at its input limit; ties by row), which keeps padding small;
* each window cut into batches of `BATCH` texts, each embedded as one forward pass.

Which worker, engine or device embeds a batch never changes the batch. Only systems with
the embedder capability have a cache.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.errors import RecallbenchError
from recallbench.spool import stream_scopes
from recallbench.stages.execution import Execution, cache_source, run_tasks
from recallbench.stages.hydrate import Truncation, counted

#: texts per forward pass of the model
BATCH = 64
#: distinct texts sorted by length together (a multiple of BATCH)
WINDOW = 64 * BATCH
#: what the manifest records of the batching (a cache made otherwise is another cache)
BATCHING = {
    "order": "distinct texts by first appearance; windows sorted by token count, then row",
    "batch": BATCH,
    "window": WINDOW,
}


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
    into batches of BATCH. `sort_by_length=False` keeps row order (for the benchmark that
    measures what sorting saves; such a cache records its other batching)."""
    limit = cap if cap is not None else max(token_counts, default=0)
    order = list(range(len(texts)))
    if sort_by_length:
        order.sort(key=lambda i: (min(token_counts[i], limit), i))
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


def run_prep(
    suite_env: Mapping[str, Any],
    cache_dir: Path,
    system_name: str,
    *,
    execution: Execution | None = None,
    sort_by_length: bool = True,
) -> dict[str, Any]:
    """Write the cache; return its manifest (with `timing`, a local diagnostic).

    The previous cache in `cache_dir`, if any, stays valid until the new one is complete
    (see `recallbench.cache.CacheWriter`)."""
    from recallbench.cache import CacheWriter, text_key
    from recallbench.stages import tasks
    from recallbench.systems import get_system

    execution = execution or Execution()
    system = get_system(system_name)
    embedder = system.embedder
    if embedder is None:
        raise RecallbenchError(f"{system.name} has no embedder: it needs no vector cache")
    cap = getattr(embedder, "max_tokens", None)
    writer = CacheWriter(Path(cache_dir), embedder.identity())
    tally = Truncation(system)  # counted on the same pass over the spool
    rows: dict[bytes, int] = {}  # text key -> its row, in order of first appearance
    windows: deque[_Window] = deque()
    placed: deque[tuple[_Window, list[int]]] = deque()  # each batch's window and positions
    counts = {"seen": 0, "tokens": 0, "tokens_embedded": 0}
    started = time.perf_counter()
    inside = 0.0
    builds: list[dict[str, Any]] = []

    def window_batches(texts: list[str], keys: list[bytes]) -> Iterator[list[str]]:
        tokens = [int(n) for n in embedder.token_counts(texts)]
        counts["tokens"] += sum(tokens)
        counts["tokens_embedded"] += sum(min(n, cap) if cap else n for n in tokens)
        window = _Window(len(rows) - len(texts), keys, 0, [None] * len(texts))
        batches = plan_batches(texts, window.first, tokens, cap, sort_by_length=sort_by_length)
        window.pending = len(batches)
        windows.append(window)
        for positions in batches:
            placed.append((window, positions))
            yield [texts[i] for i in positions]

    def batches() -> Iterator[list[str]]:
        texts: list[str] = []
        keys: list[bytes] = []
        for _, scope in counted(stream_scopes(suite_env), tally):
            scope_rows = []
            for text in [q["text"] for q in scope["queries"]] + [
                m["text"] for m in scope["memories"]
            ]:
                counts["seen"] += 1
                key = text_key(text)
                row = rows.get(key)
                if row is None:
                    row = rows[key] = len(rows)
                    texts.append(text)
                    keys.append(key)
                scope_rows.append(row)
            writer.add_scope(scope_rows)
            if len(texts) >= WINDOW:
                yield from window_batches(texts, keys)
                texts, keys = [], []
        if texts:
            yield from window_batches(texts, keys)

    def flush() -> None:
        """Write every finished window at the head, in row order."""
        while windows and windows[0].pending == 0:
            window = windows.popleft()
            writer.add(window.keys, b"".join(window.vectors), window.dimension)  # type: ignore[arg-type]

    try:
        for result in run_tasks(
            tasks.embed_batch,
            batches(),
            system=system_name,
            execution=execution,
            cache=None,
            total=None,
            desc=f"prep {system.name}",
            unit="text",
            weight=lambda result: result["texts"],
        ):
            window, positions = placed.popleft()
            size = result["dimension"] * 4
            blob = result["blob"]
            if len(blob) != size * len(positions):
                raise RecallbenchError(
                    f"{system.name}: the embedder returned {len(blob) // max(size, 1)} "
                    f"vectors for {len(positions)} texts"
                )
            window.dimension = result["dimension"]
            for n, i in enumerate(positions):
                window.vectors[i] = blob[n * size : (n + 1) * size]
            window.pending -= 1
            inside += result["seconds_inside"]
            if result.get("build") and result["build"] not in builds:
                builds.append(result["build"])
            flush()
    except BaseException:
        writer.abort()
        raise
    wall = time.perf_counter() - started
    manifest = writer.finish(
        {
            "source": cache_source(suite_env),
            "batching": BATCHING
            if sort_by_length
            else {**BATCHING, "order": "distinct texts by first appearance (not sorted)"},
            "embedder_build": builds[0] if len(builds) == 1 else builds or None,
            "truncation": tally.report(),
            "system": system_name,
            "texts": {"seen": counts["seen"], "distinct": len(rows)},
            "recallbench_version": __version__,
        }
    )
    return {
        **manifest,
        "timing": {
            "wall_seconds": wall,
            "seconds_inside_system": inside,
            "execution": execution.describe(),
            "texts_embedded": len(rows),
            "tokens": counts["tokens"],
            "tokens_embedded": counts["tokens_embedded"],
            "texts_per_second": len(rows) / wall if wall > 0 else None,
            "tokens_per_second": counts["tokens_embedded"] / wall if wall > 0 else None,
        },
    }
