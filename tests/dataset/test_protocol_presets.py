"""The protocol presets, each against a reference written here from the protocol's own text.

Each reference reads the generated data file itself (json, its own evidence parsing and
gold rule) and computes the protocol's figures from the system's rankings in runs.json (the
input every definition shares; the ranking is the store's, never re-implemented). It uses
none of recallbench's dataset, measure or preset code, so a definition drifting in either
place fails here. Also: each preset's options are recorded, contradicting options are one
line, and the stage commands take the preset as `run` does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.datasets.locomo.generator import generate as generate_locomo
from recallbench.datasets.longmemeval.generator import generate as generate_longmemeval

KS = (1, 5, 10)
TOL = 1e-12


def _run(build: Path, dataset: str, data: Path, preset: str, *extra: str) -> dict[str, Any]:
    """`recallbench run --preset PRESET` with bm25; the artifacts it wrote."""
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(build), "-q", "run", "--dataset", dataset, "--data", str(data)]
        + ["--preset", preset, "--system", "bm25", *extra],
    )
    assert result.exit_code == 0, result.output
    out = {k: json.loads((build / f"{k}.json").read_text())["data"] for k in ("suite", "runs")}
    out["results"] = json.loads((build / "results.json").read_text())["data"]
    out["stdout"] = result.stdout
    return out


def _rankings(run: dict[str, Any], level: str) -> dict[str, list[str]]:
    return {q["query_id"]: q["levels"][level]["ranking"] for q in run["runs"]["queries"]}


def _per_query(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """query id -> measure -> its value (a recall's counts read as their value)."""

    def value(cell: Any) -> Any:
        return cell["value"] if isinstance(cell, dict) else cell

    return {
        q["query_id"]: {name: value(cell) for name, cell in q["metrics"].items()}
        for q in run["results"]["queries"]
    }


def _check(run: dict[str, Any], reference: dict[str, dict[str, float]], names: list[str]) -> None:
    """Every question of the reference is scored, with the reference's value of each
    measure, and the overall figure is the reference's mean over all of them."""
    ours = _per_query(run)
    assert sorted(ours) == sorted(reference)
    overall = run["results"]["metrics"]["overall"]
    for name in names:
        for qid, values in reference.items():
            assert abs(ours[qid][name] - values[name]) <= TOL, (qid, name)
        mean = sum(v[name] for v in reference.values()) / len(reference)
        assert overall[name]["denominator"] == len(reference)
        assert abs(overall[name]["value"] - mean) <= TOL, name


# -- LoCoMo: the turn-index harnesses ------------------------------------------------------

#: the harnesses' evidence rule: every D<session>:<turn> in an entry, spaces tolerated
_EVIDENCE = re.compile(r"[Dd]\s*(\d+)\s*:\s*(\d+)")


def locomo_questions(path: Path) -> dict[str, tuple[str, set[str]]]:
    """query id -> (category, evidence turns that exist), every category kept, questions
    without an existing evidence turn left out: the question set of the harnesses."""
    out = {}
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        turns = {
            turn["dia_id"]
            for key, value in conversation.items()
            if re.fullmatch(r"session_\d+", key)
            for turn in value
        }
        for i, qa in enumerate(sample["qa"]):
            ids = {f"D{s}:{t}" for entry in qa["evidence"] for s, t in _EVIDENCE.findall(entry)}
            found = ids & turns
            if found:
                out[f"{sample['sample_id']}:q{i}"] = (str(qa["category"]), found)
    return out


def locomo_reference(path: Path, turn_rankings: dict[str, list[str]]) -> dict[str, dict]:
    """Per question, from the harnesses' definitions: the sessions of the top k turns hold
    any gold session (any@k), every gold session (session-expanded strict@k); an evidence
    turn is among the top k turns (turn-id any@k)."""
    out = {}
    for qid, (_, evidence) in locomo_questions(path).items():
        gold_sessions = {turn.split(":")[0] for turn in evidence}
        values = {}
        for k in KS:
            top = turn_rankings[qid][:k]
            sessions = {turn.split(":")[0] for turn in top}
            values[f"turn_sessions_any@{k}"] = float(bool(sessions & gold_sessions))
            values[f"turn_sessions_all@{k}"] = float(gold_sessions <= sessions)
            values[f"turn_recall_any@{k}"] = float(bool(set(top) & evidence))
        out[qid] = values
    return out


@pytest.fixture(scope="module")
def locomo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("protocols-locomo") / "locomo10.json"
    generate_locomo(
        path,
        conversations=2,
        sessions=(5, 7),
        turns_per_session=(4, 8),
        seed=3,
        questions_per_conversation=(30, 40),
    )
    return path


@pytest.mark.parametrize(
    ("preset", "names"),
    [
        ("locomo-sessions-of-top-turns", ["turn_sessions_any@{k}"]),
        ("locomo-session-expanded", ["turn_sessions_all@{k}", "turn_recall_any@{k}"]),
    ],
)
def test_locomo_turn_harness_presets_match_their_definitions(
    locomo_file: Path, tmp_path: Path, preset: str, names: list[str]
) -> None:
    run = _run(tmp_path, "locomo", locomo_file, preset)
    assert run["suite"]["options"] == {"unit": "turn", "categories": "all"}
    reference = locomo_reference(locomo_file, _rankings(run, "turn"))
    categories = {category for category, _ in locomo_questions(locomo_file).values()}
    assert "5" in categories  # category 5 is in the question set, and scored
    measures = [name.format(k=k) for name in names for k in KS]
    assert [m["name"] for m in run["results"]["run"]["measures"]] == measures
    _check(run, reference, measures)
    # labelled as the protocol labels them
    label = "any@5" if preset.endswith("top-turns") else "session-expanded strict@5"
    assert f"{label} " in run["stdout"]


# -- LongMemEval: vipune's scope document, all questions ------------------------------------


@pytest.fixture(scope="module")
def longmemeval_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("protocols-lme") / "s.json"
    generate_longmemeval(
        path, shape="s", questions=24, seed=5, sessions_per_question=8, session_chars=240
    )
    return path


def _gold(record: dict[str, Any]) -> set[str]:
    """The scope document's pair: answer_session_ids (those in the haystack); when a record
    has none, the sessions holding a has_answer turn."""
    haystack = record["haystack_session_ids"]
    if record.get("answer_session_ids"):
        return set(record["answer_session_ids"]) & set(haystack)
    return {
        sid
        for sid, session in zip(haystack, record["haystack_sessions"], strict=True)
        if any(turn.get("has_answer") for turn in session)
    }


def _stored_texts(build: Path) -> dict[str, dict[str, str]]:
    """scope (question) id -> session id -> the text stored for it (validate's spool)."""
    out: dict[str, dict[str, str]] = {}
    for line in (build / "scopes.jsonl").read_text().splitlines():
        scope = json.loads(line)
        out[scope["scope_id"]] = {
            sid: memory["text"]
            for memory in scope["memories"]
            for sid in memory["units"]["session"]
        }
    return out


def test_vipune_scope_is_fractional_recall_over_pairs_without_abstention(
    longmemeval_file: Path, tmp_path: Path
) -> None:
    """Decision 3: recall@k = |gold ∩ top-k| / |gold| per pair, averaged, k = 1, 5, 10;
    the 30-of-500 abstention pairs dropped; one row per session, role and content joined."""
    run = _run(tmp_path, "longmemeval", longmemeval_file, "vipune-scope")
    records = json.loads(longmemeval_file.read_text())
    pairs = [r for r in records if not r["question_id"].endswith("_abs") and _gold(r)]
    assert len(pairs) < len(records)  # abstention pairs exist, and are left out
    rankings = _rankings(run, "session")
    reference = {
        r["question_id"]: {
            f"recall@{k}": len(_gold(r) & set(rankings[r["question_id"]][:k])) / len(_gold(r))
            for k in KS
        }
        for r in pairs
    }
    _check(run, reference, [f"recall@{k}" for k in KS])
    texts = _stored_texts(tmp_path)
    for r in pairs:
        for sid, session in zip(r["haystack_session_ids"], r["haystack_sessions"], strict=True):
            joined = "\n".join(f"{turn['role']}: {turn['content']}" for turn in session)
            assert texts[r["question_id"]][sid] == joined
    assert "recall@5 " in run["stdout"]


def test_longmemeval_all_questions_keeps_abstention(longmemeval_file: Path, tmp_path: Path):
    """Any-hit R@k over every question, abstention included: 1 if any answer session is in
    the top k; sessions as their user turns joined by spaces."""
    run = _run(tmp_path, "longmemeval", longmemeval_file, "longmemeval-all-questions")
    records = [r for r in json.loads(longmemeval_file.read_text()) if _gold(r)]
    assert any(r["question_id"].endswith("_abs") for r in records)
    rankings = _rankings(run, "session")
    reference = {
        r["question_id"]: {
            f"recall_any@{k}": float(bool(_gold(r) & set(rankings[r["question_id"]][:k])))
            for k in KS
        }
        for r in records
    }
    _check(run, reference, [f"recall_any@{k}" for k in KS])
    assert run["suite"]["options"]["abstention"] == "keep"
    texts = _stored_texts(tmp_path)
    for r in records:
        for sid, session in zip(r["haystack_session_ids"], r["haystack_sessions"], strict=True):
            user = " ".join(turn["content"] for turn in session if turn["role"] == "user")
            assert texts[r["question_id"]][sid] == user
    assert "any-hit R@5 " in run["stdout"]


# -- contradictions and the stage commands -----------------------------------------------


@pytest.mark.parametrize(
    ("dataset", "args", "message"),
    [
        ("locomo", ["--preset", "locomo-sessions-of-top-turns", "--unit", "session"], "uses --unit turn, not session"),
        ("locomo", ["--preset", "locomo-session-expanded", "--categories", "1-4"], "uses --categories all, not 1-4"),
        ("locomo", ["--preset", "locomo-session-expanded", "--k", "5"], "uses --k 1,5,10"),
        ("locomo", ["--preset", "locomo-sessions-of-top-turns", "--measure", "recall@5"], "scores turn_sessions_any@1"),
        ("locomo", ["--preset", "vipune-scope"], "--preset vipune-scope is for --dataset longmemeval"),
        ("longmemeval", ["--preset", "vipune-scope", "--session-text", "user"], "uses --session-text all, not user"),
        ("longmemeval", ["--preset", "vipune-scope", "--abstention", "keep"], "uses --abstention drop, not keep"),
        ("longmemeval", ["--preset", "longmemeval-all-questions", "--abstention", "drop"], "uses --abstention keep"),
        ("longmemeval", ["--preset", "longmemeval-all-questions", "--top-k", "5"], "needs --top-k 10 or more"),
    ],
)  # fmt: skip
def test_contradicting_options_are_one_line_usage_errors(
    locomo_file: Path, longmemeval_file: Path, tmp_path: Path, dataset: str, args, message: str
) -> None:
    data = locomo_file if dataset == "locomo" else longmemeval_file
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "run", "--dataset", dataset, "--data", str(data), *args],
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results.json").exists()


def test_the_stage_commands_take_the_preset(locomo_file: Path, tmp_path: Path) -> None:
    """validate, query and score --preset give run --preset's figures; score --preset on a
    suite validated another way, or with other --k, is a one-line usage error naming the
    option."""
    runner = CliRunner()
    build = ["--build-dir", str(tmp_path / "stages"), "-q"]
    preset = ["--preset", "locomo-sessions-of-top-turns"]
    data = ["--dataset", "locomo", "--data", str(locomo_file)]
    for args in (
        ["validate", *data, *preset],
        ["hydrate", "--system", "bm25"],
        ["query", *preset],
        ["score", *preset],
    ):
        result = runner.invoke(main, build + args)
        assert result.exit_code == 0, (args, result.output)
    other_ks = runner.invoke(main, build + ["score", *preset, "--k", "1"])
    assert other_ks.exit_code == 2
    assert "--preset locomo-sessions-of-top-turns uses --k 1,5,10 (see " in other_ks.stderr
    assert len(other_ks.stderr.strip().splitlines()) == 1
    scores = json.loads((tmp_path / "stages" / "scores.json").read_text())["data"]
    whole = _run(tmp_path / "run", "locomo", locomo_file, "locomo-sessions-of-top-turns")
    assert scores["overall"] == whole["results"]["metrics"]["overall"]

    other = ["--build-dir", str(tmp_path / "plain"), "-q"]
    for args in (["validate", *data], ["hydrate", "--system", "bm25"], ["query"]):
        assert runner.invoke(main, other + args).exit_code == 0
    result = runner.invoke(main, other + ["score", *preset])
    assert result.exit_code == 2
    assert "--preset locomo-sessions-of-top-turns uses --unit turn; the suite was validated " in (
        result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_docs_table_of_presets_is_the_generated_one() -> None:
    from recallbench.commands.presets import PRESETS, presets_table

    docs = (Path(__file__).parents[2] / "docs" / "protocols.md").read_text(encoding="utf-8")
    assert presets_table() in docs
    assert presets_table().count("\n") == len(PRESETS) + 2
