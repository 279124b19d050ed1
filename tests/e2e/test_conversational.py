"""Conversational datasets through the one set of stages ("done when" of the redesign).

On a hand-written tiny LoCoMo file and a hand-written tiny LongMemEval file: counts by
category and drops equal hand counts; a LoCoMo conversation is one scope, hydrated once,
asked all its questions; session- and turn-level figures equal a hand computation from the
ranked hits; the search is widened until k distinct sessions; LongMemEval rankings expand
deduplicated sessions; the script's turn-level summary; a deterministic round-trip sample;
"no rule" from decide; export-trec read back by trec_eval (pytrec_eval).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytrec_eval
from click.testing import CliRunner, Result

from recallbench.cli.main import main
from recallbench.commands.pipeline import run_pipeline
from recallbench.core.ids import opaque_id
from recallbench.core.model import Scope, level_ranking
from recallbench.datasets.longmemeval.generator import generate
from recallbench.datasets.longmemeval.reader import open_source as open_longmemeval
from recallbench.metrics.measures import value_of

ROOT = Path(__file__).resolve().parents[2]
TOP_K = 5  # LoCoMo runs: measures at k = 1 and 5


def cli(build: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["--build-dir", str(build), *map(str, args)])


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def load(path: Path) -> dict[str, Any]:
    return orjson.loads(path.read_bytes())


def write_json(path: Path, value: Any) -> Path:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2))
    return path


# -- a hand-written LoCoMo file ------------------------------------------------------------


def _session(number: int, *turns: tuple[str, str]) -> list[dict[str, str]]:
    return [
        {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text}
        for i, (speaker, text) in enumerate(turns, start=1)
    ]


def _qa(category: int, evidence: list[str], question: str) -> dict[str, Any]:
    return {"question": question, "answer": "x", "evidence": evidence, "category": category}


CONV_1 = {
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": _session(
            1,
            ("Ann", "I adopted a puppy named Rex"),
            ("Bob", "Rex is a great name for a puppy"),
            ("Ann", "The puppy chews my shoes"),
        ),
        "session_2": _session(
            2,
            ("Bob", "I started pottery classes"),
            ("Ann", "Pottery sounds relaxing"),
            ("Bob", "My first pottery bowl cracked"),
        ),
        "session_3": _session(
            3,
            ("Ann", "Rex the puppy learned to sit"),
            ("Bob", "Training a puppy takes patience"),
            ("Ann", "We walk Rex every morning"),
        ),
        "session_4": _session(
            4,
            ("Bob", "We flew to Lisbon in June"),
            ("Ann", "Lisbon has lovely tiles"),
            ("Bob", "The Lisbon trip was in June"),
        ),
        "session_5": _session(
            5,
            ("Ann", "I ran a marathon in Berlin"),
            ("Bob", "A marathon is hard"),
            ("Ann", "My marathon time was four hours"),
        ),
        "session_6": _session(
            6,
            ("Bob", "My sister visited from Oslo"),
            ("Ann", "How is your sister"),
            ("Bob", "She brought Oslo chocolate"),
        ),
    },
    "qa": [
        _qa(4, ["D1:1"], "What is the name of the puppy Ann adopted?"),
        _qa(1, ["D2:3; D4:1"], "What did Bob make at pottery and where did he fly?"),
        _qa(2, ["D4:3"], "When was the Lisbon trip?"),
        _qa(5, ["D1:1"], "What is the name of Bob's cat?"),
        _qa(3, [], "Would Ann enjoy a dog show?"),
        _qa(1, ["D5:1", "D5:3"], "Where and how fast did Ann run her marathon?"),
    ],
}
CONV_2 = {
    "sample_id": "conv-2",
    "conversation": {
        "speaker_a": "Cy",
        "speaker_b": "Di",
        "session_1": _session(1, ("Cy", "I planted tomatoes"), ("Di", "Tomatoes need sun")),
        "session_2": _session(2, ("Cy", "The garden flooded"), ("Di", "Sorry about the garden")),
    },
    "qa": [
        _qa(4, ["D1:1"], "What did Cy plant?"),
        _qa(5, ["D2:1"], "What did Di plant?"),
        _qa(2, ["D9:9"], "When did the garden flood?"),
    ],
}
CONV_3 = {  # every question adversarial: no scope, only drops
    "sample_id": "conv-3",
    "conversation": {
        "speaker_a": "Eve",
        "speaker_b": "Fay",
        "session_1": _session(1, ("Eve", "hi")),
    },
    "qa": [_qa(5, ["D1:1"], "What did Fay say?")],
}
#: by hand: raw / scored questions per category, and the drops (reason, category)
LOCOMO_RAW = {"1": 2, "2": 2, "3": 1, "4": 2, "5": 3}
LOCOMO_SCORED = {"1": 2, "2": 1, "3": 0, "4": 2, "5": 0}
LOCOMO_DROPS = [
    ("conv-1:q3", "adversarial", "5"),
    ("conv-1:q4", "no_evidence", "3"),
    ("conv-2:q1", "adversarial", "5"),
    ("conv-2:q2", "no_evidence", "2"),
    ("conv-3:q0", "adversarial", "5"),
]
#: by hand: the scored questions' evidence sessions and turns
LOCOMO_GOLD = {
    "conv-1:q0": ({"D1"}, {"D1:1"}),
    "conv-1:q1": ({"D2", "D4"}, {"D2:3", "D4:1"}),
    "conv-1:q2": ({"D4"}, {"D4:3"}),
    "conv-1:q5": ({"D5"}, {"D5:1", "D5:3"}),
    "conv-2:q0": ({"D1"}, {"D1:1"}),
}
SAMPLES = {s["sample_id"]: s for s in (CONV_1, CONV_2, CONV_3)}


def _turns(sample: dict[str, Any]) -> dict[str, str]:
    """turn id -> stored text ('speaker: text'), in conversation order."""
    return {
        t["dia_id"]: f"{t['speaker']}: {t['text']}"
        for key, turns in sample["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for t in turns
    }


@pytest.fixture(scope="module")
def locomo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_json(tmp_path_factory.mktemp("locomo") / "locomo10.json", [CONV_1, CONV_2, CONV_3])


@pytest.fixture(scope="module")
def locomo_build(locomo_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seven stages through the CLI: unit turn, BM25, kept stores, top-5 (read-only)."""
    build = tmp_path_factory.mktemp("locomo-build")
    ok(cli(build, "validate", "--dataset", "locomo", "--data", locomo_file, "--unit", "turn"))
    ok(cli(build, "hydrate", "--system", "bm25", "--keep-stores"))
    ok(cli(build, "query", "--top-k", TOP_K))
    for stage in ("snapshot-roundtrip", "score", "report", "decide"):
        ok(cli(build, stage))
    return build


# -- a hand-written LongMemEval file -------------------------------------------------------


def _lme_session(*turns: tuple[str, str, bool | None]) -> list[dict[str, Any]]:
    out = []
    for role, content, has_answer in turns:
        turn: dict[str, Any] = {"role": role, "content": content}
        if has_answer is not None:
            turn["has_answer"] = has_answer
        out.append(turn)
    return out


def _lme(qid: str, qtype: str, question: str, sessions: dict, answer_ids: list | None) -> dict:
    record = {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": "x",
        "haystack_session_ids": list(sessions),
        "haystack_sessions": list(sessions.values()),
    }
    if answer_ids is not None:
        record["answer_session_ids"] = answer_ids
    return record


FILLER = _lme_session(("user", "what should I cook tonight", None), ("assistant", "pasta", None))
LONGMEMEVAL = [
    _lme(
        "q-ms",
        "multi-session",
        "Which two cities did I visit for the pottery fair?",
        {
            "f-1": FILLER,
            "ans-1": _lme_session(("user", "the pottery fair in Porto was fun", True)),
            "f-2": _lme_session(("user", "my bike needs new tyres", None)),
            "ans-2": _lme_session(("user", "next pottery fair is in Ghent", True)),
        },
        ["ans-1", "ans-2"],
    ),
    _lme(
        "q-ssu_abs",
        "single-session-user",
        "What is my cat's name?",
        {"f-1": FILLER},
        [],
    ),
    _lme(
        "q-ghost",
        "temporal-reasoning",
        "When did I buy the tyres?",
        {"f-2": _lme_session(("user", "my bike needs new tyres", None))},
        ["ghost"],
    ),
    _lme(
        "q-turns",
        "knowledge-update",
        "Where do I keep my passport now?",
        {
            "f-1": FILLER,
            "ev-1": _lme_session(
                ("user", "I moved my passport to the desk drawer", True),
                ("assistant", "noted, the desk drawer", False),
            ),
        },
        None,  # no answer_session_ids: gold from the has_answer turns
    ),
    _lme(
        "q-dup",
        "single-session-user",
        "What should I cook with the pasta tonight?",
        {"f-a": FILLER, "f-b": FILLER, "ans-d": _lme_session(("user", "I love basil", True))},
        ["ans-d"],
    ),
]
#: by hand
LME_RAW = {
    "multi-session": 1,
    "temporal-reasoning": 1,
    "knowledge-update": 1,
    "single-session-user": 2,
    "single-session-assistant": 0,
    "single-session-preference": 0,
}
LME_SCORED = {
    "multi-session": 1,
    "temporal-reasoning": 0,
    "knowledge-update": 1,
    "single-session-user": 1,
    "single-session-assistant": 0,
    "single-session-preference": 0,
}
LME_DROPS = [
    ("q-ssu_abs", "abstention", "single-session-user"),
    ("q-ghost", "no_gold", "temporal-reasoning"),
]


@pytest.fixture(scope="module")
def lme_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_json(tmp_path_factory.mktemp("lme") / "tiny.json", LONGMEMEVAL)


@pytest.fixture(scope="module")
def lme_generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lme-gen") / "lme10.json"
    generate(path, shape="s", questions=10, seed=1, sessions_per_question=8, session_chars=300)
    return path


@pytest.fixture(scope="module")
def lme_build(lme_generated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated 10-question file through the CLI: BM25, top-10, a round trip of 3 scopes,
    then export-trec (read-only)."""
    build = tmp_path_factory.mktemp("lme-build")
    ok(cli(build, "validate", "--dataset", "longmemeval", "--data", lme_generated))
    ok(cli(build, "hydrate", "--system", "bm25"))
    ok(cli(build, "query"))
    sample = ok(cli(build, "snapshot-roundtrip", "--sample", "3"))
    (build / "roundtrip.out").write_text(sample.stderr)
    for stage in ("score", "report", "decide", "export-trec"):
        ok(cli(build, stage))
    return build


# -- counts and drops ----------------------------------------------------------------------


def _counts_and_drops(build: Path) -> tuple[dict, list[tuple[str, str, str]]]:
    suite = load(build / "suite.json")["data"]
    drops = [(d["query_id"], d["reason"], d["category"]) for d in suite["drops"]]
    return suite["counts"], drops


def test_locomo_counts_by_category_and_drops_match_hand_counts(locomo_build: Path) -> None:
    counts, drops = _counts_and_drops(locomo_build)
    per = counts["per_category"]
    assert {c: per[c]["raw"] for c in per} == LOCOMO_RAW
    assert {c: per[c]["scored"] for c in per} == LOCOMO_SCORED
    assert sorted(drops) == LOCOMO_DROPS
    assert counts["dropped"] == {"adversarial": 3, "no_evidence": 2}
    assert per["5"]["dropped"] == {"adversarial": 3}
    assert per["2"]["dropped"] == {"no_evidence": 1} == per["3"]["dropped"]
    assert (counts["queries_raw"], counts["queries"]) == (10, 5)
    # results.json and the report carry the same counts
    result = load(locomo_build / "results.json")["data"]
    assert result["counts"] == counts
    report = (locomo_build / "report.md").read_text()
    assert "adversarial: 3" in report and "no_evidence: 2" in report


def test_longmemeval_counts_by_category_and_drops_match_hand_counts(
    lme_file: Path, tmp_path: Path
) -> None:
    ok(cli(tmp_path, "validate", "--dataset", "longmemeval", "--data", lme_file))
    counts, drops = _counts_and_drops(tmp_path)
    per = counts["per_category"]
    assert {c: per[c]["raw"] for c in per} == LME_RAW
    assert {c: per[c]["scored"] for c in per} == LME_SCORED
    assert sorted(drops) == sorted(LME_DROPS)
    assert counts["dropped"] == {"abstention": 1, "no_gold": 1}
    assert (counts["queries_raw"], counts["queries"], counts["scopes"]) == (5, 3, 3)
    summary = load(tmp_path / "suite.json")["data"]["summary"]
    assert summary["gold_from_has_answer_turns"] == 1  # q-turns
    assert summary["gold_from_answer_session_ids"] == 2


# -- one scope per LoCoMo conversation -----------------------------------------------------


def test_a_locomo_conversation_is_hydrated_once_and_asked_all_its_questions(
    locomo_build: Path,
) -> None:
    suite = load(locomo_build / "suite.json")["data"]
    assert suite["summary"]["conversations"] == 3
    assert suite["summary"]["conversations_without_scored_questions"] == 1  # conv-3
    assert suite["counts"]["scopes"] == 2 == len(suite["scopes"])
    assert [(s["scope_id"], s["queries"]) for s in suite["scopes"]] == [
        ("conv-1", 4),
        ("conv-2", 1),
    ]
    hydrate = load(locomo_build / "hydrate.json")["data"]
    assert hydrate["mode"] == "kept" and len(hydrate["stores"]) == 2
    for index, store in enumerate(hydrate["stores"]):
        sample = SAMPLES[store["scope_id"]]
        turns = _turns(sample)
        records = [
            orjson.loads(line)
            for line in (locomo_build / "stores" / f"{index:05d}" / "records.jsonl")
            .read_bytes()
            .splitlines()
        ]
        # every turn stored exactly once, under its opaque id
        assert store["records"] == len(records) == len(turns)
        assert sorted(r["text"] for r in records) == sorted(turns.values())
        assert {r["memory_id"] for r in records} == {
            opaque_id(sample["sample_id"], t) for t in turns
        }
    runs = load(locomo_build / "runs.json")["data"]
    assert [s["scope_id"] for s in runs["scopes"]] == ["conv-1", "conv-2"]
    asked = {}
    for row in runs["queries"]:
        asked.setdefault(row["scope_id"], []).append(row["query_id"])
    assert asked == {
        "conv-1": ["conv-1:q0", "conv-1:q1", "conv-1:q2", "conv-1:q5"],
        "conv-2": ["conv-2:q0"],
    }


def test_session_unit_stores_each_session_once(locomo_file: Path, tmp_path: Path) -> None:
    ok(cli(tmp_path, "validate", "--dataset", "locomo", "--data", locomo_file))
    ok(cli(tmp_path, "hydrate", "--system", "bm25", "--keep-stores"))
    records = [
        orjson.loads(line)
        for line in (tmp_path / "stores" / "00000" / "records.jsonl").read_bytes().splitlines()
    ]
    sessions = [k for k in CONV_1["conversation"] if k.startswith("session_") and "date" not in k]
    assert len(records) == len(sessions) == 6
    assert records[0]["text"] == "\n".join(list(_turns(CONV_1).values())[:3])


# -- figures by hand -----------------------------------------------------------------------


def _ndcg_any(ranking: list[str], gold: set[str], k: int) -> float:
    """LongMemEval's binary nDCG, written out: DCG = rel1 + sum_{i>=2} rel_i / log2(i)."""
    rel = [1.0 if unit in gold else 0.0 for unit in ranking[:k]]
    dcg = (rel[0] + sum(rel[i] / math.log2(i + 1) for i in range(1, len(rel)))) if rel else 0.0
    ideal = [1.0] * min(len(gold), k)
    return dcg / (ideal[0] + sum(ideal[i] / math.log2(i + 1) for i in range(1, len(ideal))))


def _by_hand(ranking: list[str], gold: set[str], k: int) -> dict[str, float]:
    top = ranking[:k]
    return {
        "recall": len(gold & set(top)) / len(gold),
        "recall_any": float(bool(gold & set(top))),
        "recall_all": float(gold <= set(top)),
        "ndcg_any": _ndcg_any(ranking, gold, k),
    }


def _first_appearance(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def test_locomo_figures_equal_a_hand_computation(locomo_build: Path) -> None:
    runs = load(locomo_build / "runs.json")["data"]
    scores = load(locomo_build / "scores.json")["data"]
    per_query = {r["query_id"]: r["metrics"] for r in scores["per_query"]}
    assert runs["top_k"] == TOP_K and runs["levels"] == ["session", "turn"]
    by_hand: dict[str, list[float]] = {}
    widened = 0
    for row in runs["queries"]:
        sample = row["scope_id"]
        turn_of = {opaque_id(sample, t): t for t in _turns(SAMPLES[sample])}
        hit_turns = [turn_of[h["memory_id"]] for h in row["hits"]]
        turns = _first_appearance(hit_turns)
        sessions = _first_appearance([t.split(":")[0] for t in turns])
        assert row["levels"]["turn"]["ranking"] == turns[:TOP_K]
        assert row["levels"]["session"]["ranking"] == sessions[:TOP_K]
        gold_sessions, gold_turns = LOCOMO_GOLD[row["query_id"]]
        assert row["levels"]["session"]["gold"] == dict.fromkeys(gold_sessions, 2)
        assert row["levels"]["turn"]["gold"] == dict.fromkeys(gold_turns, 2)

        # widened until both levels hold k ids (or the store is exhausted): the limit is the
        # first of k, 2k, 4k, ... (capped at the store's size) at which that holds
        count = len(turn_of)
        limits = [min(TOP_K, count)]
        while limits[-1] < count:
            limits.append(min(count, limits[-1] * 2))
        assert row["limit"] in limits and len(row["hits"]) == row["limit"]

        def short(n: int, hit_turns: list[str] = hit_turns) -> bool:
            prefix = _first_appearance(hit_turns[:n])
            return len({t.split(":")[0] for t in prefix}) < TOP_K or len(prefix) < TOP_K

        for earlier in limits[: limits.index(row["limit"])]:
            assert short(earlier), (row["query_id"], earlier)
        assert not short(row["limit"]) or row["limit"] == count
        widened += row["limit"] > TOP_K

        for k in (1, TOP_K):
            for prefix, ranking, gold in (
                ("", sessions, gold_sessions),
                ("turn_", turns, gold_turns),
            ):
                for stem, value in _by_hand(ranking, gold, k).items():
                    name = f"{prefix}{stem}@{k}"
                    assert value_of(per_query[row["query_id"]][name]) == pytest.approx(value), (
                        row["query_id"],
                        name,
                    )
                    by_hand.setdefault(name, []).append(value)
    # sessions repeat among the top turns: at least one query needed a wider search
    assert widened >= 1
    for name, values in by_hand.items():
        cell = scores["overall"][name]
        assert cell["queries"] == len(values) == 5
        assert cell["value"] == pytest.approx(sum(values) / len(values)), name
    # every measure was checked: 2 levels x 2 cutoffs x 4 measures
    assert len(by_hand) == 16 == len(scores["measures"])


# -- LongMemEval at session granularity ----------------------------------------------------


def test_longmemeval_rankings_expand_deduplicated_sessions(lme_file: Path, tmp_path: Path) -> None:
    run = run_pipeline("longmemeval", {"data": lme_file}, tmp_path, system="bm25", top_k=10)
    runs = run.envelopes["runs"]["data"]
    scopes = {
        s.scope_id: s
        for s in open_longmemeval({"data": lme_file}, {}).stream()
        if isinstance(s, Scope)
    }
    dup = scopes["q-dup"]
    assert len(dup.memories) == 2  # f-a and f-b share a text: one memory stands for both
    shared = next(m for m in dup.memories if len(m.units["session"]) == 2)
    assert shared.units == {"session": ("f-a", "f-b")}
    for row in runs["queries"]:
        memories = scopes[row["query_id"]].memory_by_id()
        hits = [h["memory_id"] for h in row["hits"]]
        session = row["levels"]["session"]
        assert session["ranking"] == level_ranking(hits, memories, "session")[:10]
    row = next(r for r in runs["queries"] if r["query_id"] == "q-dup")
    ranking, scores = row["levels"]["session"]["ranking"], row["levels"]["session"]["scores"]
    assert len(row["hits"]) == 2 and len(ranking) == 3
    at = ranking.index("f-a")
    assert ranking[at + 1] == "f-b" and scores[at] == scores[at + 1]  # one hit, two sessions
    # q-turns' gold came from its has_answer turn
    turns_row = next(r for r in runs["queries"] if r["query_id"] == "q-turns")
    assert turns_row["levels"]["session"]["gold"] == {"ev-1": 2}


def test_longmemeval_session_results_are_reproducible(lme_generated: Path, tmp_path: Path) -> None:
    """--unit session (explicit) twice and the default: the same result document."""
    results = []
    for name, options in (("a", {"unit": "session"}), ("b", {"unit": "session"}), ("c", {})):
        run = run_pipeline(
            "longmemeval",
            {"data": lme_generated},
            tmp_path / name,
            options=options,
            system="bm25",
            top_k=10,
        )
        results.append(orjson.dumps(run.result, option=orjson.OPT_SORT_KEYS))
    assert results[0] == results[1] == results[2]


def test_turn_unit_ranks_sessions_by_their_first_retrieved_turn(
    lme_generated: Path, tmp_path: Path
) -> None:
    run = run_pipeline(
        "longmemeval",
        {"data": lme_generated},
        tmp_path,
        options={"unit": "turn"},
        system="bm25",
        top_k=10,
    )
    scopes = {
        s.scope_id: s
        for s in open_longmemeval({"data": lme_generated}, {"unit": "turn"}).stream()
        if isinstance(s, Scope)
    }
    widened = 0
    for row in run.envelopes["runs"]["data"]["queries"]:
        memories = scopes[row["query_id"]].memory_by_id()
        hits = [h["memory_id"] for h in row["hits"]]
        turns = level_ranking(hits, memories, "turn")
        assert row["levels"]["turn"]["ranking"] == turns[:10]
        sessions = _first_appearance([t.rsplit("_", 1)[0] for t in turns])
        assert row["levels"]["session"]["ranking"] == sessions[:10]
        widened += row["limit"] > 10
    assert widened >= 1
    assert "turn_recall@10" in run.result["metrics"]["overall"]


# -- the script, the round-trip sample, decide, export-trec --------------------------------


def _script_main() -> Any:
    spec = importlib.util.spec_from_file_location(
        "retrieval_eval", ROOT / "scripts" / "retrieval_eval.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_the_script_prints_turn_level_lines(lme_generated: Path) -> None:
    args = ["--dataset", "longmemeval", "--data", str(lme_generated), "--unit", "turn"]
    result = CliRunner().invoke(_script_main(), [*args, "--system", "bm25", "-q"])
    assert result.exit_code == 0, (result.output, result.exception)
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:6]] == [
        "recall@1",
        "recall@5",
        "recall@10",
        "turn_recall@1",
        "turn_recall@5",
        "turn_recall@10",
    ]
    for line, k in zip(lines[3:6], (1, 5, 10), strict=True):
        assert line.split()[::2] == [
            f"turn_{m}@{k}" for m in ("recall", "recall_any", "recall_all", "ndcg_any")
        ]
    assert lines[6].startswith("(means over ") and lines[7].startswith("no rule: ")


def test_roundtrip_sample_of_3_is_deterministic_and_reported(lme_build: Path) -> None:
    suite = load(lme_build / "suite.json")["data"]
    scope_ids = [s["scope_id"] for s in suite["scopes"]]
    assert len(scope_ids) > 3
    smallest = sorted(scope_ids, key=lambda s: hashlib.sha256(s.encode()).hexdigest())[:3]
    expected = [s for s in scope_ids if s in smallest]  # reported in dataset order
    roundtrip = load(lme_build / "roundtrip.json")["data"]
    sample = roundtrip["sample"]
    assert sample["scope_ids"] == expected
    assert (sample["scopes_sampled"], sample["scopes_total"], sample["size"]) == (
        3,
        len(scope_ids),
        3,
    )
    assert sorted(roundtrip["per_query"]) == sorted(expected)  # one question per scope
    assert roundtrip["equivalence"] == {"numerator": 3, "denominator": 3, "value": 1.0}
    out = (lme_build / "roundtrip.out").read_text()
    assert f"3/3 queries identical after the round trip (3 of {len(scope_ids)} scopes)" in out
    report = (lme_build / "report.md").read_text()
    assert f"Sampled 3 of {len(scope_ids)} scopes" in report
    assert ", ".join(expected) in report


def test_datasets_without_rules_get_no_rule(lme_build: Path, locomo_build: Path) -> None:
    for build, name in ((lme_build, "longmemeval"), (locomo_build, "locomo")):
        decision = load(build / "decision.json")["data"]
        assert decision["rule"] is None and decision["rules"] == []
        assert decision["recommendation"] == (
            f"no decision rules: the {name} dataset defines none; read the metrics"
        )
    result = CliRunner().invoke(main, ["--build-dir", str(locomo_build), "-q", "decide"])
    assert result.exit_code == 0
    assert (
        result.stdout
        == "no rule: no decision rules: the locomo dataset defines none; read the metrics\n"
    )


def test_export_trec_for_longmemeval_agrees_with_trec_eval(
    lme_build: Path, lme_generated: Path
) -> None:
    run_lines = (lme_build / "run.trec").read_text().splitlines()
    qrels_lines = (lme_build / "qrels.trec").read_text().splitlines()
    raw = {r["question_id"]: r for r in orjson.loads(lme_generated.read_bytes())}
    parsed_run: dict[str, dict[str, float]] = {}
    for line in run_lines:
        qid, q0, doc, _rank, score, tag = line.split()
        assert (q0, tag) == ("Q0", "bm25")
        assert doc in raw[qid]["haystack_session_ids"]  # session ids, the primary level
        parsed_run.setdefault(qid, {})[doc] = float(score)
    parsed_qrels: dict[str, dict[str, int]] = {}
    for line in qrels_lines:
        qid, zero, doc, grade = line.split()
        assert zero == "0" and grade == "2"
        parsed_qrels.setdefault(qid, {})[doc] = int(grade)
    scores = load(lme_build / "scores.json")["data"]
    ours = {r["query_id"]: value_of(r["metrics"]["recall@5"]) for r in scores["per_query"]}
    assert set(parsed_run) == set(parsed_qrels) == set(ours)
    for qid, gold in parsed_qrels.items():
        assert set(gold) == set(raw[qid]["answer_session_ids"])
    evaluator = pytrec_eval.RelevanceEvaluator(parsed_qrels, {"recall.5"}, relevance_level=2)
    theirs = evaluator.evaluate(parsed_run)
    for qid, value in ours.items():
        assert theirs[qid]["recall_5"] == pytest.approx(value, abs=1e-12), qid
    mean = sum(ours.values()) / len(ours)
    assert scores["overall"]["recall@5"]["value"] == pytest.approx(mean)


def test_locomo_category_labels_in_the_markdown_and_the_html(locomo_build: Path) -> None:
    """The five-worst table, the why-missed lines and report.html name LoCoMo's categories
    by their labels ('1 multi-hop'), as the plots do; report.html shows a session's text as
    its turns' texts, read from the spool."""
    import re

    import orjson

    result = load(locomo_build / "results.json")["data"]
    labels = result["dataset"]["category_labels"]
    assert labels["1"] == "1 multi-hop"
    report = (locomo_build / "report.md").read_text()
    worst = report.split("## Five worst queries")[1].split("## ")[0]
    rows = [x for x in worst.splitlines() if x.startswith("| ") and not x.startswith("| query")]
    assert rows and all(x.split(" | ")[1] in labels.values() for x in rows)
    from recallbench.report.run_sections import render_markdown

    missed = copy.deepcopy(result)  # BM25 misses nothing here: give one query a miss line
    first = missed["queries"][0]
    first["why_missed"] = ["D1 (grade 3) not returned at all; the top-1 held: D2 (not gold)"]
    why = render_markdown(missed, {}, "now", "0").split("## Why relevant items were missed")[1]
    line = next(x for x in why.splitlines() if x.startswith("- `"))
    assert line == (
        f"- `{first['query_id']}` ({labels[first['category']]}): {first['why_missed'][0]}"
    )
    html = (locomo_build / "report.html").read_bytes()
    data = orjson.loads(re.search(rb'id="rb-data">(.*?)</script>', html, re.S).group(1))
    assert data["categories"] == [[c, labels[c]] for c in result["dataset"]["categories"]]
    assert b"1 multi-hop" in html
    suite_turns = {}
    for line in (locomo_build / "scopes.jsonl").read_bytes().splitlines():
        scope = orjson.loads(line)
        for m in scope["memories"]:
            for session in m["units"]["session"]:
                suite_turns.setdefault((scope["scope_id"], session), []).append(m["text"])
    q = data["inline"][0]  # the first query's record: in the page itself
    assert q["id"] == data["queries"][0]["id"]
    for unit, _grade, _rank, text in q["expected"]:
        assert q["texts"][text] == "\n\n".join(suite_turns[(q["scope"], unit)])


def test_score_takes_cutoffs_and_measures_on_a_conversational_build(
    locomo_build: Path, tmp_path: Path
) -> None:
    """`score --k` rescales the family's cutoffs; `--measure` picks measures at any level by
    their prefix; the cells at a k both runs score are the same cells."""
    import shutil

    build = tmp_path / "build"
    shutil.copytree(locomo_build, build)
    before = load(build / "scores.json")["data"]
    ok(cli(build, "score", "--k", "1,3"))
    after = load(build / "scores.json")["data"]
    assert {m["k"] for m in after["measures"]} == {1, 3}
    assert [m["stem"] for m in after["measures"] if m["k"] == 1 and m["level"] == "turn"] == [
        "recall",
        "recall_any",
        "recall_all",
        "ndcg_any",
    ]
    for name in ("recall@1", "turn_recall_any@1", "ndcg_any@1"):
        assert after["overall"][name] == before["overall"][name]
    ok(cli(build, "score", "--measure", "turn_recall(rel=3)@5", "--measure", "mrr@2"))
    picked = load(build / "scores.json")["data"]["measures"]
    assert [(m["name"], m["level"], m["params"]["rel"]) for m in picked] == [
        ("turn_recall(rel=3)@5", "turn", 3),
        ("mrr@2", "session", 2),
    ]
    result = cli(build, "score", "--k", "1,50")
    assert result.exit_code == 1 and "every k must be between 1 and --top-k" in result.stderr
