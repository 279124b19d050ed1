"""How prep spreads the embedding over processes and threads, and what never changes with
it: how many processes embed (`vectorprep.embedding_plan`), the order batches are handed
out (`vectorprep.dispatch_order`), a parent that embeds nothing and never imports torch, and
a plan reported in the timing, never in the manifest (whose bytes the identity tests
compare across worker counts and engines: tests/e2e/test_embedding_cache.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import orjson

from recallbench.stagework import Execution
from recallbench.vectorprep import BATCH, dispatch_order, embedding_plan, plan_batches

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"


def test_the_plan_never_starts_a_process_without_a_batch_nor_more_than_the_cores() -> None:
    assert embedding_plan(Execution("local", 2), batches=10, cores=2).processes == 2
    assert embedding_plan(Execution("local", 1), batches=10, cores=2).processes == 1
    capped = embedding_plan(Execution("local", 8), batches=10, cores=2)
    assert capped.processes == 2 and "capped at this machine's 2 core(s)" in capped.reason
    few = embedding_plan(Execution("local", 2), batches=1, cores=2)
    assert few.processes == 1 and "only 1 batch(es)" in few.reason
    assert embedding_plan(Execution("local", 2), batches=0, cores=2).processes == 1
    # a Ray cluster's CPUs are not this machine's: only the batches cap it
    assert embedding_plan(Execution("ray", 4), batches=10, cores=2).processes == 4
    described = embedding_plan(Execution("local", 2), batches=5, cores=2).describe(1)
    assert described["summary"] == "2 process(es) x 1 torch thread(s)"


def test_batches_go_out_costliest_first_and_stay_the_same_batches() -> None:
    texts = [f"t{i}" for i in range(3 * BATCH + 5)]
    tokens = [(i * 37) % 300 + 1 for i in range(len(texts))]
    batches = plan_batches(texts, 0, tokens, cap=256)
    order = dispatch_order(batches, tokens, cap=256)
    assert sorted(order) == list(range(len(batches)))
    cost = [len(b) * max(min(tokens[i], 256) for i in b) for b in batches]
    assert [cost[i] for i in order] == sorted(cost, reverse=True)
    assert order[0] == len(batches) - 2  # the last full batch holds the longest texts
    assert plan_batches(texts, 0, tokens, cap=256) == batches


def test_the_build_record_unpickles_without_torch() -> None:
    """A worker's result carries the build that made its vectors; a torch object in it
    (torch.__version__ is a TorchVersion) made the parent import torch to unpickle every
    result, stalling the pool's result thread for seconds while the workers idled."""
    from recallbench.systems.semantic import shared_embedder

    build = shared_embedder().build_info()
    assert all(type(v) in (str, int, bool) for v in build.values()), build
    assert b"torch_version" not in pickle.dumps(build)  # no class to import


def test_a_two_worker_prep_parent_embeds_nothing_and_never_imports_torch(tmp_path) -> None:
    """The workers load the model (each once, when it starts); the parent that only plans
    the batches and writes the cache never imports torch. The plan is in the message line."""
    build = tmp_path / "build"
    rb = [sys.executable, "-m", "recallbench.cli", "--build-dir", str(build)]
    validate = [
        *rb,
        "-q",
        "validate",
        "--corpus",
        str(FIXTURES / "corpus.jsonl"),
        "--queries",
        str(FIXTURES / "queries.jsonl"),
    ]
    proc = subprocess.run(validate, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    check = (
        "import sys; from recallbench.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules, 'the parent imported torch'\n"
        "assert 'sentence_transformers' not in sys.modules\n"
    )
    cache = tmp_path / "cache"
    args = ["--build-dir", str(build), "prep", "--cache", str(cache), "--system", "minilm"]
    proc = subprocess.run(
        [sys.executable, "-c", check, *args, "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert "136 vectors" in proc.stderr
    assert "with 2 process(es) x 1 torch thread(s)" in proc.stderr, proc.stderr
    manifest = orjson.loads((cache / "manifest.json").read_bytes())
    assert "plan" not in manifest and "processes" not in orjson.dumps(manifest).decode()
    timing = orjson.loads((build / "timings" / "prep.json").read_bytes())
    assert timing["plan"]["processes"] == 2 and timing["plan"]["torch_threads_per_process"] == 1
