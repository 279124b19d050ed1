"""benchmarks/bench_scale.py on one tiny cell: it runs every stage, `run` and the official
oracle, and prints its Markdown tables with every figure's column. Figures are never
asserted (they depend on the machine and its load)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_benchmark_prints_a_table_of_a_tiny_cell(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--cells", "s:2"]
    cmd += ["--top-k", "3", "--systems", "bm25-okapi", "--session-chars", "100", "--no-browser"]
    cmd += ["--work", str(tmp_path / "work"), "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    doc = orjson.loads(out.read_bytes())
    (cell,) = doc["cells"]
    assert cell["file"] == "S2" and cell["system"] == "bm25-okapi" and cell["top_k"] == 3
    assert set(cell["stages"]) == {
        "validate",
        "hydrate",
        "query",
        "snapshot-roundtrip",
        "score",
        "report",
        "decide",
    }
    assert cell["run_runs_identical_to_stages"] is True
    assert doc["files"]["S2"]["oracle"]["questions"] == 2
    assert {"wall_s", "peak_rss_mb", "first_contentful_paint_ms"} <= set(doc["units"])
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| file | questions"))
    for column in (
        "run peak RSS MB",
        "report.html MB",
        "first paint ms",
        "run / oracle, wall (CPU)",
    ):
        assert column in header
    row = next(line for line in lines if line.startswith("| S2 | 2 | bm25-okapi | 3 |"))
    assert row.count("|") == header.count("|")
    assert any(line.startswith("| S2 | bm25-okapi | 3 | ") for line in lines)  # per stage
    assert not (tmp_path / "work").exists()  # the generated file is removed
