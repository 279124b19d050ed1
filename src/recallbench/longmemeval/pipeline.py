"""The lane in-process: validate -> run (hydrate + query, cached or inline) -> score -> report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recallbench.artifacts import atomic_write_bytes, dumps
from recallbench.longmemeval import DEFAULT_TOP_K, stages
from recallbench.longmemeval.reader import stderr_log
from recallbench.longmemeval.stages import REPORT_MD, lane_dir
from recallbench.systems import DEFAULT_SYSTEM


def run_lane(
    data_file: Path,
    *,
    build_dir: Path,
    cache_dir: Path | None,
    workers: int,
    session_text: str,
    output: Path | None,
    report: Path | None,
    quiet: bool,
    top_k: int = DEFAULT_TOP_K,
    system: str = DEFAULT_SYSTEM,
) -> dict[str, Any]:
    """Run every stage on `data_file`; return the results (plus `local_diagnostics`).

    Artifacts go to ``<build_dir>/longmemeval/``. `output` (JSON: the results and the local
    timing diagnostics) and `report` (Markdown) are extra copies written where asked.
    With `cache_dir` the vectors come from a cache made by `prep` (an error when missing or
    made for another embedder, file or session-text mode); without it they are embedded
    inline. Notices go to stderr (warnings always, the rest unless `quiet`).
    """
    log = (lambda _message: None) if quiet else stderr_log
    common = {"build_dir": Path(build_dir), "quiet": quiet, "log": log, "warn": stderr_log}
    stages.validate(Path(data_file), **common)
    stages.run(
        Path(data_file),
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        workers=workers,
        session_text=session_text,
        top_k=top_k,
        system=system,
        **common,
    )
    stages.score(build_dir=Path(build_dir))
    results = stages.report(build_dir=Path(build_dir))
    results.pop("artifact_fingerprint", None)
    if output is not None:
        atomic_write_bytes(Path(output), dumps(results))
    if report is not None:
        atomic_write_bytes(Path(report), (lane_dir(Path(build_dir)) / REPORT_MD).read_bytes())
    return results
