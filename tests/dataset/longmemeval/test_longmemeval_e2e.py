"""LongMemEval through the seven stages on generated data: counts and drops, scores vs a
direct computation, parity with the retired `recallbench longmemeval run` command, workers, no leakage into the
stores, stale artifacts, the CLI stage by stage, quiet output and the script's summary."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.builddir.artifacts import STAGES, file_sha256
from recallbench.cli.main import main
from recallbench.commands.pipeline import Run, run_pipeline, write_run
from recallbench.core import progress
from recallbench.datasets.longmemeval.generator import generate
from recallbench.engine.tasks import Execution
from recallbench.stages import query as query_stage

ROOT = Path(__file__).resolve().parents[3]
ARTIFACT_FILES = [s.file for s in STAGES]
TYPES = (
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
)
#: The retired `recallbench longmemeval run` command (commit 4f9ba14) on
#: generate(shape="s", questions=12, seed=1, sessions_per_question=8, session_chars=300),
#: system bm25, session text "user", top-k 10: its overall figures and the sha256 of its
#: per-question session rankings ({question_id: ranking} as sorted-key compact JSON).
OLD_LANE_BM25 = {
    "recall@1": 0.5606060606060607,
    "recall@5": 0.9090909090909091,
    "recall@10": 1.0,
    "recall_any@1": 0.9090909090909091,
    "recall_any@5": 0.9090909090909091,
    "recall_any@10": 1.0,
    "recall_all@1": 0.2727272727272727,
    "recall_all@5": 0.9090909090909091,
    "recall_all@10": 1.0,
    "ndcg_any@1": 0.9090909090909091,
    "ndcg_any@5": 0.8923149887987026,
    "ndcg_any@10": 0.9209936139610416,
}
OLD_LANE_BM25_POOLED_RECALL = {1: 0.5, 5: 0.95, 10: 1.0}
OLD_LANE_BM25_RANKINGS_SHA256 = "0ff2eaacc84f1fc3ae7265947e050cd3a9ae494f9c3ee432deefad9f740a1202"


def cli(build: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["--build-dir", str(build), *map(str, args)])


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def one_line_error(result: Result, command: str, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith(f"recallbench {command}: error: "), result.stderr
    if exit_code == 1:
        assert len(lines) == 1, result.stderr
    return lines[-1]


def load(path: Path) -> dict[str, Any]:
    return orjson.loads(path.read_bytes())


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lme-e2e") / "lme_s_like.json"
    generate(path, shape="s", questions=12, seed=1, sessions_per_question=8, session_chars=300)
    return path


@pytest.fixture(scope="module")
def longmemeval_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One in-process run with BM25 (top-10), written to a build directory (read-only)."""
    build = tmp_path_factory.mktemp("lme-e2e-build")
    run = run_pipeline("longmemeval", {"data": data}, build, system="bm25", top_k=10)
    write_run(run, build)
    return {"build": build, "run": run}


def _rows(longmemeval_run: dict[str, Any]) -> list[dict[str, Any]]:
    return longmemeval_run["run"].envelopes["runs"]["data"]["queries"]


def test_the_run_writes_every_artifact_and_counts_the_drops(longmemeval_run: dict) -> None:
    build, run = longmemeval_run["build"], longmemeval_run["run"]
    for name in [*ARTIFACT_FILES, "report.md"]:
        assert (build / name).is_file(), name
    assert not (build / "work").exists()  # every transient store removed
    assert not (build / "stores").exists()
    counts = run.result["counts"]
    assert (counts["queries_raw"], counts["queries"], counts["scopes"]) == (12, 11, 11)
    assert counts["dropped"] == {"abstention": 1}
    [drop] = run.result["drops"]
    assert drop["reason"] == "abstention" and drop["query_id"].endswith("_abs")
    assert sum(c["raw"] for c in counts["per_category"].values()) == 12
    assert sum(c["scored"] for c in counts["per_category"].values()) == 11
    assert run.result["dataset"]["categories"] == list(TYPES)
    assert run.result["dataset"]["options"] == {"session_text": "user", "unit": "session"}
    # the result document carries no timing (sidecars do)
    assert "seconds" not in (build / "results.json").read_text()
    assert "seconds" in (build / "timings" / "runs.json").read_text()


def test_report_states_file_options_denominators_and_drops(
    longmemeval_run: dict, data: Path
) -> None:
    report = (longmemeval_run["build"] / "report.md").read_text()
    result = longmemeval_run["run"].result
    assert result["dataset"]["identity"]["files"][0]["sha256"] == file_sha256(data)
    assert file_sha256(data)[:12] in report and data.name in report
    assert "session text user, unit session" in report
    assert "synthetic" in report and "not LongMemEval" in report
    assert "11 / " in report and "11 scored of 12" in report
    # the underscore at a word's edge is escaped: it renders as the text '_abs'
    assert "abstention: 1 ('\\_abs' in question_id" in report
    assert result["drops"][0]["query_id"] in report
    assert "local diagnostic" in report
    assert "accuracy" not in report.lower()
    overall = result["metrics"]["overall"]
    assert overall["recall_any@5"]["denominator"] == 11
    assert "no decision rules: the longmemeval dataset defines none" in report


def _direct(ranking: list[str], gold: list[str], k: int) -> dict[str, float]:
    """The official formulas, written out again independently of the package's code."""
    top = ranking[:k]
    rel = [1.0 if s in gold else 0.0 for s in top]
    dcg = (rel[0] + sum(rel[i] / math.log2(i + 1) for i in range(1, len(rel)))) if rel else 0.0
    ideal = [1.0] * min(len(gold), k)
    idcg = ideal[0] + sum(ideal[i] / math.log2(i + 1) for i in range(1, len(ideal)))
    return {
        "recall": len(set(top) & set(gold)) / len(gold),
        "recall_any": float(any(g in top for g in gold)),
        "recall_all": float(all(g in top for g in gold)),
        "ndcg_any": dcg / idcg,
    }


def test_numbers_equal_a_direct_computation_from_the_rankings(longmemeval_run: dict) -> None:
    rows = _rows(longmemeval_run)
    metrics = longmemeval_run["run"].result["metrics"]
    groups: dict[str, list[dict]] = {"overall": rows}
    for row in rows:
        groups.setdefault(row["category"], []).append(row)
    for group, members in groups.items():
        cells = metrics["overall"] if group == "overall" else metrics["per_category"][group]
        for k in (1, 5, 10):
            direct = [
                _direct(r["levels"]["session"]["ranking"], list(r["levels"]["session"]["gold"]), k)
                for r in members
            ]
            for name in ("recall", "recall_any", "recall_all", "ndcg_any"):
                cell = cells[f"{name}@{k}"]
                assert cell["denominator"] == cell["queries"] == len(members)
                assert cell["value"] == pytest.approx(
                    sum(d[name] for d in direct) / len(direct), abs=1e-12
                )
    # not degenerate: the synthetic task is neither trivial nor hopeless
    overall = metrics["overall"]
    assert 0 < overall["recall_all@1"]["value"] < overall["recall_any@10"]["value"]


def test_session_results_equal_the_retired_lane(longmemeval_run: dict) -> None:
    overall = longmemeval_run["run"].result["metrics"]["overall"]
    for name, value in OLD_LANE_BM25.items():
        assert overall[name]["value"] == pytest.approx(value, abs=1e-12), name
    for k, value in OLD_LANE_BM25_POOLED_RECALL.items():
        pooled = overall[f"recall@{k}"]["pooled"]
        assert pooled["numerator"] / pooled["denominator"] == value
    rankings = {r["query_id"]: r["levels"]["session"]["ranking"] for r in _rows(longmemeval_run)}
    digest = hashlib.sha256(orjson.dumps(rankings, option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert digest == OLD_LANE_BM25_RANKINGS_SHA256


def test_rankings_are_top_k_dataset_ids_and_scores_descend(
    longmemeval_run: dict, data: Path
) -> None:
    raw = {r["question_id"]: r for r in orjson.loads(data.read_bytes())}
    for row in _rows(longmemeval_run):
        record = raw[row["query_id"]]
        haystack = list(dict.fromkeys(record["haystack_session_ids"]))
        session = row["levels"]["session"]
        assert len(session["ranking"]) == min(10, len(haystack)) == len(set(session["ranking"]))
        assert set(session["ranking"]) <= set(haystack)
        assert session["scores"] == sorted(session["scores"], reverse=True)
        assert session["gold"] == dict.fromkeys(record["answer_session_ids"], 2)
        assert row["scope_id"] == row["query_id"]  # one scope per question


@pytest.mark.parametrize("batched", [False, True])
def test_one_and_two_workers_give_identical_artifacts(
    longmemeval_run: dict,
    data: Path,
    tmp_path: Path,
    batched: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Also when several questions go to a worker as one task (a shallow window makes the
    11 questions enough to batch)."""
    if batched:
        monkeypatch.setattr(query_stage, "QUERY_WINDOW", 1)
    run: Run = run_pipeline(
        "longmemeval",
        {"data": data},
        tmp_path,
        system="bm25",
        top_k=10,
        execution=Execution(workers=2),
    )
    write_run(run, tmp_path)
    for name in ("runs.json", "scores.json", "results.json", "hydrate.json", "roundtrip.json"):
        assert (tmp_path / name).read_bytes() == (longmemeval_run["build"] / name).read_bytes(), (
            name
        )
    timing = load(tmp_path / "timings" / "runs.json")
    assert timing["execution"] == {"executor": "local", "workers": 2}
    assert timing["scopes_per_task"] == (4 if batched else 1)
    assert not (tmp_path / "work").exists()


def _cells(db: Path) -> list[str]:
    """Every non-null cell of every table, as text."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        cell = cell.decode("utf-8", errors="ignore")
                    if cell is not None:
                        out.append(str(cell))
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("unit", ["session", "turn"])
def test_no_dataset_id_reaches_any_store(data: Path, tmp_path: Path, unit: str) -> None:
    ok(
        cli(
            tmp_path,
            "validate",
            "--dataset",
            "longmemeval",
            "--data",
            data,
            "--session-text",
            "all",
            "--unit",
            unit,
        )
    )
    ok(cli(tmp_path, "hydrate", "--keep-stores", "--system", "hotmem"))
    records = orjson.loads(data.read_bytes())
    session_ids = {sid for r in records for sid in r["haystack_session_ids"]}
    question_ids = {r["question_id"] for r in records}
    stores = sorted((tmp_path / "stores").rglob("*.sqlite"))
    assert len(stores) == 11
    cells = 0
    for db in stores:
        blob = _cells(db)
        cells += len(blob)
        text = "\n".join(blob)
        assert "answer_" not in text  # the gold-giving prefix
        leaked = [s for s in session_ids if s in text]
        assert not leaked, (db, leaked[:3])
        assert not [q for q in question_ids if q in text], db
    assert cells > 0
    # the kept stores are the ones query then searches
    ok(cli(tmp_path, "query"))
    assert load(tmp_path / "runs.json")["data"]["store_mode"] == "kept"


def test_stages_refuse_missing_and_stale_artifacts(data: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    line = one_line_error(cli(build, "query"), "query")
    assert "suite.json: missing; run `recallbench validate` first" in line
    ok(cli(build, "validate", "--dataset", "longmemeval", "--data", data))
    line = one_line_error(cli(build, "query"), "query")
    assert "hydrate.json: missing; run `recallbench hydrate` first" in line
    for stage in (("hydrate", "--system", "bm25"), ("query",), ("snapshot-roundtrip",)):
        ok(cli(build, *stage))
    other = tmp_path / "other.json"
    generate(other, shape="oracle", questions=6, seed=1, session_chars=40)
    ok(cli(build, "validate", "--dataset", "longmemeval", "--data", other))
    line = one_line_error(cli(build, "score"), "score")
    # whichever downstream artifact is checked first names itself and the command to rerun
    assert re.search(
        r"(runs|roundtrip)\.json is stale \(made from another suite\.json\); run `recallbench (query|snapshot-roundtrip)` again",
        line,
    )


def test_bad_options_are_one_line_errors(data: Path, tmp_path: Path) -> None:
    for args, message in (
        (("--session-text", "both"), "'both' is not one of 'user', 'all'"),
        (("--unit", "word"), "'word' is not one of 'session', 'turn'"),
    ):
        result = cli(tmp_path, "validate", "--dataset", "longmemeval", "--data", data, *args)
        assert result.exit_code == 2 and message in result.stderr, result.output
    ok(cli(tmp_path, "validate", "--dataset", "longmemeval", "--data", data))
    ok(cli(tmp_path, "hydrate", "--system", "bm25"))
    result = cli(tmp_path, "query", "--top-k", "10001")
    assert result.exit_code == 2 and "10001 is not in the range" in result.stderr


def test_cli_stage_by_stage_equals_the_in_process_run(
    longmemeval_run: dict, data: Path, tmp_path: Path
) -> None:
    build = tmp_path / "b"

    def call(*args: str | Path) -> Result:
        return ok(cli(build, *args))

    validate = call("validate", "--dataset", "longmemeval", "--data", data)
    assert "11 scope(s)" in validate.stderr and "11 queries scored of 12" in validate.stderr
    assert "in 6 categories" in validate.stderr and "warning" not in validate.stderr
    assert "transient stores" in call("hydrate", "--system", "bm25").stderr
    assert "11 queries, top-10, 1 repeat(s)" in call("query").stderr
    roundtrip = call("snapshot-roundtrip")
    assert "11/11 queries identical after the round trip (11 of 11 scopes)" in roundtrip.stderr
    assert "recall@1 0.561" in call("score").stderr
    report = call("report")
    assert report.stdout.splitlines()[0].split()[:2] == ["category", "n"]
    assert "overall" in report.stdout and "single-session-preference" in report.stdout
    decide = call("decide")
    assert decide.stdout.startswith("no rule: no decision rules: the longmemeval dataset")
    for name in ("runs.json", "scores.json", "results.json", "decision.json"):
        assert (build / name).read_bytes() == (longmemeval_run["build"] / name).read_bytes(), name


def test_quiet_silences_notices_and_progress(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as if stderr were a terminal: bars are drawn unless --quiet (or NO_PROGRESS)
    monkeypatch.setattr(progress, "enabled", lambda: not progress._QUIET)
    loud = ok(cli(tmp_path / "a", "validate", "--dataset", "longmemeval", "--data", data))
    assert "wrote " in loud.stderr and "validate" in loud.stderr
    assert "B/s" in loud.stderr or "%" in loud.stderr  # the byte bar
    build = tmp_path / "q"
    for args in (
        ("validate", "--dataset", "longmemeval", "--data", data),
        ("hydrate", "--system", "bm25"),
        ("query",),
        ("snapshot-roundtrip",),
        ("score",),
    ):
        quiet = ok(CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)]))
        assert quiet.stderr == "" and quiet.stdout == "", args
    decide = ok(CliRunner().invoke(main, ["--build-dir", str(build), "-q", "decide"]))
    assert decide.stderr == "" and decide.stdout.startswith("no rule: ")


def test_cli_generate(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    args = [
        "longmemeval",
        "generate",
        "--shape",
        "m",
        "--questions",
        "3",
        "--seed",
        "2",
        "--out",
        str(out),
        "--sessions-per-question",
        "12",
        "--session-chars",
        "50",
    ]
    result = ok(CliRunner().invoke(main, args))
    first = out.read_bytes()
    assert "3 synthetic questions" in result.output
    ok(CliRunner().invoke(main, args))
    assert out.read_bytes() == first  # deterministic for a seed
    records = orjson.loads(first)
    assert len(records) == 3 and all(len(r["haystack_session_ids"]) >= 11 for r in records)


def test_500_become_470_in_the_suite(tmp_path: Path) -> None:
    data = tmp_path / "oracle_like.json"
    generate(data, shape="oracle", questions=500, seed=4, session_chars=30)
    ok(cli(tmp_path / "b", "-q", "validate", "--dataset", "longmemeval", "--data", data))
    suite = load(tmp_path / "b" / "suite.json")["data"]
    counts = suite["counts"]
    assert (counts["queries_raw"], counts["queries"], counts["scopes"]) == (500, 470, 470)
    assert counts["dropped"] == {"abstention": 30}
    assert len(suite["drops"]) == 30
    assert all(d["query_id"].endswith("_abs") for d in suite["drops"])
    assert counts["per_category"]["multi-session"]["raw"] == 133  # the real type proportions
    assert [counts["per_category"][t]["raw"] for t in TYPES] == [133, 133, 78, 70, 56, 30]
    assert sum(sum(c["dropped"].values()) for c in counts["per_category"].values()) == 30


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "retrieval_eval", ROOT / "scripts" / "retrieval_eval.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_prints_the_longmemeval_summary(data: Path, tmp_path: Path) -> None:
    report = tmp_path / "lme.md"
    result = CliRunner().invoke(
        _script().main,
        ["--longmemeval", str(data), "--system", "bm25", "--report", str(report), "-q"],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["recall@1", "recall@5", "recall@10"]
    assert lines[0].split() == [
        "recall@1",
        "0.561",
        "recall_any@1",
        "0.909",
        "recall_all@1",
        "0.273",
        "ndcg_any@1",
        "0.909",
    ]
    assert lines[3] == "(means over 11 scored queries; recall = fractional)"
    assert lines[4].startswith("no rule: ")
    assert "## Metrics" in report.read_text()

    broken = tmp_path / "broken.json"
    broken.write_text('[{"question_id": "q1"}]', encoding="utf-8")
    bad = CliRunner().invoke(_script().main, ["--longmemeval", str(broken), "-q"])
    assert bad.exit_code == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("recallbench retrieval_eval: error: ")
    assert "record[0]" in bad.stderr
