"""What `compare` keeps of each system's run on disk instead of in memory, so that its memory
does not grow with the number of systems: the result documents (`SpooledResults`), read back
one at a time, their per-query records streamed to compare.html (`QueryLookup`); the
validated spool the texts are read from, scope by scope (`report.html.SpooledTexts`).

Everything lies in one scratch directory (`Scratch`): under the build directory, named
``compare-XXXXXXXX`` (what `paths.remove_leftover_work` removes after a killed
compare), else a temporary directory; removed when the objects that use it (the spooled
results and texts) are gone, or at exit.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import orjson

#: the key of a result document that holds its per-query records (streamed, not held)
QUERIES = "queries"


class Scratch:
    """A directory of compare's own for the duration of one comparison."""

    def __init__(self, parent: Path | None = None) -> None:
        if parent is not None:
            from recallbench.builddir.paths import make_dirs

            make_dirs(Path(parent))
        self.path = Path(tempfile.mkdtemp(prefix="compare-", dir=parent))
        # removed with the last object that holds this one (the spooled results and texts)
        weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)


class SpooledResults(Sequence[dict[str, Any]]):
    """Result documents kept on disk as they are added: each one's per-query records one per
    line in a file of their own, the rest of the document (small) in memory.

    Indexing reads a whole document back (the last `KEEP` read stay in memory), `queries(i)`
    streams one's records and `head(i)` is one without them: code that goes through the
    results one at a time holds at most a few, whatever their number. A slice is a view, read
    the same way. The documents read back equal the ones added (orjson's round trip)."""

    KEEP = 2

    def __init__(self, scratch: Scratch) -> None:
        self._scratch = scratch  # kept alive while the files are in use
        self._heads: list[dict[str, Any]] = []
        self._read: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def append(self, result: Mapping[str, Any]) -> None:
        """Keep `result`: its records written out, the rest held (its key order kept)."""
        index = len(self._heads)
        with open(self._path(index), "wb") as handle:
            for record in result[QUERIES]:
                handle.write(orjson.dumps(record) + b"\n")
        self._heads.append(
            {key: (None if key == QUERIES else value) for key, value in result.items()}
        )

    def head(self, index: int) -> dict[str, Any]:
        """Result `index` without its per-query records (`queries` is None)."""
        return self._heads[index]

    def queries(self, index: int) -> Iterator[dict[str, Any]]:
        """Result `index`'s per-query records, in order, read as they are asked for."""
        with open(self._path(self._index(index)), "rb") as handle:
            for line in handle:
                yield orjson.loads(line)

    def __len__(self) -> int:
        return len(self._heads)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return _View(self, range(len(self))[index])
        index = self._index(index)
        if index in self._read:
            self._read.move_to_end(index)
            return self._read[index]
        document = dict(self._heads[index])
        document[QUERIES] = list(self.queries(index))
        self._read[index] = document
        while len(self._read) > self.KEEP:
            self._read.popitem(last=False)
        return document

    def _index(self, index: int) -> int:
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return index % len(self)

    def _path(self, index: int) -> Path:
        return self._scratch.path / f"result-{index:04d}.jsonl"


class _View(Sequence[dict[str, Any]]):
    """Some of a `SpooledResults`' documents (a slice), read when asked for."""

    def __init__(self, results: SpooledResults, indices: range) -> None:
        self._results = results
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return _View(self._results, self._indices[index])
        return self._results[self._indices[index]]


def result_head(results: Sequence[Mapping[str, Any]], index: int) -> Mapping[str, Any]:
    """Result `index` for what lies outside its per-query records: without reading them
    back when the results are spooled."""
    if isinstance(results, SpooledResults):
        return results.head(index)
    return results[index]


def query_records(results: Sequence[Mapping[str, Any]], index: int) -> Iterator[Any]:
    """Result `index`'s per-query records, streamed when the results are spooled."""
    if isinstance(results, SpooledResults):
        return results.queries(index)
    return iter(results[index][QUERIES])


class QueryLookup:
    """One result's per-query records by query id, read in step with another result's order
    (`get`): the records of results in the same order (the same spool) pass through one at a
    time; a record asked for out of order is found by reading on, the ones passed over kept
    until asked for."""

    def __init__(self, records: Iterator[Mapping[str, Any]]) -> None:
        self._records = records
        self._waiting: dict[str, Mapping[str, Any]] = {}

    def get(self, query_id: str) -> Mapping[str, Any] | None:
        """Query `query_id`'s record (None when the result has none)."""
        found = self._waiting.pop(query_id, None)
        if found is not None:
            return found
        for record in self._records:
            if record["query_id"] == query_id:
                return record
            self._waiting[record["query_id"]] = record
        return None
