#!/usr/bin/env python3
"""The same results before and after a refactor: fixed runs with another revision's code
and with this working tree, compared byte for byte (issue 39's "no result, report or
baseline changes").

Cases: the fixture suite with hotmem and bm25; a generated LongMemEval file (12 questions)
with `--unit session` and `--unit turn`; a generated LoCoMo file (2 conversations) with
`--unit turn` (bm25) and sessions (hotmem). Each runs `recallbench run` in a fresh build
directory. Compared per case: every artifact's `data`, `inputs` and `fingerprint` (the
seven stages of `artifacts.STAGES`), and report.md with its clock and measured times masked
(the generated-at line, records/s, latencies, ms/s/bytes figures, harness overhead %: they
differ run to run). Two more cases run other commands: `recallbench protocols` on the LoCoMo
file (bm25; protocols.json and protocols.md, which hold no times) and `recallbench compare`
of bm25 and hotmem on the fixtures (compare.json with the cost table's measured times and
peak memory masked; its sample counts and store sizes kept). Only options the revisions
before the packages by layer (10ab234) have are given.

The other revision's `src/` is taken from git (`git archive REV src`) and put first on
PYTHONPATH for its runs (worker processes inherit it), in this environment. Both sides use
the same generated data files (this tree's generators). Prints one line per case and a
closing "N of N cases identical"; exit 1 when one differs (every differing file is named,
the first differing line printed). About 30 s. JSON: build/bench_same_results.json.

usage: python benchmarks/bench_same_results.py --against REV
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import orjson
from common import ROOT, machine

from recallbench.builddir.artifacts import STAGES

#: compare.json's cost figures measured anew by each run (times, rates, peak memory)
MEASURED_COSTS = (
    "ingest_records_per_second",
    "query_p50_ms",
    "query_p95_ms",
    "cold_start_ms",
    "peak_rss_mib",
    "wall_seconds",
)

#: the CLI's entry point, wherever the revision keeps it (recallbench.cli.main before issue 39)
LAUNCH = (
    "import sys\n"
    "try:\n"
    "    from recallbench.cli.main import console_main\n"
    "except ImportError:\n"
    "    from recallbench.cli import console_main  # before the packages by layer\n"
    "sys.argv[0] = 'recallbench'\n"
    "console_main()\n"
)


def cases(data: Path) -> dict[str, list[str]]:
    """name -> the command line after `recallbench --quiet --build-dir BUILD`."""
    lme, locomo = str(data / "lme.json"), str(data / "locomo.json")
    return {
        "fixtures-hotmem": ["run", "--system", "hotmem"],
        "fixtures-bm25": ["run", "--system", "bm25"],
        "longmemeval-session": [
            *("run", "--dataset", "longmemeval", "--data", lme, "--system", "bm25")
        ],
        "longmemeval-turn": [
            *("run", "--dataset", "longmemeval", "--data", lme, "--unit", "turn"),
            *("--system", "bm25"),
        ],
        "locomo-turn": [
            *("run", "--dataset", "locomo", "--data", locomo, "--unit", "turn", "--system", "bm25")
        ],
        "locomo-hotmem": ["run", "--dataset", "locomo", "--data", locomo, "--system", "hotmem"],
        "locomo-protocols": [
            *("protocols", "--dataset", "locomo", "--data", locomo, "--system", "bm25")
        ],
        "fixtures-compare": [
            *("compare", "--system", "bm25", "--system", "hotmem", "--resamples", "1000")
        ],
    }


def masked_report(text: str) -> str:
    """report.md without what differs run to run: the clock and measured times."""
    text = re.sub(r"^Generated .*$", "Generated T", text, flags=re.M)
    text = re.sub(r"^(\| harness overhead .*\| )[0-9.]+%", r"\1N%", text, flags=re.M)
    text = re.sub(r"[0-9][0-9,.]*( ?)(records/s|queries/s|ms|s|MB|MiB|KiB|GiB|B)\b", r"N\1\2", text)
    return re.sub(r"[0-9][0-9,.]*( ?/ ?N ms)", r"N\1", text)


def _text(doc: object) -> str:
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()


def run_outputs(build: Path) -> dict[str, str]:
    """What a run must reproduce: each artifact's data, inputs and fingerprint; report.md."""
    out = {}
    for stage in STAGES:
        env = orjson.loads((build / stage.file).read_bytes())
        kept = {"data": env["data"], "inputs": env.get("inputs"), "fingerprint": env["fingerprint"]}
        out[stage.file] = _text(kept)
    out["report.md"] = masked_report((build / "report.md").read_text(encoding="utf-8"))
    return out


def protocols_outputs(build: Path) -> dict[str, str]:
    """What `protocols` must reproduce: protocols.json and protocols.md (no times in either)."""
    return {
        "protocols.json": _text(orjson.loads((build / "protocols.json").read_bytes())),
        "protocols.md": (build / "protocols.md").read_text(encoding="utf-8"),
    }


def compare_outputs(build: Path) -> dict[str, str]:
    """What `compare` must reproduce: compare.json with each system's measured costs masked
    (a figure measured stays distinguishable from one not measured, None)."""
    doc = orjson.loads((build / "compare.json").read_bytes())
    for figures in (doc.get("cost") or {}).get("systems", {}).values():
        for name in MEASURED_COSTS:
            if figures.get(name) is not None:
                figures[name] = "measured"
    return {"compare.json": _text(doc)}


OUTPUTS = {"run": run_outputs, "protocols": protocols_outputs, "compare": compare_outputs}


def run(args: list[str], build: Path, src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", LAUNCH, "--quiet", "--build-dir", str(build), *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        side = "the other revision" if src else "this tree"
        sys.exit(f"{side}: {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return OUTPUTS[args[0]](build)


def first_difference(name: str, before: str, after: str) -> str:
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++")):
            return f"{name}: {line[:160]}"
    return name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the revision to compare with")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recallbench-same-") as tmp:
        work = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", options.against, "src"],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(work / "rev", filter="data")
        data = work / "data"
        data.mkdir()
        rb = [sys.executable, "-c", LAUNCH]
        subprocess.run(
            [*rb, "longmemeval", "generate", "--shape", "s", "--questions", "12", "--seed", "7"]
            + ["--sessions-per-question", "12", "--session-chars", "400"]
            + ["--out", str(data / "lme.json")],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [*rb, "locomo", "generate", "--conversations", "2", "--seed", "3"]
            + ["--out", str(data / "locomo.json")],
            check=True,
            capture_output=True,
        )
        report: dict[str, str] = {}
        for name, args in cases(data).items():
            before = run(args, work / f"before-{name}", work / "rev" / "src")
            after = run(args, work / f"after-{name}", None)
            differing = [f for f in before if before[f] != after[f]]
            verdict = "identical"
            if differing:
                first = first_difference(differing[0], before[differing[0]], after[differing[0]])
                verdict = f"DIFFERS in {', '.join(differing)}; first: {first}"
            report[name] = verdict
            print(f"{name:22s} {verdict}", flush=True)
    same = sum(v == "identical" for v in report.values())
    print(
        f"{same} of {len(report)} cases identical ({len(STAGES)} artifacts' data, inputs and"
        " fingerprint, report.md, times masked; protocols.json and .md; compare.json, measured"
        f" costs masked) between {options.against} and the working tree"
    )
    out = ROOT / "build" / "bench_same_results.json"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(
        orjson.dumps(
            {"against": options.against, "cases": report, "machine": machine()},
            option=orjson.OPT_INDENT_2,
        )
    )
    return 0 if same == len(report) else 1


if __name__ == "__main__":
    sys.exit(main())
