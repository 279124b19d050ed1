"""A lexical baseline: Okapi BM25 (the `bm25s` library, Lucene variant) behind the seam.

It exists to put a plain, well-understood retriever beside the systems under test (and,
on LongMemEval, beside the paper's published BM25 figures). Text is tokenized as
lowercase `\\w+` runs, without stemming or stop words. Ranking: BM25 score descending,
ties by memory id ascending; every stored record is a candidate (like HotMem, no
abstention). A query with no word token (`???`, an empty question) has no hits; memories
with no word token score 0 (a scope where no memory has one is still searchable: every
record ties at 0). The store is a JSONL file of records; the index is rebuilt in memory when the
store is opened. Capabilities: a clone path (a package of that file plus a manifest with
its size, sha256 and the record count, checked on verify) and lexical diagnostics; no
embedder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import bm25s
import numpy as np

from recallbench.systems.adapters import OpensRecords, RecordsStore
from recallbench.systems.base import Hit, StoreRecord, TimedCalls
from recallbench.systems.packaging import RecordsClone
from recallbench.systems.registry import register

PACKAGE_FORMAT = "recallbench-bm25-v2"
_TOKEN = re.compile(r"\w+")
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens (`\\w+`), no stemming, no stop words."""
    return _TOKEN.findall(text.lower())


class BM25Store(RecordsStore):
    """Records in `directory/records.jsonl`, indexed in memory."""

    def _add(self, records: Sequence[StoreRecord]) -> None:
        self._records.extend(records)
        with self._system._inside():
            self._ids = np.array([r.memory_id for r in self._records])
            corpus = [tokenize(r.text) for r in self._records]
            self._index = None
            if any(corpus):  # bm25s cannot index a corpus without a single token
                self._index = bm25s.BM25(k1=self._system.k1, b=self._system.b)
                self._index.index(corpus, show_progress=False)

    def _scores(self, tokens: list[str]) -> np.ndarray:
        if self._index is None:  # no memory has a token: every record scores 0
            return np.zeros(len(self._records), dtype=float)
        return np.asarray(self._index.get_scores(tokens), dtype=float)

    def search(self, query: str, limit: int) -> list[Hit]:
        tokens = tokenize(query)
        if not self._records or not tokens:  # nothing stored, or nothing to look for
            return []
        with self._system._inside():
            scores = self._scores(tokens)
            # score descending, then memory id ascending
            order = np.lexsort((self._ids, -scores))[:limit]
        return self._hits(scores, order)

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """Records sharing at least one token with the query (a BM25 score above 0)."""
        tokens = tokenize(query)
        if not self._records or not tokens:
            return "BM25", []
        with self._system._inside():
            scores = self._scores(tokens)
        return "BM25", sorted(str(self._ids[i]) for i in np.flatnonzero(scores > 0))


class BM25System(OpensRecords, TimedCalls):
    """Okapi BM25 over the records' text; parameters k1 and b as in Lucene."""

    embedder = None
    lexical = True
    store_class = BM25Store

    def __init__(self, name: str = "bm25", *, k1: float = 1.5, b: float = 0.75) -> None:
        self.name = name
        self.k1 = k1
        self.b = b
        self.clone = RecordsClone(self, PACKAGE_FORMAT)

    def configuration(self) -> dict[str, Any]:
        return {
            "implementation": "bm25s",
            "implementation_version": bm25s.__version__,
            "variant": "lucene",
            "k1": self.k1,
            "b": self.b,
            "tokenizer": "lowercase \\w+ tokens, no stemming, no stop words",
            "ties": "memory id ascending",
            "clone_format": PACKAGE_FORMAT,
        }


@register(
    "bm25",
    description="Okapi BM25 (bm25s, Lucene variant, k1 1.5, b 0.75) over lowercase word tokens; the lexical reference",
    capabilities=("clone", "lexical"),
)
def bm25_system() -> BM25System:
    return BM25System("bm25")
