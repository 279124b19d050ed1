"""Stages declare their inputs (`artifacts.Stage.inputs`): the stage functions take exactly
those envelopes, in that order, and `load_inputs` reads them with the one-line refusals
(missing, stale) that name the command to run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recallbench.builddir.artifacts import (
    ARTIFACTS,
    STAGES,
    artifact_path,
    dumps,
    envelope,
    load_inputs,
    stage,
)
from recallbench.core.errors import ArtifactError
from recallbench.stages.decide import run_decide
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.report import build_report
from recallbench.stages.roundtrip import run_roundtrip
from recallbench.stages.score import run_score
from recallbench.systems.rules import decide_envelopes

#: the function each stage command calls with its inputs (validate reads the dataset)
STAGE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "hydrate": run_hydrate,
    "query": run_query,
    "snapshot-roundtrip": run_roundtrip,
    "score": run_score,
    "report": build_report,
    "decide": run_decide,
}


def leading_envelopes(function: Callable[..., Any]) -> list[str]:
    """The artifact kinds of `function`'s leading `<kind>_env` parameters, in order."""
    kinds = []
    for name in inspect.signature(function).parameters:
        if not name.endswith("_env"):
            break
        kinds.append(name.removesuffix("_env"))
    return kinds


def test_every_stage_but_validate_has_its_function() -> None:
    assert sorted(STAGE_FUNCTIONS) == sorted(s.command for s in STAGES if s.inputs)
    assert stage("validate").inputs == ()


@pytest.mark.parametrize("command", sorted(STAGE_FUNCTIONS))
def test_a_stage_function_takes_exactly_its_declared_inputs(command: str) -> None:
    """The CLI and the in-process chain pass `Stage.inputs` positionally: the function's
    leading envelope parameters must be those kinds in that order."""
    assert leading_envelopes(STAGE_FUNCTIONS[command]) == list(stage(command).inputs)


def test_the_decision_rules_take_decides_inputs() -> None:
    # the in-process chain runs the rules once, on decide's inputs, for report and decide
    assert leading_envelopes(decide_envelopes) == list(stage("decide").inputs)


def test_declarations_are_upstream_artifacts_and_their_own_files() -> None:
    made: list[str] = []
    for s in STAGES:
        assert set(s.inputs) <= set(made), s.command  # only artifacts made earlier
        assert len(set(s.inputs)) == len(s.inputs)
        assert s.file == f"{s.kind}.json" == s.outputs[0] == ARTIFACTS[s.kind][0]
        made.append(s.kind)
    outputs = [name for s in STAGES for name in s.outputs]
    assert len(outputs) == len(set(outputs))  # no file written by two stages


def test_an_unknown_stage_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        stage("export-trec")


# --- load_inputs on a build directory of small envelopes ---------------------------------


def write_chain(build: Path) -> dict[str, dict[str, Any]]:
    """An envelope of every stage kind, each made from its declared inputs."""
    made: dict[str, dict[str, Any]] = {}
    for s in STAGES:
        env = envelope(s.kind, {"n": 1}, {k: made[k]["fingerprint"] for k in s.inputs})
        write(build, env)
        made[s.kind] = env
    return made


def write(build: Path, env: dict[str, Any]) -> None:
    path = artifact_path(build, env["artifact"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps(env))


def remake(build: Path, made: dict[str, dict[str, Any]], kind: str) -> None:
    """Rewrite `kind` with other data (a rerun stage): everything after it is now stale."""
    s = next(s for s in STAGES if s.kind == kind)
    made[kind] = envelope(kind, {"n": 2}, {k: made[k]["fingerprint"] for k in s.inputs})
    write(build, made[kind])


@pytest.mark.parametrize("command", [s.command for s in STAGES])
def test_load_inputs_returns_the_declared_envelopes_in_order(tmp_path: Path, command: str) -> None:
    made = write_chain(tmp_path)
    inputs = load_inputs(tmp_path, stage(command).inputs)
    assert list(inputs) == list(stage(command).inputs)
    assert inputs == {kind: made[kind] for kind in stage(command).inputs}


def test_load_inputs_names_the_stage_to_run_first(tmp_path: Path) -> None:
    write_chain(tmp_path)
    (tmp_path / "runs.json").unlink()
    with pytest.raises(ArtifactError) as caught:
        load_inputs(tmp_path, stage("report").inputs)
    assert str(caught.value) == f"{tmp_path / 'runs.json'}: missing; run `recallbench query` first"


@pytest.mark.parametrize(
    ("command", "rerun", "message"),
    [
        ("query", ["suite"], "hydrate.json is stale (made from another suite.json); "
         "run `recallbench hydrate` again"),
        ("report", ["runs", "scores"], "roundtrip.json is stale (made from another runs.json); "
         "run `recallbench snapshot-roundtrip` again"),
        # runs and hydrate are no inputs of decide: read from the build dir to check
        ("decide", ["runs", "scores"], "roundtrip.json is stale (made from another runs.json); "
         "run `recallbench snapshot-roundtrip` again"),
        # an input's own record first (what the command reads), then what it was made from
        ("decide", ["hydrate"], "roundtrip.json is stale (made from another hydrate.json); "
         "run `recallbench snapshot-roundtrip` again"),
        ("report", ["suite"], "hydrate.json is stale (made from another suite.json); "
         "run `recallbench hydrate` again"),
    ],
    ids=["query-suite", "report-runs", "decide-runs", "decide-hydrate", "report-suite"],
)  # fmt: skip
def test_load_inputs_refuses_an_input_made_from_another_upstream(
    tmp_path: Path, command: str, rerun: list[str], message: str
) -> None:
    made = write_chain(tmp_path)
    for kind in rerun:
        remake(tmp_path, made, kind)
    with pytest.raises(ArtifactError) as caught:
        load_inputs(tmp_path, stage(command).inputs)
    assert str(caught.value) == message
