"""What a worker does: per-question hydrate + query, and prep's embedding batches.

Worker-local state (the system under test and, when given, the vector cache) is built once
per worker by `init_worker`; tasks are module-level functions of plain data, so any
executor (serial, process pool, Ray, Dask) can run them.

A question's task never sees a dataset session id, a question id or the gold: its item is
``{"index", "question", "documents": [(opaque memory id, text), ...]}``. It opens a fresh
store in its own directory, ingests the documents through the system's normal insert
path, runs the system's search once, closes the store and deletes the directory, and
returns the ranked opaque ids with their scores.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from recallbench.errors import RecallbenchError
from recallbench.longmemeval.cache import VectorCache, pack_vectors
from recallbench.longmemeval.pairs import STORE_IDENTIFIER
from recallbench.systems import get_system
from recallbench.systems.base import StoreRecord

_STATE: dict[str, Any] = {}


class TaskFailed(RecallbenchError):
    """A worker's failure, carried to the parent as one picklable line."""


def init_worker(config: dict[str, Any]) -> None:
    """Build this worker's system (and open the vector cache when `config` names one).

    config: {"system": name, "work_dir": str | None, "cache": None | {"directory",
    "embedder_identity", "data_sha256", "session_text"}, "keep_stores": bool}
    """
    close_worker()
    system = get_system(config["system"])
    cache = None
    if config.get("cache"):
        spec = config["cache"]
        # the parent verified the files' sha256 once; workers check sizes and identity
        cache = VectorCache.open(
            Path(spec["directory"]),
            embedder_identity=spec["embedder_identity"],
            data_sha256=spec["data_sha256"],
            session_text=spec["session_text"],
            verify_files=False,
        )
    work_dir = config.get("work_dir")
    _STATE.update(
        system=system,
        cache=cache,
        work_dir=work_dir,
        # one directory per worker; each question's store is a fresh subdirectory of it
        worker_dir=(
            Path(tempfile.mkdtemp(prefix=f"w{os.getpid()}-", dir=work_dir)) if work_dir else None
        ),
        keep_stores=bool(config.get("keep_stores")),
    )


def close_worker() -> None:
    cache = _STATE.get("cache")
    if cache is not None:
        cache.close()
    worker_dir = _STATE.get("worker_dir")
    if worker_dir is not None:
        shutil.rmtree(worker_dir, ignore_errors=True)
    _STATE.clear()


def _delete_store(directory: Path) -> None:
    """Remove a closed store's files (the database, its WAL and shared memory) and directory."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        os.rmdir(directory)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)


def run_question(item: dict[str, Any]) -> dict[str, Any]:
    """Fresh store -> ingest -> one search -> delete; the ranked opaque ids and scores."""
    started = time.perf_counter()
    system = _STATE["system"]
    cache: VectorCache | None = _STATE["cache"]
    inside_before = system.seconds_inside()
    if _STATE["keep_stores"]:
        directory = Path(tempfile.mkdtemp(prefix=f"q{item['index']:06d}-", dir=_STATE["work_dir"]))
    else:
        directory = _STATE["worker_dir"] / f"q{item['index']:06d}"
        directory.mkdir()
    try:
        store = system.open_store(directory, vectors=cache.lookup if cache is not None else None)
        try:
            records = [
                StoreRecord(memory_id, STORE_IDENTIFIER, text)
                for memory_id, text in item["documents"]
            ]
            store.ingest(records)
            hits = store.search(item["question"], item["top_k"])
        finally:
            store.close()  # the seam times closing too (HotMem checkpoints its WAL here)
    except RecallbenchError as exc:
        raise TaskFailed(f"question #{item['index']}: {exc}") from None
    finally:
        if not _STATE["keep_stores"]:
            _delete_store(directory)
    return {
        "index": item["index"],
        "hits": [[hit.memory_id, hit.score] for hit in hits],
        "rows": len(item["documents"]),
        "seconds_inside": system.seconds_inside() - inside_before,
        "seconds_task": time.perf_counter() - started,
    }


def embed_batch(texts: list[str]) -> dict[str, Any]:
    """Prep: embed texts with the system's own embedder; float32 bytes, row after row."""
    started = time.perf_counter()
    system = _STATE["system"]
    inside_before = system.seconds_inside()
    vectors = system.embed_texts(texts)
    dimension = len(vectors[0]) if vectors else 0
    return {
        "blob": pack_vectors(vectors),
        "dimension": dimension,
        "seconds_inside": system.seconds_inside() - inside_before,
        "seconds_task": time.perf_counter() - started,
    }
