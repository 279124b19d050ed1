#!/usr/bin/env python3
"""compare's peak RSS against the largest single run of its systems (figures; exit 1 above 1.5x).

Reports figures and asserts nothing else: the exit status says when a compare exceeds the
bound below, so the figure is never missed.

On one generated LoCoMo file (`recallbench locomo generate`, seed 0; or the committed
fixtures, `--dataset fixtures`), each system's `run` and `compare` over the first 2, 4 and 7
of them (`--sets`), each a fresh process with a fresh build directory; the figure of each is
the peak of the summed RSS of its process tree (sampled every 50 ms, `common.measured`) and
its wall time. The claim it checks (issue 40): compare's peak at most 1.5x the largest
single `run` of its systems, whatever their number. By default the systems embed with no
learned model (BM25 twice, HotMem's hash embedder twice, the LanceDB example plugin three
times); `--systems` names others (comma-separated, in the order the sets take them).

JSON: build/bench_compare.json (with the machine and its load average); the table for
docs/performance.md on stdout.

    python benchmarks/bench_compare.py [--conversations 10] [--dataset fixtures]
        [--systems bm25,minilm,...] [--sets 2,4,7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
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


#: the committed fixtures (`--dataset fixtures`)
FIXTURES = ROOT / "benchmarks" / "retrieval"


def data_args(data: Path | None) -> list[str]:
    """The dataset options: the generated LoCoMo file, or the fixtures (None)."""
    if data is None:
        return [
            "--corpus",
            str(FIXTURES / "corpus.jsonl"),
            "--queries",
            str(FIXTURES / "queries.jsonl"),
        ]
    return ["--dataset", "locomo", "--data", str(data)]


def run_cmd(build: Path, data: Path | None, system: str) -> list[str]:
    return [RB, "--build-dir", str(build), "-q", "run", *data_args(data), "--system", system]


def compare_cmd(build: Path, data: Path | None, systems: Sequence[str]) -> list[str]:
    chosen = [arg for name in systems for arg in ("--system", name)]
    return [RB, "--build-dir", str(build), "-q", "compare", *data_args(data), *chosen]


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
    return "\n".join(lines) + f"\n\nOn {doc['data']}; single runs, peak RSS (MiB): {runs}."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations", type=int, default=10, help="of the generated LoCoMo file"
    )
    parser.add_argument("--dataset", choices=("locomo", "fixtures"), default="locomo")
    parser.add_argument(
        "--systems",
        type=lambda text: tuple(text.split(",")),
        default=LIGHT,
        help="comma-separated, in the order the sets take them [default: " + ",".join(LIGHT) + "]",
    )
    parser.add_argument(
        "--sets",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=SETS,
        help="how many of the systems each compare runs (the first N) [default: 2,4,7]",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_compare.json")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    if max(args.sets) > len(args.systems) or min(args.sets) < 2:
        parser.error(f"--sets: each between 2 and the {len(args.systems)} systems given")
    sets = [args.systems[:n] for n in args.sets]
    with tempfile.TemporaryDirectory(prefix="rb-bench-compare-") as tmp:
        root = Path(tmp)
        data = None
        what = "the committed fixtures (80 memories, 57 queries)"
        if args.dataset == "locomo":
            data = root / "locomo.json"
            generate = [RB, "locomo", "generate", "--conversations", str(args.conversations)]
            measured([*generate, "--out", str(data)])
            what = f"generated LoCoMo, {args.conversations} conversations, seed 0"
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
        "data": what,
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
