"""scripts/retrieval_eval.py as a subprocess: the one documented command."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BASELINE, CORPUS, QUERIES, ROOT, load_json

from recallbench.artifacts import dumps
from recallbench.stages.report import normalize

SCRIPT = "scripts/retrieval_eval.py"


def run_script(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("RECALLBENCH_BUILD_DIR", None)
    return subprocess.run(
        [sys.executable, SCRIPT if cwd == ROOT else str(ROOT / SCRIPT), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def broken_corpus(tmp_path: Path, line: int = 4) -> Path:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = lines[line - 1][:-10]  # cut the closing part of the JSON object
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_fixtures_exit_0_and_write_both_outputs(tmp_path: Path) -> None:
    output, report = tmp_path / "out" / "result.json", tmp_path / "out" / "report.md"
    proc = run_script("--output", output, "--report", report)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = load_json(output)
    assert result["schema"] == "recallbench.fixture-result"
    assert result["suite"]["counts"]["queries"] == 57
    assert dumps(normalize(result)) == BASELINE.read_bytes()
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("# Retrieval quality report")
    assert "## Conclusion" in markdown
    out = proc.stdout.splitlines()
    assert out[0].startswith("Recall@1 0.467  Recall@5 0.702  MRR@5 0.645  nDCG@5 0.648")
    assert out[0].endswith("round-trip 57/57 identical")
    assert out[1].startswith("rule 2: Add portable semantic embeddings next")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md", "result.json"]


def test_malformed_corpus_exits_1_with_file_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = broken_corpus(tmp_path, line=4)
    output, report = tmp_path / "result.json", tmp_path / "report.md"
    proc = run_script("--corpus", bad, "--queries", QUERIES, "--output", output, "--report", report)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert re.fullmatch(rf"{re.escape(str(bad))}:4: invalid JSON \(.+\)", lines[0]), lines
    problems = [x for x in lines if x.startswith(f"{bad}:")]
    assert lines[:-1] == problems
    assert lines[-1] == f"retrieval_eval: error: {len(problems)} problem(s) in the fixtures"
    assert sum(1 for x in lines if "error:" in x) == 1
    assert not output.exists() and not report.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


def test_bad_relevance_reference_names_the_queries_line(tmp_path: Path) -> None:
    lines = QUERIES.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"mem-log-007"', '"mem-does-not-exist"')
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_script("--queries", queries, "--output", tmp_path / "r.json")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert any(
        x.startswith(f"{queries}:2: ") and "mem-does-not-exist" in x
        for x in proc.stderr.splitlines()
    ), proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_top_k_0_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_script("--top-k", "0", "--output", tmp_path / "r.json")
    assert proc.returncode == 2
    assert "Invalid value for '--top-k'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_check_baseline_option(tmp_path: Path) -> None:
    assert run_script("--check-baseline", BASELINE).returncode == 0
    doc = load_json(BASELINE)
    doc["metrics"]["overall"]["ndcg@5"]["value"] = 0.9
    tampered = tmp_path / "baseline.json"
    tampered.write_bytes(dumps(doc))
    proc = run_script("--check-baseline", tampered)
    assert proc.returncode == 3
    assert "category-level before -> after:" in proc.stderr
    assert re.search(r"overall\s+ndcg@5\s+0\.9000 ->\s+0\.6483", proc.stderr)
    assert proc.stderr.splitlines()[-1].startswith("retrieval_eval: error: result differs")
    assert "Traceback" not in proc.stderr


def test_works_from_another_directory(tmp_path: Path) -> None:
    """The default fixture paths resolve from the script, not from the current directory."""
    proc = run_script("--output", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes and umask")
def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    output, report = tmp_path / "r.json", tmp_path / "r.md"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--output", str(output), "--report", str(report)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(output.stat().st_mode) == 0o644
    assert stat.S_IMODE(report.stat().st_mode) == 0o644


def test_longmemeval_lane_through_the_script(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    gen = subprocess.run(
        [
            sys.executable,
            "-m",
            "recallbench.cli",
            "-q",
            "longmemeval",
            "generate",
            "--shape",
            "s",
            "--questions",
            "12",
            "--seed",
            "5",
            "--sessions-per-question",
            "8",
            "--out",
            str(data),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, gen.stderr
    report = tmp_path / "lme.md"
    proc = run_script(
        "--longmemeval", data, "--build-dir", tmp_path / "build", "--report", report, "-q"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["recall@1", "recall@5", "recall@10"]
    assert re.fullmatch(r"\(means over \d+ scored questions; recall = fractional\)", lines[3])
    assert "## Questions" in report.read_text(encoding="utf-8")

    broken = tmp_path / "broken.json"
    broken.write_text('[{"question_id": "q1"}]', encoding="utf-8")
    bad = run_script("--longmemeval", broken, "--build-dir", tmp_path / "build2", "-q")
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("retrieval_eval: error: ")
    assert "record[0]" in bad.stderr
