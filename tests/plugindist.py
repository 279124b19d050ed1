"""Real plugins for tests: a module and its distribution's dist-info directory (as pip
writes it) in a directory put on the PYTHONPATH of a `recallbench` process, found through
the entry points like any third-party package; how such a process runs on the committed
suite, and how its one error line is read."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "retrieval"
CORPUS, QUERIES = FIXTURES / "corpus.jsonl", FIXTURES / "queries.jsonl"


#: a module the test plugins import (installed beside each as `wrapped_bm25.py`): the
#: built-in BM25 system with its stores wrapped in a plugin's own store class, one system
#: per mode; a plugin module subclasses `Store` and `System` and takes `makers`
WRAPPED_BM25 = '''
"""BM25 with its stores wrapped: one system per mode, named by the plugin."""
import functools

from recallbench.systems.bm25 import BM25System


class Store:
    """The BM25 store `inner`, for a plugin to change what it does in `mode`."""

    def __init__(self, inner, mode):
        self._inner, self._mode = inner, mode

    def __getattr__(self, name):
        return getattr(self._inner, name)


class System(BM25System):
    """BM25 named `name`, its stores wrapped in `wrapper` with `mode`."""

    def __init__(self, name, mode, wrapper):
        super().__init__(name)
        self.mode, self.wrapper = mode, wrapper

    def open_store(self, directory, *, vectors=None):
        return self.wrapper(super().open_store(directory, vectors=vectors), self.mode)

    def attach(self, directory, *, vectors=None):
        return self.wrapper(super().attach(directory, vectors=vectors), self.mode)


def makers(modes, make):
    """{"make_<mode>": a factory of `make(mode)`} for each mode, for the module's globals
    (the entry points name them)."""
    return {"make_" + mode.replace("-", "_"): functools.partial(make, mode) for mode in modes}
'''


def install_distribution(
    root: Path,
    name: str,
    version: str,
    modules: Mapping[str, str],
    entry_points: Mapping[str, Mapping[str, str]],
) -> Path:
    """Distribution `name` `version` installed in `root`: each module (file name -> source),
    `WRAPPED_BM25` as `wrapped_bm25.py`, and a dist-info whose entry points are group ->
    {entry name: "module:object"}."""
    root.mkdir(parents=True, exist_ok=True)
    for module, source in {"wrapped_bm25.py": WRAPPED_BM25, **modules}.items():
        (root / module).write_text(source, encoding="utf-8")
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{entry} = {target}\n" for entry, target in points.items())
            for group, points in entry_points.items()
        )
    )
    return root


def plugin_env(*paths: Path, tmp: Path | None = None) -> dict[str, str]:
    """The environment of a `recallbench` process with the plugins installed in `paths`
    (and TMPDIR `tmp` when given): no bytecode written, no progress bars, no build dir from
    the caller's environment."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROGRESS": "1"}
    env.pop("RECALLBENCH_BUILD_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*(str(p) for p in paths), env.get("PYTHONPATH")])
    )
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return env


def run_args(build: Path | str, system: str, *extra: str) -> list[str]:
    """`recallbench --build-dir BUILD run` on the committed suite with `system`."""
    return [
        sys.executable,
        "-m",
        "recallbench.cli.main",
        "--build-dir",
        str(build),
        "run",
        "--corpus",
        str(CORPUS),
        "--queries",
        str(QUERIES),
        "--system",
        system,
        *extra,
    ]


def run_recallbench(
    env: Mapping[str, str], build: Path | str, system: str, *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`run_args` in a process of its own with `env` (from `plugin_env`)."""
    return subprocess.run(
        run_args(build, system, *extra),
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(env),
        cwd=cwd,
    )


def one_error_line(proc: subprocess.CompletedProcess[str], command: str = "run") -> str:
    """The one line a failed command printed (no traceback, nothing else on stderr)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"recallbench {command}: error: "), lines[0]
    return lines[0]


def assert_nothing_published(build: Path) -> None:
    """No artifact of the run's later stages, and no work left in the build directory."""
    for name in ("runs.json", "results.json", "report.md", "decision.json"):
        assert not (build / name).exists(), name
    assert not (build / "work").exists() or not any((build / "work").iterdir())
