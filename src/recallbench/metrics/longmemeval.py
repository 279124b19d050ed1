"""LongMemEval's official retrieval metrics, re-implemented (never imported).

Source: ``src/retrieval/eval_utils.py`` of xiaowu0162/LongMemEval (MIT). The original
uses ``np.asfarray``, which NumPy 2 removed; this module is a plain-Python transcription
that keeps every quirk:

``dcg(relevances, k)``
    r = relevances[:k];  DCG = r[0] + sum_{i=1..len(r)-1} r[i] / log2(i + 1)
    (0-based i), so the items at rank 1 and rank 2 are both undiscounted
    (log2(2) = 1) - unlike the textbook 1/log2(rank + 1), where rank 2 gets 1/log2(3).

``ndcg(rankings, correct_docs, corpus_ids, k)``
    binary relevance rel(doc) = 1 if doc in correct_docs; ideal = the corpus relevances
    sorted descending (so IDCG counts every gold id *present in the corpus*, cut at k);
    0.0 when IDCG is 0 (no gold in the corpus).

``evaluate_retrieval(rankings, correct_docs, corpus_ids, k)``
    recalled = {corpus_ids[i] for i in rankings[:k]}
    recall_any = 1.0 if any(doc in recalled for doc in correct_docs) else 0.0
    recall_all = 1.0 if all(doc in recalled for doc in correct_docs) else 0.0
    ndcg_any   = ndcg(...)
    With no gold at all: recall_any 0.0, recall_all 1.0 (``all([])``), ndcg_any 0.0.

``rankings`` are indices into ``corpus_ids`` (a permutation in the original; only its
first k entries matter). `evaluate_ids` is the same computation for a ranked list of ids.

``evaluate_retrieval_turn2session(rankings, correct_docs, corpus_ids, k)``
    turn ids -> session ids (the trailing ``_N`` dropped), k widened to the smallest k'
    whose top k' turns hold k distinct sessions, then `evaluate_retrieval` at k' over the
    turn ranking. Its recall_any/recall_all equal the distinct-session ranking's at k; its
    nDCG counts every gold turn at its turn rank (`turn2session_ndcg`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "dcg",
    "evaluate_ids",
    "evaluate_retrieval",
    "ndcg",
    "recall_fraction",
    "turn2session_cutoff",
    "turn2session_ndcg",
]


def dcg(relevances: Sequence[float], k: int) -> float:
    """DCG = rel[0] + sum_{i>=1} rel[i] / log2(i + 1) over the first k relevances."""
    rel = [float(r) for r in relevances[:k]]
    if not rel:
        return 0.0
    return rel[0] + math.fsum(rel[i] / math.log2(i + 1) for i in range(1, len(rel)))


def ndcg(
    rankings: Sequence[int], correct_docs: Collection[str], corpus_ids: Sequence[str], k: int = 10
) -> float:
    """nDCG@k with binary relevance and the official discount; 0.0 when IDCG is 0."""
    relevances = [1 if doc_id in correct_docs else 0 for doc_id in corpus_ids]
    sorted_relevances = [relevances[idx] for idx in rankings[:k]]
    ideal_relevance = sorted(relevances, reverse=True)
    ideal_dcg = dcg(ideal_relevance, k)
    actual_dcg = dcg(sorted_relevances, k)
    if ideal_dcg == 0:
        return 0.0
    return actual_dcg / ideal_dcg


def evaluate_retrieval(
    rankings: Sequence[int], correct_docs: Collection[str], corpus_ids: Sequence[str], k: int = 10
) -> tuple[float, float, float]:
    """(recall_any@k, recall_all@k, ndcg_any@k) exactly as eval_utils.evaluate_retrieval."""
    recalled_docs = {corpus_ids[idx] for idx in rankings[:k]}
    recall_any = float(any(doc in recalled_docs for doc in correct_docs))
    recall_all = float(all(doc in recalled_docs for doc in correct_docs))
    ndcg_any = ndcg(rankings, correct_docs, corpus_ids, k)
    return recall_any, recall_all, ndcg_any


def evaluate_ids(
    ranked: Sequence[str], gold: Collection[str], k: int, corpus: Iterable[str] | None = None
) -> tuple[float, float, float]:
    """`evaluate_retrieval` for a ranked list of ids (best first).

    The corpus is `corpus` when given, else the ranked ids plus the gold ids (the ideal DCG
    only depends on how many gold ids the corpus holds; a caller whose gold ids all lie in
    the haystack may omit it). Ranked ids missing from an explicit corpus are an error.
    """
    corpus_ids = list(dict.fromkeys([*ranked, *gold])) if corpus is None else list(corpus)
    position = {doc: i for i, doc in enumerate(corpus_ids)}
    if len(position) != len(corpus_ids):
        raise ValueError("corpus ids must be distinct")
    missing = [doc for doc in ranked if doc not in position]
    if missing:
        raise ValueError(f"ranked id {missing[0]!r} is not in the corpus")
    rankings = [position[doc] for doc in ranked]
    return evaluate_retrieval(rankings, set(gold), corpus_ids, k)


def turn2session_cutoff(turn_ranking: Sequence[str], gold_turns: Collection[str], k: int) -> int:
    """evaluate_retrieval_turn2session's widened cutoff: the smallest k' >= k whose top k'
    turns hold k distinct sessions, or len + 1 when the ranking never does. A turn's session
    is its id without the trailing ``_N``, with 'answer' renamed 'noans' for a turn of an
    'answer' session that is not a gold turn (run_retrieval.py renames such turn ids)."""

    def session(turn_id: str) -> str:
        sid = "_".join(turn_id.split("_")[:-1])
        return sid.replace("answer", "noans") if turn_id not in gold_turns else sid

    effective = k
    seen = {session(t) for t in turn_ranking[:effective]}
    while effective <= len(turn_ranking) and len(seen) < k:
        effective += 1
        seen = {session(t) for t in turn_ranking[:effective]}
    return effective


def turn2session_ndcg(turn_ranking: Sequence[str], gold_turns: Collection[str], k: int) -> float:
    """evaluate_retrieval_turn2session's ndcg_any@k: the turn ranking at the widened cutoff,
    a turn relevant when it is a gold turn (its session, renamed as above, is a gold
    session exactly then), the ideal over every gold turn."""
    gold = set(gold_turns)
    cutoff = turn2session_cutoff(turn_ranking, gold, k)
    return evaluate_ids(list(turn_ranking), gold, cutoff)[2]


def recall_fraction(ranked: Sequence[str], gold: Collection[str], k: int) -> float | None:
    """The scope document's recall@k = |gold ∩ top-k| / |gold|; None with no gold."""
    gold_set = set(gold)
    if not gold_set:
        return None
    return len(gold_set.intersection(ranked[:k])) / len(gold_set)
