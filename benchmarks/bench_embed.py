"""The cost of the learned-embedding lane on this machine: `prep` (texts/s and tokens/s) at
1 and 2 local workers and on Ray, with and without sorting by length, and `compare` over
minilm + hybrid-rrf + hotmem-minilm with the shared cache against three separate runs
(each making its own cache: what compare cost before the cache was shared).

Data: a generated LongMemEval S-shaped file (session unit) and a generated LoCoMo file at
turn unit. Figures are local diagnostics (wall seconds of whole processes, medians of
`--repeat` runs), ratios against a reference measured in the same run; written to
build/bench_embed.json.

    python benchmarks/bench_embed.py [--questions 10] [--conversations 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import orjson
from common import RB, ROOT, add_cache_options, machine, measured, warm_caches, write_json

LEARNED = ("minilm", "hybrid-rrf", "hotmem-minilm")


def prep_figures(build: Path, cache: Path, extra: list[str], repeat: int) -> dict[str, Any]:
    """Median wall seconds of `prep` and its texts/s and tokens/s (from the manifest)."""
    walls = []
    manifest: dict[str, Any] = {}
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        fig = measured(
            [
                RB,
                "--build-dir",
                str(build),
                "-q",
                "prep",
                "--cache",
                str(cache),
                "--system",
                "minilm",
                *extra,
            ]
        )
        walls.append(fig["wall_s"])
        manifest = orjson.loads((cache / "manifest.json").read_bytes())
    wall = statistics.median(walls)
    tokens = manifest["truncation"]  # stored texts only; the texts/s below count every text
    return {
        "wall_s": wall,
        "texts": manifest["texts"]["distinct"],
        "texts_per_s": manifest["texts"]["distinct"] / wall,
        "stored_tokens": tokens["tokens_total"] if tokens else None,
        "batching": manifest["batching"]["order"],
    }


def lane(label: str, validate: list[str], work: Path, repeat: int, ray: bool) -> dict[str, Any]:
    build = work / f"{label}-build"
    measured([RB, "--build-dir", str(build), "-q", "validate", *validate])
    out: dict[str, Any] = {"prep": {}}
    variants = {
        "1 local worker": ["--workers", "1"],
        "2 local workers": ["--workers", "2"],
        "2 local workers, no length sort": ["--workers", "2", "--no-length-sort"],
    }
    if ray:
        variants["ray, 2 workers"] = ["--executor", "ray", "--workers", "2"]
    for name, extra in variants.items():
        out["prep"][name] = prep_figures(build, work / f"{label}-cache", extra, repeat)
        print(
            f"{label} prep {name}: {out['prep'][name]['wall_s']:.1f} s, {out['prep'][name]['texts_per_s']:.1f} texts/s"
        )
    reference = out["prep"]["1 local worker"]["wall_s"]
    for fig in out["prep"].values():
        fig["x_of_1_worker"] = fig["wall_s"] / reference
    separate = 0.0
    for system in LEARNED:  # before: every system embeds every text for itself
        run_build = work / f"{label}-sep-{system}"
        separate += measured(
            [
                RB,
                "--build-dir",
                str(run_build),
                "-q",
                "run",
                *validate,
                "--system",
                system,
                "--workers",
                "2",
            ]
        )["wall_s"]
        shutil.rmtree(run_build, ignore_errors=True)
    systems = [a for s in LEARNED for a in ("--system", s)]
    cmp_build = work / f"{label}-compare"
    shared = measured(
        [RB, "--build-dir", str(cmp_build), "-q", "compare", *validate, *systems, "--workers", "2"]
    )["wall_s"]
    timing = orjson.loads((cmp_build / "timings" / "compare.json").read_bytes())
    out["compare"] = {
        "three separate runs (each embeds every text), wall_s": separate,
        "compare with the shared cache, wall_s": shared,
        "shared / separate": shared / separate,
        "texts embedded per system": [s["texts_embedded"] for s in timing["systems"]],
    }
    print(
        f"{label} compare: separate {separate:.1f} s, shared {shared:.1f} s ({shared / separate:.2f}x)"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--questions",
        type=int,
        default=10,
        help="LongMemEval S-shaped questions (50 sessions each)",
    )
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo conversations")
    parser.add_argument("--repeat", type=int, default=1, help="runs per prep figure (median)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray figures")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    results: dict[str, Any] = {"machine": machine(), "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="bench-embed-", dir=ROOT / "build") as tmp:
        work = Path(tmp)
        s_file, l_file = work / "s.json", work / "locomo.json"
        measured(
            [
                RB,
                "longmemeval",
                "generate",
                "--shape",
                "s",
                "--questions",
                str(args.questions),
                "--seed",
                "1",
                "--session-chars",
                "1000",
                "--out",
                str(s_file),
            ]
        )
        measured(
            [
                RB,
                "locomo",
                "generate",
                "--conversations",
                str(args.conversations),
                "--out",
                str(l_file),
            ]
        )
        results["LongMemEval S-shaped, session unit"] = lane(
            "s",
            ["--dataset", "longmemeval", "--data", str(s_file)],
            work,
            args.repeat,
            not args.no_ray,
        )
        results["LoCoMo, turn unit"] = lane(
            "locomo",
            ["--dataset", "locomo", "--data", str(l_file), "--unit", "turn"],
            work,
            args.repeat,
            not args.no_ray,
        )
    write_json(ROOT / "build" / "bench_embed.json", results)
    print(f"wrote {ROOT / 'build' / 'bench_embed.json'}")


if __name__ == "__main__":
    main()
