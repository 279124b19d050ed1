"""What the benchmarks share: where they write, the caches their measured processes keep,
how a process is measured and how the machine is stated."""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
RB = str(Path(sys.executable).parent / "recallbench")


#: where the measured processes cache compiled bytecode (see `bytecode_cache`)
PYCACHE = ROOT / "build" / "pycache"


def bytecode_cache(enabled: bool = True) -> None:
    """Let the processes this benchmark starts cache compiled bytecode, in build/pycache,
    as an installed package does. Some environments set PYTHONDONTWRITEBYTECODE; then every
    process compiles recallbench's modules from source again (about 50-100 ms a process),
    which is not what a user's run costs. `enabled=False` keeps the environment as it is."""
    if enabled:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)


#: where the measured processes keep matplotlib's font list (see `font_cache`)
MPLCONFIG = ROOT / "build" / "mplconfig"


def font_cache(enabled: bool = True) -> None:
    """Let the processes this benchmark starts keep matplotlib's font list in
    build/mplconfig, as a build directory keeps it in .cache/matplotlib after its first
    report. The benchmarks give every run a fresh build directory, where each command that
    draws would otherwise build the list again (about 0.2 s): a user's first run in a new
    build directory, not their usual one. `enabled=False` measures that first run."""
    if enabled:
        os.environ["MPLCONFIGDIR"] = str(MPLCONFIG)
    else:
        os.environ.pop("MPLCONFIGDIR", None)


def machine() -> dict[str, Any]:
    """The machine as a benchmark should state it: CPUs, memory, Python, load average, and
    whether the measured processes cache bytecode."""
    load1, load5, _ = os.getloadavg()
    return {
        "cpus": psutil.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": sys.version.split()[0],
        "load1": load1,
        "load5": load5,
        "bytecode_cached": not os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "font_list_cached": bool(os.environ.get("MPLCONFIGDIR")),
    }


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="leave PYTHONDONTWRITEBYTECODE as the environment sets it (every process then "
        "compiles recallbench's modules again); by default bytecode is cached in build/pycache",
    )
    parser.add_argument(
        "--no-font-cache",
        action="store_true",
        help="let every command that draws build matplotlib's font list again, as in a new "
        "build directory; by default the list is kept in build/mplconfig",
    )


def warm_caches(args: argparse.Namespace) -> None:
    """The caches a user's repeated run has, unless the options turn them off."""
    bytecode_cache(not args.no_bytecode_cache)
    font_cache(not args.no_font_cache)


def measured(
    cmd: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """Run `cmd`; its wall seconds, CPU seconds and the peak summed RSS of its process tree.

    A failing command stops the benchmark, unless `check` is false: then the figures carry
    its last line of stderr as "error". CPU seconds are the process's and its waited-for
    descendants' user + system time (`RUSAGE_CHILDREN`); processes it did not wait for (Ray's
    workers) are not counted.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parent = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            rss = 0
            for p in [parent, *parent.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            peak = max(peak, rss)
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    out, err = proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    error = None
    if proc.returncode != 0:
        error = f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode().strip()}"
        if check:
            raise SystemExit(error)
        error = (err.decode().strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "error": error,
        "wall_s": elapsed,
        "cpu_s": cpu,
        "peak_rss_mb": peak / 2**20,
        "stdout": out.decode(errors="replace")[-2000:],
        "stderr": err.decode(errors="replace")[-2000:],
    }


def longmemeval_generate(
    out: Path, shape: str, questions: int, session_chars: int | None = None
) -> list[str]:
    """The command that writes a generated LongMemEval file `out` (`recallbench longmemeval
    generate`, seed 1; `--session-chars` when given, else the generator's default)."""
    chars = [] if session_chars is None else ["--session-chars", str(session_chars)]
    cmd = [RB, "longmemeval", "generate", "--shape", shape, "--questions", str(questions)]
    return [*cmd, "--seed", "1", "--out", str(out), *chars]


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
