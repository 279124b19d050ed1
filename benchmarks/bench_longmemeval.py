#!/usr/bin/env python3
"""Cost of the conversational datasets on generated data: reports figures, asserts nothing.

On synthetic, format-faithful data (never the real LongMemEval or LoCoMo files), each
step as its own `recallbench` process, as a user runs them:

    recallbench longmemeval generate --shape s --questions N --seed 1 --out F
    recallbench validate --dataset longmemeval --data F        # parses F once, writes the spool
    recallbench prep --cache C --workers W                      # embeds every distinct text once
    recallbench hydrate --cache C                               # plans transient stores
    recallbench query --cache C --workers W                     # W = 1 and 2, --repeat times
    recallbench query --cache C --executor ray --workers 2      # same runs.json? (cmp)
    recallbench run --dataset longmemeval --data F --cache C --workers 2   # all in one process

For each: wall time, CPU time (user + system of the process and the children it waited
for) and peak RSS of the process tree (every process's RSS summed, sampled every 50 ms:
shared pages count once per process, so it over-states). From the query stage's timing
sidecar (BUILD/timings/runs.json): seconds inside the system (HotMem), the share of the
workers' time spent there, and the harness overhead end to end,
(wall x workers - inside) / inside. Also, smaller: an M-shaped file (per-question cost),
LoCoMo at turn unit (per-conversation cost), and Ray's own start-up.

Target of issue 11 (reported, not asserted): S-shaped, 2 workers, harness overhead end to
end <= 5%. JSON: build/bench_longmemeval.json. The machine's load average is recorded
before and after: other work on the machine inflates wall times (CPU times much less).

    python benchmarks/bench_longmemeval.py [--questions 500] [--repeat 3] [--no-ray] ...
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RB,
    ROOT,
    add_cache_options,
    longmemeval_generate,
    machine,
    measured,
    warm_caches,
    write_json,
)

from recallbench.stages.query import HARNESS_PARTS  # noqa: E402


def sidecar(build: Path, kind: str) -> dict[str, Any]:
    return orjson.loads((build / "timings" / f"{kind}.json").read_bytes())


def query_figures(fig: dict[str, Any], timing: dict[str, Any], scopes: int) -> dict[str, Any]:
    """A query process's figures plus what its timing sidecar says."""
    fig = {k: v for k, v in fig.items() if k != "stdout"}
    fig.update(
        stage_wall_s=timing["wall_seconds"],
        seconds_inside_system=timing["seconds_inside_system"],
        seconds_in_tasks=timing["seconds_in_tasks"],
        share_inside_system=timing["share_inside_system"],
        overhead_in_tasks=timing["harness_overhead_in_tasks"],
        overhead_end_to_end=timing["harness_overhead_end_to_end"],
        task_s_per_scope=timing["seconds_in_tasks"] / scopes,
        wall_ms_per_scope=1000 * timing["wall_seconds"] / scopes,
        harness_parts={part: timing.get(part) for part in HARNESS_PARTS},
    )
    return fig


def lane(
    label: str,
    dataset: str,
    data: Path,
    work: Path,
    *,
    repeat: int,
    workers_list: tuple[int, ...],
    unit: str | None = None,
    ray: bool = False,
    run_workers: int | None = None,
) -> dict[str, Any]:
    """validate, prep, hydrate and query (each worker count), [ray], [run]; figures."""
    build = work / f"build-{label}"
    shutil.rmtree(build, ignore_errors=True)
    rb = [RB, "--build-dir", str(build), "-q"]
    out: dict[str, Any] = {"data_bytes": data.stat().st_size}

    def say(msg: str) -> None:
        print(f"  {label}: {msg}", file=sys.stderr, flush=True)

    say("validate")
    source = ["--dataset", dataset, "--data", str(data), *(["--unit", unit] if unit else [])]
    fig = measured([*rb, "validate", *source])
    suite = orjson.loads((build / "suite.json").read_bytes())["data"]
    counts = suite["counts"]
    scopes = counts["scopes"]
    out["counts"] = {k: counts[k] for k in ("scopes", "memories", "queries")}
    out["validate"] = {k: v for k, v in fig.items() if k != "stdout"}
    runs: dict[str, Path] = {}
    for workers in workers_list:
        cache = work / f"cache-{label}"
        shutil.rmtree(cache, ignore_errors=True)
        say(f"prep --workers {workers}")
        fig = measured([*rb, "prep", "--cache", str(cache), "--workers", str(workers)])
        out[f"prep_w{workers}"] = {k: v for k, v in fig.items() if k != "stdout"}
        say("hydrate")
        fig = measured([*rb, "hydrate", "--cache", str(cache)])
        out["hydrate"] = {k: v for k, v in fig.items() if k != "stdout"}
        samples = []
        for i in range(repeat):
            say(f"query --workers {workers} ({i + 1}/{repeat})")
            fig = measured([*rb, "query", "--cache", str(cache), "--workers", str(workers)])
            samples.append(query_figures(fig, sidecar(build, "runs"), scopes))
        runs[f"w{workers}"] = work / f"runs-{label}-w{workers}.json"
        shutil.copy(build / "runs.json", runs[f"w{workers}"])
        mid = sorted(samples, key=lambda s: s["wall_s"])[len(samples) // 2]
        out[f"query_w{workers}"] = {
            **mid,
            "runs": repeat,
            "wall_s_all": [s["wall_s"] for s in samples],
            "wall_s": statistics.median(s["wall_s"] for s in samples),
            "peak_rss_mb": max(s["peak_rss_mb"] for s in samples),
        }
    if len(workers_list) > 1:
        first = runs[f"w{workers_list[0]}"]
        out["runs_identical_across_workers"] = all(
            filecmp.cmp(first, p, shallow=False) for p in runs.values()
        )
    if ray:
        say("query --executor ray --workers 2")
        fig = measured([*rb, "query", "--cache", str(cache), "--executor", "ray", "--workers", "2"])
        out["query_ray_w2"] = query_figures(fig, sidecar(build, "runs"), scopes)
        out["ray_runs_identical_to_local"] = filecmp.cmp(
            runs[f"w{workers_list[0]}"], build / "runs.json", shallow=False
        )
    if run_workers:
        say(f"run --workers {run_workers} (one process)")
        run_build = work / f"build-{label}-run"
        shutil.rmtree(run_build, ignore_errors=True)
        fig = measured(
            [
                RB,
                "--build-dir",
                str(run_build),
                "-q",
                "run",
                *source,
                "--cache",
                str(cache),
                "--workers",
                str(run_workers),
            ]
        )
        out[f"run_w{run_workers}"] = query_figures(fig, sidecar(run_build, "runs"), scopes)
        out["run_runs_identical_to_query"] = filecmp.cmp(
            runs[f"w{workers_list[0]}"], run_build / "runs.json", shallow=False
        )
    return out


def ray_startup(repeat: int) -> dict[str, Any] | None:
    """Seconds to import ray, `ray.init(num_cpus=2)` and `ray.shutdown()`, in a fresh process."""
    code = (
        "import time, orjson; t0 = time.perf_counter(); import ray; t1 = time.perf_counter();"
        "ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,"
        " configure_logging=False); t2 = time.perf_counter(); ray.shutdown();"
        "t3 = time.perf_counter();"
        "print(orjson.dumps({'import_s': t1 - t0, 'init_s': t2 - t1, 'shutdown_s': t3 - t2}).decode())"
    )
    try:
        import ray  # noqa: F401
    except ImportError:
        return None
    samples = []
    for _ in range(repeat):
        fig = measured([sys.executable, "-c", code])
        samples.append({**orjson.loads(fig["stdout"].strip().splitlines()[-1]), **fig})
    return {
        key: statistics.median(s[key] for s in samples)
        for key in ("import_s", "init_s", "shutdown_s", "wall_s", "peak_rss_mb")
    } | {"runs": repeat}


def generate(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_lane(label: str, r: dict[str, Any], unit: str) -> None:
    c = r["counts"]
    print(
        f"\n{label}: {c['scopes']} {unit}s, {c['memories']:,} memories, {c['queries']} queries, "
        f"{r['data_bytes'] / 2**20:.1f} MiB (generated in {r['generate_s']:.1f} s)"
    )
    header = (
        f"  {'step':<16} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'ms/' + unit:>11} "
        f"{'inside':>7} {'share':>6} {'ovh task':>8} {'ovh e2e':>8}"
    )
    print(header)
    steps = ["validate", *[k for k in r if k.startswith("prep_w")], "hydrate"]
    steps += [k for k in r if k.startswith(("query_", "run_w"))]
    for name in steps:
        x = r[name]
        line = f"  {name:<16} {x['wall_s']:7.1f} {x['cpu_s']:7.1f} {x['peak_rss_mb']:8.0f}"
        if "overhead_end_to_end" in x:
            line += (
                f" {x['wall_ms_per_scope']:11.1f} {x['seconds_inside_system']:7.1f} "
                f"{pct(x['share_inside_system']):>6} {pct(x['overhead_in_tasks']):>8} "
                f"{pct(x['overhead_end_to_end']):>8}"
            )
        print(line)
    for name in steps:
        x = r[name]
        if x.get("harness_parts") and x.get("seconds_inside_system"):
            inside = x["seconds_inside_system"]
            parts = ", ".join(
                f"{part.removeprefix('seconds_').replace('_', ' ')} {pct(v / inside)}"
                for part, v in x["harness_parts"].items()
                if v is not None
            )
            print(f"  {name} harness time within tasks, as a share of inside: {parts}")
    for key in ("runs_identical_across_workers", "ray_runs_identical_to_local"):
        if key in r:
            print(f"  {key.replace('_', ' ')}: {r[key]}")
    if "run_runs_identical_to_query" in r:
        print(f"  run's runs.json identical to query's: {r['run_runs_identical_to_query']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500, help="S-shaped questions")
    parser.add_argument("--session-chars", type=int, default=4000)
    parser.add_argument("--m-questions", type=int, default=5, help="M-shaped (0: skip)")
    parser.add_argument("--locomo", type=int, default=10, help="LoCoMo conversations (0: skip)")
    parser.add_argument("--repeat", type=int, default=3, help="query runs per worker count")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray figures")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-longmemeval")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_longmemeval.json")
    parser.add_argument("--keep", action="store_true", help="keep the generated data and caches")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    use_ray = not args.no_ray
    if use_ray:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray is not installed (pip install -e '.[ray]'): skipping Ray", file=sys.stderr)
            use_ray = False

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "label": "local diagnostic on generated data (not LongMemEval/LoCoMo); not asserted",
        "machine": machine(),
        "settings": {
            "questions": args.questions,
            "session_chars": args.session_chars,
            "m_questions": args.m_questions,
            "locomo_conversations": args.locomo,
            "repeat": args.repeat,
        },
    }
    s_file = work / "generated_s.json"
    gen = generate(longmemeval_generate(s_file, "s", args.questions, args.session_chars))
    results["S"] = {
        "generate_s": gen,
        **lane(
            "S",
            "longmemeval",
            s_file,
            work,
            repeat=args.repeat,
            workers_list=(1, 2),
            ray=use_ray,
            run_workers=2,
        ),
    }
    if args.m_questions:
        m_file = work / "generated_m.json"
        gen = generate(longmemeval_generate(m_file, "m", args.m_questions, args.session_chars))
        results["M"] = {
            "generate_s": gen,
            **lane("M", "longmemeval", m_file, work, repeat=1, workers_list=(1, 2)),
        }
    if args.locomo:
        l_file = work / "generated_locomo.json"
        gen = generate(
            [RB, "locomo", "generate", "--out", str(l_file), "--conversations", str(args.locomo)]
        )
        results["LoCoMo_turn"] = {
            "generate_s": gen,
            **lane(
                "LoCoMo_turn",
                "locomo",
                l_file,
                work,
                repeat=1,
                workers_list=(1, 2),
                unit="turn",
            ),
        }
    if use_ray:
        results["ray_startup"] = ray_startup(3)
    results["machine_after"] = machine()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.json, results)

    m0, m1 = results["machine"], results["machine_after"]
    print(
        f"\nConversational datasets on generated data; {m0['cpus']} CPUs, load average "
        f"{m0['load1']:.1f} before / {m1['load1']:.1f} after; local diagnostic, not asserted"
    )
    print_lane(f"LongMemEval S-shaped ({args.questions} questions)", results["S"], "question")
    if "M" in results:
        print_lane(f"LongMemEval M-shaped ({args.m_questions} questions)", results["M"], "question")
    if "LoCoMo_turn" in results:
        print_lane(
            f"LoCoMo, turn unit ({args.locomo} conversations)", results["LoCoMo_turn"], "conv"
        )
    if results.get("ray_startup"):
        r = results["ray_startup"]
        print(
            f"\nRay start-up (median of {r['runs']} fresh processes): import {r['import_s']:.2f} s, "
            f"ray.init(num_cpus=2) {r['init_s']:.2f} s, shutdown {r['shutdown_s']:.2f} s, "
            f"process wall {r['wall_s']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    s = results["S"]
    print(
        "\nTarget (reported, not asserted): S-shaped, 2 workers, harness overhead end to end <= 5%"
    )
    print(
        f"  query --workers 2: {pct(s['query_w2']['overhead_end_to_end'])} end to end "
        f"({pct(s['query_w2']['overhead_in_tasks'])} within the tasks); "
        f"1 worker: {pct(s['query_w1']['overhead_end_to_end'])}"
    )
    if "run_w2" in s:
        print(
            f"  run --workers 2 (query stage of the one-process chain): {pct(s['run_w2']['overhead_end_to_end'])}"
        )
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
