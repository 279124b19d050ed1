"""Reproducing the LongMemEval paper's retrieval table: `bm25-okapi` with `--gold official`
against an independent computation, question by question, at both units.

The reference below is written here from the rules of LongMemEval's
src/retrieval/run_retrieval.py and eval_utils.py (rank_bm25 called directly, the official
formulas written out); it uses none of recallbench's dataset, measure or system code. Only
rankings (lists of ids) are compared exactly; metric values are compared within 1e-12,
since the two sides compute them along different paths.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from rank_bm25 import BM25Okapi

from recallbench.cli.main import main
from recallbench.commands.pipeline import run_pipeline
from recallbench.datasets.longmemeval.generator import generate

KS = (1, 3, 5, 10, 30, 50)
TOL = 1e-12


# -- the reference, from the official rules -------------------------------------------------


def ref_dcg(relevances: list[int], k: int) -> float:
    rel = relevances[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(rel[i] / math.log2(i + 1) for i in range(1, len(rel)))


def ref_evaluate(rankings, correct, corpus_ids, k) -> tuple[float, float, float]:
    recalled = {corpus_ids[i] for i in rankings[:k]}
    recall_any = float(any(doc in recalled for doc in correct))
    recall_all = float(all(doc in recalled for doc in correct))
    relevances = [1 if doc in correct else 0 for doc in corpus_ids]
    ideal = ref_dcg(sorted(relevances, reverse=True), k)
    actual = ref_dcg([relevances[i] for i in rankings[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def ref_turn2session(rankings, correct, corpus_ids, k) -> tuple[float, float, float]:
    def strip(doc: str) -> str:
        return "_".join(doc.split("_")[:-1])

    correct = {strip(doc) for doc in correct}
    sessions = [strip(doc) for doc in corpus_ids]
    effective = k
    while effective <= len(sessions) and len({sessions[i] for i in rankings[:effective]}) < k:
        effective += 1
    return ref_evaluate(rankings, correct, sessions, effective)


def ref_corpus(record: dict[str, Any], unit: str) -> tuple[list[str], list[str]]:
    corpus, ids = [], []
    for sid, session in zip(
        record["haystack_session_ids"], record["haystack_sessions"], strict=True
    ):
        if unit == "session":
            corpus.append(" ".join(t["content"] for t in session if t["role"] == "user"))
            user = [t for t in session if t["role"] == "user"]
            noans = "answer" in sid and all(not t.get("has_answer", False) for t in user)
            ids.append(sid.replace("answer", "noans") if noans else sid)
            continue
        for i, turn in enumerate(session):
            if turn["role"] != "user":
                continue
            corpus.append(turn["content"])
            tid = f"{sid}_{i + 1}"
            if "answer" in sid and not turn.get("has_answer", False):
                tid = tid.replace("answer", "noans")
            ids.append(tid)
    return corpus, ids


def reference(record: dict[str, Any], unit: str) -> dict[str, Any]:
    corpus, ids = ref_corpus(record, unit)
    correct = sorted({doc for doc in ids if "answer" in doc})
    bm25 = BM25Okapi([doc.split(" ") for doc in corpus])
    rankings = np.argsort(bm25.get_scores(record["question"].split(" ")))[::-1]
    prefix = "turn_" if unit == "turn" else ""
    out: dict[str, Any] = {"ranking": [ids[i] for i in rankings], "correct": correct}
    for k in KS:
        values = ref_evaluate(rankings, correct, ids, k)
        for stem, v in zip(("recall_any", "recall_all", "ndcg_any"), values, strict=True):
            out[f"{prefix}{stem}@{k}"] = v
        if unit == "turn":
            values = ref_turn2session(rankings, correct, ids, k)
            for stem, v in zip(("recall_any", "recall_all", "ndcg_any"), values, strict=True):
                out[f"session:{stem}@{k}"] = v
    return out


# -- our run ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lme-paper") / "s_like.json"
    generate(path, shape="s", questions=30, seed=4, sessions_per_question=14, session_chars=400)
    return path


@pytest.fixture(scope="module")
def records(data: Path) -> list[dict[str, Any]]:
    return [r for r in json.loads(data.read_text()) if "_abs" not in r["question_id"]]


def ours(data: Path, tmp: Path, unit: str) -> Any:
    """The preset's protocol (top-k 50, at turn unit the whole store)."""
    return run_pipeline(
        "longmemeval",
        {"data": data},
        tmp,
        options={"session_text": "user", "unit": unit, "gold": "official"},
        system="bm25-okapi",
        top_k=50 if unit == "session" else 10_000,
        ks=KS,
        sample=2,
    )


@pytest.fixture(scope="module")
def session_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return ours(data, tmp_path_factory.mktemp("lme-paper-session"), "session")


@pytest.fixture(scope="module")
def turn_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return ours(data, tmp_path_factory.mktemp("lme-paper-turn"), "turn")


def _label(record: dict[str, Any]) -> str:
    """The official summary's label of a measure record: ``{prefix}{stem}@{k}`` (the name
    itself carries the official rule's empty_gold, and the turn2session nDCG's reads/depth)."""
    return f"{record['prefix']}{record['stem']}@{record['k']}"


def _relabel(cells: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {r["name"]: _label(r) for r in records}
    assert len(set(labels.values())) == len(labels)  # one label per measure
    return {labels[name]: cell for name, cell in cells.items()}


def _per_query(run: Any) -> dict[str, dict[str, Any]]:
    scores = run.envelopes["scores"]["data"]
    return {r["query_id"]: _relabel(r["metrics"], scores["measures"]) for r in scores["per_query"]}


def _rankings(run: Any, level: str) -> dict[str, list[str]]:
    return {
        r["query_id"]: r["levels"][level]["ranking"]
        for r in run.envelopes["runs"]["data"]["queries"]
    }


def test_the_data_has_vacuous_and_ordinary_questions(records: list[dict[str, Any]]) -> None:
    """Without both kinds the parity below would not test the vacuous rule."""
    golds = [reference(r, "session")["correct"] for r in records]
    assert any(not g for g in golds) and sum(1 for g in golds if g) >= 20
    assert any(len(g) > 1 for g in golds)


def test_session_unit_matches_the_official_code_per_question(
    session_run: Any, records: list[dict[str, Any]]
) -> None:
    per_query = _per_query(session_run)
    rankings = _rankings(session_run, "session")
    assert sorted(per_query) == sorted(r["question_id"] for r in records)  # all 28, vacuous too
    for record in records:
        qid = record["question_id"]
        ref = reference(record, "session")
        # the same sessions in the same order (noans ids are the same sessions, renamed)
        official = [doc.replace("noans", "answer") for doc in ref["ranking"][:50]]
        assert rankings[qid] == official, qid
        for k in KS:
            for stem in ("recall_any", "recall_all", "ndcg_any"):
                name = f"{stem}@{k}"
                assert abs(per_query[qid][name] - ref[name]) <= TOL, (qid, name)


def test_turn_unit_matches_the_official_code_per_question(
    turn_run: Any, records: list[dict[str, Any]]
) -> None:
    per_query = _per_query(turn_run)
    rankings = _rankings(turn_run, "turn")
    assert sorted(per_query) == sorted(r["question_id"] for r in records)
    for record in records:
        qid = record["question_id"]
        ref = reference(record, "turn")
        official = [doc.replace("noans", "answer") for doc in ref["ranking"]]
        assert rankings[qid] == official, qid  # the whole turn ranking
        for k in KS:
            for stem in ("recall_any", "recall_all", "ndcg_any"):
                name = f"turn_{stem}@{k}"
                assert abs(per_query[qid][name] - ref[name]) <= TOL, (qid, name)
            # the session level of a turn run: evaluate_retrieval_turn2session
            for stem in ("recall_any", "recall_all", "ndcg_any"):
                name = f"{stem}@{k}"
                assert abs(per_query[qid][name] - ref[f"session:{name}"]) <= TOL, (qid, name)


def test_means_vacuous_counts_and_the_default_rule_beside(
    session_run: Any, records: list[dict[str, Any]]
) -> None:
    result = session_run.result
    vacuous = sum(1 for r in records if not reference(r, "session")["correct"])
    assert result["summary"]["gold_rule"] == "official"
    assert result["summary"]["questions_with_vacuous_gold"] == vacuous
    # the precondition of exact parity: no two texts of a haystack were merged
    assert result["summary"]["questions_with_identical_texts_stored_once"] == 0
    overall = _relabel(
        result["metrics"]["overall"], session_run.envelopes["scores"]["data"]["measures"]
    )
    for k in (5, 10):
        for stem in ("recall_all", "ndcg_any"):
            name = f"{stem}@{k}"
            expected = sum(reference(r, "session")[name] for r in records) / len(records)
            assert overall[name]["denominator"] == len(records)  # vacuous ones averaged in
            assert abs(overall[name]["value"] - expected) <= TOL
        # the default rule's figures: the same ranking, answer_session_ids as gold
        default = overall[f"answer_ids_recall_all@{k}"]
        assert default["denominator"] == len(records)  # every generated record has gold ids
        hits = 0
        for r in records:
            top = {d.replace("noans", "answer") for d in reference(r, "session")["ranking"][:k]}
            hits += set(r["answer_session_ids"]) <= top
        assert default["value"] == hits / len(records)
    names = [m["name"] for m in result["run"]["measures"]]
    # the official summary's order; the names carry the official rule's empty-gold values
    assert names[:2] == ["recall_all(empty_gold=1.0)@1", "ndcg_any(empty_gold=0.0)@1"]
    assert {m["k"] for m in result["run"]["measures"]} == set(KS)


def test_the_preset_prints_the_papers_figures(data: Path, tmp_path: Path) -> None:
    """`run --preset longmemeval-paper` at turn unit: both levels, recall_all and ndcg_any."""
    result = CliRunner().invoke(
        main,
        [
            "--build-dir",
            str(tmp_path / "b"),
            "-q",
            "run",
            "--dataset",
            "longmemeval",
            "--data",
            str(data),
            "--preset",
            "longmemeval-paper",
            "--unit",
            "turn",
            "--k",  # the preset's own k values may be repeated beside it
            "1,3,5,10,30,50",
            "--system",
            "bm25-okapi",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10"):
        assert f"  {name} " in out and f"  turn_{name} " in out
    assert "session level (28 questions" in out and "turn level (28 questions" in out
    suite = json.loads((tmp_path / "b" / "suite.json").read_text())
    assert suite["data"]["options"] == {"gold": "official", "session_text": "user", "unit": "turn"}
    runs = json.loads((tmp_path / "b" / "runs.json").read_text())
    assert runs["data"]["ks"] == list(KS) and runs["data"]["top_k"] == 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "longmemeval-paper", "--session-text", "all"], "uses --session-text user"),
        (["--preset", "longmemeval-paper", "--gold", "answer_session_ids"], "uses --gold official"),
        (["--preset", "longmemeval-paper", "--k", "1,5"], "uses --k 1,3,5,10,30,50"),
        (["--k", "5,20", "--top-k", "10"], "every k must be between 1 and --top-k 10"),
        (["--k", "five"], "not a comma-separated list"),
    ],
)
def test_contradicting_options_are_one_line_errors(
    data: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "run", "--dataset", "longmemeval", "--data", str(data)]
        + args,
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_official_gold_on_a_record_with_a_noans_session() -> None:
    """An answer session whose evidence is only on the assistant side is not gold; at turn
    unit its turns count for the session 'noans...' (evaluate_retrieval_turn2session)."""
    from recallbench.datasets.longmemeval.pairs import make_scope, official_gold
    from recallbench.datasets.longmemeval.records import Instance, Turn

    inst = Instance(
        index=0,
        question_id="q1",
        question_type="multi-session",
        question="Where did I park?",
        question_date=None,
        session_ids=("s_1", "answer_a_1", "answer_a_2", "x_has"),
        sessions=(
            (Turn("user", "hello there", None), Turn("assistant", "hi", None)),
            (
                Turn("user", "I parked on level 3", True),
                Turn("assistant", "noted", False),
                Turn("user", "and paid", False),
            ),
            (Turn("user", "moved the car", False), Turn("assistant", "it is at level 5", True)),
            (Turn("user", "a label outside an answer id", True),),
        ),
        dates=None,
        answer_session_ids=("answer_a_1", "answer_a_2"),
    )
    gold = official_gold(inst)
    assert gold.sessions == ("answer_a_1",) and gold.turns == ("answer_a_1_1",)
    scope, _ = make_scope(inst, "user", "session", "official")
    [query] = scope.queries
    assert query.relevance == {
        "session": {"answer_a_1": 2},
        "answer_ids": {"answer_a_1": 2, "answer_a_2": 2},
    }
    scope, _ = make_scope(inst, "user", "turn", "official")
    units = {m.units["turn"][0]: m.units["session"] for m in scope.memories}
    assert units == {
        "s_1_1": ("s_1",),
        "answer_a_1_1": ("answer_a_1",),
        "answer_a_1_3": ("noans_a_1",),
        "answer_a_2_1": ("noans_a_2",),
        "x_has_1": ("x_has",),
    }
    assert scope.queries[0].relevance["turn"] == {"answer_a_1_1": 2}


def test_measures_take_the_runs_cutoffs_and_the_official_empty_gold() -> None:
    from recallbench.core.errors import RecallbenchError
    from recallbench.core.model import Level
    from recallbench.metrics.measures import NDCGAny, RecallAll, RecallAny, conversational_measures

    levels = [Level("session")]
    default = conversational_measures(10, levels)
    assert [m.name for m in default[:4]] == [
        "recall@1",
        "recall_any@1",
        "recall_all@1",
        "ndcg_any@1",
    ]
    assert sorted({m.k for m in default}) == [1, 5, 10]
    official = conversational_measures(50, levels, KS, official=True)
    assert sorted({m.k for m in official}) == list(KS)
    assert [m.name for m in official[:4]] == [
        "recall_all(empty_gold=1.0)@1",
        "ndcg_any(empty_gold=0.0)@1",
        "recall_any(empty_gold=0.0)@1",
        "recall@1",  # fractional recall stays n/a without gold: no empty_gold
    ]
    no_gold: dict[str, int] = {}
    values = {f"{m.stem}@5": m(["a", "b"], no_gold) for m in official if m.k == 5}
    assert values == {"recall_all@5": 1.0, "ndcg_any@5": 0.0, "recall_any@5": 0.0, "recall@5": None}
    assert all(m(["a"], no_gold) is None for m in default)  # the default rule: n/a
    for cls in (RecallAny, RecallAll, NDCGAny):  # with gold, the empty-gold value is unused
        assert cls("session", 1, empty_gold=0.5)(["a"], {"a": 2}) == 1.0
    with pytest.raises(RecallbenchError, match="--k: 20 is not between 1 and --top-k 10"):
        conversational_measures(10, levels, (5, 20))


def test_the_fixture_suite_refuses_k_before_searching(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path), "run", "--system", "bm25", "--k", "1,5"]
    )
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [
        "recallbench run: error: the fixture suite's cutoffs are fixed (1 and --top-k); --k is "
        "for the conversational datasets"
    ]
    assert not (tmp_path / "results.json").exists()


def test_turn2session_ndcg_widens_and_is_na_on_a_cut_ranking() -> None:
    from recallbench.metrics.measures import NDCGAnyTurn2Session

    grades = {"answer_x_3": 2}
    ranking = ["a_1", "a_3", "answer_x_1", "b_1", "answer_x_3", "c_1"]
    measure = NDCGAnyTurn2Session("session", 3, empty_gold=0.0, depth=6)
    # sessions: a, a, noans_x, b -> three distinct at turn 4; the gold turn (rank 5) is out
    assert measure(ranking, grades) == 0.0
    wider = NDCGAnyTurn2Session("session", 4, empty_gold=0.0, depth=6)
    # four distinct (a, noans_x, b, answer_x) at turn 5: the gold turn counts at rank 5
    assert abs(wider(ranking, grades) - 1 / math.log2(5)) <= TOL
    cut = NDCGAnyTurn2Session("session", 6, empty_gold=0.0, depth=6)
    assert cut(ranking, grades) is None  # 6 turns returned (the depth), 5 sessions: unknown
    exhausted = NDCGAnyTurn2Session("session", 6, empty_gold=0.0, depth=50)
    assert abs(exhausted(ranking, grades) - 1 / math.log2(5)) <= TOL  # the whole store
    assert measure(ranking, {}) == 0.0  # vacuous


def test_the_gold_rule_is_a_reader_option_of_suite_and_cache(data: Path, tmp_path: Path) -> None:
    """validate records gold: official; a vector cache made for the default rule is refused."""

    def rb(*args: str) -> Any:
        return CliRunner().invoke(main, ["--build-dir", str(tmp_path / "b"), "-q", *args])

    lme = ["--dataset", "longmemeval", "--data", str(data)]
    assert rb("validate", *lme).exit_code == 0
    suite = json.loads((tmp_path / "b" / "suite.json").read_text())
    assert "gold" not in suite["data"]["options"]  # the default is not recorded
    assert rb("prep", "--cache", str(tmp_path / "cache")).exit_code == 0  # hotmem
    assert rb("validate", *lme, "--preset", "longmemeval-paper").exit_code == 0
    suite = json.loads((tmp_path / "b" / "suite.json").read_text())
    assert suite["data"]["options"]["gold"] == "official"
    assert rb("hydrate").exit_code == 0
    refused = rb("query", "--cache", str(tmp_path / "cache"))
    assert refused.exit_code == 1
    assert "this run uses {'gold': 'official'," in refused.stderr


def test_the_script_takes_gold_official_and_counts_the_vacuous(data: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "retrieval_eval.py"), "-q", "--longmemeval"]
        + [str(data), "--gold", "official", "--system", "bm25-okapi"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "(means over 28 scored queries, 2 of them with vacuous gold" in done.stdout
    assert "answer_ids_recall_all@10 " in done.stdout
