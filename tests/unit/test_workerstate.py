"""A worker's state and stores (`recallbench.engine.workerstate`): transient stores."""

from __future__ import annotations

from pathlib import Path


def test_transient_stores_alternate_and_are_removed(tmp_path: Path) -> None:
    """A worker's transient stores alternate between two directories; the previous one is
    emptied on the removal thread once the next is asked for, the last by finish_removals."""
    from recallbench.engine import workerstate

    workerstate.close_worker()
    try:
        first = workerstate.transient_store(tmp_path)
        (first / "db").parent.mkdir(parents=True)
        (first / "db").write_bytes(b"x" * 4096)
        second = workerstate.transient_store(tmp_path)
        assert second.parent == first.parent and {first.name, second.name} == {"a", "b"}
        (second / "db").parent.mkdir(parents=True)
        (second / "db").write_bytes(b"y")
        third = workerstate.transient_store(tmp_path)  # waits for the first's removal
        assert third == first and list(first.iterdir()) == []
        workerstate.finish_removals()
        assert list(second.iterdir()) == [] and list(first.iterdir()) == []
    finally:
        workerstate.close_worker()


def test_a_worker_resolves_its_system_once_or_uses_the_one_it_is_given(monkeypatch) -> None:
    """A worker process resolves the system by name once, in init_worker (an object need not
    pickle); the serial engine's worker, in the parent's process, takes the parent's object
    ("instance") and resolves nothing."""
    from plugintools import count_lookups

    from recallbench.engine import workerstate
    from recallbench.systems import registry

    real = registry.get_system
    looked_up = count_lookups(monkeypatch)
    try:
        workerstate.init_worker({"system": "bm25"})
        assert looked_up == ["bm25"] and workerstate.system().name == "bm25"
        parents = real("bm25")
        workerstate.init_worker({"system": "bm25", "instance": parents})
        assert looked_up == ["bm25"] and workerstate.system() is parents
    finally:
        workerstate.close_worker()


def test_search_passes_query_and_limit_by_position(monkeypatch) -> None:
    """A store may name search's second parameter as it likes (`top_k` in plugins written
    before the seam said `limit`): the harness passes it by position."""
    from recallbench.core.model import Query
    from recallbench.engine import workerstate
    from recallbench.systems.boundary import system_boundary

    class NamedTopK:
        def search(self, query, top_k):
            return [query, top_k]

    class Positional:
        def search(self, query, n, /, *, query_date=None):
            return [query, n, query_date]

    monkeypatch.setitem(workerstate._STATE, "guard", system_boundary("mine"))
    query = Query("q1", "a category", "where", {}, date="d1")
    monkeypatch.setitem(workerstate._STATE, "system", object())  # no `structured`
    assert workerstate.search(NamedTopK(), query, 7, "scope s") == ["where", 7]

    class Structured:
        structured = True

    monkeypatch.setitem(workerstate._STATE, "system", Structured())
    assert workerstate.search(Positional(), query, 9, "scope s") == ["where", 9, "d1"]


def test_the_serial_engines_workers_set_a_system_up_once() -> None:
    """The serial engine hands a stage's one system object to each of its `init_worker`
    calls (prep's embedding, then the stage's tasks): its `setup()` runs once."""
    from recallbench.engine import workerstate
    from recallbench.systems import registry

    class WithSetup:
        def __init__(self) -> None:
            self.inner = registry.get_system("bm25")
            self.name, self.embedder, self.setups = "bm25", None, 0

        def setup(self) -> None:
            self.setups += 1

    system, other = WithSetup(), WithSetup()
    try:
        for given in (system, system, other):
            workerstate.init_worker({"system": "bm25", "instance": given})
        assert (system.setups, other.setups) == (1, 1)
    finally:
        workerstate.close_worker()
