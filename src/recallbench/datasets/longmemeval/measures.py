"""LongMemEval's measure family: what a LongMemEval run is scored with (`family`), by the
gold rule and the unit. Imported by `score` without the reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.core.model import Level
from recallbench.datasets.longmemeval.pairs import DEFAULT_RULE_LEVEL, GOLD_DEFAULT, GOLD_OFFICIAL
from recallbench.metrics.measures import (
    Measure,
    NDCGAny,
    NDCGAnyTurn2Session,
    conversational_measures,
)


def family(
    levels: Sequence[Level], top_k: int, ks: Sequence[int] | None, options: Mapping[str, Any]
) -> list[Measure]:
    """recall, recall_any, recall_all, ndcg_any at k = 1, 5, 10 (up to top-k) and top-k (or
    at the run's own `ks`), per level. With gold "official" the official levels score
    questions without gold vacuously and list recall_all and ndcg_any first; the default
    rule's level beside them does not; a turn run's session nDCG is LongMemEval's
    evaluate_retrieval_turn2session (from the turn ranking)."""
    if (options.get("gold") or GOLD_DEFAULT) != GOLD_OFFICIAL:
        return conversational_measures(top_k, levels, ks)
    official_levels = [lv for lv in levels if lv.name != DEFAULT_RULE_LEVEL]
    default = [lv for lv in levels if lv.name == DEFAULT_RULE_LEVEL]
    chosen = conversational_measures(top_k, official_levels, ks, official=True)
    if options.get("unit") == "turn":
        chosen = [
            NDCGAnyTurn2Session(m.level, m.k, m.prefix, empty_gold=m.empty_gold, depth=top_k)
            if type(m) is NDCGAny and m.level == "session"
            else m
            for m in chosen
        ]
    return chosen + conversational_measures(top_k, default, ks)
