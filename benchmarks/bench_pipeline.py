#!/usr/bin/env python3
"""Speed of the fixture lane: reports figures, asserts nothing.

Measures, as medians of --runs runs on this machine:
  - interpreter start-up (`python -c pass`) and `import recallbench.cli` (start-up + imports),
  - the in-process chain (`pipeline.run_fixture_lane`, imports already done) and the time
    spent inside HotMem calls during it, hence the harness overhead over HotMem,
  - `scripts/retrieval_eval.py` as a whole process,
  - the stage-by-stage run (one `recallbench <stage>` process per stage) and its ratio to the
    in-process chain (whole-process script, so both include start-up),
  - `make eval` with a warm environment.
Targets (from the issue): make eval <= 3 s warm; stage-by-stage <= 2x the chain; harness
overhead <= 10% over the time inside HotMem. Figures are local diagnostic data.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STAGES = ["validate", "hydrate", "query", "snapshot-roundtrip", "score", "report", "decide"]


def wall(cmd: list[str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def median_of(fn, runs: int) -> float:
    fn()  # warm-up: page cache, .pyc files
    return statistics.median(fn() for _ in range(runs))


def in_process(runs: int) -> tuple[float, float]:
    """Median wall seconds of the chain and of the time inside HotMem in those runs."""
    from recallbench.pipeline import run_fixture_lane
    from recallbench.systems.hotmem import HotMemSystem

    fixtures = ROOT / "benchmarks" / "retrieval"
    walls, inside = [], []
    for i in range(runs + 1):
        with tempfile.TemporaryDirectory() as work:
            before = HotMemSystem.process_seconds_inside
            start = time.perf_counter()
            run_fixture_lane(fixtures / "corpus.jsonl", fixtures / "queries.jsonl", Path(work))
            elapsed = time.perf_counter() - start
        if i:  # the first run is a warm-up
            walls.append(elapsed)
            inside.append(HotMemSystem.process_seconds_inside - before)
    return statistics.median(walls), statistics.median(inside)


def stage_by_stage(build: Path) -> float:
    rb = [str(BIN / "recallbench"), "--build-dir", str(build), "-q"]
    start = time.perf_counter()
    for stage in STAGES:
        subprocess.run([*rb, stage], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (median)")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_pipeline.json")
    args = parser.parse_args()
    py = str(BIN / "python")

    startup = median_of(lambda: wall([py, "-c", "pass"]), args.runs)
    imports = median_of(
        lambda: wall([py, "-c", "import recallbench.cli, recallbench.systems.hotmem"]), args.runs
    )
    chain, inside = in_process(args.runs)
    script = median_of(
        lambda: wall([py, str(ROOT / "scripts" / "retrieval_eval.py")], cwd=ROOT), args.runs
    )
    with tempfile.TemporaryDirectory() as build:
        stages = median_of(lambda: stage_by_stage(Path(build)), args.runs)
    make_eval = median_of(lambda: wall(["make", "-s", "eval"], cwd=ROOT), args.runs)

    figures = {
        "runs": args.runs,
        "python_startup_s": startup,
        "startup_plus_imports_s": imports,
        "in_process_chain_s": chain,
        "inside_hotmem_s": inside,
        "harness_overhead_pct": (chain - inside) / inside * 100,
        "script_whole_process_s": script,
        "stage_by_stage_s": stages,
        "stage_by_stage_over_script": stages / script,
        "make_eval_warm_s": make_eval,
        "note": "medians on this machine; local diagnostic data, not a guarantee",
    }
    rows = [
        ("python start-up", f"{startup * 1000:.0f} ms", ""),
        ("start-up + imports", f"{imports * 1000:.0f} ms", ""),
        ("in-process chain (imports done)", f"{chain * 1000:.0f} ms", ""),
        ("  of which inside HotMem", f"{inside * 1000:.0f} ms", ""),
        (
            "  harness overhead over HotMem",
            f"{figures['harness_overhead_pct']:.1f} %",
            "target <= 10 %",
        ),
        ("scripts/retrieval_eval.py (process)", f"{script * 1000:.0f} ms", ""),
        ("stage-by-stage (7 processes)", f"{stages * 1000:.0f} ms", ""),
        (
            "  ratio to the script",
            f"{figures['stage_by_stage_over_script']:.2f} x",
            "target <= 2 x",
        ),
        ("make eval (warm)", f"{make_eval * 1000:.0f} ms", "target <= 3000 ms"),
    ]
    print(f"fixture lane speed, median of {args.runs} runs (local diagnostic data)")
    for name, value, target in rows:
        print(f"  {name:<38} {value:>10}  {target}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
