#!/usr/bin/env python3
"""compare's memory against the systems' own runs: reports figures (exit 1 when a compare
exceeds the bound below, so the figure is never missed).

On one generated LoCoMo file (`recallbench locomo generate`, seed 0), each system's `run`
and `compare` over the first 2, 4 and 7 of them, each a fresh process with a fresh build
directory; the figure of each is the peak of the summed RSS of its process tree (sampled
every 50 ms, `common.measured`) and its wall time. The claim it checks (issue 40): compare's
peak at most 1.5x the largest single `run` of its systems, whatever their number. The
systems embed with no learned model (BM25 twice, HotMem's hash embedder twice, the LanceDB
example plugin three times); `--learned` adds minilm to each set (it loads MiniLM).

JSON: build/bench_compare.json (with the machine and its load average); the table for
docs/performance.md on stdout.

    python benchmarks/bench_compare.py [--conversations 10] [--learned]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RB, ROOT, add_cache_options, machine, measured, warm_caches, write_json  # noqa: E402

#: systems without a learned embedder, in the order the sets take them
LIGHT = ("bm25", "bm25-okapi", "hotmem", "hotmem-mmr", "lancedb", "lancedb-fts", "lancedb-vector")
#: how many systems each compare runs (the first N of the list)
SETS = (2, 4, 7)
#: the claim: compare's peak over the largest single run's
BOUND = 1.5


def run_cmd(build: Path, data: Path, system: str) -> list[str]:
    return [
        RB,
        "--build-dir",
        str(build),
        "-q",
        "run",
        "--dataset",
        "locomo",
        "--data",
        str(data),
        "--system",
        system,
    ]


def compare_cmd(build: Path, data: Path, systems: tuple[str, ...]) -> list[str]:
    chosen = [arg for name in systems for arg in ("--system", name)]
    return [
        RB,
        "--build-dir",
        str(build),
        "-q",
        "compare",
        "--dataset",
        "locomo",
        "--data",
        str(data),
        *chosen,
    ]


def figures(fig: dict[str, Any]) -> dict[str, Any]:
    return {key: fig[key] for key in ("wall_s", "cpu_s", "peak_rss_mb")}


def table(doc: dict[str, Any]) -> str:
    lines = [
        "| systems | compare peak RSS (MiB) | largest single run (MiB, system) | ratio | compare wall (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in doc["compares"]:
        lines.append(
            f"| {len(row['systems'])}: {', '.join(row['systems'])} | {row['peak_rss_mb']:.0f} | "
            f"{row['largest_run_mb']:.0f} ({row['largest_run']}) | {row['ratio']:.2f} | {row['wall_s']:.0f} |"
        )
    runs = ", ".join(f"{name} {r['peak_rss_mb']:.0f}" for name, r in doc["runs"].items())
    return "\n".join(lines) + f"\n\nSingle runs, peak RSS (MiB): {runs}."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations", type=int, default=10, help="of the generated LoCoMo file"
    )
    parser.add_argument(
        "--learned", action="store_true", help="add minilm to every set (loads MiniLM)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_compare.json")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    systems = (("minilm",) if args.learned else ()) + LIGHT
    sets = [systems[: n + (1 if args.learned else 0)] for n in SETS]
    with tempfile.TemporaryDirectory(prefix="rb-bench-compare-") as tmp:
        root = Path(tmp)
        data = root / "locomo.json"
        measured(
            [
                RB,
                "locomo",
                "generate",
                "--out",
                str(data),
                "--conversations",
                str(args.conversations),
            ]
        )
        before = machine()
        runs = {}
        for name in sets[-1]:
            runs[name] = figures(measured(run_cmd(root / f"run-{name}", data, name)))
            print(
                f"run {name}: {runs[name]['peak_rss_mb']:.0f} MiB, {runs[name]['wall_s']:.1f} s",
                flush=True,
            )
        compares = []
        for chosen in sets:
            fig = figures(measured(compare_cmd(root / f"compare-{len(chosen)}", data, chosen)))
            largest = max(chosen, key=lambda name: runs[name]["peak_rss_mb"])
            ratio = fig["peak_rss_mb"] / runs[largest]["peak_rss_mb"]
            compares.append(
                {
                    "systems": list(chosen),
                    **fig,
                    "largest_run": largest,
                    "largest_run_mb": runs[largest]["peak_rss_mb"],
                    "ratio": ratio,
                    "within_bound": ratio <= BOUND,
                }
            )
            print(
                f"compare of {len(chosen)}: {fig['peak_rss_mb']:.0f} MiB = {ratio:.2f} x {largest}'s run, "
                f"{fig['wall_s']:.1f} s",
                flush=True,
            )
    doc = {
        "label": "local diagnostic: peak RSS on this machine, not a result",
        "metric": "MiB, peak of the summed RSS of the command's process tree (sampled every 50 ms)",
        "data": f"generated LoCoMo, {args.conversations} conversations, seed 0",
        "bound": f"compare's peak at most {BOUND}x the largest single run of its systems",
        "machine_before": before,
        "machine_after": machine(),
        "runs": runs,
        "compares": compares,
    }
    write_json(args.out, doc)
    print(table(doc))
    print(f"wrote {args.out}")
    return 0 if all(row["within_bound"] for row in compares) else 1


if __name__ == "__main__":
    raise SystemExit(main())
