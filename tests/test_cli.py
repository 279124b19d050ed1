"""The stage commands refuse missing, stale and foreign artifacts with one clear line."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from conftest import CORPUS, QUERIES, STAGE_OUTPUTS, cli, copy_build, load_json, run_stages

from recallbench.artifacts import read_artifact
from recallbench.cli import main
from recallbench.pipeline import STAGES

ALL_COMMANDS = (*STAGES, "check-baseline", "export-trec", "run")


def assert_one_line_error(result: Result, stage: str, exit_code: int = 1) -> str:
    """The command failed with exit `exit_code` and exactly one error line, no traceback."""
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"recallbench {stage}: error: "), lines[0]
    return lines[0]


def snapshot_file(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def build(staged_build: Path, tmp_path: Path) -> Path:
    """A private, complete build directory that a test may damage."""
    return copy_build(staged_build, tmp_path / "build")


def modified_corpus_copy(tmp_path: Path) -> Path:
    """A still-valid corpus that differs from the committed one in one fact."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    first = orjson.loads(lines[0])
    first["fact"] += " Revised."
    lines[0] = orjson.dumps(first).decode()
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- missing upstream artifacts ----------------------------------------------------------

MISSING = [
    # (command, artifact deleted, artifact the command would write, stage named in the message)
    ("hydrate", "suite.json", "hydrate.json", "validate"),
    ("query", "hydrate.json", "runs.json", "hydrate"),
    ("snapshot-roundtrip", "runs.json", "roundtrip.json", "query"),
    ("score", "roundtrip.json", "scores.json", "snapshot-roundtrip"),
    ("report", "scores.json", "results.json", "score"),
    ("decide", "scores.json", "decision.json", "score"),
    ("check-baseline", "results.json", None, "report"),
    ("export-trec", "runs.json", None, "query"),
]


@pytest.mark.parametrize(("command", "deleted", "writes", "rerun"), MISSING)
def test_missing_upstream_names_the_stage_to_run_first(
    build: Path, command: str, deleted: str, writes: str | None, rerun: str
) -> None:
    (build / deleted).unlink()
    before = snapshot_file(build / writes) if writes else None
    line = assert_one_line_error(cli(build, command), command)
    assert f"run `recallbench {rerun}`" in line
    assert deleted in line
    if writes:  # the stage wrote nothing
        assert snapshot_file(build / writes) == before


def test_query_on_an_empty_build_dir_asks_for_validate(tmp_path: Path) -> None:
    line = assert_one_line_error(cli(tmp_path / "empty", "query"), "query")
    assert "suite.json: missing; run `recallbench validate` first" in line


def test_query_without_the_store_asks_for_hydrate(build: Path) -> None:
    for path in sorted((build / "store").iterdir(), reverse=True):
        path.unlink()
    (build / "store").rmdir()
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "no store; run `recallbench hydrate` first" in line


# --- stale artifacts ---------------------------------------------------------------------


def test_query_refuses_hydrate_made_from_another_suite(tmp_path: Path) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"])
    changed = modified_corpus_copy(tmp_path)
    assert cli(build, "validate", "--corpus", changed, "--queries", QUERIES).exit_code == 0
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "hydrate.json is stale" in line
    assert "run `recallbench hydrate` again" in line
    assert not (build / "runs.json").exists()
    # following the advice makes the chain work again, on the modified corpus
    run_stages(build, ["hydrate"])
    assert cli(build, "query").exit_code == 0
    fact = read_artifact(build, "suite")["data"]["suite"]["memories"][0]["fact"]
    assert fact.endswith(" Revised.")


def test_fixture_edited_after_validation_is_refused(tmp_path: Path) -> None:
    build = tmp_path / "build"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(CORPUS.read_bytes())
    assert cli(build, "validate", "--corpus", corpus, "--queries", QUERIES).exit_code == 0
    (tmp_path / "edit").mkdir()
    corpus.write_bytes(modified_corpus_copy(tmp_path / "edit").read_bytes())
    line = assert_one_line_error(cli(build, "hydrate"), "hydrate")
    assert f"{corpus} changed after validation" in line
    assert "run `recallbench validate` again" in line
    assert not (build / "hydrate.json").exists()


def test_roundtrip_refuses_runs_made_from_an_older_hydrate(build: Path) -> None:
    run_stages(build, ["hydrate"])
    before = snapshot_file(build / "roundtrip.json")
    line = assert_one_line_error(cli(build, "snapshot-roundtrip"), "snapshot-roundtrip")
    assert "runs.json is stale (made from another hydrate.json)" in line
    assert "run `recallbench query` again" in line
    assert snapshot_file(build / "roundtrip.json") == before


def test_score_refuses_a_roundtrip_made_from_older_runs(build: Path) -> None:
    assert cli(build, "query", "--top-k", "3").exit_code == 0
    line = assert_one_line_error(cli(build, "score"), "score")
    assert "roundtrip.json is stale (made from another runs.json)" in line
    assert "run `recallbench snapshot-roundtrip` again" in line


def test_report_refuses_scores_made_from_older_runs(build: Path) -> None:
    run_stages(build, ["query", "snapshot-roundtrip"])
    line = assert_one_line_error(cli(build, "report"), "report")
    assert "scores.json is stale" in line
    assert "run `recallbench score` again" in line


# --- foreign artifacts -------------------------------------------------------------------


def test_wrong_schema_version_is_refused(build: Path) -> None:
    env = load_json(build / "hydrate.json")
    env["schema_version"] = 99
    (build / "hydrate.json").write_bytes(orjson.dumps(env))
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "schema version 99 is not 1" in line
    assert "run `recallbench hydrate` again" in line


@pytest.mark.parametrize("payload", [b"this is not JSON\n", b"", b"\xff\xfe\x00garbage"])
def test_a_file_that_is_not_json_is_refused(build: Path, payload: bytes) -> None:
    (build / "runs.json").write_bytes(payload)
    line = assert_one_line_error(cli(build, "score"), "score")
    assert "runs.json: not valid JSON" in line
    assert "run `recallbench query` again" in line


def test_an_artifact_of_another_kind_is_refused(build: Path) -> None:
    (build / "hydrate.json").write_bytes((build / "runs.json").read_bytes())
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "hydrate.json: not a recallbench hydrate artifact" in line


@pytest.mark.parametrize("payload", [b"[1, 2, 3]", b'{"artifact": "scores"}', b"null"])
def test_json_that_is_not_an_envelope_is_refused(build: Path, payload: bytes) -> None:
    (build / "scores.json").write_bytes(payload)
    line = assert_one_line_error(cli(build, "decide"), "decide")
    assert "scores.json: not a recallbench scores artifact" in line


def test_edited_artifact_data_is_refused(build: Path) -> None:
    env = load_json(build / "scores.json")
    env["data"]["overall"]["recall@5"]["value"] = 1.0
    (build / "scores.json").write_bytes(orjson.dumps(env))
    line = assert_one_line_error(cli(build, "decide"), "decide")
    assert "does not match its fingerprint" in line
    assert "run `recallbench score` again" in line


# --- validate ----------------------------------------------------------------------------


def broken_corpus(tmp_path: Path) -> Path:
    """Line 3 is not JSON; line 5 lacks its fact."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    lines[2] = '{"memory_id": "mem-broken", '
    record = orjson.loads(lines[4])
    del record["fact"]
    lines[4] = orjson.dumps(record).decode()
    path = tmp_path / "bad-corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_validate_reports_file_line_reason_and_writes_nothing(tmp_path: Path) -> None:
    bad = broken_corpus(tmp_path)
    build = tmp_path / "build"
    result = cli(build, "validate", "--corpus", bad, "--queries", QUERIES)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert any(re.fullmatch(rf"{re.escape(str(bad))}:3: invalid JSON \(.+\)", x) for x in lines)
    assert any(x.startswith(f"{bad}:5: ") and "fact" in x for x in lines), lines
    problems = [x for x in lines if x.startswith(f"{bad}:")]
    assert lines[-1] == f"recallbench validate: error: {len(problems)} problem(s); nothing written"
    assert len(lines) == len(problems) + 1
    assert not (build / "suite.json").exists()
    assert not build.exists() or not any(build.iterdir())


def test_failed_validate_leaves_an_existing_suite_untouched(build: Path, tmp_path: Path) -> None:
    before = snapshot_file(build / "suite.json")
    result = cli(build, "validate", "--corpus", broken_corpus(tmp_path), "--queries", QUERIES)
    assert result.exit_code == 1
    assert snapshot_file(build / "suite.json") == before
    assert sorted(p.name for p in build.iterdir() if p.name.startswith(".")) == []


def test_validate_with_a_missing_file_is_one_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    result = cli(tmp_path / "build", "validate", "--corpus", missing, "--queries", QUERIES)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[0].startswith(f"{missing}: cannot read")


def test_validate_reports_counts(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "validate", "--corpus", CORPUS, "--queries", QUERIES)
    assert result.exit_code == 0
    assert "80 memories, 57 queries in 8 categories" in result.stderr
    args = [
        "--build-dir",
        tmp_path / "q",
        "-q",
        "validate",
        "--corpus",
        CORPUS,
        "--queries",
        QUERIES,
    ]
    quiet = CliRunner().invoke(main, [str(a) for a in args])
    assert quiet.exit_code == 0 and quiet.output == ""


# --- help and usage errors ---------------------------------------------------------------


def test_group_help_lists_every_stage() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ALL_COMMANDS:
        assert re.search(rf"^\s+{re.escape(command)}\s", result.output, re.MULTILINE), command


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_every_stage_has_help(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"Usage: main {command} [OPTIONS]" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [["query", "--top-k", "0"], ["run", "--top-k", "0"], ["query", "--repeat", "0"]],
)
def test_out_of_range_options_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = cli(tmp_path / "build", *args)
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert f"Invalid value for '{args[1]}'" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "build").exists()


def test_unknown_system_is_a_usage_error(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "hydrate", "--system", "mem0")
    assert result.exit_code == 2
    assert "Invalid value for '--system'" in result.stderr


def test_every_stage_writes_what_the_table_says() -> None:
    """Guard for STAGE_OUTPUTS itself: each name is a real artifact of the pipeline."""
    assert [s for s, _ in STAGE_OUTPUTS] == list(STAGES)


def test_export_trec_refuses_runs_made_from_another_suite(build: Path, tmp_path: Path) -> None:
    lines = QUERIES.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"mem-log-007": 3', '"mem-log-007": 2')
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli(build, "validate", "--corpus", CORPUS, "--queries", queries).exit_code == 0
    line = assert_one_line_error(cli(build, "export-trec"), "export-trec")
    assert "runs.json is stale (made from another suite.json)" in line
    assert "run `recallbench query` again" in line
    assert not (build / "qrels.trec").exists()
