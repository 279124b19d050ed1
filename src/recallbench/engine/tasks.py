"""What the stages share to run their per-scope work: how it runs (`Execution`, handed to
the process/Ray engine of `recallbench.engine.executor` by `run_tasks`, with a progress bar), where
kept stores live (`stores_root`), how a scope's queries are cut into slices for several
workers (`slice_count`, `query_spans`), a stage's wall time (`Stopwatch`), and the check
that a stage runs the system under the options hydrate recorded (`check_same_options`).

No stage imports another stage: what two stages need lives here, in `recallbench.engine.workerstate`
(the worker's state and its stores) or in `recallbench.engine.vectorprep` (the vector cache).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from recallbench.core import progress
from recallbench.core.errors import RecallbenchError
from recallbench.core.threads import DEFAULT_THREADS
from recallbench.engine import workerstate

#: the devices `--device` knows: auto = an accelerator when torch sees one, else the CPU
DEVICES = ("auto", "cpu", "cuda")
#: where kept stores live in the build dir (`stores_root`)
STORES_DIR = "stores"


@dataclass(frozen=True)
class Execution:
    """How per-scope work runs: the executor engine, its workers, the vector cache given
    (`--cache`), where learned embeddings are computed (`device`) and where the caches a
    stage makes itself are kept (`cache_root`, default BUILD/vectors)."""

    executor: str = "local"
    workers: int = 1
    ray_address: str | None = None
    cache: Path | None = None
    _: KW_ONLY  # the fields below by name only
    device: str = "auto"
    cache_root: Path | None = None
    #: seconds each call into the system may take (`--call-timeout`; None: no limit)
    call_timeout: float | None = None
    #: BLAS / OpenMP / torch threads of the system under test per worker (`--threads`;
    #: None: the libraries' own defaults), see `recallbench.core.threads`
    threads: int | None = DEFAULT_THREADS

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"executor": self.executor, "workers": self.workers}
        if self.call_timeout is not None:
            out["call_timeout_seconds"] = self.call_timeout
        if (
            self.threads != DEFAULT_THREADS
        ):  # the default is recorded in the artifacts (`threads`) only
            out["threads_per_worker"] = self.threads
        return out


def stores_root(build_dir: Path) -> Path:
    """BUILD/stores (refused when it is a symlink: stores never live outside the build dir)."""
    from recallbench.builddir.paths import safe_child

    return safe_child(Path(build_dir), STORES_DIR)


def slice_count(execution: Execution, kept: bool, scopes: int) -> int:
    """How many slices each scope's queries are cut into: with several workers and fewer
    scopes than workers, a kept (read-only) store is searched by every worker, each taking
    a contiguous slice of the queries; otherwise one task per scope."""
    if kept and execution.workers > 1 and scopes < execution.workers:
        return execution.workers * 2
    return 1


def shares_stores(system: Any) -> bool:
    """Whether several worker processes may open one store of `system` at once (to search
    slices of one scope's queries): not when the system says `one_process_per_store`
    (Milvus Lite's server and Qdrant's local mode each lock their files to one process)."""
    return not getattr(system, "one_process_per_store", False)


def query_spans(queries: int, slices: int) -> list[tuple[int, int] | None]:
    """`queries` cut into at most `slices` contiguous (start, stop) spans, in order; [None]
    (all of them, one task) when there is nothing to cut."""
    if slices <= 1 or queries <= 1:
        return [None]
    size = -(-queries // slices)
    return [(i, min(i + size, queries)) for i in range(0, queries, size)]


def run_tasks(
    fn: Callable[[Any], dict[str, Any]],
    items: Iterable[Any],
    *,
    system: Any,
    execution: Execution,
    cache: Mapping[str, Any] | None,
    total: int | None,
    desc: str,
    unit: str = "scope",
    weight: Callable[[dict[str, Any]], int] | None = None,
    query_total: int | None = None,
    window: int | None = None,
    batch: int = 1,
    preload: bool = False,
    own_process: bool = False,
) -> Iterator[dict[str, Any]]:
    """fn over items through the configured executor, results in item order.

    Each worker starts with `workerstate.init_worker` and ends with `workerstate.close_worker`; `fn`
    is a module-level task (a stage's, e.g. `stages.query.query_scope`), shipped by name.
    With one in-process worker, the bar counts queries (`query_total`) as they are
    searched; otherwise it counts finished scopes. `window` items per worker may be taken
    and not yet yielded (default: the executor's, 2); small items (a scope's place in the
    spool) afford a deeper one, so a slow task at the head of the order idles no worker.
    With `weight`, the bar advances by weight(result) per result (texts, say) instead of 1.
    `preload`: every worker starts loading its system's embedder model when it starts (for
    tasks that embed, so that each worker loads it once, while its first tasks are read).
    `own_process`: one local worker is still a process of its own (`make_executor`).

    `system` is the stage's system object, resolved once (`registry.resolve_system`): the
    in-process worker of the serial engine uses it as it is; a worker process (local or
    Ray) gets its name and resolves it once, in `workerstate.init_worker` (a system object need
    not pickle; a plugin's entry point loads in every worker).
    """
    from recallbench.engine.executor import make_executor, runs_here

    serial = runs_here(execution.executor, execution.workers, own_process)
    config = {
        "system": system.name,
        # in this process only (the serial engine runs `init_worker` here): never pickled
        "instance": system if serial else None,
        "cache": dict(cache) if cache else None,
        "device": execution.device,
        "call_timeout": execution.call_timeout,
        "preload": preload,
        # the system's threads per worker; prep's embedding workers manage their own
        "threads": None if preload else execution.threads,
    }
    by_query = serial and query_total is not None
    # the workers start before the bar: a bar's monitor thread would make local workers
    # spawn instead of fork (see `recallbench.engine.processes.start_method`)
    with (
        make_executor(
            execution.executor,
            execution.workers,
            workerstate.init_worker,
            (config,),
            workerstate.close_worker,
            ray_address=execution.ray_address,
            max_in_flight=window * execution.workers if window else None,
            own_process=own_process,
        ) as engine,
        progress.bar(
            query_total if by_query else total, desc, "query" if by_query else unit
        ) as bar,
    ):
        if by_query:
            workerstate.set_progress(bar.update)
        if batch > 1:
            groups = batches(fn, items, batch, total=total, workers=execution.workers)
            for results in engine.map(workerstate.run_batch, groups):
                bar.update(len(results))
                yield from results
            return
        for result in engine.map(fn, items):
            if not by_query:
                bar.update(1 if weight is None else weight(result))
            yield result


def batches(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    size: int,
    *,
    total: int | None = None,
    workers: int = 1,
) -> Iterator[dict[str, Any]]:
    """Consecutive items in groups of at most `size`, each group one task (`workerstate.run_batch`).

    With `total` known, groups shrink towards the end (never more than the remaining items
    over 2 x `workers`), so the last tasks are single items and no worker idles long while
    another finishes a large last group.
    """
    group: list[Any] = []
    remaining = total
    for item in items:
        group.append(item)
        limit = size if remaining is None else max(1, min(size, remaining // (2 * workers)))
        if len(group) >= limit:
            yield {"fn": fn, "items": group}
            if remaining is not None:
                remaining -= len(group)
            group = []
    if group:
        yield {"fn": fn, "items": group}


class Stopwatch:
    """Wall time of a stage."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.start


def check_same_options(
    hyd: Mapping[str, Any], system: Any, call_timeout: float | None = None
) -> None:
    """Refuse (one line) a stage after hydrate (query, the round trip) whose system options
    (what its configuration records under `adapters.OPTIONS_KEYS`: `options`, `index_options`,
    set by the user: index parameters) are not the ones hydrate recorded: transient stores
    are built there, and the result would name hydrate's (a kept store's marker is checked
    too, when it is reopened). The system's `configuration()` is called at the boundary,
    within `call_timeout` seconds."""
    from recallbench.systems.adapters import configured_options, options_variable
    from recallbench.systems.boundary import system_boundary

    held = configured_options(hyd.get("configuration"))
    if not held:
        return
    guard = system_boundary(system, call_timeout)
    now = configured_options(guard.configuration_of(system))
    if now != held:
        raise RecallbenchError(
            f"{hyd['system']}: hydrate ran with options {_shown(held)}, "
            f"{options_variable(hyd['system'])} now gives {_shown(now)}: set it as it was, "
            "or run hydrate again"
        )


def _shown(options: Mapping[str, Any]) -> str:
    """Recorded options as a line: the value of each key (one key in practice)."""
    return " ".join(map(str, options.values())) if options else "none"
