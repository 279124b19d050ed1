#!/usr/bin/env python3
"""recallbench vs memory-core-eval (mceval), BM25 on both sides: reports, asserts nothing.

Both tools evaluate the same generated, format-faithful LongMemEval S-shaped file
(`recallbench longmemeval generate --shape s --questions N --seed 1`; never the real data)
with their BM25 systems, at 1 and 2 workers, each as one whole process:

    recallbench run --dataset longmemeval --data F --system bm25 --workers W
    recallbench run ... --unit turn --session-text all          # mceval's indexing unit
    mceval run --adapter bm25 --split s --workers W             # F served as its S file

and reports wall time, CPU time, peak RSS of the process tree (sampled every 50 ms), the
time of the retrieval loop alone (recallbench: the query stage's timing sidecar;
mceval: its own `elapsed_s`, rounded by it to 0.1 s) and each tool's R@5:

  - recallbench (session unit, the default): one memory per session, the user turns'
    text (LongMemEval's official retrieval setting); bm25s (Lucene BM25, k1 1.5, b 0.75).
    R@5 = recall_any@5: a question counts when any gold session is among the top 5
    sessions. `run` also does the snapshot round trip (20 sampled questions), scoring,
    the report (with its plots) and the decision: all in the wall time.
  - recallbench (turn unit, all turns): one memory per distinct turn text, user and
    assistant; the session ranking is the turns' sessions in rank order, deduplicated.
  - mceval: indexes every turn (user and assistant) with rank_bm25's BM25Okapi, rebuilt
    per question, searches the top 10 turns; R@5 = any of the top 5 *turns* comes from a
    gold session (so fewer than 5 distinct sessions may be looked at). Abstention
    questions (`_abs`) are left out of recall, as recallbench drops them.

memory-core-eval is never a dependency of recallbench. Install it in its own venv:

    python3 -m venv /tmp/mce-venv && /tmp/mce-venv/bin/pip install memory-core-eval

and point this script at it with --mceval /tmp/mce-venv/bin/mceval (the default) or the
MCEVAL environment variable. Without it the script says so and exits without measuring.
JSON: build/bench_peer.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
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

INSTALL = "python3 -m venv /tmp/mce-venv && /tmp/mce-venv/bin/pip install memory-core-eval"
CONFIGS = {
    "recallbench": [],
    "recallbench-turn": ["--unit", "turn", "--session-text", "all"],
}


def find_mceval(given: str | None) -> str | None:
    """--mceval, else $MCEVAL, else /tmp/mce-venv/bin/mceval or `mceval` on PATH."""
    explicit = given or os.environ.get("MCEVAL")
    candidates = [explicit] if explicit else ["/tmp/mce-venv/bin/mceval", shutil.which("mceval")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def run_recallbench(data: Path, work: Path, name: str, workers: int) -> dict[str, Any]:
    build = work / f"build-{name}-w{workers}"
    shutil.rmtree(build, ignore_errors=True)
    cmd = [RB, "--build-dir", str(build), "-q", "run", "--dataset", "longmemeval"]
    cmd += ["--data", str(data), "--system", "bm25", "--workers", str(workers), *CONFIGS[name]]
    fig = measured(cmd)
    result = orjson.loads((build / "results.json").read_bytes())["data"]
    r5 = result["metrics"]["overall"]["recall_any@5"]
    runs_timing = orjson.loads((build / "timings" / "runs.json").read_bytes())
    return {
        "wall_s": fig["wall_s"],
        "cpu_s": fig["cpu_s"],
        "peak_rss_mb": fig["peak_rss_mb"],
        "retrieval_loop_s": runs_timing["wall_seconds"],
        "r_at_5": r5["value"],
        "r_at_5_counts": f"{r5['numerator']:g}/{r5['denominator']}",
        "memories": result["counts"]["memories"],
    }


def run_mceval(mceval: str, data: Path, work: Path, workers: int) -> dict[str, Any]:
    cache = work / "mceval-cache"  # mceval reads its S split from here: our file, no download
    cache.mkdir(exist_ok=True)
    target = cache / "longmemeval_s_cleaned.json"
    if not target.exists():
        target.symlink_to(data.resolve())
    out = work / f"mceval-out-w{workers}"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "MCEVAL_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    cmd = [mceval, "run", "--adapter", "bm25", "--split", "s", "--workers", str(workers)]
    fig = measured([*cmd, "--out-dir", str(out)], cwd=work, env=env)
    doc = orjson.loads(next(out.glob("*.json")).read_bytes())
    m = doc["metrics"]
    return {
        "wall_s": fig["wall_s"],
        "cpu_s": fig["cpu_s"],
        "peak_rss_mb": fig["peak_rss_mb"],
        "retrieval_loop_s": doc["meta"]["elapsed_s"],
        "r_at_5": m["overall"]["recall@5"] / 100,
        "r_at_5_counts": f"of {m['n_answerable']} answerable",
        "memories": sum(r["n_indexed"] for r in doc["results"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--session-chars", type=int, default=4000)
    parser.add_argument("--mceval", default=None, help="the mceval executable")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-peer")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_peer.json")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    mceval = find_mceval(args.mceval)
    if mceval is None:
        print(
            "bench_peer: memory-core-eval is not installed; nothing measured.\n"
            f"Install it in its own venv (never into recallbench's):\n  {INSTALL}\n"
            "then run again (or pass --mceval PATH / set MCEVAL=PATH).",
            file=sys.stderr,
        )
        sys.exit(0)
    version = subprocess.run(
        [
            str(Path(mceval).parent / "python"),
            "-c",
            "import importlib.metadata as m;"
            "print(m.version('memory-core-eval'), m.version('rank-bm25'))",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data = work / "generated_s.json"
    start = time.perf_counter()
    subprocess.run(
        longmemeval_generate(data, "s", args.questions, args.session_chars),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    results: dict[str, Any] = {
        "label": "local diagnostic on generated data (not LongMemEval); not asserted",
        "machine": machine(),
        "questions": args.questions,
        "data_bytes": data.stat().st_size,
        "generate_s": time.perf_counter() - start,
        "mceval_version": version[0] if version else None,
        "rank_bm25_version": version[1] if len(version) > 1 else None,
        "rows": [],
    }
    for workers in (1, 2):
        for name in ("recallbench", "recallbench-turn", "mceval"):
            print(f"  {name} --workers {workers} ...", file=sys.stderr, flush=True)
            if name == "mceval":
                row = run_mceval(mceval, data, work, workers)
            else:
                row = run_recallbench(data, work, name, workers)
            results["rows"].append({"tool": name, "workers": workers, **row})
    results["machine_after"] = machine()
    shutil.rmtree(work, ignore_errors=True)
    write_json(args.json, results)

    by = {(r["tool"], r["workers"]): r for r in results["rows"]}
    m0, m1 = results["machine"], results["machine_after"]
    print(
        f"\nBM25 on a generated S-shaped file ({args.questions} questions, "
        f"{results['data_bytes'] / 2**20:.0f} MiB); memory-core-eval {results['mceval_version']}; "
        f"{m0['cpus']} CPUs, load {m0['load1']:.1f} before / {m1['load1']:.1f} after; "
        "local diagnostic, not asserted"
    )
    header = (
        f"  {'tool':<17} {'workers':>7} {'wall s':>7} {'x ours':>6} {'CPU s':>6} "
        f"{'loop s':>6} {'peak MB':>7} {'memories':>9} {'R@5':>6}  R@5 counts"
    )
    print(header)
    for row in results["rows"]:
        ref = by[("recallbench", row["workers"])]["wall_s"]
        print(
            f"  {row['tool']:<17} {row['workers']:>7} {row['wall_s']:7.1f} "
            f"{row['wall_s'] / ref:6.2f} {row['cpu_s']:6.1f} {row['retrieval_loop_s']:6.1f} "
            f"{row['peak_rss_mb']:7.0f} {row['memories']:9,} {row['r_at_5']:6.3f}  "
            f"{row['r_at_5_counts']}"
        )
    for tool in ("recallbench", "recallbench-turn", "mceval"):
        w1, w2 = by[(tool, 1)]["wall_s"], by[(tool, 2)]["wall_s"]
        print(f"  {tool}: 2 workers / 1 worker wall {w2 / w1:.2f}")
    print(
        "  x ours: wall / recallbench (session unit) at the same workers; loop s: the "
        "retrieval loop alone (our query stage; mceval's elapsed_s)"
    )
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
