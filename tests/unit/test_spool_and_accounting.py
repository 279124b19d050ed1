"""The scope spool's two readers, and how the system's time is told from the harness's."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from recallbench.errors import ArtifactError
from recallbench.model import Memory, Query, Scope
from recallbench.spool import SPOOL, SpoolWriter, read_scope, scope_refs, stream_scopes
from recallbench.systems import base
from recallbench.systems.base import HarnessCallbacks, TimedCalls, timed_lookup
from recallbench.worker import task_scope


def make_scope(n: int) -> Scope:
    memories = tuple(
        Memory(f"m{n}-{i}", f"text {n} {i} é\n", {"session": (f"s{i}",)}) for i in range(3)
    )
    queries = tuple(
        Query(f"q{n}-{j}", "cat", f"question {j}", {"session": {"s0": 1}}) for j in range(5)
    )
    return Scope(f"scope-{n}", memories, queries)


def write_spool(tmp_path: Path, count: int = 3) -> dict[str, Any]:
    """A suite envelope (only what the readers use) and its spool of `count` scopes."""
    writer = SpoolWriter(tmp_path / SPOOL)
    scopes = []
    for n in range(count):
        scope = make_scope(n)
        scopes.append({"scope_id": scope.scope_id, "spool": writer.add(scope.to_dict())})
    spool = writer.close()
    (tmp_path / SPOOL).unlink(missing_ok=True)
    writer.tmp.rename(tmp_path / SPOOL)
    return {
        "data": {"spool": spool, "scopes": scopes, "counts": {"scopes": count}},
        "spool_path": str(tmp_path / SPOOL),
    }


def test_both_readers_give_every_scope_as_validate_wrote_it(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    data = (tmp_path / SPOOL).read_bytes()
    assert suite["data"]["spool"] == {
        "file": SPOOL,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }
    lines = data.splitlines(keepends=True)
    expected = [make_scope(n).to_dict() for n in range(3)]
    assert [s for _, s in stream_scopes(suite)] == expected
    refs = dict(scope_refs(suite))
    assert [read_scope(refs[i]) for i in range(3)] == expected
    # the index: contiguous lines covering the file, each with its own sha256
    assert [(r["offset"], r["bytes"]) for r in refs.values()] == [
        (sum(map(len, lines[:i])), len(lines[i])) for i in range(3)
    ]
    assert [r["sha256"] for r in refs.values()] == [hashlib.sha256(x).hexdigest() for x in lines]


def test_a_task_reads_its_scope_and_its_slice_of_queries(tmp_path: Path) -> None:
    refs = dict(scope_refs(write_spool(tmp_path)))
    assert task_scope({"ref": refs[1]}) == make_scope(1)
    sliced = task_scope({"ref": refs[1], "queries": (1, 3)})
    assert [q.query_id for q in sliced.queries] == ["q1-1", "q1-2"]
    assert sliced.memories == make_scope(1).memories
    assert task_scope({"scope": make_scope(2).to_dict()}) == make_scope(2)


@pytest.mark.parametrize("damage", ["flipped", "shifted", "missing", "foreign"])
def test_a_task_refuses_a_line_that_is_not_the_validated_one(tmp_path: Path, damage: str) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    refs = dict(scope_refs(suite))
    data = path.read_bytes()
    ref = refs[1]
    if damage == "flipped":  # one byte of scope 1's line
        at = ref["offset"] + ref["bytes"] // 2
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    elif damage == "shifted":  # same size, the lines no longer where the index says
        path.write_bytes(b"\n" + data[:-1])
    elif damage == "missing":
        path.unlink()
    else:  # a well-formed line of another scope where scope 1's should be
        ref = {**ref, "scope_id": "scope-9"}
    with pytest.raises(ArtifactError) as caught:
        read_scope(ref)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert message.endswith("run `recallbench validate` again")
    if damage in ("flipped", "foreign"):  # the other lines still read
        assert read_scope(refs[0]) == make_scope(0).to_dict()


def test_the_parent_checks_the_spool_is_there_and_whole(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    path.write_bytes(path.read_bytes() + b"{}\n")
    with pytest.raises(ArtifactError, match="not the scope spool suite.json describes"):
        next(scope_refs(suite))
    path.unlink()
    with pytest.raises(ArtifactError, match="the scope spool validate wrote is missing"):
        next(scope_refs(suite))


def test_stream_refuses_another_spool_of_the_same_size(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[1] + lines[0] + lines[2])  # same bytes, scopes out of order
    with pytest.raises(ArtifactError, match="not the scope spool suite.json describes"):
        list(stream_scopes(suite))


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
    from recallbench.systems.base import StoreRecord, records_digest

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


def test_a_suite_from_the_gzip_spool_era_is_refused(tmp_path: Path) -> None:
    """suite.json written by a recallbench whose spool was scopes.jsonl.gz (no per-scope
    places): both readers refuse it in one line, before reading anything."""
    suite = write_spool(tmp_path)
    old = {
        "data": {
            **suite["data"],
            "spool": {**suite["data"]["spool"], "file": "scopes.jsonl.gz"},
            "scopes": [{"scope_id": s["scope_id"]} for s in suite["data"]["scopes"]],
        },
        "spool_path": str(tmp_path / "scopes.jsonl.gz"),
    }
    for read in (scope_refs, stream_scopes):
        with pytest.raises(ArtifactError) as caught:
            next(read(old))
        assert "made by another recallbench version" in str(caught.value)
        assert str(caught.value).endswith("run `recallbench validate` again")


def test_query_batches_shrink_towards_the_end() -> None:
    """Groups of at most `size`, in order; with the total known, never more than the
    remaining items over 2 x workers, so the last groups are single items."""
    from recallbench.stagework import batches

    def sizes(**kw: Any) -> list[int]:
        groups = list(batches(str, range(30), 4, **kw))
        assert [i for g in groups for i in g["items"]] == list(range(30))
        assert all(g["fn"] is str for g in groups)
        return [len(g["items"]) for g in groups]

    assert sizes() == [4] * 7 + [2]
    tail = sizes(total=30, workers=2)
    assert max(tail) == 4 and tail[:3] == [4, 4, 4] and tail[-3:] == [1, 1, 1]
    assert tail == [4, 4, 4, 4, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1]


def test_transient_stores_alternate_and_are_removed(tmp_path: Path) -> None:
    """A worker's transient stores alternate between two directories; the previous one is
    emptied on the removal thread once the next is asked for, the last by finish_removals."""
    from recallbench import worker

    worker.close_worker()
    try:
        first = worker.transient_store(tmp_path)
        (first / "db").parent.mkdir(parents=True)
        (first / "db").write_bytes(b"x" * 4096)
        second = worker.transient_store(tmp_path)
        assert second.parent == first.parent and {first.name, second.name} == {"a", "b"}
        (second / "db").parent.mkdir(parents=True)
        (second / "db").write_bytes(b"y")
        third = worker.transient_store(tmp_path)  # waits for the first's removal
        assert third == first and list(first.iterdir()) == []
        worker.finish_removals()
        assert list(second.iterdir()) == [] and list(first.iterdir()) == []
    finally:
        worker.close_worker()
