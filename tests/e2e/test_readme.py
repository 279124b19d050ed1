"""The README's commands, run as written from the checkout (placeholders for the user's data
files replaced by generated files), and the output it shows checked against a real run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README, re.S)


def commands(block: str) -> list[str]:
    """The command lines of a block, without their trailing comments."""
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from recallbench.datasets.locomo.generator import generate as locomo
    from recallbench.datasets.longmemeval.generator import generate as longmemeval

    work = tmp_path_factory.mktemp("readme-data")
    lme = work / "longmemeval_s.json"
    longmemeval(lme, shape="s", questions=8, seed=3, sessions_per_question=6, session_chars=300)
    loc = work / "locomo10.json"
    locomo(loc, conversations=1, seed=3)
    return {"FILE": lme, "locomo10.json": loc}


def run(command: str, files: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    for placeholder, path in files.items():
        command = re.sub(rf"(?<![\w/.]){re.escape(placeholder)}(?![\w.])", str(path), command)
    env = {**os.environ, "NO_PROGRESS": "1"}
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_script_commands_run_as_written(data_files: dict[str, Path]) -> None:
    (script_block,) = [b for b in blocks("sh") if "scripts/retrieval_eval.py" in b]
    lines = commands(script_block)
    assert lines and all(c.startswith(".venv/bin/python scripts/retrieval_eval.py") for c in lines)
    shown = blocks("text")
    for command in lines:
        done = run(command, data_files)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "Traceback" not in done.stderr
        if command.endswith("retrieval_eval.py"):  # the fixture suite: the README's own output
            assert done.stdout == shown[0], (done.stdout, shown[0])
        else:
            lines = done.stdout.splitlines()  # the headline table, then the summary lines
            assert lines[0].split()[:2] == ["category", "n"]
            assert any(line.startswith("recall@1 ") for line in lines)
            assert "(means over " in done.stdout


def test_make_eval_into_another_build_directory(tmp_path: Path) -> None:
    """`make eval BUILD=/tmp/rb` as the README writes it (a warm .venv: no install here)."""
    if not (ROOT / ".venv" / ".recallbench-core").exists():
        pytest.fail("run `make test` (it sets up .venv) rather than pytest alone")
    assert "`make eval BUILD=/tmp/rb` writes into another directory" in README
    build = tmp_path / "rb"
    done = run(f"make -s eval BUILD={build}", {})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "result matches" in done.stderr
    for name in (
        "results.json",
        "report.md",
        "report.html",
        "decision.json",
        "run.trec",
        "qrels.trec",
    ):
        assert (build / name).is_file(), name
