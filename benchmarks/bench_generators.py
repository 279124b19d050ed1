#!/usr/bin/env python3
"""Cost of the synthetic-data generators: reports figures, asserts nothing.

Each dataset's generator (its spec's `generator` module, `generate(...)`) writes the file the
tests use, in this process, --runs times after one warm-up; the figure is the median wall
time of one call, in seconds, over those runs (min and max beside it), with the bytes
written. The LoCoMo call is the one tests/dataset/locomo/test_locomo.py makes (2 conversations, seed 7),
which a test once required to take under 1 s; that bound is now this figure.
JSON: build/bench_generators.json (with the machine and its load average).

    python benchmarks/bench_generators.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, machine, write_json  # noqa: E402

from recallbench.datasets.locomo.generator import generate as locomo  # noqa: E402
from recallbench.datasets.longmemeval.generator import generate as longmemeval  # noqa: E402

#: (name, what one call writes, the call)
CASES: tuple[tuple[str, str, Callable[[Path], dict[str, Any]]], ...] = (
    ("locomo", "2 conversations, seed 7", lambda out: locomo(out, conversations=2, seed=7)),
    (
        "longmemeval",
        "shape s, 20 questions, seed 1",
        lambda out: longmemeval(out, shape="s", questions=20, seed=1),
    ),
)


def measure(call: Callable[[Path], dict[str, Any]], runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rb-bench-gen-") as tmp:
        call(Path(tmp) / "warm.json")
        walls = []
        for i in range(runs):
            start = time.perf_counter()
            meta = call(Path(tmp) / f"{i}.json")
            walls.append(time.perf_counter() - start)
    return {
        "runs": runs,
        "median_seconds": statistics.median(walls),
        "min_seconds": min(walls),
        "max_seconds": max(walls),
        "size_bytes": meta["size_bytes"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed calls per generator (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_generators.json")
    args = parser.parse_args()
    results = {}
    for name, what, call in CASES:
        results[name] = {"call": what, **measure(call, args.runs)}
        r = results[name]
        print(
            f"{name} generate ({what}): median {r['median_seconds']:.3f} s wall per call over "
            f"{r['runs']} calls (min {r['min_seconds']:.3f} s, max {r['max_seconds']:.3f} s), "
            f"{r['size_bytes']:,} bytes written"
        )
    doc = {
        "label": "local diagnostic: wall time on this machine, not a result",
        "metric": "wall seconds per generate() call, median over runs",
        "machine": machine(),
        "generators": results,
    }
    write_json(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
