"""The lane end to end on generated data: workers, leakage, scores vs a direct computation."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from recallbench.errors import ArtifactError, RecallbenchError
from recallbench.longmemeval import stages
from recallbench.longmemeval.cli import longmemeval
from recallbench.longmemeval.generator import generate
from recallbench.longmemeval.pipeline import run_lane


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lme-lane") / "lme_s_like.json"
    generate(path, shape="s", questions=40, seed=7, sessions_per_question=10, session_chars=300)
    return path


@pytest.fixture(scope="module")
def lane(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    build = tmp_path_factory.mktemp("lme-lane-build")
    results = run_lane(
        data,
        build_dir=build,
        cache_dir=None,
        workers=1,
        session_text="user",
        output=build / "out.json",
        report=build / "out.md",
        quiet=True,
    )
    return {"build": build, "results": results}


def _load(path: Path) -> dict:
    return orjson.loads(path.read_bytes())


def _artifact(build: Path, name: str) -> dict:
    return _load(build / "longmemeval" / name)


def test_run_lane_writes_everything(lane: dict) -> None:
    build, results = lane["build"], lane["results"]
    for name in (
        "validate.json",
        "runs.json",
        "scores.json",
        "results.json",
        "report.md",
        "timing.json",
    ):
        assert (build / "longmemeval" / name).is_file(), name
    assert not (build / "longmemeval" / "work").exists()  # every per-question store deleted
    assert _load(build / "out.json") == orjson.loads(orjson.dumps(results))
    assert (build / "out.md").read_text() == (build / "longmemeval" / "report.md").read_text()
    assert results["counts"]["records"] == 40
    assert results["counts"]["dropped_abstention"]["count"] == 2
    assert results["counts"]["scored"] == 38
    assert results["local_diagnostics"]["questions"] == 38
    # the normalised results carry no timing
    assert "seconds" not in (build / "longmemeval" / "results.json").read_text()


def test_report_states_fingerprint_mode_denominators_and_drops(lane: dict, data: Path) -> None:
    report = (lane["build"] / "longmemeval" / "report.md").read_text()
    results = lane["results"]
    assert results["data_file"]["sha256"] in report
    assert "session text: `user`" in report
    assert "dropped, abstention: 2" in report and "**scored: 38**" in report
    for qid in results["counts"]["dropped_abstention"]["question_ids"]:
        assert f"`{qid}`" in report
    assert "synthetic" in report and "not LongMemEval" in report
    assert "local diagnostic" in report
    assert "accuracy" not in report.lower()
    overall = results["metrics"]["overall"]["metrics"]
    assert overall["recall_any@5"]["denominator"] == 38
    assert f"({overall['recall_any@5']['numerator']}/38)" in report


def _direct(ranking: list[str], gold: list[str], k: int) -> dict[str, float]:
    """The official formulas, written out again independently of the lane's code."""
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


def test_numbers_equal_a_direct_computation_from_the_rankings(lane: dict) -> None:
    runs = _artifact(lane["build"], "runs.json")["data"]["questions"]
    metrics = lane["results"]["metrics"]
    groups = {"overall": runs}
    for q in runs:
        groups.setdefault(q["question_type"], []).append(q)
    for scope, questions in groups.items():
        block = metrics["overall"] if scope == "overall" else metrics["by_type"][scope]
        assert block["questions"] == len(questions)
        for k in (1, 5, 10):
            rows = [_direct(q["ranking"], q["gold"], k) for q in questions]
            for name in ("recall", "recall_any", "recall_all", "ndcg_any"):
                cell = block["metrics"][f"{name}@{k}"]
                assert cell["denominator"] == len(questions)
                assert cell["value"] == pytest.approx(
                    sum(r[name] for r in rows) / len(rows), abs=1e-12
                )
    # not degenerate: the synthetic task is neither trivial nor hopeless
    overall = metrics["overall"]["metrics"]
    assert 0 < overall["recall_all@1"]["value"] < overall["recall_any@10"]["value"]


def test_rankings_are_top_k_dataset_ids_and_scores_descend(lane: dict, data: Path) -> None:
    raw = {r["question_id"]: r for r in orjson.loads(data.read_bytes())}
    for q in _artifact(lane["build"], "runs.json")["data"]["questions"]:
        haystack = raw[q["question_id"]]["haystack_session_ids"]
        assert len(q["ranking"]) == min(10, len(haystack)) == len(set(q["ranking"]))
        assert set(q["ranking"]) <= set(haystack)
        assert q["scores"] == sorted(q["scores"], reverse=True)
        assert q["gold"] == [g for g in raw[q["question_id"]]["answer_session_ids"]]


def test_one_and_two_workers_give_identical_artifacts(
    lane: dict, data: Path, tmp_path: Path
) -> None:
    build = tmp_path / "b2"
    shutil.copytree(lane["build"] / "longmemeval", build / "longmemeval")
    stages.run(data, build_dir=build, workers=2, quiet=True)
    stages.score(build_dir=build)
    for name in ("runs.json", "scores.json"):
        assert (build / "longmemeval" / name).read_bytes() == (
            lane["build"] / "longmemeval" / name
        ).read_bytes(), name
    assert _artifact(build, "timing.json")["workers"] == 2
    assert not (build / "longmemeval" / "work").exists()


def test_no_dataset_session_id_reaches_any_store(data: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    stages.validate(data, build_dir=build, quiet=True)
    stages.run(data, build_dir=build, quiet=True, keep_stores=True, session_text="all")
    records = orjson.loads(data.read_bytes())
    session_ids = {sid for r in records for sid in r["haystack_session_ids"]}
    question_ids = {r["question_id"] for r in records}
    stores = sorted((build / "longmemeval" / "work").rglob("*.sqlite"))
    assert len(stores) == 38
    cells = 0
    for db in stores:
        conn = sqlite3.connect(db)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        blob = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        cell = cell.decode("utf-8", errors="ignore")
                    if cell is not None:
                        blob.append(str(cell))
                        cells += 1
        conn.close()
        text = "\n".join(blob)
        assert "answer_" not in text  # the gold-giving prefix
        leaked = [s for s in session_ids if s in text]
        assert not leaked, (db, leaked[:3])
        assert not [q for q in question_ids if q in text], db
    assert cells > 0


def test_stages_refuse_missing_and_stale_artifacts(data: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    with pytest.raises(
        ArtifactError, match="validate.json: missing; run `recallbench longmemeval validate FILE`"
    ):
        stages.run(data, build_dir=build, quiet=True)
    stages.validate(data, build_dir=build, quiet=True)
    with pytest.raises(ArtifactError, match="runs.json: missing"):
        stages.score(build_dir=build)
    other = tmp_path / "other.json"
    generate(other, shape="oracle", questions=6, seed=1, session_chars=40)
    with pytest.raises(ArtifactError, match="not the file validate.json was made from"):
        stages.run(other, build_dir=build, quiet=True)
    stages.run(data, build_dir=build, quiet=True)
    stages.validate(other, build_dir=build, quiet=True)
    with pytest.raises(ArtifactError, match="runs.json is stale"):
        stages.score(build_dir=build)


def test_bad_options_are_one_line_errors(data: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    stages.validate(data, build_dir=build, quiet=True)
    with pytest.raises(RecallbenchError, match="--top-k must be between 1 and 10000"):
        stages.run(data, build_dir=build, top_k=10_001, quiet=True)
    with pytest.raises(RecallbenchError, match="--session-text must be one of"):
        stages.run(data, build_dir=build, session_text="both", quiet=True)


def test_cli_stage_by_stage(data: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    runner = CliRunner()

    def call(*args: str) -> str:
        result = runner.invoke(longmemeval, ["--build-dir", str(build), "--quiet", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "40 records, 2 abstention dropped, 0 other dropped, 38 to score" in call(
        "validate", str(data)
    )
    call("prep", str(data), "--cache", str(tmp_path / "cache"))
    assert "38 questions ranked" in call("run", str(data), "--cache", str(tmp_path / "cache"))
    assert "scored 38 questions" in call("score")
    assert call("report").strip().endswith("report.md")
    result = runner.invoke(
        longmemeval,
        ["--build-dir", str(build), "run", str(data), "--cache", str(tmp_path / "nope")],
    )
    assert result.exit_code == 1 and "no vector cache here" in result.output
    assert "Traceback" not in result.output


def test_cli_generate(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    args = [
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
    result = CliRunner().invoke(longmemeval, args)
    assert result.exit_code == 0, result.output
    first = out.read_bytes()
    assert "3 synthetic questions" in result.output
    CliRunner().invoke(longmemeval, args)
    assert out.read_bytes() == first  # deterministic for a seed
    records = orjson.loads(first)
    assert len(records) == 3 and all(len(r["haystack_session_ids"]) >= 11 for r in records)


def test_500_to_470_filtering_is_visible_in_the_report(tmp_path: Path) -> None:
    data = tmp_path / "oracle_like.json"
    generate(data, shape="oracle", questions=500, seed=4, session_chars=30)
    results = run_lane(
        data,
        build_dir=tmp_path / "b",
        cache_dir=None,
        workers=2,
        session_text="user",
        output=None,
        report=tmp_path / "report.md",
        quiet=True,
    )
    counts = results["counts"]
    assert (counts["records"], counts["dropped_abstention"]["count"], counts["scored"]) == (
        500,
        30,
        470,
    )
    assert len(counts["dropped_abstention"]["question_ids"]) == 30
    assert sum(c["raw"] for c in counts["by_type"].values()) == 500
    assert results["metrics"]["overall"]["metrics"]["recall@10"]["denominator"] == 470
    report = (tmp_path / "report.md").read_text()
    assert "records in the file: 500" in report
    assert "dropped, abstention: 30" in report
    assert "**scored: 470**" in report
    assert "| multi-session | 133 |" in report  # the real type proportions


def test_registered_under_the_main_cli_inherits_build_dir(data: Path, tmp_path: Path) -> None:
    from recallbench.cli import main

    build = tmp_path / "inherited"
    result = CliRunner().invoke(
        main, ["--build-dir", str(build), "-q", "longmemeval", "validate", str(data)]
    )
    assert result.exit_code == 0, result.output
    assert (build / "longmemeval" / "validate.json").is_file()
    assert "loaded" not in result.output  # the parent's --quiet silences notices
