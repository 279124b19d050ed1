"""Tiny module-level tasks for tests/unit/test_executor.py.

Spawned workers and Ray actors import this module by name, so it lives in `tests/` beside
the other shared helpers (pytest puts `tests/` on sys.path: `pythonpath` in pyproject.toml;
spawned workers inherit the parent's sys.path; the Ray tests put it on PYTHONPATH) and holds
only module-level functions of plain data.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError

#: worker-local state, set by `remember` (one copy per worker process)
STATE: dict[str, Any] = {}
#: how often `remember` ran in this process, per token
INITS: dict[str, int] = {}
#: objects kept until the interpreter's teardown (`mark_exit`)
KEPT: list[Any] = []


class Boom(RecallbenchError):
    """A user-facing failure raised inside a task."""


def digest(item: int) -> str:
    """Deterministic, with a small item-dependent delay so completions arrive out of order."""
    time.sleep((item * 7 % 5) / 500)
    return hashlib.sha256(f"item-{item}".encode()).hexdigest()[:16]


def square(item: int) -> int:
    return item * item


def remember(token: str, directory: str | None = None) -> None:
    """Initializer: record who this worker is (and, given a directory, leave a mark there)."""
    INITS[token] = INITS.get(token, 0) + 1
    STATE.clear()
    STATE.update(token=token, pid=os.getpid(), directory=directory)
    if directory is not None:
        (Path(directory) / f"init-{os.getpid()}").write_text(str(INITS[token]))


class _AtTeardown:
    """Writes to its file when freed: in the interpreter's teardown, at the latest (the file
    is opened and the function bound now, so neither depends on a module still there)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self.write = os.write

    def __del__(self) -> None:
        self.write(self.fd, b"teardown")


def mark_exit(directory: str) -> None:
    """Initializer: an `atexit` handler and a teardown-only finalizer, each leaving a mark."""
    import atexit

    pid = os.getpid()
    atexit.register(lambda: (Path(directory) / f"atexit-{pid}").write_text("atexit"))
    KEPT.append(_AtTeardown(Path(directory) / f"teardown-{pid}"))
    STATE["directory"] = directory


def forget() -> None:
    """Finalizer: leave a mark in the initializer's directory."""
    directory = STATE.get("directory")
    if directory is not None:
        marks = Path(directory) / f"fin-{os.getpid()}"
        marks.write_text(str(int(marks.read_text()) + 1 if marks.exists() else 1))
    STATE.clear()


def whoami(item: int) -> dict[str, Any]:
    return {
        "item": item,
        "token": STATE.get("token"),
        "state_pid": STATE.get("pid"),
        "inits": INITS.get(STATE.get("token", ""), 0),
        "pid": os.getpid(),
    }


def fail_initializer(message: str) -> None:
    raise Boom(message)


def fail_at(item: tuple[int, int, str]) -> int:
    """item = (index, failing index, done-marker directory): Boom at the failing index."""
    index, failing, directory = item
    Path(directory, f"done-{index}").touch()
    if index == failing:
        raise Boom(f"item {index} is bad")
    time.sleep(0.02)
    return index


def value_error_at(item: int) -> int:
    if item == 3:
        raise ValueError(f"no good: {item}")
    return item


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def sleep_marked(seconds: float) -> float:
    """sleep_for, after leaving a mark (task-PID) in the initializer's directory: the sign
    that this worker is inside a task."""
    (Path(STATE["directory"]) / f"task-{os.getpid()}").touch()
    time.sleep(seconds)
    return seconds


def die_at(item: dict[str, Any]) -> int:
    """The worker kills itself (SIGKILL) on item["bad"]; else returns the index."""
    if item["index"] == item["bad"]:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    time.sleep(0.01)
    return item["index"]


def torch_cache(item: int) -> str:
    """What importing torch._dynamo does in a worker: make the directory of
    TORCHINDUCTOR_CACHE_DIR (here with a file in it); returns the directory."""
    directory = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{item}-{os.getpid()}").touch()
    return str(directory)
