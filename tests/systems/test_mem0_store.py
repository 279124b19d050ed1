"""`mem0` (mem0ai's open-source Memory) through its own API: duplicate texts are kept, and
memories of equal score come back in one order in the process that added them, after a
reopen and after a clone's restore (mem0 orders ties over its vector store's candidates);
the configuration says what is on; no network is used (run with networking blocked)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from recallbench.systems import get_system
from recallbench.systems.base import StoreRecord

TEXTS = [
    "The backup job runs at midnight.",
    "Trains are better than planes.",
    "The backup job runs at midnight.",
    "Invoices are sent on the first of the month.",
    "The backup job runs at midnight.",
]


def records() -> list[StoreRecord]:
    return [StoreRecord(f"m{i}", f"doc-{i}", t) for i, t in enumerate(TEXTS)]


def ranked(store) -> list[list[str]]:
    return [
        [h.memory_id for h in store.search(q, 5)]
        for q in ("The backup job runs at midnight.", "when do backups run", "trains")
    ]


def test_duplicate_texts_are_kept_and_ties_keep_one_order(tmp_path: Path) -> None:
    system = get_system("mem0")
    store = system.open_store(tmp_path / "s")
    assert store.ingest(records()) == len(TEXTS)  # infer=False: no copy is dropped
    first = ranked(store)
    copies = {"m0", "m2", "m4"}
    assert set(first[0][:3]) == copies  # the three copies, tied at the top
    system.clone.snapshot(store, tmp_path / "package")
    store.close()

    reopened = system.attach(tmp_path / "s")
    assert ranked(reopened) == first
    reopened.close()
    restored = system.clone.restore(tmp_path / "package", tmp_path / "restored")
    assert ranked(restored) == first
    restored.close()

    again = get_system("mem0").open_store(tmp_path / "second")
    again.ingest(records())
    assert ranked(again) == first  # a second store of the same records
    again.close()


def test_configuration_names_version_backend_and_what_is_off() -> None:
    config = get_system("mem0").configuration()
    assert config["implementation"] == "mem0ai"
    assert config["implementation_version"] == "2.2.1"
    assert config["vector_store"]["provider"] == "faiss"
    assert config["vector_store"]["config"]["distance_strategy"] == "euclidean"
    assert config["vector_store"]["config"]["normalize_L2"] is True
    assert config["text_transform"] == {"query": "strip"}
    assert config["add"] == {"infer": False}
    assert config["search_knobs"] == {"threshold": 0}
    assert config["bm25_half_active"] is False
    assert config["entity_boosts_active"] is False
    assert config["embedder"] == get_system("minilm").embedder.identity()


SCRIPT = textwrap.dedent(
    """
    import socket, sys
    from pathlib import Path
    from recallbench.systems import get_system
    from recallbench.systems.base import StoreRecord
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1)
        sys.exit("the network is reachable")
    except OSError:
        pass
    system = get_system("mem0")
    store = system.open_store(Path(sys.argv[1]))
    n = store.ingest([StoreRecord("a", "x", "alpha beta"), StoreRecord("b", "y", "gamma")])
    hits = store.search("alpha", 2)
    store.close()
    print(n, [h.memory_id for h in hits])
    """
)


def test_add_and_search_run_with_networking_blocked(tmp_path: Path) -> None:
    """No LLM, no hub, no telemetry: the same calls in a process without a network."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-n", "true"]).returncode != 0:
        pytest.skip("`unshare -n` (a process without networking) is not permitted here")
    done = subprocess.run(
        [unshare, "-n", sys.executable, "-c", SCRIPT, str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "2 ['a', 'b']"


def test_a_store_of_k_memories_returns_k_hits_whatever_their_cosine(tmp_path: Path) -> None:
    """mem0 drops a candidate whose semantic score is below the threshold, and accepts none
    below 0: under its "cosine" strategy a memory of negative cosine was never returned.
    Over L2 on unit vectors its score is 1 / (3 - 2 cos) > 0, so every memory comes back,
    in cosine order."""
    dims = 384

    def unit(*head: float) -> list[float]:
        return [*head, *[0.0] * (dims - len(head))]

    vectors = {
        "query": unit(1.0, 0.0),
        "opposite": unit(-1.0, 0.0),  # cosine -1
        "orthogonal": unit(0.0, 1.0),  # cosine 0
        "near": unit(0.6, 0.8),  # cosine 0.6
        "obtuse": unit(-0.6, 0.8),  # cosine -0.6
    }
    store = get_system("mem0").open_store(tmp_path / "s", vectors=lambda t: vectors[t])
    memories = [StoreRecord(name, name, name) for name in vectors if name != "query"]
    assert store.ingest(memories) == 4
    hits = store.search("query", 4)
    store.close()
    assert [h.memory_id for h in hits] == ["near", "orthogonal", "obtuse", "opposite"]
    assert [h.score for h in hits] == [round(1 / (3 - 2 * c), 6) for c in (0.6, 0, -0.6, -1)]
