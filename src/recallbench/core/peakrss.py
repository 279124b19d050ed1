"""The peak resident memory of this process and its descendants while a block runs.

A local diagnostic of compare's cost table: a thread samples the resident set (VmRSS) of
the process tree (this process, its workers, a store's server) from /proc every
`INTERVAL` seconds; the peak is the largest sum seen. Linux only: elsewhere, or when /proc
cannot be read, the peak is None. A sampled peak can miss a spike shorter than the
interval."""

from __future__ import annotations

import os
import threading
from pathlib import Path

INTERVAL = 0.05


def _rss_bytes(pid: int) -> int:
    """One process's VmRSS in bytes (0 when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    """The direct children of a process, from every thread's /proc children list."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                out += [int(x) for x in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return out


def tree_rss_bytes(pid: int | None = None) -> int:
    """The resident bytes of a process and every descendant."""
    pid = os.getpid() if pid is None else pid
    seen, todo, total = set(), [pid], 0
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _rss_bytes(p)
        todo += _children(p)
    return total


class PeakRSS:
    """`with PeakRSS() as peak: ...`, then `peak.bytes`: the largest resident size of this
    process tree sampled while the block ran (None where /proc is not there)."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.bytes: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        self.bytes = max(self.bytes or 0, tree_rss_bytes())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakRSS:
        if not Path(f"/proc/{os.getpid()}/status").exists():
            return self
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="recallbench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
