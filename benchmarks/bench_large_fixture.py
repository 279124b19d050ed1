#!/usr/bin/env python3
"""A large single-scope fixture suite: `query` with 1 worker vs 2. Reports, asserts nothing.

Generates a synthetic fixture suite (corpus.jsonl + queries.jsonl in the format of
benchmarks/retrieval/README.md: unique memory ids and identifier+fact pairs, graded
relevance 0-3, at least five queries in each of the eight categories, duplicate groups of
two or more, empty relevance for no-answer queries) of --memories memories and --queries
queries into a temporary directory, then runs, each as its own `recallbench` process:

    validate --corpus C --queries Q  ->  hydrate  ->  query --workers 1  ->  query --workers 2
    [--roundtrip: snapshot-roundtrip --workers 1 and --workers 2]

and reports each step's wall time, CPU time and peak RSS (process tree), the query stage's
per-query time (so other sizes can be extrapolated: HotMem's search is a full scan, so a
query's cost grows with the memories and the stage's with the queries), the 2-worker /
1-worker ratio, and whether runs.json (and roundtrip.json) are byte-identical.

The default size (20,000 memories x 200 queries) keeps the per-query cost of the issue's
20,000 x 2,000 case and finishes in a few minutes on 2 cores; `--queries 2000` runs the
full case (about 11 minutes per query run with 1 worker). JSON: build/bench_large_fixture.json.

    python benchmarks/bench_large_fixture.py [--memories 20000] [--queries 200] [--roundtrip]
    python benchmarks/bench_large_fixture.py --generate-only DIR   # just write the suite
"""

from __future__ import annotations

import argparse
import filecmp
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ROOT,
    add_cache_options,
    machine,
    measured,
    warm_caches,
    write_json,
)

from recallbench.datasets.fixtures.reader import CATEGORIES  # noqa: E402

PROJECTS = ("acme", "borealis", "cinder", "delta", "ember", "falcon", "nimbus", "orchid")
AREAS = ("finance", "logistics", "engineering", "support", "people", "office")
VERBS = ("requires", "allows", "forbids", "records", "schedules", "reviews", "limits", "tracks")
#: every this-many memories, the next one is a near-duplicate (same words, new order)
DUPLICATE_EVERY = 50


def _words(rng: random.Random, count: int) -> list[str]:
    """`count` distinct pronounceable synthetic words (never real names)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        word = "".join(
            rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))
        )
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def generate_suite(out_dir: Path, memories: int, queries: int, seed: int = 1) -> dict[str, Any]:
    """Write corpus.jsonl and queries.jsonl into `out_dir`; return counts and paths."""
    if memories < 100:
        raise SystemExit("--memories must be at least 100")
    if queries < 5 * len(CATEGORIES):
        raise SystemExit(f"--queries must be at least {5 * len(CATEGORIES)} (5 per category)")
    rng = random.Random(seed)
    vocab = _words(rng, 6000)
    entities = _words(rng, memories)  # one entity name per memory: identifier lookups
    out_dir.mkdir(parents=True, exist_ok=True)
    facts: list[list[str]] = []
    rows: list[bytes] = []
    groups: dict[int, str] = {}
    for i in range(memories):
        project = PROJECTS[i % len(PROJECTS)]
        area = AREAS[(i // len(PROJECTS)) % len(AREAS)]
        if i % DUPLICATE_EVERY == 1 and i >= 1:  # a near-duplicate of memory i - 1
            words = facts[i - 1][:]
            words = words[1:] + words[:1]
            group = f"dup-{i - 1:06d}"
            groups[i - 1] = groups[i] = group
        else:
            words = [
                project.capitalize(),
                area,
                entities[i].capitalize(),
                rng.choice(VERBS),
                *rng.sample(vocab, rng.randint(8, 14)),
                f"rev{rng.randint(1, 9)}",
            ]
        facts.append(words)
    for i, words in enumerate(facts):
        project = PROJECTS[i % len(PROJECTS)]
        row = {
            "memory_id": f"mem-{i:06d}",
            "identifier": f"{project}-{AREAS[(i // len(PROJECTS)) % len(AREAS)]}",
            "fact": " ".join(words) + f" (item {i}).",
            "importance": 0.5,
            "tags": [project, "synthetic"],
        }
        if i in groups:
            row["duplicate_group"] = groups[i]
        rows.append(orjson.dumps(row))
    (out_dir / "corpus.jsonl").write_bytes(b"\n".join(rows) + b"\n")

    grouped = sorted(i for i in groups if groups[i] == f"dup-{i:06d}")  # first members
    qrows: list[bytes] = []
    for n in range(queries):
        category = CATEGORIES[n % len(CATEGORIES)]
        target = rng.randrange(memories)
        words = facts[target]
        mid = f"mem-{target:06d}"
        relevance: dict[str, int] = {mid: 3}
        if category == "exact_lexical":
            text = " ".join(words[4:9])
        elif category == "semantic_paraphrase":
            text = "what is known about " + " ".join(rng.sample(words[4:], 3))
        elif category == "identifier_or_entity_name":
            text = words[2]
        elif category == "temporal_or_revision":
            other = (target + len(PROJECTS)) % memories
            relevance[f"mem-{other:06d}"] = 1
            text = "current rule: " + " ".join(words[4:8])
        elif category == "near_duplicate_diversity":
            first = rng.choice(grouped)
            relevance = {f"mem-{first:06d}": 3, f"mem-{first + 1:06d}": 3}
            text = " ".join(facts[first][4:9])
        elif category == "negative_or_no_answer":
            relevance = {}
            text = f"quorble zint {n} flarp"
        elif category == "cross_project_isolation":
            other = target + 1 if target + 1 < memories else target - 1
            relevance[f"mem-{other:06d}"] = 0
            text = f"{words[0]} " + " ".join(words[4:8])
        else:  # snapshot_hydration_equivalence
            text = " ".join(words[2:7])
        qrows.append(
            orjson.dumps(
                {
                    "query_id": f"q-{category.split('_')[0]}-{n:06d}",
                    "category": category,
                    "query": text,
                    "relevance": relevance,
                    "notes": "synthetic, generated by benchmarks/bench_large_fixture.py",
                }
            )
        )
    (out_dir / "queries.jsonl").write_bytes(b"\n".join(qrows) + b"\n")
    return {
        "corpus": str(out_dir / "corpus.jsonl"),
        "queries": str(out_dir / "queries.jsonl"),
        "memories": memories,
        "queries_count": queries,
        "corpus_bytes": (out_dir / "corpus.jsonl").stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--roundtrip", action="store_true", help="also snapshot-roundtrip with 1 and 2 workers"
    )
    parser.add_argument("--generate-only", type=Path, metavar="DIR", help="write the suite, stop")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_large_fixture.json")
    add_cache_options(parser)
    args = parser.parse_args()
    warm_caches(args)
    if args.generate_only:
        print(
            orjson.dumps(generate_suite(args.generate_only, args.memories, args.queries)).decode()
        )
        return

    rb = [str(Path(sys.executable).parent / "recallbench")]
    results: dict[str, Any] = {"machine": machine(), "memories": args.memories}
    with tempfile.TemporaryDirectory(prefix="rb-large-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        suite = generate_suite(work / "suite", args.memories, args.queries, args.seed)
        results["generate_s"] = time.perf_counter() - start
        results["queries"] = args.queries
        results["corpus_bytes"] = suite["corpus_bytes"]
        build = work / "build"

        def step(name: str, *cmd: str, check: bool = True) -> dict[str, Any]:
            print(f"  {name} ...", file=sys.stderr, flush=True)
            fig = measured([*rb, "--build-dir", str(build), "-q", *cmd], check=check)
            fig.pop("stdout")
            results[name] = fig
            if fig["error"]:
                print(f"  {name} FAILED: {fig['error']}", file=sys.stderr, flush=True)
            return fig

        step("validate", "validate", "--corpus", suite["corpus"], "--queries", suite["queries"])
        step("hydrate", "hydrate")
        for workers in (1, 2):
            # a failure with 2 workers is a finding to report, not the end of the benchmark
            fig = step(f"query_w{workers}", "query", "--workers", str(workers), check=workers == 1)
            if fig["error"]:
                continue
            timing = orjson.loads((build / "timings" / "runs.json").read_bytes())
            fig["stage_wall_s"] = timing["wall_seconds"]
            fig["seconds_inside_system"] = timing["seconds_inside_system"]
            fig["latency_p50_ms"] = timing["latency"]["p50_ms"]
            fig["latency_p95_ms"] = timing["latency"]["p95_ms"]
            fig["ms_per_query_wall"] = 1000 * timing["wall_seconds"] / args.queries
            shutil.copy(build / "runs.json", work / f"runs_w{workers}.json")
        results["runs_identical"] = (work / "runs_w2.json").exists() and filecmp.cmp(
            work / "runs_w1.json", work / "runs_w2.json", False
        )
        if args.roundtrip:
            for workers in (1, 2):
                shutil.copy(work / "runs_w1.json", build / "runs.json")
                fig = step(
                    f"roundtrip_w{workers}",
                    "snapshot-roundtrip",
                    "--workers",
                    str(workers),
                    check=False,
                )
                if not fig["error"]:
                    shutil.copy(build / "roundtrip.json", work / f"roundtrip_w{workers}.json")
            results["roundtrip_identical"] = all(
                (work / f"roundtrip_w{w}.json").exists() for w in (1, 2)
            ) and filecmp.cmp(work / "roundtrip_w1.json", work / "roundtrip_w2.json", False)
    w1, w2 = results["query_w1"], results["query_w2"]
    per_query = w1["stage_wall_s"] / args.queries
    ok2 = not w2["error"]
    results["query_ratio_w2_over_w1"] = w2["wall_s"] / w1["wall_s"] if ok2 else None
    results["speedup_w2"] = w1["wall_s"] / w2["wall_s"] if ok2 else None
    results["extrapolated_2000_queries_w1_s"] = w1["wall_s"] - w1["stage_wall_s"] + per_query * 2000
    results["extrapolated_2000_queries_w2_s"] = (
        results["extrapolated_2000_queries_w1_s"] * results["query_ratio_w2_over_w1"]
        if ok2
        else None
    )
    results["machine_after"] = machine()
    write_json(args.json, results)

    print(
        f"\nlarge fixture suite: {args.memories:,} memories x {args.queries:,} queries, one scope "
        f"({results['machine']['cpus']} CPUs, load {results['machine']['load1']:.1f} before, "
        f"{results['machine_after']['load1']:.1f} after); local diagnostic, not asserted"
    )
    header = f"  {'step':<14} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'ms/query':>9}"
    print(header)
    steps = ["validate", "hydrate", "query_w1", "query_w2"]
    if args.roundtrip:
        steps += ["roundtrip_w1", "roundtrip_w2"]
    for name in steps:
        f = results[name]
        per = (
            f"{1000 * f['wall_s'] / args.queries:9.1f}"
            if name.startswith(("query", "round"))
            else ""
        )
        print(f"  {name:<14} {f['wall_s']:8.1f} {f['cpu_s']:8.1f} {f['peak_rss_mb']:8.0f} {per}")
        if f["error"]:
            print(f"  {'':<14} FAILED after {f['wall_s']:.1f} s: {f['error']}")
    if ok2:
        print(
            f"  query, 2 workers / 1 worker (wall): {results['query_ratio_w2_over_w1']:.2f} "
            f"(speed-up {results['speedup_w2']:.2f}x); runs.json identical: "
            f"{results['runs_identical']}"
        )
    if args.roundtrip and results["roundtrip_identical"]:
        rt = results["roundtrip_w2"]["wall_s"] / results["roundtrip_w1"]["wall_s"]
        print(
            f"  snapshot-roundtrip, 2 workers / 1 worker (wall): {rt:.2f}; roundtrip.json "
            f"identical: {results['roundtrip_identical']}"
        )
    print(
        f"  query stage per query, 1 worker: {1000 * per_query:.1f} ms (stage wall / queries; "
        f"search p50 {w1['latency_p50_ms']:.1f} ms)"
    )
    w2x = results["extrapolated_2000_queries_w2_s"]
    print(
        f"  extrapolated to 2,000 queries: {results['extrapolated_2000_queries_w1_s']:.0f} s with "
        f"1 worker" + (f", {w2x:.0f} s with 2 (same ratio)" if w2x else "")
    )
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
