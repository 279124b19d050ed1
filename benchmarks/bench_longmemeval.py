#!/usr/bin/env python3
"""Cost of the LongMemEval lane on generated data: reports figures, asserts nothing.

On synthetic, format-faithful data (never the real LongMemEval files):
  - S-shaped: --s-questions questions x ~50 sessions of ~4,000 characters (user text),
  - M-shaped: --m-questions questions x ~500 sessions (per-question cost reported),
measures, for 1 and 2 workers, the wall time and the peak RSS (all processes of the stage
summed, sampled every 50 ms with psutil) of `validate`, `prep` and `run --cache` as
separate `recallbench longmemeval` processes, plus the share of time inside HotMem calls
and the harness overhead over it (from the stages' timing diagnostics). `run` figures are
medians of --repeat runs; prep and validate run once per worker count (they are slower).

Targets (issue 5, this 2-core machine): S-shaped prep <= 60 s and run <= 30 s with 2
workers; harness overhead <= 10% over the time inside HotMem; peak RSS on M-shaped data
< 1.5 GB. Figures are local diagnostics; the JSON goes to build/bench_longmemeval.json.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
LANE = [sys.executable, "-c", "from recallbench.longmemeval.cli import longmemeval; longmemeval()"]


def measured(args: list[str]) -> tuple[float, float]:
    """Run one lane command; (wall seconds, peak summed RSS of its process tree in MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen([*LANE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    parent = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            procs = [parent, *parent.children(recursive=True)]
            rss = 0
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    rss += p.memory_info().rss
            peak = max(peak, rss)
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err.strip()}")
    return elapsed, peak / 2**20


def timing(build: Path, name: str) -> dict[str, Any]:
    return orjson.loads((build / "longmemeval" / name).read_bytes())


def bench_shape(
    label: str, data: Path, work: Path, repeat: int, workers_list: list[int]
) -> dict[str, Any]:
    build = work / f"build-{label}"
    out: dict[str, Any] = {"data_bytes": data.stat().st_size}
    wall, rss = measured(["--build-dir", str(build), "--quiet", "validate", str(data)])
    validated = orjson.loads((build / "longmemeval" / "validate.json").read_bytes())["data"]
    out["questions_scored"] = validated["scored"]
    out["sessions_total"] = validated["haystack"]["sessions_total"]
    out["sessions_per_question_median"] = validated["haystack"]["sessions_median"]
    out["validate"] = {"wall_s": wall, "peak_rss_mb": rss}
    for workers in workers_list:
        cache = work / f"cache-{label}"
        shutil.rmtree(cache, ignore_errors=True)
        wall, rss = measured(
            [
                "--build-dir",
                str(build),
                "--quiet",
                "prep",
                str(data),
                "--cache",
                str(cache),
                "--workers",
                str(workers),
            ]
        )
        t = timing(build, "prep_timing.json")
        out[f"prep_w{workers}"] = {
            "wall_s": wall,
            "stage_wall_s": t["wall_seconds"],
            "peak_rss_mb": rss,
            "texts_embedded": t["texts_embedded"],
            "inside_hotmem_s": t["seconds_inside_system"],
            "share_inside_hotmem": t["seconds_inside_system"] / (t["wall_seconds"] * workers),
            "overhead_in_tasks": t["harness_overhead_in_tasks"],
            "overhead_end_to_end": t["harness_overhead_end_to_end"],
            "per_question_ms": 1000 * t["wall_seconds"] / max(1, t["questions"]),
        }
        runs = []
        for _ in range(repeat):
            wall, rss = measured(
                [
                    "--build-dir",
                    str(build),
                    "--quiet",
                    "run",
                    str(data),
                    "--cache",
                    str(cache),
                    "--workers",
                    str(workers),
                ]
            )
            t = timing(build, "timing.json")
            runs.append((wall, rss, t))
        stage = [r[2]["wall_seconds"] for r in runs]
        mid = sorted(runs, key=lambda r: r[2]["wall_seconds"])[len(runs) // 2][2]
        out[f"run_w{workers}"] = {
            "runs": repeat,
            "wall_s": statistics.median(r[0] for r in runs),
            "stage_wall_s": statistics.median(stage),
            "peak_rss_mb": max(r[1] for r in runs),
            "inside_hotmem_s": mid["seconds_inside_system"],
            "share_inside_hotmem": mid["share_inside_system"],
            "overhead_in_tasks": mid["harness_overhead_in_tasks"],
            "overhead_end_to_end": mid["harness_overhead_end_to_end"],
            "per_question_ms": 1000 * statistics.median(stage) / mid["questions"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--s-questions", type=int, default=500)
    parser.add_argument("--m-questions", type=int, default=40)
    parser.add_argument("--session-chars", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3, help="run-stage repetitions (median)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-longmemeval")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_longmemeval.json")
    parser.add_argument("--keep", action="store_true", help="keep the generated data and caches")
    args = parser.parse_args()
    from recallbench.longmemeval.generator import generate

    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "label": "local diagnostic on generated data (not LongMemEval); no assertion",
        "cpus": psutil.cpu_count(),
    }
    shapes = {
        "S": ("s", args.s_questions, 50),
        "M": ("m", args.m_questions, 500),
    }
    for label, (shape, questions, spq) in shapes.items():
        data = args.work / f"generated_{shape}.json"
        start = time.perf_counter()
        generate(
            data,
            shape=shape,
            questions=questions,
            seed=1,
            sessions_per_question=spq,
            session_chars=args.session_chars,
        )
        gen_s = time.perf_counter() - start
        print(f"{label}: generated {questions} questions in {gen_s:.1f} s", file=sys.stderr)
        results[label] = {
            "generate_s": gen_s,
            **bench_shape(label, data, args.work, args.repeat, [1, 2]),
        }
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    print(f"\nLongMemEval lane cost on generated data ({results['cpus']} CPUs); local diagnostic")
    header = f"{'shape':5} {'step':12} {'wall s':>8} {'stage s':>8} {'ms/q':>8} {'peak MB':>8} {'inside HotMem':>13} {'ovh task':>9} {'ovh e2e':>8}"
    print(header)
    print("-" * len(header))
    for label in shapes:
        r = results[label]
        print(f"{label:5} {'generate':12} {r['generate_s']:8.1f}")
        print(
            f"{label:5} {'validate':12} {r['validate']['wall_s']:8.1f} {'':8} {'':8} {r['validate']['peak_rss_mb']:8.0f}"
        )
        for step in ("prep_w1", "prep_w2", "run_w1", "run_w2"):
            x = r[step]
            print(
                f"{label:5} {step:12} {x['wall_s']:8.1f} {x['stage_wall_s']:8.1f} "
                f"{x['per_question_ms']:8.1f} {x['peak_rss_mb']:8.0f} "
                f"{pct(x['share_inside_hotmem']):>13} "
                f"{pct(x['overhead_in_tasks']):>9} {pct(x['overhead_end_to_end']):>8}"
            )
    s, m = results["S"], results["M"]
    print("\nTargets (reported, not asserted):")
    print(f"  S prep, 2 workers <= 60 s: {s['prep_w2']['wall_s']:.1f} s")
    print(f"  S run,  2 workers <= 30 s: {s['run_w2']['wall_s']:.1f} s")
    print(
        f"  harness overhead <= 10% over time inside HotMem (S run, 2 workers): "
        f"in tasks {pct(s['run_w2']['overhead_in_tasks'])}, "
        f"end to end {pct(s['run_w2']['overhead_end_to_end'])}"
    )
    peak_m = max(
        m[k]["peak_rss_mb"] for k in ("validate", "prep_w1", "prep_w2", "run_w1", "run_w2")
    )
    print(f"  M peak RSS < 1.5 GB: {peak_m:.0f} MB (all processes of a stage summed)")
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
