"""Progress where stderr is no terminal (CI logs, `| tee`): a plain line at most every
$RECALLBENCH_PROGRESS_INTERVAL seconds (30 by default) naming the step, done/total, the
rate and the time left; none with -q or NO_PROGRESS; the generators show theirs too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.core import progress

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"
RB = str(Path(sys.executable).parent / "recallbench")
FIXTURE_ARGS = [
    "--corpus",
    str(FIXTURES / "corpus.jsonl"),
    "--queries",
    str(FIXTURES / "queries.jsonl"),
]
#: a plain progress line of a step with a known total
LINE = re.compile(
    r"^(?P<step>[\w -]+): [\d,]+/[\d,]+ \w+ \(\d+%\), [\d,.]+ \w+/s(, about .+ left)?$"
)


def progress_lines(stderr: str) -> list[re.Match[str]]:
    return [m for line in stderr.splitlines() if (m := LINE.match(line))]


def test_a_run_with_stderr_redirected_prints_plain_progress_lines(tmp_path: Path) -> None:
    """A real process whose stderr is a pipe: each stage's line, with a small interval."""
    env = {**os.environ, progress.INTERVAL_ENV: "0.000001"}
    env.pop("NO_PROGRESS", None)
    done = subprocess.run(
        [RB, "--build-dir", str(tmp_path / "b"), "run", *FIXTURE_ARGS, "--system", "bm25"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    steps = {m["step"] for m in progress_lines(done.stderr)}
    assert {"hydrate", "query", "snapshot-roundtrip"} <= steps, done.stderr
    assert "query: 57/57 query (100%)" in done.stderr
    assert re.search(r"^query: done, 57 query in \d+ s$", done.stderr, re.M), done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # no bar


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ([], {}),  # the default interval: a step of a second prints no line
        (["-q"], {progress.INTERVAL_ENV: "0.000001"}),
        ([], {progress.INTERVAL_ENV: "0.000001", "NO_PROGRESS": "1"}),
    ],
    ids=["default-interval", "quiet", "NO_PROGRESS"],
)
def test_no_line_within_the_interval_nor_when_progress_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
) -> None:
    monkeypatch.delenv(progress.INTERVAL_ENV, raising=False)
    monkeypatch.delenv("NO_PROGRESS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    done = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path), *args, "validate", *FIXTURE_ARGS]
    )
    assert done.exit_code == 0, done.output
    assert not progress_lines(done.stderr), done.stderr
    assert "done," not in done.stderr


def test_lines_come_at_most_once_per_interval(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clock of our own: 100 updates one second apart, 30 s apart at most: lines at 30,
    60 and 90 s, then the closing line."""
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    lines = progress.Lines(100, "hydrate x", "scope", every=30)
    for _ in range(100):
        clock[0] += 1
        lines.update()
    lines.close()
    assert capsys.readouterr().err.splitlines() == [
        "hydrate x: 30/100 scope (30%), 1.0 scope/s, about 1 min 10 s left",
        "hydrate x: 60/100 scope (60%), 1.0 scope/s, about 40 s left",
        "hydrate x: 90/100 scope (90%), 1.0 scope/s, about 10 s left",
        "hydrate x: done, 100 scope in 1 min 40 s",
    ]


def test_a_bad_interval_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.INTERVAL_ENV, "soon")
    monkeypatch.delenv("NO_PROGRESS", raising=False)
    done = CliRunner().invoke(main, ["--build-dir", str(tmp_path), "validate", *FIXTURE_ARGS])
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines() == [
        "recallbench validate: error: $RECALLBENCH_PROGRESS_INTERVAL: a number of seconds "
        "above 0, not 'soon'"
    ]


@pytest.mark.parametrize(
    ("command", "step"),
    [
        (["locomo", "generate", "--conversations", "3", "--seed", "1"], "locomo generate"),
        (
            ["longmemeval", "generate", "--shape", "s", "--questions", "3", "--seed", "1"],
            "longmemeval generate",
        ),
    ],
)
def test_the_generators_show_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], step: str
) -> None:
    """Plain lines where stderr is no terminal; a bar on a terminal (forced)."""
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.000001")
    monkeypatch.delenv("NO_PROGRESS", raising=False)
    out = tmp_path / "data.json"
    done = CliRunner().invoke(main, [*command, "--out", str(out)])
    assert done.exit_code == 0, done.output
    lines = progress_lines(done.stderr)
    assert [m["step"] for m in lines] == [step] * 3, done.stderr
    assert lines[-1].group(0).startswith(f"{step}: 3/3 ")
    monkeypatch.setattr(progress, "enabled", lambda: True)
    done = CliRunner().invoke(main, [*command, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert f"{step}:" in done.stderr and "\r" in done.stderr  # tqdm's frames


@pytest.mark.parametrize(
    "command",
    [
        ["locomo", "generate", "--conversations", "1"],
        ["longmemeval", "generate", "--shape", "s", "--questions", "1", "--seed", "1"],
    ],
    ids=["locomo", "longmemeval"],
)
def test_a_generator_that_cannot_write_says_so_in_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    """An output under a regular file: one line naming it, exit 1, no traceback (longmemeval
    generate printed one)."""
    (tmp_path / "file").write_text("")
    done = CliRunner().invoke(main, [*command, "--out", str(tmp_path / "file" / "data.json")])
    assert done.exit_code == 1, done.output
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"recallbench {' '.join(command[:2])}: error: {tmp_path / 'file'}")
    assert "Traceback" not in done.output
