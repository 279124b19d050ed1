#!/usr/bin/env python3
"""What the test suite costs: reports figures, asserts nothing.

Runs the two pytest passes of `make test` (the Makefile gives their command lines: the main
run and the portable rerun of the `embedding` tests), each with `--durations=0`, and prints
for each pass its wall time, its outcome line and the load average before and after, then
the 30 slowest tests and the 30 slowest files. A test's figure is its setup + call +
teardown seconds as pytest reports them (a module fixture's cost falls on the first test
that uses it); a file's is the sum over its tests, which is the time one worker spends in
it (the passes hand out whole files). Failed tests are listed by name; each pass's whole
output is kept beside the JSON (bench_tests-NAME.txt). With `--from FILE` it reads a saved
pytest output made with `--durations=0` instead of running anything. JSON:
build/bench_tests.json.

    python benchmarks/bench_tests.py --pass main "pytest -q -n 2 --dist loadfile" \\
        --pass portable "ATEN_CPU_CAPABILITY=default pytest -q -n 2 --dist loadfile -m embedding"
    python benchmarks/bench_tests.py --from /tmp/durations.txt
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, machine, write_json  # noqa: E402

#: one line of pytest's --durations report: "12.34s call     tests/x.py::test_y[a]"
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")
#: pytest's closing line: "=== 1285 passed, 22 skipped in 500.12s (0:08:20) ==="
OUTCOME = re.compile(r"^=*\s*(\d+ \w+.* in [\d.]+s.*?)\s*=*$")
TOP = 30


@dataclass
class Report:
    """One pytest pass: seconds per test (phases summed), its closing line, its wall time."""

    name: str
    tests: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    failed: list[str] = field(default_factory=list)
    outcome: str = ""
    wall_seconds: float | None = None
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None

    def files(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for test, seconds in self.tests.items():
            out[test.split("::", 1)[0]] += seconds
        return out


def parse(name: str, text: str) -> Report:
    """The durations and the closing line of a pytest output (-q or not, xdist or not)."""
    report = Report(name)
    for line in text.splitlines():
        line = line.strip()
        if match := DURATION.match(line):
            report.tests[match.group(3)] += float(match.group(1))
        elif line.startswith(("FAILED ", "ERROR ")):
            report.failed.append(line)
        elif (match := OUTCOME.match(line)) and (" passed" in line or " failed" in line):
            report.outcome = match.group(1)
    return report


def run_pass(name: str, command: str, keep: Path) -> Report:
    """Run one pass: leading VAR=value words set the environment, the rest is the command,
    given --durations=0; its whole output is written to `keep`."""
    words = shlex.split(command)
    env = dict(os.environ)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    words += ["--durations=0", "-p", "no:cacheprovider"]
    print(f"$ {command} --durations=0", flush=True)
    before = os.getloadavg()
    started = time.monotonic()
    done = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(done.stdout + done.stderr)
    report = parse(name, done.stdout + done.stderr)
    report.wall_seconds, report.load_before, report.load_after = wall, before, os.getloadavg()
    if not report.outcome:
        report.outcome = f"exit {done.returncode}, no closing line: {done.stdout[-300:]}"
    return report


def table(title: str, rows: dict[str, float], total: float) -> None:
    print(f"\n{title} (seconds; share of the pass's summed test time)")
    for key, seconds in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]:
        print(f"  {seconds:8.1f} s  {100 * seconds / total if total else 0:5.1f} %  {key}")


def show(report: Report) -> dict:
    total = sum(report.tests.values())
    print(f"\n== {report.name}: {report.outcome}")
    if report.wall_seconds is not None:
        print(
            f"wall {report.wall_seconds:.0f} s; load average (1, 5, 15 min) "
            f"{' '.join(f'{x:.2f}' for x in report.load_before or ())} before, "
            f"{' '.join(f'{x:.2f}' for x in report.load_after or ())} after"
        )
    print(
        f"{len(report.tests)} tests timed, {total:.0f} s summed over them "
        f"(both workers together; wall is about half on 2 workers)"
    )
    for line in report.failed:
        print(f"  {line}")
    table(f"the {TOP} slowest tests", report.tests, total)
    table(f"the {TOP} slowest files", report.files(), total)
    return {
        "name": report.name,
        "outcome": report.outcome,
        "failed": report.failed,
        "wall_seconds": report.wall_seconds,
        "load_before": report.load_before,
        "load_after": report.load_after,
        "summed_test_seconds": total,
        "tests": dict(sorted(report.tests.items(), key=lambda kv: -kv[1])),
        "files": dict(sorted(report.files().items(), key=lambda kv: -kv[1])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pass",
        dest="passes",
        nargs=2,
        action="append",
        metavar=("NAME", "COMMAND"),
        help="a pytest pass to run and time (repeatable)",
    )
    parser.add_argument(
        "--from", dest="saved", type=Path, action="append", help="a saved --durations=0 output"
    )
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench_tests.json")
    args = parser.parse_args()
    if not args.passes and not args.saved:
        parser.error("give --pass NAME COMMAND or --from FILE")
    reports = [parse(str(path), path.read_text(errors="replace")) for path in args.saved or []]
    reports += [
        run_pass(name, command, args.json.with_name(f"{args.json.stem}-{name}.txt"))
        for name, command in args.passes or []
    ]
    shown = [show(report) for report in reports]
    walls = [r.wall_seconds for r in reports if r.wall_seconds is not None]
    if walls:
        print(f"\ntotal wall over the passes: {sum(walls):.0f} s ({sum(walls) / 60:.1f} min)")
    write_json(args.json, {"machine": machine(), "passes": shown, "total_wall_seconds": sum(walls)})


if __name__ == "__main__":
    main()
