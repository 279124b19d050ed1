"""The LongMemEval paper's BM25: `rank_bm25.BM25Okapi`, as LongMemEval's run_retrieval.py
calls it, behind the seam (optional extra `okapi`).

It exists to reproduce the paper's retrieval table: the same library, parameters,
tokenisation and tie order as the official code, so that its figures can be compared with
the published ones question by question. Exactly:

* index: ``BM25Okapi([text.split(" ") for text in corpus])`` with the library's defaults
  (k1 1.5, b 0.75, epsilon 0.25), the corpus in ingest order (no lowercasing, punctuation
  kept, so ``"Paris."`` and ``"paris"`` are different tokens);
* query: ``get_scores(question.split(" "))``;
* ranking: ``np.argsort(scores)[::-1]`` over the whole corpus, i.e. ties in whatever order
  NumPy's default sort leaves them, reversed (as the official code ranks on this machine).

Every stored record is a candidate (no abstention); the index is rebuilt when records are
added and when a store is opened. The store is a JSONL file of records, like `bm25`'s;
capabilities: a clone path (a package of that file plus a manifest with its size, sha256
and the record count) and lexical diagnostics; no embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recallbench.systems.adapters import OpensRecords, RecordsStore
from recallbench.systems.base import Hit, StoreRecord, TimedCalls
from recallbench.systems.packaging import RecordsClone
from recallbench.systems.registry import register

PACKAGE_FORMAT = "recallbench-bm25-okapi-v1"


def tokenize(text: str) -> list[str]:
    """The official tokenisation: ``text.split(" ")`` (empty strings kept, case kept)."""
    return text.split(" ")


def rank(scores: np.ndarray) -> np.ndarray:
    """The official ranking: ``np.argsort(scores)[::-1]``."""
    return np.argsort(scores)[::-1]


class OkapiStore(RecordsStore):
    """Records in `directory/records.jsonl`, indexed in memory with BM25Okapi (`_index`)."""

    def _add(self, records: Sequence[StoreRecord]) -> None:
        from rank_bm25 import BM25Okapi  # the optional extra: imported when a store is built

        self._records.extend(records)
        with self._system._inside():
            if self._records:
                self._index = BM25Okapi(
                    [tokenize(r.text) for r in self._records],
                    k1=self._system.k1,
                    b=self._system.b,
                    epsilon=self._system.epsilon,
                )

    def _scores(self, query: str) -> np.ndarray:
        return np.asarray(self._index.get_scores(tokenize(query)))

    def search(self, query: str, limit: int) -> list[Hit]:
        if self._index is None:
            return []
        with self._system._inside():
            scores = self._scores(query)
            order = rank(scores)[:limit]
        return self._hits(scores, order)

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """Records holding at least one query token (BM25Okapi scores can be 0 or negative
        for a matching token, so the match is on tokens, not on the score)."""
        if self._index is None:
            return "BM25Okapi", []
        with self._system._inside():
            wanted = set(tokenize(query))
            matched = [
                r.memory_id
                for r, freqs in zip(self._records, self._index.doc_freqs, strict=True)
                if not wanted.isdisjoint(freqs)
            ]
        return "BM25Okapi", sorted(matched)


class OkapiSystem(OpensRecords, TimedCalls):
    """rank_bm25's BM25Okapi with LongMemEval's tokenisation and ranking."""

    embedder = None
    lexical = True
    store_class = OkapiStore

    def __init__(
        self, name: str = "bm25-okapi", *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> None:
        self.name = name
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon
        self.clone = RecordsClone(self, PACKAGE_FORMAT)

    def configuration(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "implementation": "rank_bm25.BM25Okapi",
            "implementation_version": version("rank-bm25"),
            "variant": "okapi (the LongMemEval paper's BM25)",
            "k1": self.k1,
            "b": self.b,
            "epsilon": self.epsilon,
            "tokenizer": 'text.split(" "), query.split(" ") (case and punctuation kept)',
            "ties": "np.argsort(scores)[::-1] over the store in ingest order",
            "clone_format": PACKAGE_FORMAT,
        }


@register(
    "bm25-okapi",
    description='The LongMemEval paper\'s BM25: rank_bm25.BM25Okapi (k1 1.5, b 0.75, epsilon 0.25) over text.split(" ") tokens, ranked by np.argsort(scores)[::-1]',
    capabilities=("clone", "lexical"),
    extra="okapi",
)
def bm25_okapi_system() -> OkapiSystem:
    return OkapiSystem("bm25-okapi")
