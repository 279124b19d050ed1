"""How the system's time is told from the harness's (`recallbench.systems.base`): lookups
into the harness are not counted, and HotMem's digest reads inside and hashes outside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallbench.systems import base
from recallbench.systems.base import HarnessCallbacks, TimedCalls, timed_lookup


class FakeClock:
    """perf_counter for `base`: advanced by hand, so no test depends on real time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _System(TimedCalls):
    def __init__(self, clock: FakeClock, lookup: Any) -> None:
        self.clock = clock
        self.lookup = lookup

    def ingest(self, texts: list[str]) -> None:
        with self._inside():
            for text in texts:
                self.clock.now += 2.0  # the system's own work
                self.lookup(text)  # calls back into the harness


def test_the_harness_s_lookups_are_not_counted_as_the_system_s_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(base.time, "perf_counter", clock)
    monkeypatch.setattr(HarnessCallbacks, "seconds", 0.0)

    def cache_lookup(text: str) -> list[float]:
        clock.now += 0.5  # the harness's vector cache
        return [float(len(text))]

    system = _System(clock, timed_lookup(cache_lookup))
    system.ingest(["a", "bb", "ccc"])
    assert system.seconds_inside() == pytest.approx(6.0)  # 3 x 2.0, not 3 x 2.5
    assert HarnessCallbacks.seconds == pytest.approx(1.5)
    assert timed_lookup(cache_lookup)("dddd") == [4.0]  # the value passes through


def test_hotmem_digest_reads_inside_and_hashes_outside(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """HotMem's digest: reading the rows is HotMem's time, hashing them the harness's."""
    from recallbench.systems import get_system
    from recallbench.systems import hotmem as hm
    from recallbench.systems.base import StoreRecord
    from recallbench.systems.packaging import records_digest

    system = get_system("hotmem")
    store = system.open_store(tmp_path / "store")
    store.ingest([StoreRecord(f"m{i}", "fixture", f"text {i}", 0.5, ()) for i in range(4)])
    clock = FakeClock()
    monkeypatch.setattr(base.time, "perf_counter", clock)

    def slow_digest(pairs: Any) -> str:
        clock.now += 7.0
        return records_digest(pairs)

    monkeypatch.setattr(hm, "records_digest", slow_digest)
    before = system.seconds_inside()
    digest = store.digest()
    store.close()
    assert digest == records_digest((f"m{i}", f"text {i}") for i in range(4))
    assert system.seconds_inside() - before == 0.0  # the clock only moved while hashing
