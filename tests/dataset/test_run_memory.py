"""What `run` keeps in memory outside the report does not grow with the results: the query
stage's rows go to disk as they come back (`queryrows.RowSpool`) and are read back one at a
time by the round trip, score and the report. Measured with tracemalloc (bytes still allocated after a stage returns, its output kept):
no timing is asserted."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from recallbench.builddir.scopespool import SPOOL
from recallbench.datasets.longmemeval.generator import generate
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.validate import place_spool, run_validate

OPTIONS = {"session_text": "user", "unit": "turn", "gold": "official"}


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    """A turn-unit suite (hundreds of turns a question, so top-k 200 makes long rows)."""
    work = tmp_path_factory.mktemp("run-memory")
    data = work / "s.json"
    generate(data, shape="s", questions=12, seed=3, sessions_per_question=20, session_chars=600)
    suite = run_validate("longmemeval", {"data": data}, OPTIONS, spool=work / SPOOL)
    place_spool(suite)
    hydrate, _ = run_hydrate(suite, work, "bm25-okapi")
    return suite, hydrate, work


def retained(fn: Any) -> tuple[Any, int]:
    """fn()'s result and the bytes still allocated once it returned (the result kept)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        gc.collect()
        return out, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_query_stage_keeps_its_rows_on_disk_whatever_the_top_k(staged: Any) -> None:
    suite, hydrate, work = staged
    run_query(suite, hydrate, work, top_k=200)  # imports and caches: not counted below
    # the smaller of two measurements each: a one-off allocation another test's state can
    # trigger in this process (a lazy import, a first warning; 4.6 KB once in a make test)
    # is not what grows with the results
    _, small_bytes = min(
        (retained(lambda: run_query(suite, hydrate, work, top_k=5)) for _ in range(2)),
        key=lambda measured: measured[1],
    )
    large, large_bytes = min(
        (retained(lambda: run_query(suite, hydrate, work, top_k=200)) for _ in range(2)),
        key=lambda measured: measured[1],
    )
    rows = list(large[0]["data"]["queries"])
    hits = sum(len(r["hits"]) for r in rows)
    assert len(rows) == suite["data"]["counts"]["queries"] and hits > 40 * len(rows)
    # as a list, the top-200 rows alone hold more than 2,000 bytes a question
    assert large_bytes < small_bytes + 200 * len(rows), (small_bytes, large_bytes)
