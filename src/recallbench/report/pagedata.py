"""The per-query texts of report.html and compare.html, in bounded pieces.

A page carries its summary and its per-query table (ids, category, figures, the first
relevant rank) for every query, but the texts of each query (its text, the expected and
returned items' texts, the diagnostics) only for a bounded first slice: at most
`FIRST_SLICE_QUERIES` queries and `FIRST_SLICE_BYTES` bytes. The texts of the other queries
go to data files in a directory beside the page (``report-data/`` beside report.html,
``compare-data/`` beside compare.html), each a chunk of at most `CHUNK_QUERIES` queries and
(unless one query alone is larger) `CHUNK_BYTES` bytes, named ``0001.js``, ``0002.js``, ...
The page loads a chunk, when a query of it is opened, as a ``<script>`` element (which works
from ``file://`` without a server); each file is one call::

    recallbenchPageData("report", "<the page's token>", 3, [<record>, ...]);

so the page can tell its own data from another page's (the token is the document's
fingerprint). Opening the page costs the same at 50 or 5,000 queries; a missing or foreign
file leaves the page usable and names the file.

`PageChunks` takes the records (one query's JSON each, `escape.script_json`) in the table's
order and decides where each goes from its size alone, so the same records give the same
page and the same files, whatever the worker count. Chunks are written as they fill into a
staging directory (under `scratch`, the build directory, or a temporary directory), so the
writer holds at most one chunk; `StagedTree` publishes them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import TEMP_PREFIX, StagedTree
from recallbench.core.escape import script_json

#: the queries whose texts are in the page itself: at most this many ...
FIRST_SLICE_QUERIES = 50
#: ... and at most this many bytes of their records (a first query larger than this goes
#: to a data file)
FIRST_SLICE_BYTES = 2 * 2**20
#: a data file holds at most this many queries ...
CHUNK_QUERIES = 50
#: ... and at most this many bytes of records, unless one query's record alone is larger
CHUNK_BYTES = 2 * 2**20
#: the global function each data file calls
REGISTER = "recallbenchPageData"


def chunk_name(number: int) -> str:
    """The file name of data chunk `number` (1, 2, ...): ``0001.js``."""
    return f"{number:04d}.js"


def chunk_script(kind: str, token: str, number: int, records: list[str]) -> bytes:
    """The bytes of one data file: the registration call with the chunk's records (each
    already `escape.script_json`)."""
    head = f"{REGISTER}({script_json(kind)},{script_json(token)},{number},["
    return (head + ",".join(records) + "]);\n").encode("utf-8")


def _remove(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


class PageChunks:
    """Records in table order -> the page's inline slice and its data files.

    `add` returns where the record went: 0 (the page itself) or the chunk's number.
    `finish` returns the inline records and the `DataFiles` to publish beside the page."""

    def __init__(self, kind: str, token: str, scratch: Path | None = None) -> None:
        self.kind = kind
        self.token = token
        self.scratch = scratch
        self.inline: list[str] = []
        self._inline_bytes = 0
        self._inline_open = True
        self._records: list[str] = []
        self._bytes = 0
        self._number = 1
        self.data = DataFiles()

    def add(self, record: str) -> int:
        """Place one record (JSON text); its chunk number (0: in the page)."""
        size = len(record.encode("utf-8"))
        if self._inline_open:
            fits = (
                len(self.inline) < FIRST_SLICE_QUERIES
                and self._inline_bytes + size <= FIRST_SLICE_BYTES
            )
            if fits:
                self.inline.append(record)
                self._inline_bytes += size
                return 0
            self._inline_open = False  # the slice is a prefix: once closed, it stays closed
        if self._records and self._bytes + size > CHUNK_BYTES:
            self._flush()
        self._records.append(record)
        self._bytes += size
        number = self._number
        if len(self._records) >= CHUNK_QUERIES:
            self._flush()
        return number

    def _flush(self) -> None:
        if not self._records:
            return
        name = chunk_name(self._number)
        self.data.write(
            name, chunk_script(self.kind, self.token, self._number, self._records), self.scratch
        )
        self._records, self._bytes = [], 0
        self._number += 1

    def finish(self) -> tuple[list[str], DataFiles]:
        """The inline records and the data files (the last chunk written)."""
        self._flush()
        return self.inline, self.data


class DataFiles:
    """A page's data files as they are written: in a staging directory of their own
    (`TEMP_PREFIX` name under the scratch directory, else a temporary directory), removed
    by `close` or when this object is collected. `tree()` is what `publish` takes."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.bytes = 0
        self._dir: str | None = None
        self._cleanup: Any = None

    def write(self, name: str, payload: bytes, scratch: Path | None) -> None:
        if self._dir is None:
            if scratch is not None:
                from recallbench.builddir.paths import make_dirs

                make_dirs(Path(scratch))
                self._dir = tempfile.mkdtemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=scratch)
            else:
                self._dir = tempfile.mkdtemp(prefix="recallbench-page-")
            self._cleanup = weakref.finalize(self, _remove, self._dir)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(os.path.join(self._dir, name), flags, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        self.names.append(name)
        self.bytes += len(payload)

    def tree(self) -> StagedTree:
        """The directory to publish beside the page (no files: an old one is removed)."""
        return StagedTree({n: Path(self._dir or "") / n for n in self.names})

    def read(self, name: str) -> bytes:
        """One file's bytes (for tests and checks)."""
        return (Path(self._dir or "") / name).read_bytes()

    def close(self) -> None:
        """Remove the staging directory (after publishing)."""
        if self._cleanup is not None:
            self._cleanup()
