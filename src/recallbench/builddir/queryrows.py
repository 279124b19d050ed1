"""The query stage's rows kept on disk, never all in memory.

`RowSpool` writes rows as they come back to an unnamed temp file in the build directory
(removed by the system when it is closed, even after a crash); `SpooledRows` reads them back
one at a time, a read-only Sequence that the round trip, score and the report iterate as
they would a list. `lazy_rows_envelope` reads a canonical runs.json the same way: the rows'
places in the file found by their lines, each row parsed when it is read.
`recallbench.builddir.artifacts` writes and fingerprints an envelope holding such rows item by item
(`artifacts.canonical_chunks`), byte for byte as the list.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson


class RowSpool:
    """Rows (plain JSON objects) kept on disk as they are made, one line each, in an unnamed
    temp file in `directory` (removed by the system when it is closed, even after a crash),
    so a stage's rows are never all in memory: `rows()` reads them back one at a time."""

    def __init__(self, directory: Path) -> None:
        import tempfile

        # open as long as the rows are read, so not a `with` block
        self._file = tempfile.TemporaryFile(dir=directory, prefix=".recallbench-rows-")  # noqa: SIM115
        self._places: list[tuple[int, int]] = []
        self._end = 0

    def add(self, row: Mapping[str, Any]) -> None:
        line = orjson.dumps(row) + b"\n"
        self._file.write(line)
        self._places.append((self._end, len(line)))
        self._end += len(line)

    def rows(self) -> SpooledRows:
        """Every row added, as a read-only sequence read from the file (no more may be added)."""
        self._file.flush()
        return SpooledRows(self._file, self._places)


class SpooledRows(Sequence):
    """A read-only sequence of the rows a `RowSpool` wrote (or of the items of a canonical
    runs.json, see `artifacts.load_envelope`), each parsed when it is read
    (iterating holds one row at a time). `recallbench.builddir.artifacts` writes it and computes
    fingerprints over it item by item, as it would over a list; it equals a list of the
    same rows, and a copy of it (`copy.deepcopy`, pickle) is that list."""

    def __init__(self, file: Any, places: list[tuple[int, int]]) -> None:
        import weakref

        self._file = file  # kept open: the unnamed file lives as long as this sequence
        self._places = places
        weakref.finalize(self, file.close)

    def __len__(self) -> int:
        return len(self._places)

    def _read(self, index: int) -> dict[str, Any]:
        offset, size = self._places[index]
        return orjson.loads(os.pread(self._file.fileno(), size, offset))

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row index out of range")
        return self._read(index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(len(self._places)):
            yield self._read(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied or pickled, it becomes the list of its rows (its file stays here)."""
        return (list, (list(self),))

    def __repr__(self) -> str:
        return f"SpooledRows({len(self)} rows)"


#: where the query rows' list starts in a canonical runs.json (`artifacts.dumps`: 2-space
#: indent, sorted keys), and how its items and its end look there
_ROWS_START = b'    "queries": [\n'
_ROW_START = b"      {\n"
_ROW_ENDS = (b"      }\n", b"      },\n")
_ROWS_ENDS = (b"    ]\n", b"    ],\n")


def lazy_rows_envelope(path: Path) -> dict[str, Any] | None:
    """A canonical runs.json read without its rows in memory: the envelope with
    `data.queries` a `SpooledRows` over the rows' places in the file (found by their lines:
    canonical JSON has no newline inside a string), or None when the file is not laid out
    so (the caller then reads it whole). The fingerprint is not checked here."""
    handle = open(path, "rb")  # noqa: SIM115 - kept open by the rows when it succeeds
    try:
        env = _scan_rows(handle)
    except BaseException:
        handle.close()
        raise
    if env is None:
        handle.close()
    return env


def _scan_rows(handle: Any) -> dict[str, Any] | None:
    head, places = bytearray(), []
    offset, start, in_list = 0, None, False
    for line in handle:
        if not in_list:
            in_list = line == _ROWS_START
            head += line[:-2] if in_list else line  # up to `"queries": `
        elif start is None:
            if line == _ROW_START:
                start = offset
            elif line in _ROWS_ENDS:
                try:
                    env = orjson.loads(bytes(head) + b"[]" + line[5:] + handle.read())
                except orjson.JSONDecodeError:
                    return None
                if not isinstance(env, dict) or not isinstance(env.get("data"), dict):
                    return None
                if env["data"].get("queries") != []:
                    return None
                env["data"]["queries"] = SpooledRows(handle, places)
                return env
            else:
                return None  # not the canonical layout
        elif line in _ROW_ENDS:
            places.append((start, offset + 7 - start))  # to the row's closing brace
            start = None
        offset += len(line)
    return None
