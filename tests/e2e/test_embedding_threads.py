"""How prep spreads the embedding over processes and threads, and what never changes with
it: how many processes and threads embed (`vectorprep.embedding_plan`), the order batches
are handed out (`vectorprep.dispatch_order`), a parent that embeds nothing and never imports
torch, a stage that embeds nothing and never loads the model, and a plan reported in the
timing, never in the manifest (whose bytes the identity tests
compare across worker counts and engines: tests/e2e/test_embedding_cache.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import orjson

from recallbench.engine.tasks import Execution
from recallbench.engine.vectorprep import (
    BATCH_TEXTS,
    dispatch_order,
    embedding_plan,
    grouped,
    plan_batches,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"


def test_the_plan_never_starts_a_process_without_a_batch_nor_more_than_the_cores() -> None:
    """Locally one process embeds as many batches at a time as workers were asked for (on
    2 cores faster than two processes; one model load), capped at the cores and batches."""
    two = embedding_plan(Execution("local", 2), batches=10, cores=2, prefer="threads")
    assert (two.processes, two.threads) == (1, 2) and "one model load" in two.reason
    one = embedding_plan(Execution("local", 1), batches=10, cores=2, prefer="threads")
    assert (one.processes, one.threads) == (1, 1) and one.reason == "as asked"
    capped = embedding_plan(Execution("local", 8), batches=10, cores=2, prefer="threads")
    assert (capped.processes, capped.threads) == (1, 2)
    assert "capped at this machine's 2 core(s)" in capped.reason
    few = embedding_plan(Execution("local", 2), batches=1, cores=2, prefer="threads")
    assert (few.processes, few.threads) == (1, 1) and "only 1 batch(es)" in few.reason
    assert embedding_plan(Execution("local", 2), batches=0, cores=2).threads == 1
    # the diagnostic plan: a process per worker, one thread each
    apart = embedding_plan(Execution("local", 2), batches=10, cores=2, prefer="processes")
    assert (apart.processes, apart.threads) == (2, 1)
    # an embedder that does not say it is thread-safe (a plugin's): a process per worker
    unsafe = embedding_plan(Execution("local", 2), batches=10, cores=2, thread_safe=False)
    assert (unsafe.processes, unsafe.threads) == (2, 1) and "thread-safe" in unsafe.reason
    # a Ray cluster's CPUs are not this machine's: only the batches cap it, an actor each
    ray = embedding_plan(Execution("ray", 4), batches=10, cores=2)
    assert (ray.processes, ray.threads) == (4, 1)
    described = two.describe(1)
    assert described["summary"] == "1 process x 2 threads"
    assert described["torch_threads_per_batch"] == 1 and "by construction" in described["identity"]
    assert embedding_plan(Execution("ray", 3), batches=9).summary == "3 processes x 1 thread"


def test_batches_are_grouped_in_dispatch_order() -> None:
    batches = [[f"t{i}"] for i in range(5)]
    assert list(grouped(iter(batches), 2)) == [batches[0:2], batches[2:4], batches[4:]]
    assert list(grouped(iter(batches), 1)) == [[b] for b in batches]


def test_batches_go_out_costliest_first_and_stay_the_same_batches() -> None:
    texts = [f"t{i}" for i in range(3 * BATCH_TEXTS + 5)]
    tokens = [(i * 37) % 300 + 1 for i in range(len(texts))]
    batches = plan_batches(texts, 0, tokens, cap=256)
    order = dispatch_order(batches, tokens, cap=256)
    assert sorted(order) == list(range(len(batches)))
    cost = [len(b) * max(min(tokens[i], 256) for i in b) for b in batches]
    assert [cost[i] for i in order] == sorted(cost, reverse=True)
    assert len(set(cost)) > 1  # the order is a choice here, not every batch alike
    assert plan_batches(texts, 0, tokens, cap=256) == batches


def test_the_build_record_unpickles_without_torch() -> None:
    """A worker's result carries the build that made its vectors; a torch object in it
    (torch.__version__ is a TorchVersion) made the parent import torch to unpickle every
    result, stalling the pool's result thread for seconds while the workers idled."""
    from recallbench.systems.semantic import shared_embedder

    build = shared_embedder().build_info()
    assert all(type(v) in (str, int, bool) for v in build.values()), build
    assert b"torch_version" not in pickle.dumps(build)  # no class to import


CHECK = (
    "import sys; from recallbench.cli.main import main\n"
    "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
    "assert 'torch' not in sys.modules, 'this process imported torch'\n"
    "assert 'sentence_transformers' not in sys.modules, 'this process loaded the model'\n"
)


def _validated(build: Path) -> None:
    validate = [
        sys.executable,
        "-m",
        "recallbench.cli.main",
        "--build-dir",
        str(build),
        "-q",
        "validate",
        "--corpus",
        str(FIXTURES / "corpus.jsonl"),
        "--queries",
        str(FIXTURES / "queries.jsonl"),
    ]
    proc = subprocess.run(validate, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def _checked(*args: str) -> subprocess.CompletedProcess:
    """The CLI with `args` in a process that must end without torch or the model loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, *args], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_two_worker_prep_parent_embeds_nothing_and_never_imports_torch(tmp_path) -> None:
    """With 2 workers one process of its own embeds 2 batches at a time (one model load,
    while this process reads and tokenizes the spool); the parent that only plans the
    batches and writes the cache never imports torch. The plan is said when embedding
    starts and in the closing line, and kept in the timing."""
    build = tmp_path / "build"
    _validated(build)
    cache = tmp_path / "cache"
    args = ["--build-dir", str(build), "prep", "--cache", str(cache), "--system", "minilm"]
    proc = _checked(*args, "--workers", "2")
    assert (
        "embedding 136 texts: 1 process x 2 threads "
        "(each batch on one torch thread: identical by construction)" in proc.stderr
    ), proc.stderr
    assert "136 vectors" in proc.stderr
    assert "with 1 process x 2 threads" in proc.stderr, proc.stderr
    manifest = orjson.loads((cache / "manifest.json").read_bytes())
    assert "plan" not in manifest and "processes" not in orjson.dumps(manifest).decode()
    timing = orjson.loads((build / "timings" / "prep.json").read_bytes())
    plan = timing["plan"]
    assert (plan["processes"], plan["threads_per_process"]) == (1, 2), plan
    assert plan["torch_threads_per_batch"] == 1 and plan["workers_requested"] == 2


def test_a_stage_that_embeds_nothing_never_loads_the_model(tmp_path) -> None:
    """Once a run has made BUILD/vectors, hydrate and query of a dense system take every
    vector from it, in this process (one worker), without importing torch or the model."""
    build = tmp_path / "build"
    _validated(build)
    rb = ["--build-dir", str(build), "-q"]
    made = subprocess.run(
        [sys.executable, "-m", "recallbench.cli.main", *rb, "hydrate", "--system", "minilm"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert made.returncode == 0, made.stderr
    assert list((build / "vectors").iterdir())
    _checked(*rb, "hydrate", "--system", "minilm", "--workers", "1")
    _checked(*rb, "query", "--workers", "1")
    assert (build / "runs.json").is_file()
