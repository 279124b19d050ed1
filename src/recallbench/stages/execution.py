"""Running per-scope tasks through the executor seam, with a progress bar and timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from recallbench import progress
from recallbench.stages import tasks

#: where a stage keeps the vector caches it makes itself (`vector_cache`), in the build dir
VECTORS_DIR = "vectors"
#: the devices `--device` knows: auto = an accelerator when torch sees one, else the CPU
DEVICES = ("auto", "cpu", "cuda")


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

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"executor": self.executor, "workers": self.workers}
        if self.call_timeout is not None:
            out["call_timeout_seconds"] = self.call_timeout
        return out


def vector_cache(
    execution: Execution, system: Any, suite_env: Mapping[str, Any], build_dir: Path
) -> tuple[Execution, dict[str, Any] | None]:
    """The execution with the vector cache this stage's system reads, and what making it
    cost and counted (None when nothing was embedded now).

    `--cache DIR` is used as given (and checked by `cache_spec`). Otherwise a system whose
    embedder is not batch-invariant (`recallbench.embedding.needs_cache`) gets the cache of
    its embedder under `cache_root` (default BUILD/vectors/<embedder>/): reused when it was
    made for this validation and embedder, made by prep (the same batches as `recallbench
    prep`) otherwise. Systems that embed inline identically, or embed nothing, get none.
    """
    from dataclasses import replace

    from recallbench.embedding import cache_dir_name, needs_cache

    if execution.cache is not None or not needs_cache(system):
        return execution, None
    from recallbench.buildpaths import safe_child
    from recallbench.cache import check_manifest, read_manifest
    from recallbench.errors import RecallbenchError

    root = execution.cache_root or safe_child(Path(build_dir), VECTORS_DIR)
    directory = Path(root) / cache_dir_name(system.embedder.identity())
    chosen = replace(execution, cache=directory)
    try:
        check_manifest(
            directory,
            read_manifest(directory),
            embedder_identity=system.embedder.identity(),
            source=cache_source(suite_env),
            verify_files=False,  # `cache_spec` checks the files' sha256 next
        )
        return chosen, None
    except RecallbenchError:
        pass  # none yet, or made for other data: ours to remake
    from recallbench.stages.prep import run_prep

    manifest = run_prep(suite_env, directory, system.name, execution=execution)
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
    from recallbench.cache import check_manifest, read_manifest
    from recallbench.errors import RecallbenchError

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


def run_tasks(
    fn: Callable[[Any], dict[str, Any]],
    items: Iterable[Any],
    *,
    system: str,
    execution: Execution,
    cache: Mapping[str, Any] | None,
    total: int | None,
    desc: str,
    unit: str = "scope",
    weight: Callable[[dict[str, Any]], int] | None = None,
    query_total: int | None = None,
    window: int | None = None,
    batch: int = 1,
) -> Iterator[dict[str, Any]]:
    """fn over items through the configured executor, results in item order.

    With one in-process worker, the bar counts queries (`query_total`) as they are
    searched; otherwise it counts finished scopes. `window` items per worker may be taken
    and not yet yielded (default: the executor's, 2); small items (a scope's place in the
    spool) afford a deeper one, so a slow task at the head of the order idles no worker.
    With `weight`, the bar advances by weight(result) per result (texts, say) instead of 1.
    """
    from recallbench.executor import make_executor

    config = {
        "system": system,
        "cache": dict(cache) if cache else None,
        "device": execution.device,
        "call_timeout": execution.call_timeout,
    }
    serial = execution.executor == "local" and execution.workers == 1
    by_query = serial and query_total is not None
    # the workers start before the bar: a bar's monitor thread would make local workers
    # spawn instead of fork (see `recallbench.executor.start_method`)
    with (
        make_executor(
            execution.executor,
            execution.workers,
            tasks.init_worker,
            (config,),
            tasks.close_worker,
            ray_address=execution.ray_address,
            max_in_flight=window * execution.workers if window else None,
        ) as engine,
        progress.bar(
            query_total if by_query else total, desc, "query" if by_query else unit
        ) as bar,
    ):
        if by_query:
            tasks.set_progress(bar.update)
        if batch > 1:
            groups = batches(fn, items, batch, total=total, workers=execution.workers)
            for results in engine.map(tasks.run_batch, groups):
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
    """Consecutive items in groups of at most `size`, each group one task (`tasks.run_batch`).

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
