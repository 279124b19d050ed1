"""A worker's state and stores (`recallbench.worker`): transient stores."""

from __future__ import annotations

from pathlib import Path


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
