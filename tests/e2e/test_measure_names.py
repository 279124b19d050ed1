"""Measure names as artifact keys, end to end (reliability round three, items 1 and 2):
every non-default parameter is in the name, two measures never share a key in scores.json,
results.json or report.md, and a repeated parameter is a usage error."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from conftest import cli, copy_build

from recallbench.builddir.artifacts import read_artifact
from recallbench.cli.main import main

RESTRICTED = "ndcg(categories=exact_lexical)@5"


@pytest.fixture
def build(staged_build: Path, tmp_path: Path) -> Path:
    return copy_build(staged_build, tmp_path / "build")


def test_a_restricted_measure_and_the_plain_one_keep_their_own_keys(build: Path) -> None:
    """Asked together, `ndcg(categories=exact_lexical)@5` and `ndcg@5` are two keys with
    their own values everywhere (the restricted one was named ndcg@5 and one was dropped)."""
    scored = cli(build, "score", "--measure", RESTRICTED, "--measure", "ndcg@5")
    assert scored.exit_code == 0, scored.output
    scores = read_artifact(build, "scores")["data"]
    assert [m["name"] for m in scores["measures"]] == [RESTRICTED, "ndcg@5"]
    overall = scores["overall"]
    exact = scores["per_category"]["exact_lexical"]
    assert overall[RESTRICTED]["value"] == exact["ndcg@5"]["value"]  # only those queries
    assert overall[RESTRICTED]["queries"] < overall["ndcg@5"]["queries"]
    for stage in ("decide", "report"):
        assert cli(build, stage).exit_code == 0
    result = orjson.loads((build / "results.json").read_bytes())["data"]
    assert [m["name"] for m in result["run"]["measures"]] == [RESTRICTED, "ndcg@5"]
    assert set(result["metrics"]["overall"]) == {RESTRICTED, "ndcg@5"}
    report = (build / "report.md").read_text("utf-8")
    assert "ndcg(categories=exact" in report  # the restricted name, escaped or not


@pytest.mark.parametrize(
    "measure",
    [
        "recall(rel=2,rel=3)@5",
        "ndcg(categories=a,categories=b)@5",
        "recall(level=memory,level=x)@5",
    ],
)
def test_a_repeated_parameter_is_a_usage_error_in_one_line(build: Path, measure: str) -> None:
    before = (build / "scores.json").read_bytes()
    result = CliRunner().invoke(
        main, ["--build-dir", str(build), "score", "--measure", measure], prog_name="recallbench"
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "is given twice" in lines[0], lines
    assert lines[0].startswith("recallbench score: error: ")
    assert (build / "scores.json").read_bytes() == before
