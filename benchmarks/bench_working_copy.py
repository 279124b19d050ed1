#!/usr/bin/env python3
"""A contributor's working copy of HotMem under `make eval`, in a scratch venv (issue 41).

Checks (each printed PASS or FAIL; exit 1 when one fails) and the seconds of each step:

1. HotMem's sdist (the version pyproject.toml pins; pip's cache or the package index) is
   unpacked into a temp dir and made a git checkout: a commit "start 0.2.7.dev0" that bumps
   the version, then W_COSINE 0.4 and W_FTS 0.4 in src/hotmem/search.py, uncommitted.
2. A copy of this project (the files git lists, or `--rev REV`'s tree) goes beside it and
   `make eval` runs in it with VENV and BUILD in the temp dir:
   - `store`: `make eval STORE=../hotmem-wc`; then `touch pyproject.toml && make eval`;
   - `manual` (the issue's path): `pip install --no-deps -e ../hotmem-wc`, `make eval`;
     then `touch pyproject.toml && make eval`.
   After the second `make eval` the working copy must still be the installed HotMem, the
   output must say so, check-baseline must report the weight change (exit 3, so make fails)
   and name BUILD/baseline-diff.md, and report.md must name the checkout's path, revision
   and local changes (`editable ../hotmem-wc @ 1a2b3c4 + local changes`).
3. `make eval STORE=index` returns to the pinned release: "result matches" the committed
   baseline, which the source record never enters.

The scratch venv sees this environment's packages through a .pth file (`--fresh`: a venv
of its own, `pip install -e .` from scratch: minutes and about 370 MB), so pip installs only
the project and the two HotMems there, and never touches this environment. On the code
before issue 41 (`--rev 0dbb717 --paths manual`), the second `make eval` reinstalls HotMem
0.2.6 over the working copy and reports "result matches": the check fails.
JSON: build/bench_working_copy.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = "scoring weights: cosine 0.6 -> 0.4, fts bm25 0.2 -> 0.4"
DEV = "0.2.7.dev0"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "contributor",
    "GIT_AUTHOR_EMAIL": "contributor@example.invalid",
    "GIT_COMMITTER_NAME": "contributor",
    "GIT_COMMITTER_EMAIL": "contributor@example.invalid",
}


def run(command: list[str], cwd: Path, **env: str) -> tuple[int, str, float]:
    """Run `command`; (exit code, stdout and stderr together, seconds)."""
    started = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout, time.perf_counter() - started


def pinned_hotmem() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return next(r for r in data["project"]["dependencies"] if r.startswith("hotmem"))


def working_copy(work: Path) -> tuple[Path, str]:
    """HotMem's sdist unpacked into work/hotmem-wc, committed, bumped to DEV (committed)
    and its weights edited (not committed); (the checkout, its short revision)."""
    download = work / "download"
    code, out, _ = run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--disable-pip-version-check", "-d", str(download), pinned_hotmem()],
        work,
    )  # fmt: skip
    if code != 0:
        sys.exit(f"pip download failed:\n{out}")
    (sdist,) = download.glob("hotmem-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    checkout = work / "hotmem-wc"
    next(work.glob("hotmem-*/")).rename(checkout)
    (checkout / ".gitignore").write_text("*.egg-info/\nbuild/\n__pycache__/\n", encoding="utf-8")
    shutil.rmtree(checkout / "src" / "hotmem.egg-info", ignore_errors=True)
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "hotmem release"]):
        run(["git", *args], checkout)
    for path, pattern in (
        (checkout / "pyproject.toml", r'^version = "[^"]+"'),
        (checkout / "src" / "hotmem" / "__init__.py", r'^__version__ = "[^"]+"'),
    ):
        text = path.read_text(encoding="utf-8")
        key = pattern.split(" ")[0].lstrip("^")
        path.write_text(re.sub(pattern, f'{key} = "{DEV}"', text, flags=re.M), encoding="utf-8")
    run(["git", "commit", "-q", "-am", f"start {DEV}"], checkout)
    search = checkout / "src" / "hotmem" / "search.py"
    text = search.read_text(encoding="utf-8")
    text = re.sub(r"^W_COSINE = .*$", "W_COSINE = 0.4", text, flags=re.M)
    search.write_text(re.sub(r"^W_FTS = .*$", "W_FTS = 0.4", text, flags=re.M), encoding="utf-8")
    _, revision, _ = run(["git", "rev-parse", "--short=7", "HEAD"], checkout)
    return checkout, revision.strip()


def project_copy(work: Path, rev: str | None) -> Path:
    """This project's files (as git lists them, uncommitted ones included) or REV's tree."""
    target = work / "project"
    if rev:
        archive = subprocess.run(
            ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
        ).stdout
        target.mkdir()
        subprocess.run(["tar", "x"], cwd=target, input=archive, check=True)
        return target
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def scratch_venv(work: Path, fresh: bool) -> Path:
    """A venv in work/venv: seeing this environment's packages through a .pth file, or
    (`fresh`) a venv of its own with pip."""
    venv = work / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    args = [base, "-m", "venv", str(venv)] + ([] if fresh else ["--without-pip"])
    subprocess.run(args, check=True)
    if not fresh:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        site = venv / "lib" / version / "site-packages"
        # named to sort after pip's __editable__ files: an editable install comes first
        (site / "zz_bench_overlay.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
        )
    return venv


def make_eval(project: Path, venv: Path, build: Path, *extra: str) -> tuple[int, str, float]:
    base = getattr(sys, "_base_executable", sys.executable)
    return run(
        ["make", "--no-print-directory", "eval", f"VENV={venv}", f"BUILD={build}",
         f"PYTHON={base}", *extra],
        project,
    )  # fmt: skip


def report_source(build: Path) -> str:
    for line in (build / "report.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| system source |"):
            return line
    return ""


def check_path(name: str, args: argparse.Namespace, checks: list[dict[str, Any]]) -> None:
    """One path (`store` or `manual`) in a temp dir of its own."""
    work = Path(tempfile.mkdtemp(prefix=f"working-copy-{name}-"))
    steps: dict[str, float] = {}
    outputs: dict[str, str] = {}

    def check(what: str, ok: bool, detail: str = "") -> None:
        checks.append({"path": name, "check": what, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} [{name}] {what}" + (f": {detail}" if detail else ""))

    try:
        started = time.perf_counter()
        checkout, revision = working_copy(work)
        steps["working copy"] = time.perf_counter() - started
        project = project_copy(work, args.rev)
        venv, build = scratch_venv(work, args.fresh), work / "build"
        python = str(venv / "bin" / "python")
        if name == "store":
            code, out, steps["make eval STORE=../hotmem-wc"] = make_eval(
                project, venv, build, "STORE=../hotmem-wc"
            )
        else:
            code, out, _ = make_eval(project, venv, build)  # the project installed first
            pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
            _, more, steps["pip install --no-deps -e ../hotmem-wc"] = run(
                [*pip, "--no-deps", "-e", "../hotmem-wc"], project
            )
            out += more
            code, more, steps["make eval"] = make_eval(project, venv, build)
            out += more
        outputs["first"] = out
        expected = f"editable ../hotmem-wc @ {revision} + local changes"
        check("the first make eval measures the working copy", expected in report_source(build),
              report_source(build))  # fmt: skip
        (project / "pyproject.toml").touch()
        code, out, steps["touch pyproject.toml && make eval"] = make_eval(project, venv, build)
        outputs["after touch"] = out
        check("make eval reinstalled the project after the touch", " -m pip install " in out)
        check(
            "the working copy is still the installed HotMem",
            f"system under test: hotmem {DEV}, {expected}" in out,
            next((x for x in out.splitlines() if "system under test" in x), "no such line"),
        )
        check(
            "one line says the working copy was put back",
            sum("put the working copy back" in line for line in out.splitlines()) == 1,
        )
        check("check-baseline shows the weight change (exit 3: make fails)",
              code != 0 and WEIGHTS in out and "check-baseline: error: result differs" in out)  # fmt: skip
        check(
            "check-baseline names the pull request's block",
            f"The block for the pull request's description: {build / 'baseline-diff.md'}" in out
            and (build / "baseline-diff.md").is_file(),
        )
        check(
            "report.md names the path, revision and local changes",
            expected in report_source(build),
            report_source(build),
        )
        code, out, steps["make eval STORE=index"] = make_eval(project, venv, build, "STORE=index")
        outputs["index"] = out
        check("STORE=index: the pinned release matches the committed baseline",
              code == 0 and "result matches" in out and "from a package index" in report_source(build),
              report_source(build))  # fmt: skip
    finally:
        record = {"path": name, "seconds": {k: round(v, 1) for k, v in steps.items()}}
        if args.keep:
            record["work"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
        if args.verbose:
            for label, text in outputs.items():
                print(f"--- {name}: {label} ---\n{text}")
        checks.append(record)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", nargs="+", choices=("store", "manual"), default=["store"])
    parser.add_argument("--rev", help="copy this git revision of the project (default: the tree)")
    parser.add_argument("--fresh", action="store_true", help="a venv of its own (slow)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="print make's output")
    args = parser.parse_args()
    if shutil.which("make") is None or shutil.which("git") is None:
        sys.exit("needs make and git")
    checks: list[dict[str, Any]] = []
    for name in args.paths:
        check_path(name, args, checks)
    out = ROOT / "build" / "bench_working_copy.json"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(orjson.dumps({"rev": args.rev, "fresh": args.fresh, "checks": checks},
                                 option=orjson.OPT_INDENT_2))  # fmt: skip
    for record in checks:
        if "seconds" in record:
            print(f"[{record['path']}] seconds: {record['seconds']}")
    failed = [c for c in checks if c.get("ok") is False]
    print(f"{len(failed)} check(s) failed; figures in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
