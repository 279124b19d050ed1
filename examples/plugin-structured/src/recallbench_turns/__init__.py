"""`turn-pairs`: a store built on structured records (plugin API 1.1), the kind a plain text
record cannot serve: it needs each memory's turns, its session date and the question's date.

* Documents: each memory is cut into turn pairs (a turn and the one after it: a user's
  question with the assistant's answer, or one speaker's line with the other's reply), each
  pair prefixed with the session's date, as ``"<date>\\n<who>: <text>\\n<who>: <text>"``. A
  memory without turns (the fixture suite) is one document, its text.
* Ranking: BM25 (`bm25s`, Lucene variant, k1 1.5, b 0.75) over lowercase word tokens of
  every pair of the store; a memory scores its best pair's score; ties by memory id.
* The question's date: a memory whose session is dated after the question is left out (a
  conversation cannot hold what was said later). Dates are compared when both parse as
  LongMemEval's ``2023/05/20 (Sat) 02:21`` or LoCoMo's ``1:56 pm on 8 May, 2023``;
  otherwise the memory stays.

The store keeps its records (turns and dates included) in `records.jsonl` and rebuilds the
index when reopened; `RecordsClone` gives it a clone path over that file.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from recallbench.plugin import (
    RECORDS_FILE,
    Hit,
    RecordsClone,
    TimedCalls,
    check_new_ids,
    jsonl_bytes,
    jsonl_records,
    records_digest,
)

TOKEN = re.compile(r"\w+")
DATE_FORMATS = ("%Y/%m/%d (%a) %H:%M", "%I:%M %p on %d %B, %Y")
logging.getLogger("bm25s").setLevel(logging.WARNING)


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def parse_date(text: str | None) -> datetime | None:
    """A LongMemEval or LoCoMo date, or None when it is neither."""
    for form in DATE_FORMATS:
        try:
            return datetime.strptime((text or "").strip(), form)
        except ValueError:
            continue
    return None


def pairs(record: Any) -> list[str]:
    """The memory's documents: its turns two by two, each pair under its session date."""
    if not record.turns:
        return [record.text]
    lines = [f"{t.speaker or t.role or 'someone'}: {t.text}" for t in record.turns]
    date = f"{record.session_date}\n" if record.session_date else ""
    if len(lines) == 1:
        return [date + lines[0]]
    return [date + "\n".join(lines[i : i + 2]) for i in range(len(lines) - 1)]


class TurnPairStore:
    def __init__(self, system: TurnPairSystem, directory: Path, records: list[Any]) -> None:
        self.system = system
        self.directory = Path(directory)
        self.records: list[Any] = []
        self.dates: list[Any] = []  # each record's session date, parsed once
        self._add(records)

    def _add(self, records: list[Any]) -> None:
        self.records.extend(records)
        self.dates.extend(parse_date(r.session_date) for r in records)
        with self.system._inside():
            self.owner: list[int] = []
            corpus = []
            for n, record in enumerate(self.records):
                for document in pairs(record):
                    self.owner.append(n)
                    corpus.append(tokenize(document))
            self.index = None
            if any(corpus):
                self.index = bm25s.BM25(k1=1.5, b=0.75)
                self.index.index(corpus, show_progress=False)

    def ingest(self, records: Any) -> int:
        check_new_ids((r.memory_id for r in self.records), records)
        self._add(list(records))
        (self.directory / RECORDS_FILE).write_bytes(jsonl_bytes(self.records))
        return len(self.records)

    def search(self, query: str, limit: int, *, query_date: str | None = None) -> list[Hit]:
        tokens = tokenize(query)
        if not self.records or not tokens:
            return []
        with self.system._inside():
            if self.index is None:
                chunk_scores = np.zeros(len(self.owner))
            else:
                chunk_scores = np.asarray(self.index.get_scores(tokens), dtype=float)
            best = np.full(len(self.records), -np.inf)
            np.maximum.at(best, np.asarray(self.owner, dtype=int), chunk_scores)
            asked = parse_date(query_date)
            ranked = []
            for n, (record, said) in enumerate(zip(self.records, self.dates, strict=True)):
                if asked is not None and said is not None and said > asked:
                    continue  # dated after the question
                ranked.append((-round(float(best[n]), 4), record.memory_id, record.identifier))
            ranked.sort()
        return [Hit(memory_id, -score, ident) for score, memory_id, ident in ranked[:limit]]

    def count(self) -> int:
        return len(self.records)

    def texts(self) -> list[tuple[str, str]]:
        return [(r.memory_id, r.text) for r in self.records]

    def digest(self) -> str:
        return records_digest(self.texts())

    def close(self) -> None:
        self.index = None


class TurnPairSystem(TimedCalls):
    """BM25 over dated turn pairs; a memory ranks by its best pair; none after the question."""

    embedder = None
    lexical = False
    structured = True  # records carry turns and session dates, searches the question's date

    def __init__(self) -> None:
        self.name = "turn-pairs"
        self.clone = RecordsClone(self, "recallbench-turn-pairs-1")

    def configuration(self) -> dict[str, Any]:
        return {
            "documents": "turn pairs under the session date (a memory without turns: its text)",
            "ranking": "bm25s BM25 (k1 1.5, b 0.75) of a memory's best pair; ties by memory id",
            "question_date": "memories dated after the question are left out",
            "bm25s_version": bm25s.__version__,
        }

    def open_store(self, directory: Path, *, vectors: Any = None) -> TurnPairStore:
        path = Path(directory) / RECORDS_FILE
        if path.exists():
            raise FileExistsError(f"{path}: a store already exists here")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return TurnPairStore(self, Path(directory), [])

    def attach(self, directory: Path, *, vectors: Any = None) -> TurnPairStore:
        path = Path(directory) / RECORDS_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path}: no store here")
        return TurnPairStore(self, Path(directory), jsonl_records(path))


def make_system() -> TurnPairSystem:
    return TurnPairSystem()
