"""Measures as values: score, report, compare and baseline loop over them.

A measure is a frozen value carrying its parameters: the `stem` (its class), the scoring
`level` it reads, a cutoff `k`, the relevance threshold `rel` (ids graded at least `rel`
are relevant; default `RELEVANT_GRADE` 2), the level's name `prefix`, optionally the query
`categories` it applies to and the `empty_gold` value. Called on one query's ranking at its
level (dataset ids, best first) and the query's grades at that level, it returns a float, a
`Ratio` of counts, or None (not applicable). The formula is in each class's docstring; the
arithmetic lives in `recallbench.metrics.arithmetic` (textbook / trec_eval definitions) and
`recallbench.metrics.longmemeval` (LongMemEval's own code, quirks kept).

Names (ir-measures style): ``name`` is the artifact key, ``{prefix}{stem}@{k}`` with every
parameter that is not its class's default in parentheses, in field order
(``recall(rel=3)@10``, ``ndcg(categories=exact_lexical)@5``,
``recall_all(empty_gold=1.0)@5``, ``turn_recall_any@5``); the level is the one the prefix
names in the suite. ``spec`` (also ``str(measure)``) adds ``level=`` when the level is not
the prefix's default (``fp_rate(level=memory)@5``). `parse` reads either back:
``parse(m.spec) == m`` and ``parse(m.name, levels) == m`` for the suite's levels, so two
distinct measures of one suite never share a name (`distinct` refuses it if they would).
The slot rates' default categories are the fixture suite's (``fp_rate`` applies to
``negative_or_no_answer`` queries, ``duplicate_slot_rate`` to ``near_duplicate_diversity``);
``categories=*`` applies a measure to every query. A parameter given twice, an empty value,
a value with a separator (``,|()=@``) or whitespace, or a parameter the stem does not read
is refused in one line.

Measure families: a dataset's measure set is one function of (levels, top_k, ks,
options) in the dataset's own package (``datasets/<name>/measures.py``, named by its spec),
built from the pieces here (`conversational_measures`, the classes, `distinct`); `score`
rebuilds the measures from suite.json alone (`recallbench.datasets.base.family_measures`).

Aggregation (`aggregate`) gives every measure the same cell shape::

    {"value", "numerator", "denominator", "queries", "not_applicable", "pooled"}

* mean measures: value = numerator / denominator = (sum of per-query values) / (queries
  the measure applies to); `pooled` is None, except for recall, where it holds the pooled
  counts {"numerator": relevant found, "denominator": relevant} behind the mean;
* pooled measures (slot rates): numerator and denominator are summed slot counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.core.model import RELEVANT_GRADE, Level, relevant_ids
from recallbench.metrics import arithmetic as m
from recallbench.metrics import longmemeval as official

#: the fixture suite's categories its slot rates apply to (datasets.fixtures.measures'
#: NEGATIVE_CATEGORY and DUPLICATE_CATEGORY are these): the slot rates' default
#: categories, which a name does not spell out (`fp_rate@5`)
FIXTURE_NO_ANSWER = "negative_or_no_answer"
FIXTURE_DUPLICATES = "near_duplicate_diversity"
#: a parameter value in a name: no separator of the name grammar, no whitespace
_VALUE = re.compile(r"^[^\s,|()=@]+$")
#: `categories=*`: every query (None)
EVERY_CATEGORY = "*"


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
    #: the relevance threshold: ids graded at least `rel` are relevant
    rel: int = RELEVANT_GRADE

    stem = "measure"
    pooled = False  # True: aggregate by summing Ratio counts instead of a mean
    #: whether `rel` changes the value (nDCG uses the raw grades, slot rates grade 0)
    takes_rel = True
    #: whether `empty_gold` changes the value (the measures LongMemEval's official rule scores)
    takes_empty_gold = False
    #: a one-line definition for docs and reports
    definition = ""

    def __post_init__(self) -> None:
        """Check every parameter (one-line RecallbenchError) and normalise `empty_gold` to a
        float, so that equal measures have one name."""
        what = f"measure {self.stem}"
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise RecallbenchError(f"{what}: k must be a positive integer")
        if isinstance(self.rel, bool) or not isinstance(self.rel, int) or self.rel < 1:
            raise RecallbenchError(f"{what}: rel must be a positive integer, got {self.rel!r}")
        if self.rel != RELEVANT_GRADE and not self.takes_rel:
            raise RecallbenchError(f"measure {self.stem} takes no rel (it reads the grades)")
        _check_value(what, "level", self.level)
        if not isinstance(self.prefix, str) or not _PREFIX.match(self.prefix):
            raise RecallbenchError(f"{what}: prefix {self.prefix!r} is not lowercase ending '_'")
        if self.categories is not None:
            if not isinstance(self.categories, frozenset) or not self.categories:
                raise RecallbenchError(f"{what}: categories must be a non-empty frozenset")
            for category in sorted(self.categories, key=str):
                _check_value(what, "category", category)
                if category == EVERY_CATEGORY:
                    raise RecallbenchError(f"{what}: '*' is no category (categories=* is all)")
        if self.empty_gold is not None:
            if not self.takes_empty_gold:
                raise RecallbenchError(f"measure {self.stem} takes no empty_gold")
            if isinstance(self.empty_gold, bool) or not isinstance(self.empty_gold, int | float):
                raise RecallbenchError(f"{what}: empty_gold must be a number")
            if not 0.0 <= self.empty_gold <= 1.0:
                raise RecallbenchError(f"{what}: empty_gold {self.empty_gold!r} is not in [0, 1]")
            object.__setattr__(self, "empty_gold", float(self.empty_gold) + 0.0)  # no -0.0

    @property
    def name(self) -> str:
        """The artifact key: ``{prefix}{stem}({params})@{k}``, every parameter but the level
        that is not its default (`parse(name, levels)` gives `self` back)."""
        return self._named(with_level=False)

    @property
    def at_k(self) -> str:
        """The name with a literal k (``turn_recall@k``), for definitions lists."""
        return f"{self.name.rpartition('@')[0]}@k"

    def params(self) -> dict[str, Any]:
        """Every parameter beyond stem, level, prefix and k, with its value (for scores.json)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("level", "k", "prefix"):
                continue
            value = getattr(self, f.name)
            out[f.name] = sorted(value) if isinstance(value, frozenset) else value
        return out

    @property
    def spec(self) -> str:
        """The full name: the name with ``level=`` first when the level is not the prefix's
        default; `parse` gives `self` back without the suite's levels."""
        return self._named(with_level=self.level != _default_level(self.prefix))

    def _named(self, *, with_level: bool) -> str:
        parts = [f"level={self.level}"] if with_level else []
        for f in fields(self):
            if f.name in ("level", "k", "prefix"):
                continue
            value = getattr(self, f.name)
            if value != f.default or f.name == "reads":  # `reads` marks the turn2session nDCG
                parts.append(f"{f.name}={_shown(value)}")
        inner = f"({','.join(parts)})" if parts else ""
        return f"{self.prefix}{self.stem}{inner}@{self.k}"

    def __str__(self) -> str:
        return self.spec

    def record(self) -> dict[str, Any]:
        """The measure as scores.json records it: name, level, k, pooled, definition (and
        empty_gold when set) as before, then stem, prefix, params and spec."""
        return {
            "name": self.name,
            "level": self.level,
            "k": self.k,
            "pooled": self.pooled,
            "definition": self.definition,
            # only when set: a query without gold scores this (LongMemEval's official rule)
            **({"empty_gold": self.empty_gold} if self.empty_gold is not None else {}),
            "stem": self.stem,
            "prefix": self.prefix,
            "params": self.params(),
            "spec": self.spec,
        }

    def relevant(self, grades: Mapping[str, int]) -> frozenset[str]:
        """R: the ids graded at least `rel` (the one relevance rule, `model.relevant_ids`)."""
        return relevant_ids(grades, self.rel)

    def applies_to(self, category: str) -> bool:
        return self.categories is None or category in self.categories

    def aggregate(self, values: Iterable[float | Mapping[str, Any] | None]) -> dict[str, Any]:
        """A mean over the queries it applies to: value = numerator / denominator = (sum of
        per-query values) / (queries with a value); `pooled` is None."""
        values = list(values)
        present = [v for v in values if v is not None]
        floats = [value_of(v) for v in present]
        total = math.fsum(floats)
        return {
            "value": total / len(floats) if floats else None,
            "numerator": total,
            "denominator": len(floats),
            "queries": len(floats),
            "not_applicable": len(values) - len(present),
            "pooled": self._pooled_counts(present),
        }

    def _pooled_counts(self, present: Sequence[Any]) -> dict[str, int] | None:
        return None

    def __call__(
        self,
        ranking: Sequence[str],
        grades: Mapping[str, int],
        groups: Mapping[str, str] | None = None,
    ) -> float | m.Ratio | None:
        raise NotImplementedError


class PooledMeasure(Measure):
    """Base of the slot rates: aggregated by summing the per-query Ratio counts."""

    pooled = True
    takes_rel = False

    def aggregate(self, values: Iterable[float | Mapping[str, Any] | None]) -> dict[str, Any]:
        """numerator and denominator are the summed slot counts; value = their ratio."""
        values = list(values)
        present = [v for v in values if v is not None]
        num = sum(v["numerator"] for v in present)
        den = sum(v["denominator"] for v in present)
        return {
            "value": num / den if den else None,
            "numerator": num,
            "denominator": den,
            "queries": len(present),
            "not_applicable": len(values) - len(present),
            "pooled": None,
        }


class Recall(Measure):
    """Recall@k = |R ∩ top-k| / |R|, R = ids graded >= 2; None when R is empty.

    trec_eval ``recall.k``; LongMemEval's scope document calls it recall@k (fractional).
    """

    stem = "recall"
    definition = "|relevant in top-k| / |relevant| (fractional recall, trec_eval recall.k)"

    def __call__(self, ranking, grades, groups=None):
        return m.recall_at_k(ranking, grades, self.k, self.rel)

    def _pooled_counts(self, present):
        """The pooled counts behind the mean: relevant found / relevant."""
        return {
            "numerator": sum(v["numerator"] for v in present),
            "denominator": sum(v["denominator"] for v in present),
        }


class RecallAny(Measure):
    """recall_any@k = 1 if any relevant id is in the top k, else 0 (Success@k, hit rate).

    None when R is empty (LongMemEval's code would give 0; such queries are dropped before).
    """

    stem = "recall_any"
    takes_empty_gold = True
    definition = "1 if any relevant id is in the top k (Success@k, 'hit rate')"

    def __call__(self, ranking, grades, groups=None):
        value = m.success_at_k(ranking, grades, self.k, self.rel)
        return self.empty_gold if value is None else value


class RecallAll(Measure):
    """recall_all@k = 1 if every relevant id is in the top k, else 0; None when R is empty."""

    stem = "recall_all"
    takes_empty_gold = True
    definition = "1 if every relevant id is in the top k (strict recall)"

    def __call__(self, ranking, grades, groups=None):
        ratio = m.recall_at_k(ranking, grades, self.k, self.rel)
        return self.empty_gold if ratio is None else float(ratio.numerator == ratio.denominator)


class ReciprocalRank(Measure):
    """RR@k = 1 / rank of the first relevant id within the top k, else 0; None when R is
    empty. trec_eval ``recip_rank`` on the run cut to k; the mean over queries is MRR@k."""

    stem = "mrr"
    definition = "1 / rank of the first relevant id within the top k (mean: MRR)"

    def __call__(self, ranking, grades, groups=None):
        return m.reciprocal_rank_at_k(ranking, grades, self.k, self.rel)


class NDCG(Measure):
    """nDCG@k = DCG@k / IDCG@k, gain = grade, discount 1 / log2(rank + 1), IDCG over every
    graded id (trec_eval ``ndcg_cut.k``); None when nothing is graded above 0."""

    stem = "ndcg"
    takes_rel = False
    definition = "linear-gain nDCG, discount 1/log2(rank+1), ideal over all graded ids"

    def __call__(self, ranking, grades, groups=None):
        return m.ndcg_at_k(ranking, grades, self.k)


class NDCGAny(Measure):
    """ndcg_any@k as LongMemEval's eval_utils.py computes it: binary relevance, DCG =
    rel[0] + sum_{i>=1} rel[i] / log2(i + 1) (ranks 1 and 2 both undiscounted); None when R
    is empty."""

    stem = "ndcg_any"
    takes_empty_gold = True
    definition = "LongMemEval's official binary nDCG (ranks 1 and 2 both undiscounted)"

    def __call__(self, ranking, grades, groups=None):
        gold = self.relevant(grades)
        if not gold:
            return self.empty_gold
        return official.evaluate_ids(list(ranking), [i for i in grades if i in gold], self.k)[2]


@dataclass(frozen=True)
class NDCGAnyTurn2Session(NDCGAny):
    """ndcg_any@k of a session level scored from a turn ranking, as LongMemEval's
    evaluate_retrieval_turn2session computes it: over the turn ranking (`reads`) cut at the
    smallest k' >= k holding k distinct sessions, each gold turn relevant at its turn rank.
    None when the turn ranking is `depth` long (possibly cut) and holds fewer than k
    distinct sessions, since k' is then unknown."""

    reads: str = "turn"
    depth: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_value(f"measure {self.stem}", "reads", self.reads)
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 0:
            raise RecallbenchError(f"measure {self.stem}: depth must be an integer >= 0")

    definition = (
        "LongMemEval's evaluate_retrieval_turn2session nDCG: the turn ranking cut where it "
        "holds k distinct sessions, gold turns relevant"
    )

    def __call__(self, ranking, grades, groups=None):
        gold = self.relevant(grades)
        if not gold:
            return self.empty_gold
        cutoff = official.turn2session_cutoff(ranking, gold, self.k)
        if len(ranking) >= self.depth and cutoff > len(ranking):
            return None
        return official.turn2session_ndcg(list(ranking), gold, self.k)


class SessionsOfTopTurnsAny(Measure):
    """sessions_any@k, over a turn ranking: 1 if a gold session (one holding a gold turn) is
    the session of any of the top k turns, else 0 - "any gold session among the sessions of
    the top k turns". k counts turns, not distinct sessions: the top 5 turns may come from
    one to five sessions (`recall_any@k` of a turn run counts k distinct sessions). A
    turn's session is its id without the position (`arithmetic.turn_session`: D3:4 -> D3).
    None when no turn is gold."""

    stem = "sessions_any"
    definition = "1 if any gold session is the session of one of the top k turns (k counts turns)"

    def __post_init__(self) -> None:
        """Only at the turn level: elsewhere the ids are no turns (a LongMemEval session id
        `answer_ab_2` would read as a turn of session `answer_ab`), so the figure would be
        wrong, not refused."""
        super().__post_init__()
        if self.level != "turn":
            raise RecallbenchError(
                f"measure {self.stem} reads a turn ranking (turn_{self.stem}@k at --unit turn), "
                f"not the {self.level!r} level"
            )

    def __call__(self, ranking, grades, groups=None):
        found = self._sessions(ranking, grades)
        return None if found is None else float(not found[0].isdisjoint(found[1]))

    def _sessions(self, ranking, grades):
        try:
            return m.sessions_of_top_turns(ranking, grades, self.k, self.rel)
        except ValueError as exc:
            raise RecallbenchError(f"measure {self.spec} reads a turn ranking: {exc}") from None


class SessionsOfTopTurnsAll(SessionsOfTopTurnsAny):
    """sessions_all@k, over a turn ranking: 1 if every gold session (one holding a gold
    turn) is the session of one of the top k turns, else 0 - "session-expanded strict@k":
    each of the top k turns expanded to its whole session, every gold turn then retrieved.
    k counts turns. None when no turn is gold."""

    stem = "sessions_all"
    definition = (
        "1 if every gold session is the session of one of the top k turns (session-expanded "
        "strict@k)"
    )

    def __call__(self, ranking, grades, groups=None):
        found = self._sessions(ranking, grades)
        return None if found is None else float(found[0] <= found[1])


@dataclass(frozen=True)
class FalsePositiveRate(PooledMeasure):
    """False-positive slots@k = returned ids in the top k graded 0 / min(k, returned);
    pooled over queries (a Ratio of slot counts). By default over the no-answer queries
    (category ``negative_or_no_answer``); ``categories=*`` for every query."""

    categories: frozenset[str] | None = frozenset({FIXTURE_NO_ANSWER})

    stem = "fp_rate"
    definition = "returned slots in the top k holding an ungraded id / returned slots (pooled)"

    def __call__(self, ranking, grades, groups=None):
        return m.false_positive_slots(ranking, grades, self.k)


@dataclass(frozen=True)
class DuplicateSlotRate(PooledMeasure):
    """Duplicate slots@k = slots in the top k whose duplicate group already appeared above /
    min(k, returned); pooled over queries. By default over the near-duplicate queries
    (category ``near_duplicate_diversity``); ``categories=*`` for every query."""

    categories: frozenset[str] | None = frozenset({FIXTURE_DUPLICATES})

    stem = "duplicate_slot_rate"
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
    SessionsOfTopTurnsAny,
    SessionsOfTopTurnsAll,
    FalsePositiveRate,
    DuplicateSlotRate,
)


def measure_table() -> str:
    """The docs' table of measure stems (docs/architecture.md#measures; a test checks it)."""
    lines = ["| stem | aggregation | takes `rel` | definition |", "|---|---|---|---|"]
    for cls in MEASURE_CLASSES:
        how = "pooled slot counts" if cls.pooled else "mean over applicable queries"
        if cls is Recall:
            how += " (+ pooled counts)"
        takes = "yes" if cls.takes_rel else "no"
        definition = cls.definition.replace("|", "\\|")
        lines.append(f"| `{cls.stem}` | {how} | {takes} | {definition} |")
    return "\n".join(lines) + "\n"


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


_PREFIX = re.compile(r"^(?:[a-z0-9_]*_)?$")


def _check_value(what: str, key: str, value: Any) -> None:
    """A string parameter must be writable in a name: non-empty, no separator or space."""
    if not isinstance(value, str) or not _VALUE.match(value):
        raise RecallbenchError(
            f"{what}: {key} {value!r} must be non-empty, without whitespace or any of ,|()=@"
        )


def _shown(value: Any) -> str:
    """A parameter's value as a name writes it (`_CONVERT` reads it back)."""
    if value is None:
        return EVERY_CATEGORY  # only categories can be None where the default is not
    if isinstance(value, frozenset):
        return "|".join(sorted(value))
    return repr(value) if isinstance(value, float) else str(value)


def _categories(text: str) -> frozenset[str] | None:
    if text == EVERY_CATEGORY:
        return None
    parts = text.split("|")
    if len(set(parts)) != len(parts):
        raise ValueError("a category is repeated")
    return frozenset(parts)


#: measures by stem, for `parse` (the turn2session nDCG is ndcg_any with a `reads` level)
BY_STEM: dict[str, type[Measure]] = {cls.stem: cls for cls in MEASURE_CLASSES}
_NAME = re.compile(r"^(?P<body>[a-z0-9_]+?)(?:\((?P<params>[^()]*)\))?@(?P<k>[0-9]+)$")
_CONVERT: dict[str, Callable[[str], Any]] = {
    "level": str,
    "rel": int,
    "categories": _categories,
    "empty_gold": float,
    "reads": str,
    "depth": int,
}


def _default_level(prefix: str) -> str:
    """The level a bare name means without a `levels` list: the prefix without its '_', or
    'session' (the conversational datasets' primary level) for no prefix."""
    return prefix[:-1] if prefix else "session"


def as_level(level: Level | Mapping[str, Any]) -> Level:
    """A Level, or suite.json's record of one, as a Level."""
    if isinstance(level, Level):
        return level
    return Level(level["name"], level.get("prefix", ""), level.get("description", ""))


def parse(text: str, levels: Sequence[Level | Mapping[str, Any]] | None = None) -> Measure:
    """The measure a name or spec denotes (``recall@10``, ``turn_recall(rel=3)@5``,
    ``fp_rate(level=memory,categories=negative_or_no_answer)@5``): ``parse(m.spec) == m``.

    Without ``level=`` the level is the one in `levels` whose prefix the name carries, else
    `_default_level`. With `levels`, ``level=`` must be among them and a name
    without a prefix takes its level's prefix (``recall(level=turn)@5`` is
    ``turn_recall@5``). A bad name, an unknown, repeated or empty parameter raises
    RecallbenchError in one line."""
    stems = ", ".join(BY_STEM)
    bad = f"{text!r} is not a measure name (STEM@K or STEM(rel=N)@K, stems: {stems})"
    match = _NAME.match(text.strip())
    if not match:
        raise RecallbenchError(bad)
    body = match["body"]
    stem = next((st for st in sorted(BY_STEM, key=len, reverse=True) if body.endswith(st)), None)
    if stem is None:
        raise RecallbenchError(bad)
    prefix = body[: -len(stem)]
    if prefix and not prefix.endswith("_"):
        raise RecallbenchError(bad)
    params: dict[str, Any] = {}
    for part in match["params"].split(",") if (match["params"] or "").strip() else ():
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not key:
            raise RecallbenchError(f"{text!r}: an empty parameter (a stray ',')")
        if not sep or key not in _CONVERT:
            raise RecallbenchError(
                f"{text!r}: unknown parameter {key!r} (known: {', '.join(_CONVERT)})"
            )
        if key in params:
            raise RecallbenchError(f"{text!r}: parameter {key!r} is given twice")
        if not value:
            raise RecallbenchError(f"{text!r}: parameter {key!r} has no value")
        try:
            params[key] = _CONVERT[key](value)
        except ValueError:
            raise RecallbenchError(f"{text!r}: {key}={value!r} is not valid") from None
    cls = BY_STEM[stem]
    if "reads" in params or "depth" in params:
        if cls is not NDCGAny:
            raise RecallbenchError(f"{text!r}: only ndcg_any takes reads/depth")
        cls = NDCGAnyTurn2Session
    if levels is not None:
        prefix = _resolve_level(text, prefix, params, [as_level(lv) for lv in levels])
    elif "level" not in params:
        params["level"] = _default_level(prefix)
    try:
        return cls(k=int(match["k"]), prefix=prefix, **params)
    except RecallbenchError as exc:
        raise RecallbenchError(f"{text!r}: {exc}") from None


def _resolve_level(text: str, prefix: str, params: dict[str, Any], known: list[Level]) -> str:
    """Set params' level from the suite's levels; return the prefix (the level's own)."""
    names = ", ".join(lv.name for lv in known)
    if "level" in params and params["level"] not in {lv.name for lv in known}:
        raise RecallbenchError(
            f"{text!r}: the suite has no level {params['level']!r} (levels: {names})"
        )
    if "level" in params:
        own = next(lv.prefix for lv in known if lv.name == params["level"])
        if prefix and prefix != own:
            raise RecallbenchError(
                f"{text!r}: the prefix {prefix!r} is not level {params['level']!r}'s ({own!r})"
            )
        return own
    found = [lv.name for lv in known if lv.prefix == prefix]
    if not found:
        prefixes = ", ".join(repr(lv.prefix) for lv in known)
        raise RecallbenchError(
            f"{text!r}: no level with the prefix {prefix!r} (prefixes: {prefixes})"
        )
    params["level"] = found[0]
    return prefix


def distinct(measures: Iterable[Measure]) -> list[Measure]:
    """The measures without repeats, in order; two different measures sharing a name (one
    artifact key) raise RecallbenchError in one line naming both."""
    by_name: dict[str, Measure] = {}
    for measure in measures:
        seen = by_name.setdefault(measure.name, measure)
        if seen != measure:
            raise RecallbenchError(
                f"measures {seen.spec} and {measure.spec} would share the key {measure.name}"
            )
    return list(by_name.values())


def from_record(record: Mapping[str, Any]) -> Measure:
    """The measure an artifact records (scores.json's entry, or results.json's, which keeps
    the older fields): its `spec` when recorded, else its name at its recorded level."""
    if record.get("spec"):
        return parse(record["spec"])
    measure = parse(record["name"], [Level(record["level"], _prefix_of(record["name"]))])
    empty = record.get("empty_gold")
    return measure if empty is None else replace(measure, empty_gold=empty)


def _prefix_of(name: str) -> str:
    return parse(name).prefix


def select(
    records: Iterable[Mapping[str, Any] | str],
    *,
    stem: str | Sequence[str] | None = None,
    k: int | None = None,
    level: str | None = None,
    pooled: bool | None = None,
    **params: Any,
) -> list[str]:
    """Names of the measures with these fields, in the given order: `records` are artifact
    records (scores.json / results.json) or bare names. `stem` may be several stems; any other
    keyword (prefix, rel, ...) must equal the measure's own. Consumers select by fields this
    way, never by name prefix."""
    stems = (stem,) if isinstance(stem, str) else stem
    out = []
    for record in records:
        measure = parse(record) if isinstance(record, str) else from_record(record)
        if stems is not None and measure.stem not in stems:
            continue
        if k is not None and measure.k != k:
            continue
        if level is not None and measure.level != level:
            continue
        if pooled is not None and measure.pooled != pooled:
            continue
        if any(getattr(measure, key) != value for key, value in params.items()):
            continue
        out.append(measure.name)
    return out


def preferred_measures(names: Iterable[str], k: int) -> list[str]:
    """nDCG@k, then recall@k, at the primary level (no prefix) among `names` (a headline)."""
    names = list(names)
    return select(names, stem="ndcg", k=k, prefix="") + select(
        names, stem="recall", k=k, prefix="", rel=RELEVANT_GRADE
    )


def per_query_value(value: float | m.Ratio | None) -> float | dict[str, Any] | None:
    """A measure's per-query result as artifact JSON (Ratios keep their counts)."""
    return value.to_dict() if isinstance(value, m.Ratio) else value


def value_of(cell: float | Mapping[str, Any] | None) -> float | None:
    """The number inside a per-query artifact value (a Ratio dict's value, or the float)."""
    return cell.get("value") if isinstance(cell, Mapping) else cell


def aggregate(measure: Measure, values: Iterable[float | Mapping[str, Any] | None]) -> dict:
    """The one cell shape for a measure over queries (see the module docstring); the
    aggregation is the measure's own (`Measure.aggregate`)."""
    return measure.aggregate(values)
