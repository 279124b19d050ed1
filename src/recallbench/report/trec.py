"""Export runs and qrels in TREC format, for trec_eval, ranx or ir-measures.

Run line: ``qid Q0 docid rank score tag``; qrels line: ``qid 0 docid grade``.

Tools disagree on ties (trec_eval re-sorts by score descending, then doc id descending),
so the exported scores are strictly decreasing within each query: every tool then reads
back exactly the system's own order. Each score is written as the shortest text that reads
back as the same double (Python's ``repr``: ``0.75``, ``1700000000000.001``, ``1e-07``).
trec_eval keeps a score in single precision (``float sim``), so the scores must also be
strictly decreasing once rounded to float32 (1.7e12 and 1.7e12 + 1 are one float32). A query
whose scores are not (a tie, a higher score ranked lower, or distinct doubles that are one
float32) is written with scores from its ranks instead: n, n - 1, ..., 1 for its n returned
ids (`exported_scores`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from recallbench.builddir.artifacts import publish


def check_id(value: str, what: str = "id") -> str:
    """Return `value` if it can be a TREC field, else raise ValueError naming it.

    A field follows the id grammar (`recallbench.core.ids`): printable, no whitespace, no
    leading '#', no control, bidirectional or zero-width characters.
    """
    from recallbench.core.ids import id_problem

    if not isinstance(value, str) or not value:
        raise ValueError(f"TREC {what} must be a non-empty string, got {value!r}")
    problem = id_problem(value)
    if problem:
        raise ValueError(f"TREC {what} {value!r}: {problem}")
    return value


def _finite(score: float) -> float:
    """The score as a finite double, else ValueError naming it."""
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise ValueError(f"TREC score must be a finite number, got {score!r}")
    try:
        value = float(score)
    except OverflowError:
        raise ValueError(f"TREC score must be a finite number, got {score!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"TREC score must be a finite number, got {score!r}")
    return value


def _single(value: float) -> float:
    """The value as trec_eval holds it (a C float); infinity beyond float32's range."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def exported_scores(scores: Iterable[float]) -> list[str]:
    """One query's scores as written, best first: each ``repr(float(s))`` when they are
    strictly decreasing also in single precision (what a tool parses then sorts in the given
    order, trec_eval included), else the ranks' scores n, n - 1, ..., 1 (a tie or an
    inversion would let a tool reorder the ids by doc id)."""
    values = [_finite(score) for score in scores]
    single = [_single(value) for value in values]
    if all(a > b for a, b in zip(single, single[1:], strict=False)):
        return [repr(value) for value in values]
    return [str(len(values) - rank) for rank in range(len(values))]


def run_lines(run: Iterable[tuple[str, Sequence[tuple[str, float]]]], tag: str) -> list[str]:
    """One ``qid Q0 docid rank score tag`` line per returned id, queries in the given order.

    `run` yields (query id, [(doc id, system score), ...] best first). Rank counts from 1
    in the given order; scores are written to read back strictly decreasing (`exported_scores`).
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
        scores = exported_scores(score for _, score in results)
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
        from recallbench.core.errors import RecallbenchError

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
