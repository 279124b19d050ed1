"""The stage commands refuse missing, stale, foreign and damaged inputs with one clear line;
operating-system errors and interruptions are one line too, and nothing is half-written."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from conftest import (
    BASELINE,
    CORPUS,
    QUERIES,
    ROOT,
    STAGE_OUTPUTS,
    cli,
    copy_build,
    load_json,
    run_stages,
    stage_args,
)
from signalling import default_signals, run_signalled, signal_when

from recallbench.builddir.artifacts import STAGE_NAMES, read_artifact
from recallbench.builddir.lock import LOCK_NAME, build_lock
from recallbench.builddir.scopespool import SPOOL
from recallbench.cli.main import main
from recallbench.datasets.fixtures.reader import load_fixture_scope
from recallbench.systems.packaging import records_digest

ALL_COMMANDS = (
    *STAGE_NAMES,
    "check-baseline",
    "export-trec",
    "run",
    "compare",
    "prep",
    "stages",
    "systems",
)
SCOPE = "00000"  # the fixture suite's one scope, as stores/ and roundtrip/ name it


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


def assert_one_line_process_error(proc: subprocess.CompletedProcess[str], stage: str) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"recallbench {stage}: error: "), lines[0]
    return lines[0]


def snapshot_file(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def leftovers(build: Path) -> list[str]:
    """Temp files a publish left behind (there must never be any)."""
    return sorted(str(p.relative_to(build)) for p in build.rglob("*.tmp"))


def recallbench(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`recallbench ARGS...` in a process of its own (for locks and signals)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROGRESS": "1"}
    env.pop("RECALLBENCH_BUILD_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "recallbench.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


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


def stored_facts(build: Path) -> dict[str, str]:
    """id -> fact_text of the kept HotMem store, read with sqlite3 (not through recallbench)."""
    db = sqlite3.connect(build / "stores" / SCOPE / "hotmem.sqlite")
    try:
        return dict(db.execute("SELECT id, fact_text FROM memories"))
    finally:
        db.close()


# --- commands that only print ------------------------------------------------------------


def test_stages_prints_the_stage_order(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "stages")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == list(STAGE_NAMES)
    assert result.stdout.splitlines() == [s for s, _ in STAGE_OUTPUTS]
    assert result.stderr == ""
    assert not (tmp_path / "build").exists()  # it writes nothing, so it takes no lock


def test_stages_io_prints_each_stages_inputs_and_outputs(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "stages", "--io")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[::3] == list(STAGE_NAMES)  # the plain order, each stage's two lines under it
    assert lines[1:5] == [
        "  inputs   the dataset's files (--dataset and its options)",
        "  outputs  suite.json scopes.jsonl scopes-structure.jsonl",
        "hydrate",
        "  inputs   suite.json",
    ]
    report = lines.index("report")
    assert lines[report + 1 : report + 3] == [
        "  inputs   suite.json hydrate.json runs.json roundtrip.json scores.json",
        "  outputs  results.json timings/results.json report.md report-plots/ report.html "
        "report-data/",
    ]
    assert lines[-2:] == [
        "  inputs   suite.json scores.json roundtrip.json",
        "  outputs  decision.json",
    ]
    assert result.stdout in (ROOT / "docs" / "stages.md").read_text(encoding="utf-8")
    assert result.stderr == ""
    assert not (tmp_path / "build").exists()


def test_systems_lists_every_registered_system(tmp_path: Path) -> None:
    from recallbench.systems.registry import system_names

    result = cli(tmp_path / "build", "systems")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(system_names())
    (hotmem,) = [line for line in lines if line.split()[0] == "hotmem"]
    assert hotmem.split()[1:5] == ["available", "clone,", "embedder,", "lexical"]
    assert not (tmp_path / "build").exists()


# --- missing upstream artifacts ----------------------------------------------------------

MISSING = [
    # (command, artifact deleted, artifact the command would write, stage named in the message)
    ("hydrate", "suite.json", "hydrate.json", "validate"),
    ("query", "hydrate.json", "runs.json", "hydrate"),
    ("snapshot-roundtrip", "runs.json", "roundtrip.json", "query"),
    ("score", "runs.json", "scores.json", "query"),
    ("report", "scores.json", "results.json", "score"),
    ("decide", "scores.json", "decision.json", "score"),
    ("decide", "roundtrip.json", "decision.json", "snapshot-roundtrip"),
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
    assert f"{build / deleted}: missing; run `recallbench {rerun}` first" in line
    if writes:  # the stage wrote nothing
        assert snapshot_file(build / writes) == before
    assert leftovers(build) == []


def test_query_on_an_empty_build_dir_asks_for_validate(tmp_path: Path) -> None:
    line = assert_one_line_error(cli(tmp_path / "empty", "query"), "query")
    assert "suite.json: missing; run `recallbench validate` first" in line


@pytest.mark.parametrize(
    ("command", "writes"), [("query", "runs.json"), ("snapshot-roundtrip", "roundtrip.json")]
)
def test_a_stage_without_the_kept_store_asks_for_hydrate(
    build: Path, command: str, writes: str
) -> None:
    for path in sorted((build / "stores" / SCOPE).iterdir(), reverse=True):
        path.unlink()
    before = snapshot_file(build / writes)
    line = assert_one_line_error(cli(build, command), command)
    assert f"{build / 'stores' / SCOPE}" in line
    assert "no store; run `recallbench hydrate` first" in line
    assert snapshot_file(build / writes) == before


# --- a damaged kept store ----------------------------------------------------------------

DAMAGE = {
    "row deleted": (
        "DELETE FROM memories WHERE id = 'mem-fin-001'",
        "store holds 79 records, hydrate.json says 80",
    ),
    "fact edited": (
        "UPDATE memories SET fact_text = fact_text || ' (edited)' WHERE id = 'mem-fin-001'",
        "store content differs from what hydrate recorded",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize(
    ("command", "writes"), [("query", "runs.json"), ("snapshot-roundtrip", "roundtrip.json")]
)
def test_a_damaged_store_is_refused_with_the_command_that_rebuilds_it(
    build: Path, damage: str, command: str, writes: str
) -> None:
    """A store that is not what hydrate recorded is refused before it is searched or
    packaged: never reported as a retrieval result or a clone-path failure."""
    sql, reason = DAMAGE[damage]
    db = sqlite3.connect(build / "stores" / SCOPE / "hotmem.sqlite")
    with db:
        assert db.execute(sql).rowcount == 1
    db.close()
    before = snapshot_file(build / writes)
    line = assert_one_line_error(cli(build, command), command)
    assert reason in line
    assert line.endswith("run `recallbench hydrate` again")
    assert "rejected" not in line and "corrupt" not in line
    assert snapshot_file(build / writes) == before
    # following the advice repairs the chain
    run_stages(build, ["hydrate", command])


# --- stale artifacts ---------------------------------------------------------------------


def test_query_refuses_hydrate_made_from_another_suite(tmp_path: Path) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"])
    changed = modified_corpus_copy(tmp_path)
    assert cli(build, "validate", "--corpus", changed, "--queries", QUERIES).exit_code == 0
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "hydrate.json is stale (made from another suite.json)" in line
    assert "run `recallbench hydrate` again" in line
    assert not (build / "runs.json").exists()
    # following the advice makes the chain work again, on the modified corpus
    run_stages(build, ["hydrate"])
    assert cli(build, "query").exit_code == 0
    first = orjson.loads(CORPUS.read_text(encoding="utf-8").splitlines()[0])["memory_id"]
    assert stored_facts(build)[first].endswith(" Revised.")


def test_a_fixture_edited_after_validation_does_not_reach_the_store(tmp_path: Path) -> None:
    """Stages after validate read validate's scope spool, never the data file again: the
    store holds exactly what validate checked and suite.json identifies."""
    build = tmp_path / "build"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(CORPUS.read_bytes())
    assert cli(build, "validate", "--corpus", corpus, "--queries", QUERIES).exit_code == 0
    (tmp_path / "edit").mkdir()
    corpus.write_bytes(modified_corpus_copy(tmp_path / "edit").read_bytes())
    run_stages(build, ["hydrate"])
    scope, _ = load_fixture_scope(CORPUS, QUERIES)
    assert stored_facts(build) == {m.memory_id: m.text for m in scope.memories}
    expected = records_digest((m.memory_id, m.text) for m in scope.memories)
    assert read_artifact(build, "hydrate")["data"]["stores"][0]["digest"] == expected


def test_a_missing_scope_spool_asks_for_validate(tmp_path: Path) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate"])
    (build / SPOOL).unlink()
    line = assert_one_line_error(cli(build, "hydrate"), "hydrate")
    assert f"{build.resolve() / SPOOL}" in line
    assert line.endswith("run `recallbench validate` again")
    assert not (build / "hydrate.json").exists()


def damage_spool(spool: Path, damage: str) -> None:
    """truncated: half the file; replaced: another well-formed scope of the same size (only
    the digests differ); flipped: one byte of a memory's text changed."""
    data = spool.read_bytes()
    if damage == "truncated":
        spool.write_bytes(data[: len(data) // 2])
    elif damage == "replaced":
        scope = orjson.loads(data)
        scope["memories"] = scope["memories"][1:]
        line = orjson.dumps(scope) + b"\n"
        spool.write_bytes(line + b" " * (len(data) - len(line)))
    else:
        at = data.index(b'"text":"') + len(b'"text":"')
        spool.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])


@pytest.mark.parametrize("damage", ["truncated", "replaced", "flipped"])
@pytest.mark.parametrize("stage", ["hydrate", "query"])
def test_a_damaged_scope_spool_is_refused(tmp_path: Path, damage: str, stage: str) -> None:
    """hydrate streams the whole spool (checked against its sha256); query hands each task
    where its scope lies, and the task checks that line's sha256 (and the file's size)."""
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"] if stage == "query" else ["validate"])
    spool = build / SPOOL
    damage_spool(spool, damage)
    line = assert_one_line_error(cli(build, stage), stage)
    assert f"{spool.resolve()}" in line
    assert line.endswith("run `recallbench validate` again")
    assert not (build / ("runs.json" if stage == "query" else "hydrate.json")).exists()


def test_roundtrip_refuses_runs_made_from_another_hydrate(build: Path) -> None:
    assert cli(build, "hydrate", "--system", "hotmem-mmr").exit_code == 0
    assert read_artifact(build, "hydrate")["data"]["system"] == "hotmem-mmr"
    before = snapshot_file(build / "roundtrip.json")
    line = assert_one_line_error(cli(build, "snapshot-roundtrip"), "snapshot-roundtrip")
    assert "runs.json is stale (made from another hydrate.json)" in line
    assert "run `recallbench query` again" in line
    assert snapshot_file(build / "roundtrip.json") == before


def test_decide_refuses_a_roundtrip_made_from_older_runs(build: Path) -> None:
    assert cli(build, "query", "--top-k", "3").exit_code == 0
    run_stages(build, ["score"])  # the scores are of the new runs, the round trip is not
    before = snapshot_file(build / "decision.json")
    line = assert_one_line_error(cli(build, "decide"), "decide")
    assert "roundtrip.json is stale (made from another runs.json)" in line
    assert "run `recallbench snapshot-roundtrip` again" in line
    assert snapshot_file(build / "decision.json") == before


@pytest.mark.parametrize(
    ("command", "writes"), [("report", "results.json"), ("decide", "decision.json")]
)
def test_report_and_decide_refuse_scores_made_from_older_runs(
    build: Path, command: str, writes: str
) -> None:
    assert cli(build, "query", "--top-k", "3").exit_code == 0
    run_stages(build, ["snapshot-roundtrip"])
    before = snapshot_file(build / writes)
    line = assert_one_line_error(cli(build, command), command)
    assert "scores.json is stale (made from another" in line
    assert "run `recallbench score` again" in line
    assert snapshot_file(build / writes) == before


def test_check_baseline_refuses_a_result_older_than_the_scores(build: Path) -> None:
    """query --top-k 3, snapshot-roundtrip and score, but no report: results.json still says
    top-k 5 and matches the baseline; it must be refused as stale, never "matches"."""
    assert cli(build, "query", "--top-k", "3").exit_code == 0
    run_stages(build, ["snapshot-roundtrip", "score"])
    assert read_artifact(build, "scores")["data"]["top_k"] == 3
    result = cli(build, *stage_args("check-baseline"))
    line = assert_one_line_error(result, "check-baseline")
    assert "results.json is stale (made from another" in line
    assert "run `recallbench report` again" in line
    assert "matches" not in result.output
    # after the report, the gate runs and finds the top-k change (exit 3)
    run_stages(build, ["report"])
    assert cli(build, *stage_args("check-baseline")).exit_code == 3


def test_check_baseline_of_a_saved_result_file(build: Path, tmp_path: Path) -> None:
    saved = tmp_path / "saved-results.json"
    saved.write_bytes((build / "results.json").read_bytes())
    result = cli(build, "check-baseline", "--baseline", BASELINE, "--result", saved)
    assert result.exit_code == 0, result.output
    assert f"result matches {BASELINE}" in result.stderr
    env = load_json(saved)
    env["data"]["metrics"]["overall"]["mrr@5"]["value"] = 0.5
    saved.write_bytes(orjson.dumps(env))
    line = assert_one_line_error(
        cli(build, "check-baseline", "--baseline", BASELINE, "--result", saved), "check-baseline"
    )
    assert "does not match its fingerprint" in line
    # a bare result document (a baseline, as --result's help allows) is a result too: it
    # crashed with KeyError 'run' (its wrapper was read as the document)
    bare = cli(build, "check-baseline", "--baseline", BASELINE, "--result", BASELINE)
    assert bare.exit_code == 0, bare.output
    assert f"result matches {BASELINE}" in bare.stderr


def test_export_trec_refuses_runs_made_from_another_suite(build: Path, tmp_path: Path) -> None:
    lines = QUERIES.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"mem-log-007": 3', '"mem-log-007": 2')
    assert lines[1] != QUERIES.read_text(encoding="utf-8").splitlines()[1]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli(build, "validate", "--corpus", CORPUS, "--queries", queries).exit_code == 0
    line = assert_one_line_error(cli(build, "export-trec"), "export-trec")
    assert "runs.json is stale (made from another suite.json)" in line
    assert "run `recallbench query` again" in line
    assert not (build / "qrels.trec").exists()
    assert not (build / "run.trec").exists()


# --- foreign and edited artifacts --------------------------------------------------------


def test_wrong_schema_version_is_refused(build: Path) -> None:
    env = load_json(build / "hydrate.json")
    env["schema_version"] = 99
    (build / "hydrate.json").write_bytes(orjson.dumps(env))
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "schema version 99 is not 2" in line
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


def test_an_artifact_that_is_a_directory_is_refused(build: Path) -> None:
    (build / "scores.json").unlink()
    (build / "scores.json").mkdir()
    line = assert_one_line_error(cli(build, "decide"), "decide")
    assert "scores.json: is a directory, not an artifact" in line


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
    assert "scores.json: content does not match its fingerprint" in line
    assert "run `recallbench score` again" in line


def test_edited_artifact_inputs_are_refused(build: Path) -> None:
    """Pointing a stale artifact's `inputs` at the current upstream does not make it fresh:
    the fingerprint covers the inputs."""
    assert cli(build, "query", "--top-k", "3").exit_code == 0
    env = load_json(build / "roundtrip.json")
    assert env["inputs"]["runs"] != read_artifact(build, "runs")["fingerprint"]  # stale
    env["inputs"]["runs"] = read_artifact(build, "runs")["fingerprint"]
    (build / "roundtrip.json").write_bytes(orjson.dumps(env))
    run_stages(build, ["score"])
    before = snapshot_file(build / "decision.json")
    line = assert_one_line_error(cli(build, "decide"), "decide")
    assert "roundtrip.json: content does not match its fingerprint" in line
    assert "run `recallbench snapshot-roundtrip` again" in line
    assert snapshot_file(build / "decision.json") == before


def test_an_edited_upstream_fingerprint_in_inputs_is_refused(build: Path) -> None:
    env = load_json(build / "hydrate.json")
    env["inputs"]["suite"] = "0" * 64
    (build / "hydrate.json").write_bytes(orjson.dumps(env))
    line = assert_one_line_error(cli(build, "query"), "query")
    assert "hydrate.json: content does not match its fingerprint" in line


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


def assert_only_the_released_lock(build: Path) -> None:
    """Nothing left of the failed command: the build dir it created is gone (its lock file
    with it, issue 26); one that was there holds at most its lock file, released (empty)."""
    if not build.exists():
        return
    assert sorted(p.name for p in build.iterdir()) in ([LOCK_NAME], [])
    assert not (build / LOCK_NAME).exists() or (build / LOCK_NAME).read_bytes() == b""


def test_validate_reports_file_line_reason_and_writes_nothing(tmp_path: Path) -> None:
    bad = broken_corpus(tmp_path)
    build = tmp_path / "build"
    result = cli(build, "validate", "--corpus", bad, "--queries", QUERIES)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert any(re.fullmatch(rf"{re.escape(str(bad))}:3: invalid JSON: .+", x) for x in lines)
    assert any(x.startswith(f"{bad}:5: ") and "fact" in x for x in lines), lines
    problems = [x for x in lines if x.startswith(f"{bad}:")]
    assert lines[-1] == f"recallbench validate: error: {len(problems)} problem(s); nothing written"
    assert len(lines) == len(problems) + 1
    assert not (build / "suite.json").exists()
    assert_only_the_released_lock(build)


def test_failed_validate_leaves_an_existing_suite_untouched(build: Path, tmp_path: Path) -> None:
    before = snapshot_file(build / "suite.json")
    spool = snapshot_file(build / SPOOL)
    # the staged build's own dot entries: its lock, and matplotlib's font list when the
    # report stage was the first to draw in this process (`.cache`)
    hidden = sorted(p.name for p in build.iterdir() if p.name.startswith("."))
    assert LOCK_NAME in hidden and set(hidden) <= {LOCK_NAME, ".cache"}
    result = cli(build, "validate", "--corpus", broken_corpus(tmp_path), "--queries", QUERIES)
    assert result.exit_code == 1
    assert snapshot_file(build / "suite.json") == before
    assert snapshot_file(build / SPOOL) == spool
    assert sorted(p.name for p in build.iterdir() if p.name.startswith(".")) == hidden
    assert leftovers(build) == []


def test_validate_with_a_missing_file_is_one_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    result = cli(tmp_path / "build", "validate", "--corpus", missing, "--queries", QUERIES)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"recallbench validate: error: fixture file {missing} does not exist",
    ]


def test_validate_reports_counts(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "validate", "--corpus", CORPUS, "--queries", QUERIES)
    assert result.exit_code == 0
    assert "1 scope(s), 80 memories, 57 queries scored of 57 in 8 categories" in result.stderr
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


def write_fixture_with(tmp_path: Path, line: int, edit) -> Path:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = edit(lines[line - 1])
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad_id", "reason"),
    [
        ("mem\x00fin", "U+0000"),
        ("mem\u202efin", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("mem|fin", "breaks Markdown tables"),
        ("mem`fin", "breaks Markdown code"),
    ],
)
def test_validate_refuses_ids_that_would_break_outputs(
    tmp_path: Path, bad_id: str, reason: str
) -> None:
    def edit(text: str) -> str:
        record = orjson.loads(text)
        record["memory_id"] = bad_id
        return orjson.dumps(record).decode()

    corpus = write_fixture_with(tmp_path, 7, edit)
    build = tmp_path / "build"
    result = cli(build, "validate", "--corpus", corpus, "--queries", QUERIES)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    (problem,) = [x for x in lines if f"{corpus}:7: " in x]
    assert f"field 'memory_id' {bad_id!r}" in problem and reason in problem
    if not bad_id.isprintable():  # shown escaped: the terminal line cannot be reordered
        assert bad_id not in result.stderr
    assert lines[-1].startswith("recallbench validate: error: ")
    assert_only_the_released_lock(build)


def test_validate_refuses_a_duplicate_json_key(tmp_path: Path) -> None:
    corpus = write_fixture_with(tmp_path, 4, lambda text: text[:-1] + ', "fact": "a second fact"}')
    build = tmp_path / "build"
    result = cli(build, "validate", "--corpus", corpus, "--queries", QUERIES)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f'recallbench validate: error: {corpus}:4: duplicate key "fact" at fact',
    ]
    assert_only_the_released_lock(build)


@pytest.mark.parametrize("kind", ["fifo", "character device"])
def test_validate_of_a_special_file_fails_fast(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        special = tmp_path / "corpus.fifo"
        os.mkfifo(special)
        said = "is a FIFO"
    else:
        special = Path("/dev/zero")
        if not special.exists() or not stat.S_ISCHR(special.stat().st_mode):
            pytest.skip("no /dev/zero")
        said = "is a character device"
    build = tmp_path / "build"
    # never blocks on the FIFO, never reads /dev/zero: either would run into the timeout
    # (a bound on a loaded machine's start-up, not a measure of speed)
    proc = recallbench(
        "--build-dir", build, "validate", "--corpus", special, "--queries", QUERIES, timeout=300
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"recallbench validate: error: fixture file {special} {said}; give a regular file",
    ]
    assert not (build / "suite.json").exists()


def test_validate_of_a_fifo_as_dataset_file_is_one_line(tmp_path: Path) -> None:
    special = tmp_path / "data.fifo"
    os.mkfifo(special)
    proc = recallbench(
        "--build-dir",
        tmp_path / "build",
        "validate",
        "--dataset",
        "longmemeval",
        "--data",
        special,
        timeout=60,
    )
    line = assert_one_line_process_error(proc, "validate")
    assert str(special) in line and "is a FIFO" in line


# --- the build directory: its lock, bad paths, operating-system errors --------------------


def test_a_locked_build_dir_is_refused_at_once_naming_the_holder(build: Path) -> None:
    before = snapshot_file(build / "runs.json")
    with build_lock(build, "x"):  # held until the command ends: waiting would time out
        proc = recallbench("--build-dir", build, "query", timeout=300)
    line = assert_one_line_process_error(proc, "query")
    assert f"{build} is in use by pid {os.getpid()} (`x`, started " in line
    assert line.endswith("wait for it to finish or use another --build-dir")
    assert snapshot_file(build / "runs.json") == before
    # released: the same command now runs
    assert cli(build, "query").exit_code == 0


def test_read_only_commands_do_not_take_the_lock(build: Path) -> None:
    with build_lock(build, "x"):
        proc = recallbench("--build-dir", build, *stage_args("check-baseline"))
    assert proc.returncode == 0, proc.stderr
    assert "result matches" in proc.stderr


@pytest.mark.parametrize("given", ["", "/", "."])
def test_build_dirs_that_are_not_our_own_are_refused(tmp_path: Path, given: str) -> None:
    result = CliRunner().invoke(
        main, ["--build-dir", given, "validate", "--corpus", str(CORPUS), "--queries", str(QUERIES)]
    )
    line = assert_one_line_error(result, "validate")
    assert "use a directory of its own" in line


def test_a_build_dir_under_a_regular_file_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory\n", encoding="utf-8")
    result = cli(blocker / "build", *stage_args("validate"))
    line = assert_one_line_error(result, "validate")
    assert f"{blocker} is a file, not a directory" in line
    assert blocker.read_text(encoding="utf-8") == "not a directory\n"


@pytest.mark.parametrize("which", ["--output", "--report"])
def test_report_output_under_a_regular_file_writes_nothing(
    build: Path, tmp_path: Path, which: str
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x\n", encoding="utf-8")
    elsewhere = tmp_path / "out" / ("r.md" if which == "--output" else "r.json")
    other = "--report" if which == "--output" else "--output"
    results, markdown = snapshot_file(build / "results.json"), snapshot_file(build / "report.md")
    line = assert_one_line_error(
        cli(build, "report", which, blocker / "sub" / "r", other, elsewhere), "report"
    )
    assert str(blocker) in line
    # both outputs are published together: neither is written when one cannot be
    assert not elsewhere.exists()
    assert not (tmp_path / "out").exists() or leftovers(tmp_path / "out") == []
    assert snapshot_file(build / "results.json") == results
    assert snapshot_file(build / "report.md") == markdown
    assert blocker.read_text(encoding="utf-8") == "x\n"


def test_export_trec_with_a_tag_that_is_not_a_trec_field(build: Path) -> None:
    line = assert_one_line_error(cli(build, "export-trec", "--tag", "my run"), "export-trec")
    assert "'my run'" in line and "whitespace" in line
    assert not (build / "run.trec").exists() and not (build / "qrels.trec").exists()


def test_export_trec_writes_both_files(build: Path) -> None:
    result = cli(build, "export-trec", "--tag", "hotmem-run")
    assert result.exit_code == 0, result.output
    runs = read_artifact(build, "runs")["data"]["queries"]
    run_lines = (build / "run.trec").read_text(encoding="utf-8").splitlines()
    assert len(run_lines) == sum(len(r["hits"]) for r in runs)
    first = run_lines[0].split()
    assert first[:4] == ["q-lexical-001", "Q0", "mem-fin-001", "1"] and first[5] == "hotmem-run"
    qrels = (build / "qrels.trec").read_text(encoding="utf-8").splitlines()
    assert "q-lexical-001 0 mem-fin-001 3" in qrels


# --- interruption ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_longmemeval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic LongMemEval file large enough that validate takes a moment (~65 MB)."""
    out = tmp_path_factory.mktemp("lme") / "lme-s-200.json"
    proc = recallbench(
        "-q",
        "longmemeval",
        "generate",
        "--shape",
        "s",
        "--questions",
        "200",
        "--seed",
        "1",
        "--out",
        out,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _opened(pid: int, path: Path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def interrupt_when(
    args: list[str | Path], ready, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Start `recallbench ARGS`, send SIGINT once `ready(pid)` holds (the command is inside
    its work, past start-up; seen while it was stopped, so it cannot have finished since:
    tests/signalling.py), and return the finished process."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROGRESS": "1"}
    args = [sys.executable, "-m", "recallbench.cli.main", *map(str, args)]
    return run_signalled(args, env, ready, signal.SIGINT, timeout)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see open files")
def test_ctrl_c_during_validate_exits_130_and_writes_nothing(
    big_longmemeval: Path, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    proc = interrupt_when(
        ["--build-dir", build, "validate", "--dataset", "longmemeval", "--data", big_longmemeval],
        lambda pid: _opened(pid, big_longmemeval.resolve()),
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == ["recallbench validate: interrupted; nothing half-written"]
    assert_only_the_released_lock(build)  # no suite.json, no spool, no temp file


def test_ctrl_c_during_query_exits_130_and_removes_its_work(
    big_longmemeval: Path, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    for args in (
        ["validate", "--dataset", "longmemeval", "--data", big_longmemeval],
        ["hydrate"],
    ):
        assert recallbench("-q", "--build-dir", build, *args).returncode == 0
    assert read_artifact(build, "hydrate")["data"]["mode"] == "transient"
    before = sorted(p.name for p in build.iterdir())
    proc = interrupt_when(["--build-dir", build, "query"], lambda pid: (build / "work").is_dir())
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["recallbench query: interrupted; nothing half-written"]
    assert sorted(p.name for p in build.iterdir()) == before  # no runs.json, no work/
    assert leftovers(build) == []
    assert (build / LOCK_NAME).read_bytes() == b""


# --- help and usage errors ---------------------------------------------------------------


def test_group_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in (*ALL_COMMANDS, "longmemeval", "locomo"):
        assert re.search(rf"^\s+{re.escape(command)}(\s|$)", result.output, re.MULTILINE), command


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"Usage: main {command} [OPTIONS]" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["query", "--top-k", "0"],
        ["run", "--top-k", "0"],
        ["query", "--repeat", "0"],
        ["query", "--workers", "0"],
        ["snapshot-roundtrip", "--sample", "0"],
    ],
)
def test_out_of_range_options_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = cli(tmp_path / "build", *args)
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert f"Invalid value for '{args[1]}'" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "build").exists()


def test_unknown_system_is_a_usage_error(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "hydrate", "--system", "no-such-store")
    assert result.exit_code == 2
    assert "Invalid value for '--system'" in result.stderr
    assert not (tmp_path / "build").exists()


def test_data_options_of_another_dataset_are_usage_errors(tmp_path: Path) -> None:
    result = cli(tmp_path / "build", "validate", "--data", CORPUS)
    assert result.exit_code == 2
    assert "--data is for --dataset longmemeval or locomo" in result.stderr
    result = cli(tmp_path / "build", "validate", "--dataset", "longmemeval")
    assert result.exit_code == 2
    assert "--dataset longmemeval needs --data FILE" in result.stderr


def test_the_size_limit_applies_to_dataset_files_and_can_be_raised(
    big_longmemeval: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RECALLBENCH_MAX_INPUT_BYTES below a data file's size refuses it in one line naming
    the limit and the variable; raised above it, the same file validates."""
    build = tmp_path / "build"
    size = big_longmemeval.stat().st_size
    args = ["--build-dir", build, "validate", "--dataset", "longmemeval", "--data", big_longmemeval]
    monkeypatch.setenv("RECALLBENCH_MAX_INPUT_BYTES", str(size - 1))
    refused = recallbench(*args)
    assert refused.returncode == 1
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"recallbench validate: error: LongMemEval file {big_longmemeval}")
    assert "RECALLBENCH_MAX_INPUT_BYTES" in line
    assert not (build / "suite.json").exists()
    monkeypatch.setenv("RECALLBENCH_MAX_INPUT_BYTES", str(size))
    assert recallbench("-q", *args).returncode == 0


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see open files")
def test_ctrl_c_during_the_script_exits_130_and_writes_nothing(
    big_longmemeval: Path, tmp_path: Path
) -> None:
    output = tmp_path / "result.json"
    script = Path(__file__).resolve().parents[2] / "scripts" / "retrieval_eval.py"
    env = {**os.environ, "NO_PROGRESS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), "--longmemeval", big_longmemeval, "--output", output],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_signals,
    )
    try:
        signal_when(proc, lambda pid: _opened(pid, big_longmemeval.resolve()), signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert out == ""
    assert err.splitlines() == ["recallbench retrieval_eval: interrupted; nothing half-written"]
    assert not output.exists()


def test_score_takes_measures_by_name(build: Path) -> None:
    """`score --measure`: the named measures, parsed with their parameters, recorded with
    stem, level, k and parameters; recall(rel=3)'s denominator counts the grade-3 gold."""
    result = cli(build, "score", "--measure", "recall(rel=3)@5", "--measure", "mrr@3")
    assert result.exit_code == 0, result.output
    scores = read_artifact(build, "scores")["data"]
    assert [m["name"] for m in scores["measures"]] == ["recall(rel=3)@5", "mrr@3"]
    first = scores["measures"][0]
    assert (first["stem"], first["level"], first["k"], first["params"]["rel"]) == (
        "recall",
        "memory",
        5,
        3,
    )
    runs = {q["query_id"]: q for q in read_artifact(build, "runs")["data"]["queries"]}
    checked = 0
    for row in scores["per_query"]:
        gold = runs[row["query_id"]]["levels"]["memory"]["gold"]
        grade3 = sum(1 for g in gold.values() if g == 3)
        cell = row["metrics"]["recall(rel=3)@5"]
        if grade3:
            assert cell["denominator"] == grade3
            checked += 1
        else:
            assert cell is None
    assert checked
    # --k on score: the fixture suite's cutoffs are fixed, refused in one line
    line = assert_one_line_error(cli(build, "score", "--k", "1,3"), "score")
    assert "the fixture suite's cutoffs are fixed" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--measure", "recal@5"], "is not a measure name"),
        (["--measure", "ndcg(rel=3)@5"], "takes no rel"),
    ],
)
def test_score_refuses_a_bad_measure_name_in_one_line(
    build: Path, args: list[str], says: str
) -> None:
    before = snapshot_file(build / "scores.json")
    result = CliRunner().invoke(
        main, ["--build-dir", str(build), "score", *args], prog_name="recallbench"
    )
    line = assert_one_line_error(result, "score", exit_code=2)
    assert says in line
    if "not a measure name" in says:
        assert "stems: recall, recall_any" in line
    assert snapshot_file(build / "scores.json") == before


def test_score_refuses_a_measure_at_a_level_the_suite_lacks(build: Path) -> None:
    line = assert_one_line_error(cli(build, "score", "--measure", "turn_recall@5"), "score")
    assert "no level with the prefix 'turn_'" in line
    line = assert_one_line_error(cli(build, "score", "--measure", "recall@9"), "score")
    assert "k 9 is above --top-k 5" in line
    line = assert_one_line_error(cli(build, "score", "--measure", "recall(level=turn)@5"), "score")
    assert "the suite has no level 'turn' (levels: memory)" in line


def test_run_and_compare_take_measures(tmp_path: Path, staged_build: Path) -> None:
    """`run --measure` scores the named measures (the report and the decision still come
    out); `compare --result` refuses --measure (it scores runs, not saved results)."""
    run = cli(tmp_path / "run", "run", "--system", "bm25", "--measure", "recall(rel=3)@5")
    assert run.exit_code == 0, run.output
    scores = read_artifact(tmp_path / "run", "scores")["data"]
    assert [m["name"] for m in scores["measures"]] == ["recall(rel=3)@5"]
    result = orjson.loads((tmp_path / "run" / "results.json").read_bytes())["data"]
    assert [m["name"] for m in result["run"]["measures"]] == ["recall(rel=3)@5"]
    saved = staged_build / "results.json"
    refused = CliRunner().invoke(
        main,
        [
            "--build-dir",
            str(tmp_path / "c"),
            "compare",
            "--result",
            str(saved),
            "--result",
            str(saved),
            "--measure",
            "mrr@3",
        ],
        prog_name="recallbench",
    )
    line = assert_one_line_error(refused, "compare", exit_code=2)
    assert "--k, --measure and --repeat run systems" in line


# --- a global option after the command; compare's arguments --------------------------------


@pytest.mark.parametrize(
    ("args", "command", "fix"),
    [
        (
            ["compare", "--build-dir", "/tmp/a b", "--system", "bm25"],
            "compare",
            "recallbench --build-dir '/tmp/a b' compare ...",
        ),
        (
            ["validate", "--build-dir=/tmp/rb"],
            "validate",
            "recallbench --build-dir /tmp/rb validate ...",
        ),
        (["run", "-q"], "run", "recallbench -q run ..."),
        (["run", "--quiet"], "run", "recallbench --quiet run ..."),
        (
            ["longmemeval", "generate", "-q"],
            "longmemeval generate",
            "recallbench -q longmemeval generate ...",
        ),
    ],
)
def test_a_global_option_after_the_command_says_where_it_goes(
    tmp_path: Path, args: list[str], command: str, fix: str
) -> None:
    """`compare --build-dir x` gets more than "No such option": the command to type."""
    result = CliRunner().invoke(main, args, prog_name="recallbench")
    line = assert_one_line_error(result, command, exit_code=2)
    option = args[len(command.split())].split("=")[0]
    assert f"No such option '{option}': put it before the command" in line
    assert line.endswith(f"{fix} (see `recallbench {command} --help`)"), line


def test_an_unknown_option_gets_clicks_message_and_no_hint() -> None:
    result = CliRunner().invoke(main, ["validate", "--bogus"], prog_name="recallbench")
    line = assert_one_line_error(result, "validate", exit_code=2)
    assert "No such option '--bogus'" in line
    assert "put it before" not in line


@pytest.mark.parametrize(
    "args",
    [["--system", "bm25"], ["--system", "bm25", "--system", "bm25"], ["--result", BASELINE]],
    ids=["one-system", "one-system-twice", "one-result"],
)
def test_compare_checks_its_arguments_before_any_work(tmp_path: Path, args: list[str]) -> None:
    """One system (or one result) cannot be compared: refused at once, nothing run (the old
    code ran bm25 on the whole dataset first)."""
    build = tmp_path / "build"
    result = CliRunner().invoke(
        main, ["--build-dir", str(build), "compare", *map(str, args)], prog_name="recallbench"
    )
    line = assert_one_line_error(result, "compare", exit_code=2)
    assert "compare needs two or more" in line
    if args[0] == "--system":
        assert "`--system bm25 --system hotmem`" in line
    assert (sorted(p.name for p in build.iterdir()) if build.exists() else []) in ([], [LOCK_NAME])


# --- first contact: run ends with the figures, the files and a closing line ------------------

HOSTILE_LABEL = "evil\x1b]0;owned\x07\rX"  # sets the terminal's title; CR rewrites the row


def test_run_ends_with_the_table_the_files_and_the_closing_line(tmp_path: Path) -> None:
    build = tmp_path / "b"
    out, report = tmp_path / "copy" / "r.json", tmp_path / "copy" / "r.md"
    result = cli(build, "run", "--system", "bm25", "--output", out, "--report", report)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["category", "n"] + [
        w for m in ("recall@1", "recall@5", "mrr@5", "ndcg@5") for w in (m, "[95%", "CI]")
    ]
    # each mean with its 95% interval
    assert lines[1].split()[:4] == ["overall", "57", "0.574", "[0.452,"]
    assert lines[1].split()[2::3] == ["0.574", "0.841", "0.788", "0.800"]
    assert len(lines) == 1 + 9 + 1  # header, overall and eight categories, the decision
    # bm25 is not HotMem: the committed rules (HotMem's roadmap) give it no advice
    assert lines[-1] == (
        "no rule: the committed rules are HotMem's roadmap; no rule applies to bm25"
    )
    assert "#78" not in result.stdout and "rule 2" not in result.stdout
    err = result.stderr.splitlines()
    assert err[-2] == (
        f"wrote {build}/results.json, {build}/report.md, {build}/report.html, "
        f"{build}/report-data/, {build}/decision.json, {out}, {report}, "
        f"{tmp_path / 'copy' / 'r.html'}, {tmp_path / 'copy' / 'report-data'}/; "
        f"the stage artifacts in {build}"
    )
    assert re.fullmatch(r"57 queries scored in \d+\.\d s \(memory level\)", err[-1]), err[-1]
    # the report's conclusion is the measured figures, not HotMem's advice
    markdown = (build / "report.md").read_text(encoding="utf-8")
    conclusion = markdown.split("## Conclusion", 1)[1]
    assert "#78" not in conclusion and "Rule 2" not in conclusion
    assert "no rule applies to bm25" in conclusion
    assert "Measured (memory level, 57 scored queries): recall@1 0.574" in conclusion
    html = (build / "report.html").read_text(encoding="utf-8")
    page_conclusion = html.split('<section id="conclusion">', 1)[1]
    assert "#78" not in page_conclusion and "Rule 2 fired" not in page_conclusion
    assert "Measured (memory level, 57 scored queries)" in page_conclusion
    # -q: only the decision
    quiet = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path / "q"), "-q", "run", "--system", "bm25"]
    )
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout == lines[-1] + "\n" and quiet.stderr == ""


def test_hotmem_still_gets_rule_2(tmp_path: Path) -> None:
    result = cli(tmp_path / "b", "run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith(
        "rule 2: Add portable semantic embeddings next"
    )
    assert "**Rule 2 fired:" in (tmp_path / "b" / "report.md").read_text(encoding="utf-8")


def test_run_json_prints_one_object(tmp_path: Path) -> None:
    build = tmp_path / "b"
    result = CliRunner().invoke(
        main, ["--build-dir", str(build), "-q", "run", "--system", "bm25", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)  # stdout is the one object, nothing else
    assert doc["system"] == "bm25" and doc["dataset"] == "fixtures"
    assert (doc["queries_scored"], doc["queries_read"], doc["level"]) == (57, 57, "memory")
    assert doc["measures"] == ["recall@1", "recall@5", "mrr@5", "ndcg@5"]
    overall = doc["figures"][0]
    assert overall["category"] is None and overall["n"] == 57
    assert overall["values"]["ndcg@5"] == pytest.approx(0.800, abs=5e-4)
    assert [row["category"] for row in doc["figures"][1:]] == load_json(build / "suite.json")[
        "data"
    ]["categories"]
    assert doc["files"] == [str(build / n) for n in ("results.json", "report.md")] + [
        str(build / "report.html"),
        f"{build / 'report-data'}/",
        str(build / "decision.json"),
    ]
    assert doc["decision"]["rule"] is None
    assert doc["decision"]["headline"].endswith("no rule applies to bm25")
    assert doc["seconds"] > 0


def test_compare_json_prints_one_object(tmp_path: Path) -> None:
    build = tmp_path / "b"
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(build), "compare", "--system", "bm25", "--system", "hotmem"]
        + ["--resamples", "200", "--json"],
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)  # stdout is the one object, nothing else
    assert doc["reference"] == "bm25"
    assert [s["label"] for s in doc["systems"]] == ["bm25", "hotmem"]
    assert [s["system"] for s in doc["systems"]] == ["bm25", "hotmem"]
    bm25, hotmem = (s["figures"][0]["values"]["ndcg@5"] for s in doc["systems"])
    assert bm25 == pytest.approx(0.800, abs=5e-4) and hotmem == pytest.approx(0.648, abs=5e-4)
    assert doc["systems"][0]["decision"] is None and doc["systems"][0]["queries_scored"] == 57
    assert len(doc["comparisons"]) == 1 and doc["comparisons"][0].startswith("hotmem vs bm25: ")
    assert doc["files"][:3] == [
        str(build / n) for n in ("compare.json", "compare.md", "compare.html")
    ]
    assert doc["seconds"] > 0


def _hostile_longmemeval(path: Path) -> Path:
    from recallbench.datasets.longmemeval.generator import generate

    generate(path, shape="s", questions=6, seed=5, sessions_per_question=4, session_chars=200)
    records = orjson.loads(path.read_bytes())
    records[0]["question_type"] = HOSTILE_LABEL
    path.write_bytes(orjson.dumps(records))
    return path


def test_the_terminal_table_escapes_labels_and_stays_aligned(tmp_path: Path) -> None:
    """A category label with an escape sequence (it sets the terminal's title) and a carriage
    return (it overwrites the row) prints as U+001B / U+000D, and every row keeps its width,
    in `report`'s table and in `run`'s."""
    data = _hostile_longmemeval(tmp_path / "lme.json")
    build = tmp_path / "b"
    args = ["run", "--dataset", "longmemeval", "--data", data, "--system", "bm25"]
    ran = cli(build, *args)
    assert ran.exit_code == 0, ran.output
    reported = cli(build, "report")
    assert reported.exit_code == 0, reported.output
    for out in (reported.stdout, ran.stdout):  # report: the table 2706fe9 printed raw
        assert "\x1b" not in out and "\r" not in out and "\x07" not in out
        rows = [line for line in out.splitlines() if not line.startswith("no rule")]
        assert any(row.startswith("evilU+001B]0;ownedU+0007U+000DX ") for row in rows), rows
        assert len({len(row) for row in rows}) == 1, rows  # aligned: one width
    assert "\x1b" not in ran.stderr and "\r" not in ran.stderr


def test_messages_escape_data_for_the_terminal(tmp_path: Path) -> None:
    """A path holding control characters, in an error line, is shown as U+XXXX."""
    bad = tmp_path / "a\x1b]0;owned\x07\rb.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    result = cli(tmp_path / "b", "validate", "--corpus", bad, "--queries", QUERIES)
    assert result.exit_code == 1
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    assert "aU+001B]0;ownedU+0007U+000Db.jsonl" in result.stderr


def test_a_build_dir_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """Issue 38: validate into a non-UTF-8 build directory ended with a 51-line orjson
    traceback (suite.json records the spool's path as JSON text). It is refused in one line
    showing the bytes as \\xNN, before anything is made."""
    build = os.fsdecode(bytes(tmp_path) + b"/bad\xff")
    proc = recallbench("--build-dir", build, "validate")
    line = assert_one_line_process_error(proc, "validate")
    assert line == (
        f"recallbench validate: error: build directory {tmp_path}/bad\\xff is not valid UTF-8 "
        "(its artifacts record paths as JSON text); use a directory whose path is, e.g. "
        "--build-dir build"
    )
    assert list(tmp_path.iterdir()) == []


def test_compare_labels_results_in_directories_that_are_not_utf8(
    staged_build: Path, tmp_path: Path
) -> None:
    """Issue 38: `compare --result` of two results of one system, in directories whose names
    are not UTF-8, ended with a 53-line orjson traceback (the labels name the directories).
    The labels show those bytes as \\xNN; the comparison is written."""
    saved = []
    for name in (b"old\xff", b"new\xfe"):
        directory = Path(os.fsdecode(bytes(tmp_path) + b"/" + name))
        directory.mkdir()
        shutil.copyfile(staged_build / "results.json", directory / "results.json")
        saved.append(directory / "results.json")
    out = tmp_path / "out"
    proc = recallbench(
        "--build-dir", out, "compare", "--result", saved[0], "--result", saved[1], "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    import json

    doc = json.loads(proc.stdout)
    assert [s["label"] for s in doc["systems"]] == ["hotmem (old\\xff)", "hotmem (new\\xfe)"]
    assert (out / "compare.json").is_file() and (out / "compare.html").is_file()
