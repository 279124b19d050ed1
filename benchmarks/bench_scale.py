#!/usr/bin/env python3
"""Cost at scale on generated LongMemEval files: reports figures, asserts nothing.

Cells: a generated S- or M-shaped file (`recallbench longmemeval generate --shape s|m
--questions N --seed 1`, never the real data) x system x top-k, the paper's protocol
otherwise (`--gold official`, cutoffs 1, 3, 5, 10, 30, 50 up to the top-k). Per cell:

* every stage as its own `recallbench` process, as a user runs them (validate, prep for a
  system that needs a vector cache, hydrate, query, snapshot-roundtrip, score, report,
  decide): wall seconds and the peak RSS of its process tree (`common.measured`: every
  process's RSS summed, sampled every 50 ms);
* `recallbench run` (all stages in one process) on the same file: wall seconds and peak RSS,
  the figure "memory of a run";
* report.html's bytes and, when the report writes its texts into data files beside the page
  (a `report-data/` directory), their count and total bytes;
* time to first paint of report.html opened from file:// in headless Chromium (the
  `first-contentful-paint` entry of the page's paint timing, milliseconds from navigation
  start; median of `--paint-repeat` loads), and the page's load event;
* once per file: the official protocol's oracle (tests/dataset/longmemeval's reference,
  written from LongMemEval's run_retrieval.py rules: `json.load` of the file, then
  rank_bm25's BM25Okapi and the official metrics per question, at session unit) as its own
  process: its own seconds (reading and ranking; its process's wall time and peak RSS too)
  and our bm25-okapi `run`'s wall time (the whole process) as a ratio of them.

The machine's load average is recorded before and after each cell: other work on the
machine inflates wall times. JSON: build/bench_scale.json; a Markdown table on stdout.

    python benchmarks/bench_scale.py [--cells s:50,s:500,m:50] [--top-k 10,50]
        [--systems bm25-okapi,minilm] [--dense-cells s:50] [--no-browser] ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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

#: the official protocol's cutoffs (`--preset longmemeval-paper`), those up to the top-k used
PAPER_KS = (1, 3, 5, 10, 30, 50)
#: the oracle: the reference of the paper-reproduction test, imported, never copied
ORACLE_MODULE = ROOT / "tests" / "dataset" / "longmemeval" / "test_longmemeval_paper.py"
#: where a report keeps the texts it loads on demand (beside report.html), when it does
DATA_DIR = "report-data"
STAGES = ("validate", "prep", "hydrate", "query", "snapshot-roundtrip", "score", "report", "decide")


def parse_cells(text: str) -> list[tuple[str, int]]:
    """'s:50,m:500' -> [('s', 50), ('m', 500)]."""
    cells = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        shape, _, n = part.partition(":")
        if shape not in ("s", "m") or not n.isdigit() or int(n) < 1:
            raise SystemExit(f"--cells: {part!r} is not SHAPE:QUESTIONS (s:50, m:500)")
        cells.append((shape, int(n)))
    return cells


def cell_name(shape: str, questions: int) -> str:
    return f"{shape.upper()}{questions}"


def figures(fig: dict[str, Any]) -> dict[str, Any]:
    return {k: fig[k] for k in ("wall_s", "cpu_s", "peak_rss_mb", "error") if k in fig}


def data_files(build: Path) -> dict[str, Any]:
    """report.html's bytes and the data files beside it (none: count 0)."""
    html = build / "report.html"
    folder = build / DATA_DIR
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return {
        "report_html_bytes": html.stat().st_size if html.exists() else None,
        "data_files": len(files),
        "data_files_bytes": sum(p.stat().st_size for p in files),
    }


def first_paint(html: Path, repeat: int) -> dict[str, Any]:
    """Median first-contentful-paint and load-event times (ms) of `html` in headless
    Chromium, each load in a fresh browser profile (tests/browser.py's driver)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import browser  # tests/browser.py

    why = browser.missing()
    if why:
        return {"error": why}
    paints, loads = [], []
    for _ in range(repeat):
        with browser.chromium() as driver:
            driver.set_page_load_timeout(300)
            browser.open_page(driver, html.resolve().as_uri())
            paint = driver.execute_script(
                "const e = performance.getEntriesByName('first-contentful-paint');"
                "return e.length ? e[0].startTime : null;"
            )
            load = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return n ? n.loadEventEnd : null;"
            )
        if paint is not None:
            paints.append(paint)
        if load is not None:
            loads.append(load)
    return {
        "loads": repeat,
        "first_contentful_paint_ms": statistics.median(paints) if paints else None,
        "load_event_ms": statistics.median(loads) if loads else None,
    }


def oracle_main(data: Path) -> None:
    """The official protocol's oracle over every question of `data` (this process)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("longmemeval_paper_oracle", ORACLE_MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    started = time.perf_counter()
    with open(data, encoding="utf-8") as handle:
        records = json.load(handle)  # as run_retrieval.py reads it: the whole file
    loaded = time.perf_counter()
    for record in records:
        module.reference(record, "session")
    done = time.perf_counter()
    print(
        json.dumps({"questions": len(records), "load_s": loaded - started, "rank_s": done - loaded})
    )


def oracle(data: Path) -> dict[str, Any]:
    """The oracle's process: its wall time and peak RSS, and its own seconds (reading the
    file and ranking: what the official code does, without the imports of the test module
    it lives in) as `oracle_s`."""
    fig = measured([sys.executable, __file__, "--oracle", str(data)])
    own = orjson.loads(fig["stdout"].strip().splitlines()[-1])
    return {**figures(fig), **own, "oracle_s": own["load_s"] + own["rank_s"]}


def cell(
    data: Path,
    work: Path,
    system: str,
    top_k: int,
    *,
    browser_loads: int,
) -> dict[str, Any]:
    """Every stage as its own process, then `run`, on one file with one system and top-k."""
    ks = ",".join(str(k) for k in PAPER_KS if k <= top_k)
    label = f"{data.stem}-{system}-k{top_k}"
    build, whole = work / f"stages-{label}", work / f"run-{label}"
    for d in (build, whole):
        shutil.rmtree(d, ignore_errors=True)
    cache = work / f"cache-{data.stem}-{system}"
    needs_cache = system in dense_systems()
    source = ["--dataset", "longmemeval", "--data", str(data), "--gold", "official"]
    with_cache = ["--cache", str(cache)] if needs_cache else []
    steps = {
        "validate": ["validate", *source],
        "prep": ["prep", "--cache", str(cache), "--system", system] if needs_cache else None,
        "hydrate": ["hydrate", "--system", system, *with_cache],
        "query": ["query", "--top-k", str(top_k), "--k", ks, *with_cache],
        "snapshot-roundtrip": ["snapshot-roundtrip", *with_cache],
        "score": ["score"],
        "report": ["report"],
        "decide": ["decide"],
    }
    out: dict[str, Any] = {"system": system, "top_k": top_k, "machine_before": machine()}
    stages: dict[str, Any] = {}
    for name in STAGES:
        if steps[name] is None:
            continue
        if name == "prep" and cache.exists():  # one cache per file and system
            stages[name] = {"reused": True}
            continue
        say(f"{label}: {name}")
        stages[name] = figures(measured([RB, "--build-dir", str(build), "-q", *steps[name]]))
    out["stages"] = stages
    out["report"] = data_files(build)
    suite = orjson.loads((build / "suite.json").read_bytes())["data"]["counts"]
    out["counts"] = {k: suite[k] for k in ("scopes", "memories", "queries")}
    say(f"{label}: run")
    run = [RB, "--build-dir", str(whole), "-q", "run", *source, "--system", system]
    out["run"] = figures(measured([*run, "--top-k", str(top_k), "--k", ks, *with_cache]))
    out["run_runs_identical_to_stages"] = (whole / "runs.json").read_bytes() == (
        build / "runs.json"
    ).read_bytes()
    if browser_loads:
        say(f"{label}: first paint")
        out["paint"] = first_paint(build / "report.html", browser_loads)
    out["machine_after"] = machine()
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(whole, ignore_errors=True)
    return out


def dense_systems() -> set[str]:
    """The systems whose vectors must come from `prep`'s cache."""
    from recallbench.core.embedding import needs_cache
    from recallbench.systems import get_system

    return {
        name for name in ("minilm", "hotmem-minilm", "hybrid-rrf") if needs_cache(get_system(name))
    }


def add_cpu_ratio(result: dict[str, Any], oracle: dict[str, Any]) -> None:
    """Our run's CPU seconds over the oracle's (both whole processes, imports included):
    on a loaded machine a steadier ratio than the wall times'."""
    result["oracle_cpu_s"] = oracle["cpu_s"]
    result["run_cpu_over_oracle_cpu"] = result["run"]["cpu_s"] / oracle["cpu_s"]


def say(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def _mb(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(doc: dict[str, Any]) -> str:
    """The Markdown tables of a benchmark document: one row per cell."""
    lines = [
        "| file | questions | system | top-k | run s | run CPU s | run peak RSS MB "
        "| report.html MB | data files (MB) | first paint ms | oracle s (CPU s) "
        "| run / oracle, wall (CPU) | load avg |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in doc["cells"]:
        rep, paint = c["report"], c.get("paint") or {}
        html = rep["report_html_bytes"]
        data = (
            f"{rep['data_files']} ({rep['data_files_bytes'] / 1e6:.1f})"
            if rep["data_files"]
            else "-"
        )
        ratio, cpu_ratio = c.get("run_over_oracle"), c.get("run_cpu_over_oracle_cpu")
        oracle = (
            "-" if c.get("oracle_s") is None else f"{c['oracle_s']:.1f} ({c['oracle_cpu_s']:.1f})"
        )
        ratios = "-" if ratio is None else f"{ratio:.2f}x ({cpu_ratio:.2f}x)"
        lines.append(
            f"| {c['file']} | {c['counts']['queries']} | {c['system']} | {c['top_k']} "
            f"| {_s(c['run']['wall_s'])} | {_s(c['run'].get('cpu_s'))} "
            f"| {_mb(c['run']['peak_rss_mb'])} "
            f"| {'-' if html is None else f'{html / 1e6:.1f}'} | {data} "
            f"| {_mb(paint.get('first_contentful_paint_ms'))} | {oracle} | {ratios} "
            f"| {c['machine_before']['load1']:.1f} |"
        )
    names = [s for s in STAGES if any(s in c["stages"] for c in doc["cells"])]
    lines += [
        "",
        "Per stage, wall s (CPU s) / peak RSS MB (each stage its own process):",
        "",
        "| file | system | top-k | " + " | ".join(names) + " |",
        "|---|---|---:|" + "---:|" * len(names),
    ]
    for c in doc["cells"]:
        row = []
        for name in names:
            x = c["stages"].get(name)
            if x is None:
                row.append("-")
            elif x.get("reused"):
                row.append("(cached)")
            else:
                row.append(f"{_s(x['wall_s'])} ({_s(x.get('cpu_s'))}) / {_mb(x['peak_rss_mb'])}")
        lines.append(f"| {c['file']} | {c['system']} | {c['top_k']} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="s:50,s:500,m:50", help="SHAPE:QUESTIONS,...")
    parser.add_argument("--top-k", default="10,50", help="top-k values, comma-separated")
    parser.add_argument("--systems", default="bm25-okapi,minilm")
    parser.add_argument(
        "--dense-cells",
        default="s:50",
        help="the files a system that needs prep's vector cache (minilm) runs on: it embeds "
        "every text, minutes per 10,000 on 2 cores ('all': every cell)",
    )
    parser.add_argument("--session-chars", type=int, default=None, help="generator default")
    parser.add_argument("--paint-repeat", type=int, default=3, help="browser loads per cell")
    parser.add_argument("--no-browser", action="store_true", help="skip the first paint")
    parser.add_argument("--no-oracle", action="store_true", help="skip the official oracle")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-scale")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_scale.json")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--oracle", type=Path, help=argparse.SUPPRESS)  # the oracle's process
    parser.add_argument(
        "--table", type=Path, help="print the tables of a JSON this script wrote, and exit"
    )
    add_cache_options(parser)
    args = parser.parse_args()
    if args.oracle:
        oracle_main(args.oracle)
        return
    if args.table:
        doc = orjson.loads(args.table.read_bytes())
        for c in doc["cells"]:
            if c.get("oracle_s") is not None and "oracle_cpu_s" not in c:
                add_cpu_ratio(c, doc["files"][c["file"]]["oracle"])
        print(table(doc))
        return
    warm_caches(args)
    cells = parse_cells(args.cells)
    top_ks = [int(k) for k in args.top_k.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    dense = dense_systems()
    dense_cells = cells if args.dense_cells == "all" else parse_cells(args.dense_cells)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "label": "local diagnostic on generated data (not LongMemEval); not asserted",
        "machine": machine(),
        "settings": {
            "cells": args.cells,
            "top_k": top_ks,
            "systems": systems,
            "dense_cells": args.dense_cells,
            "session_chars": args.session_chars,
            "paint_repeat": 0 if args.no_browser else args.paint_repeat,
            "ks": list(PAPER_KS),
        },
        "units": {
            "wall_s": "seconds of wall time, one process",
            "peak_rss_mb": "MiB, peak of the summed RSS of the process tree (sampled every 50 ms)",
            "report_html_bytes": "bytes of report.html",
            "data_files_bytes": f"bytes of every file under {DATA_DIR}/ beside report.html",
            "first_contentful_paint_ms": "ms from navigation start, median of the loads",
            "oracle_s": "seconds the oracle spends reading the file and ranking every question",
            "run_over_oracle": "our bm25-okapi run's wall s (the whole process) / oracle_s",
            "run_cpu_over_oracle_cpu": "our run's CPU s / the oracle process's CPU s "
            "(user + system, both whole processes, imports included)",
        },
        "files": {},
        "cells": [],
    }
    for shape, questions in cells:
        name = cell_name(shape, questions)
        data = work / f"{name}.json"
        say(f"generate {name}")
        fig = measured(longmemeval_generate(data, shape, questions, args.session_chars or None))
        info: dict[str, Any] = {"bytes": data.stat().st_size, "generate_s": fig["wall_s"]}
        if not args.no_oracle:
            say(f"{name}: oracle")
            info["oracle"] = oracle(data)
        doc["files"][name] = info
        for system in systems:
            if system in dense and (shape, questions) not in dense_cells:
                continue
            for top_k in top_ks:
                result = {
                    "file": name,
                    **cell(
                        data,
                        work,
                        system,
                        top_k,
                        browser_loads=0 if args.no_browser else args.paint_repeat,
                    ),
                }
                if system == "bm25-okapi" and "oracle" in info:
                    result["oracle_s"] = info["oracle"]["oracle_s"]
                    result["run_over_oracle"] = result["run"]["wall_s"] / result["oracle_s"]
                    add_cpu_ratio(result, info["oracle"])
                doc["cells"].append(result)
                write_json(args.json, doc)  # what is done so far survives an interruption
        for cache in work.glob(f"cache-{data.stem}-*"):
            shutil.rmtree(cache, ignore_errors=True)
        if not args.keep:
            data.unlink(missing_ok=True)
            Path(f"{data}.generated.json").unlink(missing_ok=True)
    doc["machine_after"] = machine()
    write_json(args.json, doc)
    m0, m1 = doc["machine"], doc["machine_after"]
    print(
        f"Scale on generated LongMemEval files; {m0['cpus']} CPUs, {m0['memory_gb']} GB, "
        f"load average {m0['load1']:.1f} before / {m1['load1']:.1f} after; local diagnostic, "
        "not asserted"
    )
    print(table(doc))
    print(f"\nJSON: {args.json}")
    if not args.keep and not any(work.iterdir()):
        work.rmdir()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
