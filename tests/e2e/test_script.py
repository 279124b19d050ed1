"""scripts/retrieval_eval.py as a subprocess: the one documented command."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BASELINE, CORPUS, QUERIES, ROOT, load_json

from recallbench.builddir.artifacts import dumps, envelope_fingerprint
from recallbench.report.plots import REPORT_PLOTS_DIR

SCRIPT = "scripts/retrieval_eval.py"
#: the one error line of the script (run_guarded's `recallbench <command>: error:` form)
ERROR = "recallbench retrieval_eval: error: "


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


def test_valid_fixtures_exit_0_and_write_every_output(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    output, report = out_dir / "result.json", out_dir / "report.md"
    baseline = out_dir / "baseline.json"
    proc = run_script("--output", output, "--report", report, "--write-baseline", baseline)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    env = load_json(output)  # the results envelope, as `recallbench report` writes it
    assert env["artifact"] == "results"
    assert env["fingerprint"] == envelope_fingerprint("results", env["inputs"], env["data"])
    result = env["data"]
    assert result["schema"] == "recallbench.result"
    assert result["counts"]["queries"] == 57
    assert dumps(result) == BASELINE.read_bytes()
    # --write-baseline writes the result document itself, byte for byte the committed form
    assert baseline.read_bytes() == BASELINE.read_bytes()
    assert f"wrote baseline {baseline}" in proc.stderr
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("# Retrieval quality report")
    assert "## Conclusion" in markdown
    out = proc.stdout.splitlines()
    # the headline table `recallbench report` and `run` print, then the summary and decision
    assert out[0].split()[:4] == ["category", "n", "recall@1", "[95%"]
    assert out[1].split()[2::3] == ["0.467", "0.702", "0.645", "0.648"]
    assert len(out) == 2 + 9 + 1  # header, overall, the eight categories; summary; decision
    assert out[-2] == (
        "Recall@1 0.467  Recall@5 0.702  MRR@5 0.645  nDCG@5 0.648  round-trip 57/57 identical"
    )
    assert out[-1].startswith("rule 2: Add portable semantic embeddings next")
    # stderr ends with every file written and the closing line
    err = proc.stderr.splitlines()
    assert err[-2] == (
        f"wrote {output}, {report}, {out_dir / 'report.html'}, {out_dir / 'report-data'}/, "
        f"{baseline}"
    ), err
    assert re.fullmatch(r"57 queries scored in \d+\.\d s \(memory level\)", err[-1]), err
    # the report's plots go beside it (where its links point), listed in the envelope
    plots = [p["file"] for p in env["plots"]]
    assert plots == [f"{REPORT_PLOTS_DIR}/category-bars.svg", f"{REPORT_PLOTS_DIR}/recall-at-k.svg"]
    for plot in env["plots"]:
        svg = (out_dir / plot["file"]).read_bytes()
        assert b"<svg" in svg
        assert hashlib.sha256(svg).hexdigest() == plot["sha256"]
        assert f"]({plot['file']})" in markdown  # linked from the report
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "baseline.json",
        "report-data",
        "report-plots",
        "report.html",
        "report.md",
        "result.json",
    ]
    assert [p.name for p in (out_dir / "report-data").iterdir()] == ["0001.js"]
    # the HTML report beside report.md: written inside the run, while its spool was there
    assert "q-semantic-001" in (out_dir / "report.html").read_text(encoding="utf-8")


def test_malformed_corpus_exits_1_with_file_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = broken_corpus(tmp_path, line=4)
    output, report = tmp_path / "result.json", tmp_path / "report.md"
    proc = run_script("--corpus", bad, "--queries", QUERIES, "--output", output, "--report", report)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    # one problem: one line, the error prefix and FILE:LINE: reason
    assert len(lines) == 1, lines
    assert re.fullmatch(rf"{re.escape(ERROR + str(bad))}:4: invalid JSON: .+", lines[0]), lines
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
    assert proc.stderr.splitlines() == [
        f"{ERROR}{queries}:2: relevance references unknown memory 'mem-does-not-exist'"
    ], proc.stderr
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
    assert "\nWhat changed in the configuration\n" in proc.stderr
    assert re.search(r"\noverall\s+50\s+0\.900\s+0\.648\s+-0\.252\s+worse\s", proc.stderr)
    assert "$.metrics.overall.ndcg@5.value: 0.9 -> 0.648" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"{ERROR}result differs")
    assert "Traceback" not in proc.stderr
    # the headline is still printed: the gate runs after the result is known
    assert "Recall@1 0.467" in proc.stdout and proc.stdout.startswith("category ")


def test_check_baseline_refuses_a_file_that_is_not_a_result(tmp_path: Path) -> None:
    foreign = tmp_path / "baseline.json"
    foreign.write_bytes(dumps({"schema": "recallbench.fixture-result", "metrics": {}}))
    proc = run_script("--check-baseline", foreign)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"{ERROR}{foreign}: not a recallbench.result document")


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
            "recallbench.cli.main",
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
    for k, line in zip((1, 5, 10), lines[:3], strict=True):
        assert re.fullmatch(
            rf"recall@{k} [\d.]+  recall_any@{k} [\d.]+  recall_all@{k} [\d.]+  "
            rf"ndcg_any@{k} [\d.]+",
            line,
        ), line
    assert re.fullmatch(r"\(means over \d+ scored queries; recall = fractional\)", lines[3])
    assert lines[4].startswith("no rule: ")  # LongMemEval defines no decision rules
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("# Retrieval quality report")
    assert "## Five worst queries" in markdown
    # --build-dir keeps every artifact of the run
    build = tmp_path / "build"
    for name in ("suite.json", "hydrate.json", "runs.json", "results.json", "decision.json"):
        assert (build / name).is_file(), name
    assert load_json(build / "suite.json")["data"]["dataset"] == "longmemeval"

    broken = tmp_path / "broken.json"
    broken.write_text('[{"question_id": "q1"}]', encoding="utf-8")
    bad = run_script("--longmemeval", broken, "--build-dir", tmp_path / "build2", "-q")
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]  # one line
    assert bad.stderr.startswith(ERROR)
    assert f"{broken}: record[0]" in bad.stderr
    assert not (tmp_path / "build2" / "suite.json").exists()


@pytest.mark.parametrize(
    ("given", "reason"),
    [("/", "is the filesystem root"), ("afile/build", "afile is a file, not a directory")],
)
def test_a_build_dir_that_is_not_our_own_is_refused(
    tmp_path: Path, given: str, reason: str
) -> None:
    (tmp_path / "afile").write_text("x\n", encoding="utf-8")
    proc = run_script("--build-dir", given, "--output", "r.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), lines
    assert reason in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_the_script_takes_runs_options_declared_once() -> None:
    """The script's options are `recallbench run`'s (one declaration,
    `options.run_command_options`), plus the documented script-only ones."""
    import importlib.util

    import click

    from recallbench.cli.main import main as cli_main

    spec = importlib.util.spec_from_file_location("retrieval_eval", ROOT / SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def flags(command: click.Command) -> set[str]:
        ctx = click.Context(command)
        return {
            flag
            for param in command.get_params(ctx)
            if isinstance(param, click.Option)
            for flag in (*param.opts, *param.secondary_opts)
        } - {"-h", "--help"}

    # --build-dir and -q/--quiet are the `recallbench` group's options in the CLI
    script_only = {"--longmemeval", "--build-dir", "--write-baseline", "--check-baseline"}
    script_only |= {"-q", "--quiet"}
    run = flags(cli_main.commands["run"])
    script = flags(module.main)
    assert script - script_only == run
    assert script_only <= script
    assert {"--k", "--preset", "--measure", "--json"} <= run
    assert set(module.SCRIPT_ONLY_OPTIONS) <= script_only


def test_the_script_takes_measure_preset_and_json(tmp_path: Path) -> None:
    """--measure, --preset and --json work in the script as in `run` (--json: one JSON
    object on stdout); --preset is checked as `run` checks it."""
    import json

    proc = run_script("--measure", "recall@3", "--measure", "ndcg@3", "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # the whole of stdout is one object
    assert doc["measures"] == ["recall@3", "ndcg@3"]
    assert doc["queries_scored"] == 57 and doc["level"] == "memory"
    assert doc["figures"][0]["label"] == "overall" and doc["figures"][0]["n"] == 57
    assert doc["decision"]["headline"].startswith("rule ")
    assert doc["files"] == [] and doc["system"] == "hotmem"
    refused = run_script("--preset", "longmemeval-paper")
    assert refused.returncode == 2
    assert "--preset longmemeval-paper is for --dataset longmemeval" in refused.stderr
