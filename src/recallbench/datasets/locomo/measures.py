"""LoCoMo's measure family: what a LoCoMo run is scored with (`family`). Imported by `score`
without the reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recallbench.core.model import Level
from recallbench.metrics.measures import Measure, conversational_measures


def family(
    levels: Sequence[Level], top_k: int, ks: Sequence[int] | None, options: Mapping[str, Any]
) -> list[Measure]:
    """recall, recall_any, recall_all, ndcg_any at k = 1, 5, 10 (up to top-k) and top-k (or
    at the run's own `ks`), per level."""
    return conversational_measures(top_k, levels, ks)
