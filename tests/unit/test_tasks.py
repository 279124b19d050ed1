"""The stages' side of the executor (`recallbench.engine.tasks`): query batches."""

from __future__ import annotations

from typing import Any


def test_query_batches_shrink_towards_the_end() -> None:
    """Groups of at most `size`, in order; with the total known, never more than the
    remaining items over 2 x workers, so the last groups are single items."""
    from recallbench.engine.tasks import batches

    def sizes(**kw: Any) -> list[int]:
        groups = list(batches(str, range(30), 4, **kw))
        assert [i for g in groups for i in g["items"]] == list(range(30))
        assert all(g["fn"] is str for g in groups)
        return [len(g["items"]) for g in groups]

    assert sizes() == [4] * 7 + [2]
    tail = sizes(total=30, workers=2)
    assert max(tail) == 4 and tail[:3] == [4, 4, 4] and tail[-3:] == [1, 1, 1]
    assert tail == [4, 4, 4, 4, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1]
