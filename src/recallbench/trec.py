"""Export runs and qrels in TREC format, for trec_eval, ranx or ir-measures.

Run line: ``qid Q0 docid rank score tag``; qrels line: ``qid 0 docid grade``.

Tools disagree on ties (trec_eval re-sorts by score descending, then doc id descending),
so the exported scores are made strictly decreasing within each query: every tool then
reads back exactly the system's own order. Scores are written with six decimals
(integer micro-units, so formatting cannot create a tie): each score is the system score
rounded to 1e-6, except where that is not strictly below the previous written score of
the same query, where it becomes previous - 0.000001 instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path

from recallbench.artifacts import publish

SCORE_DECIMALS = 6
_SCALE = 10**SCORE_DECIMALS
_QUANTUM = Decimal(1).scaleb(-SCORE_DECIMALS)


def check_id(value: str, what: str = "id") -> str:
    """Return `value` if it can be a TREC field, else raise ValueError naming it.

    A field follows the id grammar (`recallbench.ids`): printable, no whitespace, no
    leading '#', no control, bidirectional or zero-width characters.
    """
    from recallbench.ids import id_problem

    if not isinstance(value, str) or not value:
        raise ValueError(f"TREC {what} must be a non-empty string, got {value!r}")
    problem = id_problem(value)
    if problem:
        raise ValueError(f"TREC {what} {value!r}: {problem}")
    return value


def _micro_units(score: float) -> int:
    """The score rounded (half to even, on its exact binary value) to an integer of 1e-6 units."""
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise ValueError(f"TREC score must be a finite number, got {score!r}")
    with localcontext(prec=400):  # enough digits for any finite double at 1e-6
        exact = Decimal(score).quantize(_QUANTUM, rounding=ROUND_HALF_EVEN)
        return int(exact.scaleb(SCORE_DECIMALS))


def _format_units(units: int) -> str:
    """Integer micro-units -> fixed six-decimal text, exactly (no float rounding)."""
    sign = "-" if units < 0 else ""
    whole, frac = divmod(abs(units), _SCALE)
    return f"{sign}{whole}.{frac:0{SCORE_DECIMALS}d}"


def strictly_decreasing(scores: Iterable[float]) -> list[str]:
    """Formatted scores, strictly decreasing: s'_1 = round6(s_1),
    s'_i = round6(s_i) if round6(s_i) < s'_{i-1} else s'_{i-1} - 0.000001."""
    written: list[str] = []
    previous: int | None = None
    for score in scores:
        units = _micro_units(score)
        if previous is not None and units >= previous:
            units = previous - 1
        written.append(_format_units(units))
        previous = units
    return written


def run_lines(run: Iterable[tuple[str, Sequence[tuple[str, float]]]], tag: str) -> list[str]:
    """One ``qid Q0 docid rank score tag`` line per returned id, queries in the given order.

    `run` yields (query id, [(doc id, system score), ...] best first). Rank counts from 1
    in the given order; scores are rewritten strictly decreasing (see `strictly_decreasing`).
    Raises ValueError for an id or tag with whitespace or a leading '#', a repeated query
    id, a doc id repeated within a query, or a non-finite score.
    """
    check_id(tag, "run tag")
    lines: list[str] = []
    seen_queries: set[str] = set()
    for qid, ranked in run:
        check_id(qid, "query id")
        results = list(ranked)
        if qid in seen_queries:
            raise ValueError(f"TREC run repeats query id {qid!r}")
        seen_queries.add(qid)
        seen_docs: set[str] = set()
        for doc, _ in results:
            check_id(doc, "doc id")
            if doc in seen_docs:
                raise ValueError(f"TREC run for query {qid!r} repeats doc id {doc!r}")
            seen_docs.add(doc)
        scores = strictly_decreasing(score for _, score in results)
        for rank, ((doc, _), score) in enumerate(zip(results, scores, strict=True), start=1):
            lines.append(f"{qid} Q0 {doc} {rank} {score} {tag}")
    return lines


def qrels_lines(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One ``qid 0 docid grade`` line per judgement with grade > 0, sorted by qid, then docid.

    Grade-0 judgements are omitted (an unjudged doc is non-relevant to every tool).
    A query whose grades are all 0 therefore has no lines. Raises ValueError for a bad id
    or a grade that is not an integer.
    """
    lines: list[str] = []
    for qid in sorted(qrels):
        check_id(qid, "query id")
        grades = qrels[qid]
        for doc in sorted(grades):
            check_id(doc, "doc id")
            grade = grades[doc]
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise ValueError(
                    f"TREC grade for {qid!r}/{doc!r} must be an integer, got {grade!r}"
                )
            if grade > 0:
                lines.append(f"{qid} 0 {doc} {grade}")
    return lines


def _payload(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def trec_files(
    runs: Mapping, level: str, tag: str, path_run: Path, path_qrels: Path
) -> dict[Path, bytes]:
    """The run and qrels files of a `runs` artifact's data at `level`, formatted (not yet
    written): every query's ranking with its scores, and its graded ids."""
    run = [
        (
            r["query_id"],
            list(zip(r["levels"][level]["ranking"], r["levels"][level]["scores"], strict=True)),
        )
        for r in runs["queries"]
    ]
    qrels = {r["query_id"]: r["levels"][level]["gold"] for r in runs["queries"]}
    try:
        return {
            Path(path_run): _payload(run_lines(run, check_id(tag, "tag"))),
            Path(path_qrels): _payload(qrels_lines(qrels)),
        }
    except ValueError as exc:
        from recallbench.errors import RecallbenchError

        raise RecallbenchError(str(exc)) from None


def write_trec(
    path_run: Path,
    path_qrels: Path,
    run: Iterable[tuple[str, Sequence[tuple[str, float]]]],
    qrels: Mapping[str, Mapping[str, int]],
    tag: str,
) -> None:
    """Write the run and qrels files together (UTF-8, one line each, trailing newline).

    Both are formatted before either is written, so a bad id leaves no partial output.
    """
    publish(
        {
            Path(path_run): _payload(run_lines(run, tag)),
            Path(path_qrels): _payload(qrels_lines(qrels)),
        }
    )
