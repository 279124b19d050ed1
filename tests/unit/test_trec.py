"""TREC run/qrels export: line formats, strictly decreasing scores, id checks, and the files
of a `runs` artifact at a level (`trec_files`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.commands.pipeline import Run
from recallbench.core.errors import RecallbenchError
from recallbench.report.trec import (
    check_id,
    exported_scores,
    qrels_lines,
    run_lines,
    trec_files,
    write_trec,
)


def _scores(lines: list[str]) -> list[float]:
    return [float(line.split()[4]) for line in lines]


def test_run_line_format() -> None:
    lines = run_lines([("q1", [("m1", 0.75), ("m2", 0.5)]), ("q2", [("m3", 0.25)])], "hotmem")
    assert lines == [
        "q1 Q0 m1 1 0.75 hotmem",
        "q1 Q0 m2 2 0.5 hotmem",
        "q2 Q0 m3 1 0.25 hotmem",
    ]
    for line in lines:
        assert len(line.split(" ")) == 6


def test_run_keeps_given_order_and_empty_queries() -> None:
    # query order and doc order are the caller's; a query with no results writes nothing
    lines = run_lines([("qb", [("z", 1.0), ("a", 0.0)]), ("qa", []), ("qc", [("m", 2.0)])], "t")
    assert [line.split()[:4] for line in lines] == [
        ["qb", "Q0", "z", "1"],
        ["qb", "Q0", "a", "2"],
        ["qc", "Q0", "m", "1"],
    ]


def test_strictly_decreasing_scores_are_written_exactly() -> None:
    """The shortest text that reads back as the same double (six decimals made scores 1e-7
    apart read back equal)."""
    scores = [1.7e12, 3.5e5 + 0.5, 0.12345704, 0.12345703, 1e-7, 0.0, -2.5]
    written = exported_scores(scores)
    assert [float(text) for text in written] == scores
    assert written == ["1700000000000.0", "350000.5", "0.12345704", "0.12345703"] + [
        "1e-07",
        "0.0",
        "-2.5",
    ]


def test_tied_or_inverted_scores_are_rewritten_from_ranks() -> None:
    assert exported_scores([0.5, 0.5, 0.5, 0.2]) == ["4", "3", "2", "1"]
    # the system ranked a above b although b has the higher score: order wins
    assert exported_scores([0.1, 0.9, 0.95, 0.05]) == ["4", "3", "2", "1"]
    assert exported_scores([0.0, -0.0]) == ["2", "1"]  # equal doubles
    # distinct doubles that trec_eval, holding scores as C floats, reads as one value
    assert exported_scores([1.7e12 + 1, 1.7e12]) == ["2", "1"]
    assert exported_scores([1e-300, 0.0]) == ["2", "1"]
    assert exported_scores([1e300, 1e299]) == ["2", "1"]  # both beyond float32
    assert exported_scores([]) == [] and exported_scores([3]) == ["3.0"]


def test_rank_scores_are_per_query() -> None:
    lines = run_lines([("q1", [("a", 0.5), ("b", 0.5)]), ("q2", [("a", 0.5), ("b", 0.25)])], "t")
    assert _scores(lines) == [2.0, 1.0, 0.5, 0.25]


def test_many_ties_stay_strictly_decreasing_after_parsing() -> None:
    results = [(f"m{i}", 0.3) for i in range(500)]
    scores = _scores(run_lines([("q", results)], "t"))
    assert all(a > b for a, b in zip(scores, scores[1:], strict=False))
    assert len(set(scores)) == 500


# --- what trec_eval (pytrec_eval) reads back ---------------------------------------------


def _evaluated_order(lines: list[str]) -> dict[str, list[str]]:
    """Per query, the order pytrec_eval (trec_eval's code) ranks the written run in: for each
    doc, judge it alone relevant; its reciprocal rank gives its position."""
    import pytrec_eval

    run: dict[str, dict[str, float]] = {}
    for line in lines:
        qid, _, doc, _, score, _ = line.split(" ")
        run.setdefault(qid, {})[doc] = float(score)
    order: dict[str, list[str]] = {}
    for qid, docs in run.items():
        positions = {}
        for doc in docs:
            evaluator = pytrec_eval.RelevanceEvaluator({qid: {doc: 1}}, {"recip_rank"})
            positions[doc] = round(1 / evaluator.evaluate({qid: docs})[qid]["recip_rank"])
        order[qid] = sorted(docs, key=positions.__getitem__)
        assert sorted(positions.values()) == list(range(1, len(docs) + 1))
    return order


@pytest.mark.parametrize(
    "scores",
    [
        [1.7e12 + 4 * 2**-12, 1.7e12 + 3 * 2**-12, 1.7e12 + 2 * 2**-12, 1.7e12 + 2**-12],
        [1_700_000_000_004.0, 1_700_000_000_003.0, 1_700_000_000_002.0, 1_700_000_000_001.0],
        [0.5, 0.5, 0.5, 0.5],  # all tied
        [0.9, 0.4, 0.4, 0.1],  # one tie
        [0.1, 0.2, 0.3, 0.4],  # inverted
        [1e-300, 5e-301, 0.0, -1e-300],
        [0.30000000000000004, 0.3, 0.29999999999999993, 0.2999999999999999],
    ],
)
def test_trec_eval_reads_back_our_order(scores: list[float]) -> None:
    """Doc ids chosen so trec_eval's tie-break (doc id descending) would differ from ours."""
    docs = ["a", "b", "c", "d"]
    lines = run_lines([("q1", list(zip(docs, scores, strict=True))), ("q2", [("z", 1.0)])], "t")
    assert _evaluated_order(lines) == {"q1": docs, "q2": ["z"]}


@pytest.mark.parametrize("score", [float("nan"), float("inf"), None, "0.5", True, 10**400])
def test_non_finite_or_non_numeric_score_rejected(score: object) -> None:
    with pytest.raises(ValueError, match="score"):
        run_lines([("q", [("a", score)])], "t")  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("run", "tag", "bad"),
    [
        ([("q 1", [("a", 1.0)])], "t", "'q 1'"),
        ([("q", [("a\tb", 1.0)])], "t", "'a\\tb'"),
        ([("q", [("a\nb", 1.0)])], "t", "'a\\nb'"),
        ([("#q", [("a", 1.0)])], "t", "'#q'"),
        ([("q", [("#a", 1.0)])], "t", "'#a'"),
        ([("q", [("a", 1.0)])], "my run", "'my run'"),
        ([("q", [("a", 1.0)])], "#tag", "'#tag'"),
        ([("q", [("", 1.0)])], "t", "''"),
        # the id grammar: nothing that breaks a Markdown table or hides in a line
        ([("q|1", [("a", 1.0)])], "t", "'q|1'"),
        ([("q", [("a`b", 1.0)])], "t", "'a`b'"),
        ([("q", [("a\u202eb", 1.0)])], "t", "U+202E"),
        ([("q", [("a\u200bb", 1.0)])], "t", "U+200B"),
        ([("q", [("a\x00b", 1.0)])], "t", "U+0000"),
        ([("q", [("a\u00a0b", 1.0)])], "t", "U+00A0"),
        ([("q", [("a" * 201, 1.0)])], "t", "201 characters"),
    ],
)
def test_run_rejects_bad_ids(run: list, tag: str, bad: str) -> None:
    with pytest.raises(ValueError) as info:
        run_lines(run, tag)
    assert bad in str(info.value)


def test_id_with_hash_inside_is_allowed() -> None:
    assert run_lines([("q#1", [("a#b", 1.0)])], "t") == ["q#1 Q0 a#b 1 1.0 t"]


def test_run_rejects_repeated_doc_and_query() -> None:
    with pytest.raises(ValueError, match="repeats doc id 'a'"):
        run_lines([("q", [("a", 1.0), ("a", 0.5)])], "t")
    with pytest.raises(ValueError, match="repeats query id 'q'"):
        run_lines([("q", [("a", 1.0)]), ("q", [("b", 1.0)])], "t")


def test_qrels_format_sorted_and_positive_only() -> None:
    qrels = {"q2": {"b": 1, "a": 3}, "q1": {"z": 2, "c": 0, "d": 2}, "q3": {"x": 0}, "q4": {}}
    assert qrels_lines(qrels) == [
        "q1 0 d 2",
        "q1 0 z 2",
        "q2 0 a 3",
        "q2 0 b 1",
    ]


@pytest.mark.parametrize(
    ("qrels", "bad"),
    [
        ({"q 1": {"a": 2}}, "'q 1'"),
        ({"q": {"a b": 2}}, "'a b'"),
        ({"#q": {"a": 2}}, "'#q'"),
        ({"q": {"#a": 2}}, "'#a'"),
        ({"q": {"a": 2.5}}, "2.5"),
        ({"q": {"a": True}}, "True"),
    ],
)
def test_qrels_rejects_bad_ids_and_grades(qrels: dict, bad: str) -> None:
    with pytest.raises(ValueError) as info:
        qrels_lines(qrels)
    assert bad in str(info.value)


def test_write_trec(tmp_path: Path) -> None:
    run_path, qrels_path = tmp_path / "out" / "run.txt", tmp_path / "out" / "qrels.txt"
    run = iter([("q1", [("a", 0.5), ("b", 0.5)])])  # any iterable, consumed once
    write_trec(run_path, qrels_path, run, {"q1": {"b": 2, "c": 0}}, "hotmem-0.2.6")
    assert run_path.read_bytes() == (b"q1 Q0 a 1 2 hotmem-0.2.6\nq1 Q0 b 2 1 hotmem-0.2.6\n")
    assert qrels_path.read_bytes() == b"q1 0 b 2\n"
    assert sorted(p.name for p in run_path.parent.iterdir()) == ["qrels.txt", "run.txt"]


def test_write_trec_bad_input_writes_nothing(tmp_path: Path) -> None:
    run_path, qrels_path = tmp_path / "run.txt", tmp_path / "qrels.txt"
    with pytest.raises(ValueError):
        write_trec(run_path, qrels_path, [("q", [("a", 1.0)])], {"q": {"bad id": 2}}, "t")
    assert list(tmp_path.iterdir()) == []


def test_check_id_returns_the_id_or_names_the_problem() -> None:
    assert check_id("mem-001", "doc id") == "mem-001"
    assert check_id("caf\u00e9-\u6587", "doc id") == "caf\u00e9-\u6587"  # printable Unicode is fine
    with pytest.raises(ValueError, match=r"TREC doc id 'a\|b': contains '\|'"):
        check_id("a|b", "doc id")
    with pytest.raises(ValueError, match="TREC tag must be a non-empty string"):
        check_id("", "tag")


# --- the files of a runs artifact -----------------------------------------------------------


def runs_data(rows: list[tuple[str, dict[str, tuple[list[str], list[float], dict]]]]) -> dict:
    """A `runs` artifact's data: (query id, {level: (ranking, scores, gold)}) per query."""
    return {
        "queries": [
            {
                "query_id": qid,
                "levels": {
                    level: {"ranking": ranking, "scores": scores, "gold": gold}
                    for level, (ranking, scores, gold) in levels.items()
                },
            }
            for qid, levels in rows
        ]
    }


def test_trec_files_at_each_level(tmp_path: Path) -> None:
    runs = runs_data(
        [
            (
                "q1",
                {
                    "session": (["D2", "D1"], [0.9, 0.9], {"D1": 2, "D3": 0}),
                    "turn": (["D2:1", "D1:4", "D1:2"], [0.9, 0.9, 0.4], {"D1:4": 3}),
                },
            ),
            (
                "q2",
                {
                    "session": ([], [], {"D3": 1}),  # nothing returned: no run lines
                    "turn": (["D3:1"], [0.1], {}),  # nothing graded: no qrels lines
                },
            ),
        ]
    )
    run, qrels = tmp_path / "x" / "run.trec", tmp_path / "x" / "qrels.trec"
    session = trec_files(runs, "session", "hotmem", run, qrels)
    assert session == {
        run: b"q1 Q0 D2 1 2 hotmem\nq1 Q0 D1 2 1 hotmem\n",  # a tie: scores from ranks
        qrels: b"q1 0 D1 2\nq2 0 D3 1\n",
    }
    turn = trec_files(runs, "turn", "bm25", run, qrels)
    assert turn[run].decode().splitlines() == [
        "q1 Q0 D2:1 1 3 bm25",
        "q1 Q0 D1:4 2 2 bm25",
        "q1 Q0 D1:2 3 1 bm25",
        "q2 Q0 D3:1 1 0.1 bm25",
    ]
    assert turn[qrels] == b"q1 0 D1:4 3\n"
    assert not run.parent.exists()  # formatted, not written


@pytest.mark.parametrize(
    ("tag", "change", "bad"),
    [
        ("my run", None, "'my run'"),
        ("t", ("ranking", ["a|b"]), "'a|b'"),
        ("t", ("gold", {"a b": 2}), "'a b'"),
        ("t", ("scores", [float("nan")]), "score"),
    ],
)
def test_trec_files_refuses_with_a_user_error(
    tmp_path: Path, tag: str, change: tuple | None, bad: str
) -> None:
    level = {"ranking": ["a"], "scores": [1.0], "gold": {"a": 2}}
    if change:
        level[change[0]] = change[1]
    runs = {"queries": [{"query_id": "q", "levels": {"memory": level}}]}
    with pytest.raises(RecallbenchError, match=bad):
        trec_files(runs, "memory", tag, tmp_path / "run", tmp_path / "qrels")


def test_trec_files_of_the_fixture_run(fixture_run: Run, tmp_path: Path) -> None:
    run_path, qrels_path = tmp_path / "run.trec", tmp_path / "qrels.trec"
    files = trec_files(
        fixture_run.envelopes["runs"]["data"], "memory", "hotmem", run_path, qrels_path
    )
    run = [line.split() for line in files[run_path].decode().splitlines()]
    qrels = [line.split() for line in files[qrels_path].decode().splitlines()]
    queries = fixture_run.result["queries"]
    assert len(run) == sum(len(q["returned"]) for q in queries) == 57 * 5
    # the system's order, rank from 1, and its ids, query by query
    by_query: dict[str, list[str]] = {}
    for qid, q0, doc, rank, _, tag in run:
        assert (q0, tag) == ("Q0", "hotmem")
        by_query.setdefault(qid, []).append(doc)
        assert int(rank) == len(by_query[qid])
    assert by_query == {q["query_id"]: [h["id"] for h in q["returned"]] for q in queries}
    # every positive grade once; the negative queries have none
    assert len(qrels) == sum(1 for q in queries for g in q["expected"].values() if g > 0)
    assert {qid for qid, *_ in qrels} == {
        q["query_id"] for q in queries if any(g > 0 for g in q["expected"].values())
    }
    assert not any(qid.startswith("q-negative") for qid, *_ in qrels)
    # trec_eval reads every query back in the system's order
    assert _evaluated_order(files[run_path].decode().splitlines()) == by_query
