"""snapshot-roundtrip: package the hydrated store, verify it, hydrate a clean store from it,
rerun every query and compare; also prove that a corrupted package is rejected."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, require_made_from
from recallbench.errors import RecallbenchError
from recallbench.stages.validate import suite_of
from recallbench.systems import get_system
from recallbench.systems.base import SnapshotRejected


def compare_rankings(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-query drift between two ranked hit lists (rows with memory_id and score)."""
    ids_before = [h["memory_id"] for h in before]
    ids_after = [h["memory_id"] for h in after]
    score_before = {h["memory_id"]: h["score"] for h in before}
    score_after = {h["memory_id"]: h["score"] for h in after}
    common = sorted(set(score_before) & set(score_after))
    return {
        "identical": ids_before == ids_after,
        "same_set": set(ids_before) == set(ids_after),
        "moved_positions": [
            i + 1
            for i in range(max(len(ids_before), len(ids_after)))
            if (ids_before[i] if i < len(ids_before) else None)
            != (ids_after[i] if i < len(ids_after) else None)
        ],
        "only_before": [m for m in ids_before if m not in score_after],
        "only_after": [m for m in ids_after if m not in score_before],
        "max_score_drift": max(
            (abs(score_before[m] - score_after[m]) for m in common), default=0.0
        ),
        "after": ids_after,
    }


def _corrupt_one_byte(package_dir: Path, target_dir: Path) -> str:
    """Copy the package and flip one byte in the middle of its payload; return the file name."""
    shutil.copytree(package_dir, target_dir)
    payload = max(
        (p for p in target_dir.iterdir() if p.name != "manifest.json"),
        key=lambda p: p.stat().st_size,
    )
    raw = bytearray(payload.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    payload.write_bytes(bytes(raw))
    return payload.name


def run_roundtrip(
    suite_env: dict[str, Any],
    hydrate_env: dict[str, Any],
    runs_env: dict[str, Any],
    store_dir: Path,
    work_dir: Path,
) -> dict[str, Any]:
    """snapshot -> verify -> clean hydrate -> query again; return the `roundtrip` envelope."""
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    suite = suite_of(suite_env)
    top_k = runs_env["data"]["top_k"]
    system = get_system(hydrate_env["data"]["system"])
    work_dir = Path(work_dir)
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    package_dir = work_dir / "package"

    try:
        source = system.attach(Path(store_dir))
    except FileNotFoundError:
        raise RecallbenchError(f"{store_dir}: no store; run `recallbench hydrate` first") from None
    try:
        start = time.perf_counter()
        package = system.snapshot(source, package_dir)
        snapshot_s = time.perf_counter() - start
    finally:
        source.close()

    start = time.perf_counter()
    verified_records = system.verify(package_dir, work_dir / "spool")
    verify_s = time.perf_counter() - start

    start = time.perf_counter()
    clone = system.restore(package_dir, work_dir / "clone")
    hydrate_s = time.perf_counter() - start
    try:
        queries = suite.queries
        first_hits = clone.search(queries[0].query, top_k) if queries else []
        cold_start_s = time.perf_counter() - start
        clone_records = clone.count()
        after = {}
        for i, q in enumerate(queries):
            hits = first_hits if i == 0 else clone.search(q.query, top_k)
            after[q.query_id] = [{"memory_id": h.memory_id, "score": h.score} for h in hits]
    finally:
        clone.close()

    per_query = {}
    for row in runs_env["data"]["queries"]:
        per_query[row["query_id"]] = compare_rankings(row["hits"], after[row["query_id"]])
    identical = sum(1 for d in per_query.values() if d["identical"])

    corrupt_dir = work_dir / "package-corrupted"
    corrupted_file = _corrupt_one_byte(package_dir, corrupt_dir)
    try:
        system.verify(corrupt_dir, work_dir / "spool")
        rejection = {"rejected": False, "reason": None}
    except SnapshotRejected as exc:
        rejection = {"rejected": True, "reason": exc.reason}

    def rate(seconds: float, n: int) -> float | None:
        return n / seconds if seconds > 0 else None

    data = {
        "system": system.name,
        "top_k": top_k,
        "records": {
            "source": hydrate_env["data"]["records"],
            "packaged": package.records,
            "verified": verified_records,
            "clone": clone_records,
        },
        "equivalence": {
            "numerator": identical,
            "denominator": len(per_query),
            "value": identical / len(per_query) if per_query else None,
        },
        "per_query": per_query,
        "corruption_check": {"file": corrupted_file, "flipped_bytes": 1, **rejection},
        "timing": {
            "package_bytes": package.size_bytes,
            "snapshot_seconds": snapshot_s,
            "snapshot_records_per_second": rate(snapshot_s, package.records),
            "verify_seconds": verify_s,
            "verify_records_per_second": rate(verify_s, verified_records),
            "hydrate_seconds": hydrate_s,
            "hydrate_records_per_second": rate(hydrate_s, clone_records),
            "cold_start_to_first_query_seconds": cold_start_s,
        },
    }
    inputs = {
        "suite": suite_env["fingerprint"],
        "hydrate": hydrate_env["fingerprint"],
        "runs": runs_env["fingerprint"],
    }
    return envelope("roundtrip", data, inputs)
