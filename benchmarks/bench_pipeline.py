#!/usr/bin/env python3
"""Start-up and stage-split cost of the fixture suite: reports figures, asserts nothing.

Measures on the committed fixture suite, as medians of --runs rounds (after one warm-up
round: page cache, and .pyc files, cached in build/pycache even where the environment sets
PYTHONDONTWRITEBYTECODE; `--no-bytecode-cache` measures without). Within a round every variant runs once, one after the
other, so a ratio compares runs made under the same machine load:

  - a bare interpreter (`python -c pass`) and `python -c "import recallbench.cli.main"`,
  - stage by stage: one `recallbench <stage>` process per stage, in the order of
    `recallbench.builddir.artifacts.STAGE_NAMES`, into a fresh build directory; each stage's
    process wall and CPU time, and their sum,
  - the in-process chain as one process: `recallbench run` and `scripts/retrieval_eval.py`,
  - `make eval` (the seven stages, export-trec and check-baseline) into a temp BUILD,
  - the in-process chain with imports done (`pipeline.run_pipeline` in this process) and
    the seconds inside HotMem during it (hydrate, query and round trip timing sidecars),
  - what each stage command imports (`python -X importtime`, one run per stage against a
    prepared build directory): modules loaded, and which heavy ones (hotmem, numpy, scipy,
    bm25s, click, importlib.metadata, ...) with their cumulative import time.

Ratios: stage by stage / `recallbench run` (the target of issue 11 is <= 1.5x), and the
floor, (`recallbench run` + 6 more bare interpreters) / `recallbench run`: what seven
processes would cost if they shared nothing but the interpreter's own start-up.
JSON: build/bench_pipeline.json.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RB,
    ROOT,
    add_cache_options,
    machine,
    warm_caches,
    write_json,
)

from recallbench.builddir.artifacts import STAGE_NAMES  # noqa: E402

PY = sys.executable
FIXTURES = ROOT / "benchmarks" / "retrieval"
#: modules whose presence in a stage's imports is worth reporting (and their cost)
HEAVY = (
    "hotmem",
    "matplotlib",
    "numpy",
    "scipy",
    "bm25s",
    "numba",
    "click",
    "importlib.metadata",
    "sqlite3",
    "ijson",
    "orjson",
    "tqdm",
    "ray",
    "torch",
)


def timed(cmd: list[str], check: bool = True, **kw: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def stage_by_stage() -> dict[str, tuple[float, float]]:
    """Each stage as its own process into a fresh build directory: {stage: (wall, cpu)}."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="rb-bench-") as build:
        for stage in STAGE_NAMES:
            out[stage] = timed([RB, "--build-dir", build, "-q", stage], cwd=ROOT)
    return out


def whole(cmd: list[str], check: bool = True) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="rb-bench-") as build:
        return timed([a.replace("{BUILD}", build) for a in cmd], check, cwd=ROOT)


def in_process(runs: int) -> tuple[float, float]:
    """Median wall seconds of `run_pipeline` here (imports done) and of the time inside
    HotMem in those runs (sum of the stages' seconds_inside_system)."""
    from recallbench.commands.pipeline import run_pipeline

    paths = {"corpus": FIXTURES / "corpus.jsonl", "queries": FIXTURES / "queries.jsonl"}
    walls, inside = [], []
    for i in range(runs + 1):
        with tempfile.TemporaryDirectory(prefix="rb-bench-") as work:
            start = time.perf_counter()
            run = run_pipeline("fixtures", paths, Path(work))
            elapsed = time.perf_counter() - start
        if i:  # the first run is a warm-up
            walls.append(elapsed)
            inside.append(sum(t.get("seconds_inside_system") or 0.0 for t in run.timings.values()))
    return statistics.median(walls), statistics.median(inside)


_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def import_profile(stage: str, build: str) -> dict[str, Any]:
    """Run one stage with `-X importtime`; modules loaded and the heavy ones' cumulative ms."""
    proc = subprocess.run(
        [PY, "-X", "importtime", RB, "--build-dir", build, "-q", stage],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    modules: dict[str, int] = {}
    self_by_package: dict[str, int] = defaultdict(int)
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        self_us, name = int(m[1]), m[4]
        modules[name] = self_us
        self_by_package[name.split(".")[0]] += self_us
    # a heavy package's cost: the self time of its own modules (its dependencies apart)
    heavy = {
        h: sum(us for n, us in modules.items() if n == h or n.startswith(h + ".")) / 1000
        for h in HEAVY
        if h in modules
    }
    top = sorted(self_by_package.items(), key=lambda kv: -kv[1])[:6]
    return {
        "modules": len(modules),
        "self_ms_total": sum(self_by_package.values()) / 1000,
        "heavy_cumulative_ms": heavy,
        "top_packages_self_ms": {k: v / 1000 for k, v in top},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed rounds (median)")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_pipeline.json")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    before = machine()

    variants = {
        "bare": lambda: timed([PY, "-c", "pass"]),
        "import_cli": lambda: timed([PY, "-c", "import recallbench.cli.main"]),
        "run": lambda: whole([RB, "--build-dir", "{BUILD}", "-q", "run"]),
        "script": lambda: whole([PY, str(ROOT / "scripts" / "retrieval_eval.py"), "-q"]),
        # timed whatever check-baseline says (a baseline being regenerated fails it)
        "make_eval": lambda: whole(["make", "-s", "eval", "BUILD={BUILD}"], check=False),
    }
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    per_stage: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i in range(args.runs + 1):
        print(f"  round {i}/{args.runs}{' (warm-up)' if not i else ''}", file=sys.stderr)
        got = {name: fn() for name, fn in variants.items()}
        stages = stage_by_stage()
        if not i:
            continue
        for name, value in got.items():
            samples[name].append(value)
        for stage, value in stages.items():
            per_stage[stage].append(value)
        samples["stage_by_stage"].append(
            (sum(w for w, _ in stages.values()), sum(c for _, c in stages.values()))
        )

    def med(values: list[tuple[float, float]], j: int) -> float:
        return statistics.median(v[j] for v in values)

    figures: dict[str, Any] = {
        name: {"wall_s": med(v, 0), "cpu_s": med(v, 1)} for name, v in samples.items()
    }
    figures["per_stage"] = {
        s: {"wall_s": med(v, 0), "cpu_s": med(v, 1)} for s, v in per_stage.items()
    }
    chain, inside = in_process(args.runs)
    figures["in_process_chain"] = {"wall_s": chain, "inside_hotmem_s": inside}
    with tempfile.TemporaryDirectory(prefix="rb-bench-") as build:
        figures["imports"] = {stage: import_profile(stage, build) for stage in STAGE_NAMES}
    run_wall = figures["run"]["wall_s"]
    sbs = figures["stage_by_stage"]
    figures["ratios"] = {
        "stage_by_stage_over_run_wall": sbs["wall_s"] / run_wall,
        "stage_by_stage_over_run_cpu": sbs["cpu_s"] / figures["run"]["cpu_s"],
        "stage_by_stage_over_script_wall": sbs["wall_s"] / figures["script"]["wall_s"],
        "floor_over_run_wall": (run_wall + 6 * figures["bare"]["wall_s"]) / run_wall,
        "harness_over_hotmem_in_process": (chain - inside) / inside if inside else None,
    }
    figures["runs"] = args.runs
    figures["machine"] = before
    figures["machine_after"] = machine()
    write_json(args.json, figures)

    r = figures["ratios"]
    print(
        f"\nfixture suite: start-up and stage split, median of {args.runs} rounds "
        f"({before['cpus']} CPUs, load {before['load1']:.1f} before, "
        f"{figures['machine_after']['load1']:.1f} after); local diagnostic, not asserted"
    )
    print(f"  {'process':<44} {'wall ms':>8} {'CPU ms':>8}")
    rows = [
        ("python -c pass", figures["bare"]),
        ("python -c 'import recallbench.cli.main'", figures["import_cli"]),
        *[(f"  recallbench {s}", figures["per_stage"][s]) for s in STAGE_NAMES],
        ("stage by stage (7 processes, sum)", sbs),
        ("recallbench run (one process)", figures["run"]),
        ("scripts/retrieval_eval.py (one process)", figures["script"]),
        ("make eval (7 stages + export-trec + check-baseline)", figures["make_eval"]),
    ]
    for name, f in rows:
        print(f"  {name:<44} {1000 * f['wall_s']:8.0f} {1000 * f['cpu_s']:8.0f}")
    print(
        f"  {'in-process chain, imports done':<44} {1000 * chain:8.0f}"
        f"\n  {'  of which inside HotMem':<44} {1000 * inside:8.0f}"
    )
    print(
        f"  stage by stage / recallbench run: {r['stage_by_stage_over_run_wall']:.2f}x wall, "
        f"{r['stage_by_stage_over_run_cpu']:.2f}x CPU (target <= 1.5x); "
        f"/ script: {r['stage_by_stage_over_script_wall']:.2f}x wall"
    )
    print(
        f"  floor (run + 6 bare interpreters) / run: "
        f"{r['floor_over_run_wall']:.2f}x; harness over HotMem in process: "
        f"{100 * r['harness_over_hotmem_in_process']:.0f}%"
    )
    print("\n  imports of each stage command (python -X importtime, one run; self ms by package)")
    for stage, imp in figures["imports"].items():
        heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in imp["heavy_cumulative_ms"].items())
        print(f"  {stage:<20} {imp['modules']:4d} modules, {imp['self_ms_total']:5.0f} ms: {heavy}")
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
