"""Measures as named objects: score, report, compare and baseline loop over them.

A measure has a `name` (as it appears in artifacts and reports, e.g. ``recall@5`` or
``turn_recall_any@10``), the scoring `level` it reads, a cutoff `k`, and optionally the
query `categories` it applies to. Called on one query's ranking at its level (dataset ids,
best first) and the query's grades at that level, it returns a float, a `Ratio` of counts,
or None (not applicable). The formula is in each class's docstring; the arithmetic lives in
`recallbench.metrics` (textbook / trec_eval definitions) and
`recallbench.datasets.longmemeval.official` (LongMemEval's own code, quirks kept).

Aggregation (`aggregate`) gives every measure the same cell shape::

    {"value", "numerator", "denominator", "queries", "not_applicable", "pooled"}

* mean measures: value = numerator / denominator = (sum of per-query values) / (queries
  the measure applies to); `pooled` is None, except for recall, where it holds the pooled
  counts {"numerator": relevant found, "denominator": relevant} behind the mean;
* pooled measures (slot rates): numerator and denominator are summed slot counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recallbench import metrics as m
from recallbench.model import RELEVANT_GRADE, Level


@dataclass(frozen=True)
class Measure:
    """Base: subclasses set `stem` and implement `__call__`."""

    level: str
    k: int
    prefix: str = ""
    categories: frozenset[str] | None = None
    #: the value for a query with no relevant id at this level; None (the default) means
    #: "not applicable". LongMemEval's official rule (`--gold official`) scores such a
    #: question recall_any 0, recall_all 1 (vacuously) and nDCG 0, and averages it in.
    empty_gold: float | None = None

    stem = "measure"
    pooled = False  # True: aggregate by summing Ratio counts instead of a mean
    #: a one-line definition for docs and reports
    definition = ""

    @property
    def name(self) -> str:
        return f"{self.prefix}{self.stem}@{self.k}"

    def applies_to(self, category: str) -> bool:
        return self.categories is None or category in self.categories

    def __call__(
        self,
        ranking: Sequence[str],
        grades: Mapping[str, int],
        groups: Mapping[str, str] | None = None,
    ) -> float | m.Ratio | None:
        raise NotImplementedError


class Recall(Measure):
    """Recall@k = |R ∩ top-k| / |R|, R = ids graded >= 2; None when R is empty.

    trec_eval ``recall.k``; LongMemEval's scope document calls it recall@k (fractional).
    """

    stem = "recall"
    definition = "|relevant in top-k| / |relevant| (fractional recall, trec_eval recall.k)"

    def __call__(self, ranking, grades, groups=None):
        return m.recall_at_k(ranking, grades, self.k)


class RecallAny(Measure):
    """recall_any@k = 1 if any relevant id is in the top k, else 0 (Success@k, hit rate).

    None when R is empty (LongMemEval's code would give 0; such queries are dropped before).
    """

    stem = "recall_any"
    definition = "1 if any relevant id is in the top k (Success@k, 'hit rate')"

    def __call__(self, ranking, grades, groups=None):
        value = m.success_at_k(ranking, grades, self.k)
        return self.empty_gold if value is None else value


class RecallAll(Measure):
    """recall_all@k = 1 if every relevant id is in the top k, else 0; None when R is empty."""

    stem = "recall_all"
    definition = "1 if every relevant id is in the top k (strict recall)"

    def __call__(self, ranking, grades, groups=None):
        ratio = m.recall_at_k(ranking, grades, self.k)
        return self.empty_gold if ratio is None else float(ratio.numerator == ratio.denominator)


class ReciprocalRank(Measure):
    """RR@k = 1 / rank of the first relevant id within the top k, else 0; None when R is
    empty. trec_eval ``recip_rank`` on the run cut to k; the mean over queries is MRR@k."""

    stem = "mrr"
    definition = "1 / rank of the first relevant id within the top k (mean: MRR)"

    def __call__(self, ranking, grades, groups=None):
        return m.reciprocal_rank_at_k(ranking, grades, self.k)


class NDCG(Measure):
    """nDCG@k = DCG@k / IDCG@k, gain = grade, discount 1 / log2(rank + 1), IDCG over every
    graded id (trec_eval ``ndcg_cut.k``); None when nothing is graded above 0."""

    stem = "ndcg"
    definition = "linear-gain nDCG, discount 1/log2(rank+1), ideal over all graded ids"

    def __call__(self, ranking, grades, groups=None):
        return m.ndcg_at_k(ranking, grades, self.k)


class NDCGAny(Measure):
    """ndcg_any@k as LongMemEval's eval_utils.py computes it: binary relevance, DCG =
    rel[0] + sum_{i>=1} rel[i] / log2(i + 1) (ranks 1 and 2 both undiscounted); None when R
    is empty."""

    stem = "ndcg_any"
    definition = "LongMemEval's official binary nDCG (ranks 1 and 2 both undiscounted)"

    def __call__(self, ranking, grades, groups=None):
        from recallbench.datasets.longmemeval.official import evaluate_ids

        gold = [i for i, g in grades.items() if g >= RELEVANT_GRADE]
        if not gold:
            return self.empty_gold
        return evaluate_ids(list(ranking), gold, self.k)[2]


@dataclass(frozen=True)
class NDCGAnyTurn2Session(NDCGAny):
    """ndcg_any@k of a session level scored from a turn ranking, as LongMemEval's
    evaluate_retrieval_turn2session computes it: over the turn ranking (`reads`) cut at the
    smallest k' >= k holding k distinct sessions, each gold turn relevant at its turn rank.
    None when the turn ranking is `depth` long (possibly cut) and holds fewer than k
    distinct sessions, since k' is then unknown."""

    reads: str = "turn"
    depth: int = 0

    definition = (
        "LongMemEval's evaluate_retrieval_turn2session nDCG: the turn ranking cut where it "
        "holds k distinct sessions, gold turns relevant"
    )

    def __call__(self, ranking, grades, groups=None):
        from recallbench.datasets.longmemeval.official import (
            turn2session_cutoff,
            turn2session_ndcg,
        )

        gold = {i for i, g in grades.items() if g >= RELEVANT_GRADE}
        if not gold:
            return self.empty_gold
        if len(ranking) >= self.depth and turn2session_cutoff(ranking, gold, self.k) > len(ranking):
            return None
        return turn2session_ndcg(list(ranking), gold, self.k)


class FalsePositiveRate(Measure):
    """False-positive slots@k = returned ids in the top k graded 0 / min(k, returned);
    pooled over queries (a Ratio of slot counts)."""

    stem = "fp_rate"
    pooled = True
    definition = "returned slots in the top k holding an ungraded id / returned slots (pooled)"

    def __call__(self, ranking, grades, groups=None):
        return m.false_positive_slots(ranking, grades, self.k)


class DuplicateSlotRate(Measure):
    """Duplicate slots@k = slots in the top k whose duplicate group already appeared above /
    min(k, returned); pooled over queries."""

    stem = "duplicate_slot_rate"
    pooled = True
    definition = "top-k slots repeating an earlier slot's duplicate group / returned slots (pooled)"

    def __call__(self, ranking, grades, groups=None):
        return m.duplicate_slots(ranking, groups or {}, self.k)


#: every measure class, for docs and the measure table
MEASURE_CLASSES: tuple[type[Measure], ...] = (
    Recall,
    RecallAny,
    RecallAll,
    ReciprocalRank,
    NDCG,
    NDCGAny,
    FalsePositiveRate,
    DuplicateSlotRate,
)
#: the cutoffs conversational datasets report (those not above the run's top-k)
CONVERSATIONAL_KS: tuple[int, ...] = (1, 5, 10)


#: LongMemEval's official empty-gold values (eval_utils.py: any([]), all([]), IDCG 0)
OFFICIAL_EMPTY_GOLD: dict[type[Measure], float] = {RecallAny: 0.0, RecallAll: 1.0, NDCGAny: 0.0}
#: the conversational measures in their default order, and in the order of LongMemEval's
#: official summary (recall_all and ndcg_any first)
CONVERSATIONAL_ORDER: tuple[type[Measure], ...] = (Recall, RecallAny, RecallAll, NDCGAny)
OFFICIAL_ORDER: tuple[type[Measure], ...] = (RecallAll, NDCGAny, RecallAny, Recall)


def cutoffs(top_k: int, ks: Sequence[int] | None = None) -> list[int]:
    """The cutoffs a run is scored at: the run's own `ks` (each at most `top_k`) when given,
    else k = 1, 5, 10 up to `top_k`, and `top_k` itself."""
    if ks:
        too_big = [k for k in ks if not 1 <= k <= top_k]
        if too_big:
            from recallbench.errors import RecallbenchError

            raise RecallbenchError(f"--k: {too_big[0]} is not between 1 and --top-k {top_k}")
        return sorted(set(ks))
    return sorted({k for k in CONVERSATIONAL_KS if k <= top_k} | {top_k})


def conversational_measures(
    top_k: int,
    levels: Sequence[Level],
    ks: Sequence[int] | None = None,
    *,
    official: bool = False,
) -> list[Measure]:
    """recall, recall_any, recall_all and ndcg_any at the run's cutoffs (`cutoffs`), for each
    level (prefixed by the level's prefix), the primary level first.

    `official`: LongMemEval's official rule - queries without gold at a level score
    recall_any 0, recall_all 1 and ndcg_any 0 there (fractional recall stays n/a), and the
    measures come in the official summary's order (recall_all, ndcg_any first)."""
    order = OFFICIAL_ORDER if official else CONVERSATIONAL_ORDER
    out: list[Measure] = []
    for level in levels:
        for k in cutoffs(top_k, ks):
            for cls in order:
                empty = OFFICIAL_EMPTY_GOLD.get(cls) if official else None
                out.append(cls(level.name, k, level.prefix, empty_gold=empty))
    return out


def per_query_value(value: float | m.Ratio | None) -> float | dict[str, Any] | None:
    """A measure's per-query result as artifact JSON (Ratios keep their counts)."""
    return value.to_dict() if isinstance(value, m.Ratio) else value


def value_of(cell: float | Mapping[str, Any] | None) -> float | None:
    """The number inside a per-query artifact value (a Ratio dict's value, or the float)."""
    return cell.get("value") if isinstance(cell, Mapping) else cell


def aggregate(measure: Measure, values: Iterable[float | Mapping[str, Any] | None]) -> dict:
    """The one cell shape for a measure over queries (see the module docstring)."""
    values = list(values)
    present = [v for v in values if v is not None]
    missing = len(values) - len(present)
    if measure.pooled:
        num = sum(v["numerator"] for v in present)
        den = sum(v["denominator"] for v in present)
        return {
            "value": num / den if den else None,
            "numerator": num,
            "denominator": den,
            "queries": len(present),
            "not_applicable": missing,
            "pooled": None,
        }
    floats = [value_of(v) for v in present]
    total = math.fsum(floats)
    pooled = None
    if isinstance(measure, Recall):
        pooled = {
            "numerator": sum(v["numerator"] for v in present),
            "denominator": sum(v["denominator"] for v in present),
        }
    return {
        "value": total / len(floats) if floats else None,
        "numerator": total,
        "denominator": len(floats),
        "queries": len(floats),
        "not_applicable": missing,
        "pooled": pooled,
    }
