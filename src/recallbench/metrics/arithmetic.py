"""Pure retrieval metrics over one query's ranked list (textbook / trec_eval definitions;
LongMemEval's official code, quirks kept, is `recallbench.metrics.longmemeval`).

Conventions (see docs / the IR-metrics reference):

* ``ranked`` is the system's own order, best first. Ties in score are already resolved
  by that order; nothing here re-sorts. Ids in ``ranked`` must be distinct (a
  ``ValueError`` names a repeated id), as trec_eval also requires.
* ``grades`` maps memory ids to graded relevance 0-3; an omitted id has grade 0.
  A memory is *relevant* (recall, success, reciprocal rank) when its grade is at least
  ``threshold`` (default ``RELEVANT_GRADE`` = 2); nDCG uses the raw grades.
* ``k`` is a cutoff >= 1. When the system returned fewer than ``k`` ids, the metrics use
  what was returned (a missing slot is neither a hit nor a false positive).
* A metric that is undefined for a query (nothing relevant to find) returns ``None``
  ("not applicable"), never 0; averages report those queries separately.

Every function is pure: no I/O, no state, inputs are not modified.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recallbench.core.model import RELEVANT_GRADE, relevant_ids

__all__ = [
    "RELEVANT_GRADE",
    "Ratio",
    "dcg",
    "duplicate_slots",
    "false_positive_slots",
    "ndcg_at_k",
    "percentile",
    "recall_at_k",
    "reciprocal_rank_at_k",
    "relevant_ids",
    "sessions_of_top_turns",
    "success_at_k",
    "turn_session",
]


@dataclass(frozen=True)
class Ratio:
    """A ratio of counts, kept as counts so that sums over queries stay exact.

    ``value = numerator / denominator``, or ``None`` when ``denominator == 0``.
    Adding two ratios sums numerators and denominators (a micro-average): the sum of
    per-query ratios is the pooled ratio, not a mean of ratios (pooled measures aggregate
    so, `recallbench.metrics.measures.PooledMeasure.aggregate`).
    """

    numerator: int
    denominator: int

    def __post_init__(self) -> None:
        for name in ("numerator", "denominator"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"Ratio {name} must be a non-negative integer, got {count!r}")
        if self.numerator > self.denominator:
            raise ValueError(
                f"Ratio numerator {self.numerator} exceeds denominator {self.denominator}"
            )

    @property
    def value(self) -> float | None:
        """numerator / denominator; None when the denominator is 0."""
        if self.denominator == 0:
            return None
        return self.numerator / self.denominator

    def __add__(self, other: Ratio) -> Ratio:
        """(a/b) + (c/d) = (a+c)/(b+d)."""
        if not isinstance(other, Ratio):
            return NotImplemented
        return Ratio(self.numerator + other.numerator, self.denominator + other.denominator)

    def to_dict(self) -> dict[str, Any]:
        """{"numerator": n, "denominator": d, "value": n/d or None}."""
        return {"numerator": self.numerator, "denominator": self.denominator, "value": self.value}


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _top(ranked: Sequence[str], k: int) -> Sequence[str]:
    """The first min(k, len(ranked)) ids, after checking k and that ids are distinct."""
    _check_k(k)
    seen: set[str] = set()
    for doc in ranked:
        if doc in seen:
            raise ValueError(f"ranked list repeats id {doc!r}")
        seen.add(doc)
    return ranked[:k]


def recall_at_k(
    ranked: Sequence[str], grades: Mapping[str, int], k: int, threshold: int = RELEVANT_GRADE
) -> Ratio | None:
    """Recall@k = |R ∩ top-k| / |R|, with R = ids graded >= threshold.

    The denominator is |R| (not min(k, |R|)), as in trec_eval's ``recall.k``.
    None (not applicable) when R is empty.
    """
    top = _top(ranked, k)
    relevant = relevant_ids(grades, threshold)
    if not relevant:
        return None
    return Ratio(sum(1 for doc in top if doc in relevant), len(relevant))


def success_at_k(
    ranked: Sequence[str], grades: Mapping[str, int], k: int, threshold: int = RELEVANT_GRADE
) -> int | None:
    """Success@k (hit rate) = 1 if |R ∩ top-k| >= 1 else 0; None when R is empty."""
    top = _top(ranked, k)
    relevant = relevant_ids(grades, threshold)
    if not relevant:
        return None
    return 1 if any(doc in relevant for doc in top) else 0


def reciprocal_rank_at_k(
    ranked: Sequence[str], grades: Mapping[str, int], k: int, threshold: int = RELEVANT_GRADE
) -> float | None:
    """RR@k = 1 / rank of the first id in R within the top k (ranks from 1), else 0.0.

    None when R is empty. Equals trec_eval's ``recip_rank`` on the run cut to k.
    """
    top = _top(ranked, k)
    relevant = relevant_ids(grades, threshold)
    if not relevant:
        return None
    for rank, doc in enumerate(top, start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


#: a turn id: its session's id, then ':' or '_' and the turn's position (D3:4, s1_3)
_TURN_ID = re.compile(r"^(?P<session>.+?)[:_][0-9]+$", re.DOTALL)


def turn_session(turn_id: str) -> str:
    """The session of a turn id: the id without its trailing position, ``D3:4`` -> ``D3``
    (a LoCoMo ``dia_id``), ``s1_3`` -> ``s1`` (LongMemEval's session id + '_' + position).
    A ValueError names an id of another shape."""
    match = _TURN_ID.match(turn_id)
    if match is None:
        raise ValueError(
            f"{turn_id!r} is not a turn id (a session id, then ':' or '_' and a position)"
        )
    return match["session"]


def sessions_of_top_turns(
    ranked_turns: Sequence[str], grades: Mapping[str, int], k: int, threshold: int = RELEVANT_GRADE
) -> tuple[frozenset[str], frozenset[str]] | None:
    """(G, S): G = the sessions of the turns graded >= threshold (the gold sessions), S =
    the sessions of the top k turns (k counts turns: S holds one to k sessions); None when
    no turn is graded >= threshold."""
    top = _top(ranked_turns, k)
    relevant = relevant_ids(grades, threshold)
    if not relevant:
        return None
    gold = frozenset(turn_session(turn) for turn in relevant)
    return gold, frozenset(turn_session(turn) for turn in top)


def dcg(gains: Iterable[float]) -> float:
    """DCG = sum over ranks i = 1.. of gain_i / log2(i + 1)."""
    return math.fsum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float | None:
    """nDCG@k = DCG@k(ranked) / IDCG@k, linear gain = grade, discount 1 / log2(rank + 1).

    DCG@k = sum_{i=1..min(k, n)} grade(ranked[i]) / log2(i + 1).
    IDCG@k = the same sum over all graded memories (grade > 0, whether retrieved or not)
    sorted by grade descending and cut at k (trec_eval ``ndcg_cut.k``; ranx ``ndcg``).
    Grade-1 memories count here although they are not relevant for recall.
    None when no memory has a grade > 0.
    """
    top = _top(ranked, k)
    ideal = sorted((grade for grade in grades.values() if grade > 0), reverse=True)[:k]
    if not ideal:
        return None
    gains = [max(grades.get(doc, 0), 0) for doc in top]
    return dcg(gains) / dcg(ideal)


def false_positive_slots(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> Ratio:
    """False-positive slots = |{returned ids in top-k with grade 0 or omitted}| / min(k, n).

    n = len(ranked). Grade-1 (partially relevant) memories are not false positives.
    Ratio(0, 0) when nothing was returned. Defined for every query, including those
    with nothing relevant, where every returned slot is a false positive.
    """
    top = _top(ranked, k)
    return Ratio(sum(1 for doc in top if grades.get(doc, 0) <= 0), len(top))


def duplicate_slots(ranked: Sequence[str], groups: Mapping[str, str], k: int) -> Ratio:
    """Duplicate slots = |{slots i in top-k : group(ranked[i]) = group(ranked[j]) for some j < i}|
    / min(k, n).

    group(id) = groups[id], or the id itself when absent from ``groups``. The first
    member of a group to appear is not a duplicate; every later one is.
    Ratio(0, 0) when nothing was returned.
    """
    top = _top(ranked, k)
    seen: set[tuple[bool, str]] = set()
    repeats = 0
    for doc in top:
        # (True, group) vs (False, id): an id never collides with a group of the same name.
        key = (True, groups[doc]) if doc in groups else (False, doc)
        if key in seen:
            repeats += 1
        else:
            seen.add(key)
    return Ratio(repeats, len(top))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0 <= q <= 100) with linear interpolation between closest ranks.

    Sort the n values ascending as x_0..x_{n-1}; h = (n - 1) * q / 100;
    result = x_floor(h) + (h - floor(h)) * (x_ceil(h) - x_floor(h)).
    This is numpy's default ``method="linear"``. None for empty input.
    """
    if not 0 <= q <= 100 or math.isnan(q):
        raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return None
    h = (len(ordered) - 1) * (q / 100)
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    frac = h - lo
    low, high = ordered[lo], ordered[hi]
    diff = high - low
    # numpy's _lerp: interpolate from the nearer end so the result stays within [low, high].
    return high - diff * (1 - frac) if frac >= 0.5 else low + diff * frac
