"""`mem0-qdrant` (mem0's Memory on its Qdrant store in local mode) through mem0's own API:
memories of equal score come back in one order in the store that was hydrated, after a
reopen, after a clone's restore and in a second store of the same records (Qdrant local
ranks with an unstable sort over its points as it loaded them, newest first: the store is
reopened after every ingest so every search runs on that order); mem0 drops a hit of
negative cosine on this store (its threshold, 0, is on Qdrant's cosine); the configuration
says what is on and that local mode has no index."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.systems import get_system
from recallbench.systems.base import StoreRecord

# (mem0 is not imported here: it reads MEM0_TELEMETRY once, at its first import, which the
# adapter makes after setting it off)

#: 6 copies of one text among 40 memories: more than numpy's insertion-sort cut-off (16), so
#: np.argsort's order of the tied copies depends on where each point sits
TEXTS = ["The backup job runs at midnight."] * 6 + [
    f"Note {i}: the {('red', 'green', 'blue', 'grey')[i % 4]} folder holds report {i}."
    for i in range(34)
]


def records() -> list[StoreRecord]:
    order = [6, 0, 7, 1, 8, 2, 9, 3, 10, 4, 11, 5, *range(12, 40)]  # the copies interleaved
    return [StoreRecord(f"m{i:02d}", f"doc-{i}", TEXTS[i]) for i in order]


def ranked(store) -> list[list[str]]:
    return [
        [h.memory_id for h in store.search(q, 12)]
        for q in ("The backup job runs at midnight.", "when do backups run", "blue folder")
    ]


def test_ties_keep_one_order_across_reopen_restore_and_a_second_store(tmp_path: Path) -> None:
    system = get_system("mem0-qdrant")
    store = system.open_store(tmp_path / "s")
    assert store.ingest(records()) == len(TEXTS)  # infer=False: no copy is dropped
    first = ranked(store)
    assert set(first[0][:6]) == {f"m{i:02d}" for i in range(6)}  # the copies, tied at the top
    system.clone.snapshot(store, tmp_path / "package")
    store.close()

    reopened = get_system("mem0-qdrant").attach(tmp_path / "s")
    assert ranked(reopened) == first
    reopened.close()
    restored = system.clone.restore(tmp_path / "package", tmp_path / "restored")
    assert ranked(restored) == first
    restored.close()
    again = get_system("mem0-qdrant").open_store(tmp_path / "second")
    again.ingest(records())
    assert ranked(again) == first
    again.close()


def test_a_hit_of_negative_cosine_is_dropped_by_mem0s_threshold(tmp_path: Path) -> None:
    """What mem0 does on its Qdrant store (cosine scores, threshold 0): reported, not hidden
    (docs/stores.md); the text contract counts such a store's hits as at most k."""
    dims = 384

    def unit(*head: float) -> list[float]:
        return [*head, *[0.0] * (dims - len(head))]

    vectors = {
        "query": unit(1.0, 0.0),
        "opposite": unit(-1.0, 0.0),
        "orthogonal": unit(0.0, 1.0),
        "near": unit(0.6, 0.8),
        "obtuse": unit(-0.6, 0.8),
    }
    store = get_system("mem0-qdrant").open_store(tmp_path / "s", vectors=lambda t: vectors[t])
    assert store.ingest([StoreRecord(n, n, n) for n in vectors if n != "query"]) == 4
    hits = store.search("query", 4)
    store.close()
    assert [h.memory_id for h in hits] == ["near", "orthogonal"]
    assert [h.score for h in hits] == pytest.approx([0.6, 0.0], abs=1e-6)


def test_configuration_names_qdrant_local_and_what_is_off() -> None:
    config = get_system("mem0-qdrant").configuration()
    assert config["implementation"] == "mem0ai"
    assert config["vector_store"]["provider"] == "qdrant"
    assert config["vector_store"]["config"]["on_disk"] is True
    assert "path" not in config["vector_store"]["config"]  # local mode: the path is the store's
    assert config["index"].startswith("none")
    assert config["bm25_half_active"] is False
    assert config["text_transform"] == {"query": "strip"}
    assert config["embedder"] == get_system("minilm").embedder.identity()
