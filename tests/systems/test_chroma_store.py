"""`chroma`: its HNSW parameters in the configuration are the ones its collection holds, and
the determinism it has: a store of at most `ef_search` records (Chroma's default, 100) ranks
exactly, so two runs in fresh processes (hydrate + query each) give the same rankings, equal
to the exact ranking of the same vectors. Above that its graph differs run after run (see
the module docstring and docs/stores.md), which no test can pin down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import orjson
import pytest

pytest.importorskip("chromadb")

from recallbench.systems import get_system  # noqa: E402

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np, orjson
    from recallbench.systems import get_system
    from recallbench.systems.base import StoreRecord
    data = orjson.loads(Path(sys.argv[1]).read_bytes())
    vectors = {t: v for t, v in zip(data["texts"], data["vectors"])}
    store = get_system("chroma").open_store(Path(sys.argv[2]), vectors=vectors.__getitem__)
    store.ingest([StoreRecord(t, "x", t) for t in data["memories"]])
    out = [[h.memory_id for h in store.search(q, 10)] for q in data["queries"]]
    store.close()
    sys.stdout.write(orjson.dumps(out).decode())
    """
)


def test_the_configuration_records_the_hnsw_parameters_its_collection_holds(
    tmp_path: Path,
) -> None:
    system = get_system("chroma")
    config = system.configuration()
    assert config["hnsw"]["ef_search"] == 100  # Chroma's default, as shipped
    assert config["hnsw"]["space"] == "cosine"
    assert config["exact"].startswith("no")
    store = system.open_store(tmp_path / "s")
    held = store._collection.configuration_json["hnsw"]
    store.close()
    assert {key: held[key] for key in config["hnsw"]} == config["hnsw"]


def test_up_to_ef_search_records_two_runs_agree_and_rank_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = get_system("chroma").configuration()["hnsw"]["ef_search"]
    centres = rng.normal(size=(10, 384))
    memories = centres[rng.integers(0, 10, n)] + 0.6 * rng.normal(size=(n, 384))
    queries = memories[rng.integers(0, n, 60)] + 0.8 * rng.normal(size=(60, 384))
    memories /= np.linalg.norm(memories, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    memories, queries = memories.astype(np.float32), queries.astype(np.float32)
    names = [f"m{i:03d}" for i in range(n)]
    asked = [f"q{i:03d}" for i in range(len(queries))]
    data = tmp_path / "vectors.json"
    data.write_bytes(
        orjson.dumps(
            {
                "texts": names + asked,
                "vectors": np.concatenate([memories, queries]).tolist(),
                "memories": names,
                "queries": asked,
            }
        )
    )
    runs = []
    for run in ("one", "two"):  # each in a fresh process: a graph of its own
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(data), str(tmp_path / run)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(orjson.loads(done.stdout))
    exact = np.argsort(-(queries.astype(np.float64) @ memories.astype(np.float64).T), axis=1)
    assert runs[0] == runs[1]
    assert runs[0] == [[names[j] for j in row[:10]] for row in exact]
