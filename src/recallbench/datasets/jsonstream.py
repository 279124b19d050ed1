"""Streaming a dataset file that is one JSON array of records, for every reader.

`JsonArrayFile.stream()` parses one record at a time with ijson (its C backend when
present) while the same bytes are hashed (sha256) and counted for a progress bar, so a
2.7 GB file never loads whole and its digest describes exactly what was parsed. An object
that repeats a key is refused (only validate reads a data file; later stages read the
spool it writes). A Ctrl-C is held until the parser is between two records. Every error is
one line naming the file and the record.

`generated_sidecar(path, sha256)` reads the sidecar a recallbench generator writes next to
a synthetic file (``<file>.generated.json``), when it describes these very bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import orjson

from recallbench.errors import RecallbenchError
from recallbench.jsonstrict import StrictObject, interrupts_between

try:  # the C backend is ~10x faster; fall back to whatever ijson picked
    import ijson.backends.yajl2_c as _ijson_backend
except ImportError:  # pragma: no cover - depends on the platform's wheel
    _ijson_backend = ijson

GENERATED_SIDECAR_SUFFIX = ".generated.json"
READ_CHUNK = 1 << 20

Progress = Callable[[int], Any]


def record_error(
    path: Path, index: int, id_field: str, ident: Any, message: str
) -> RecallbenchError:
    """`FILE: record[i] (ID_FIELD 'x'): message` as a one-line error."""
    who = f" ({id_field} {ident!r})" if isinstance(ident, str) else ""
    return RecallbenchError(f"{path}: record[{index}]{who}: {message}")


def type_name(value: Any) -> str:
    """A JSON value's type in words, for messages ("a string", "an object", "null", ...);
    a parser's own dict or list type (`jsonstrict.StrictObject`) is still an object."""
    if value is None:
        return "null"
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


#: in this order: a bool is also an int
_TYPE_NAMES = (
    (bool, "a boolean"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
    (int, "an integer"),
    (float, "a number"),
)


class _HashingReader:
    """A binary file wrapper that hashes (and reports) every byte the parser reads."""

    def __init__(self, handle: BinaryIO, progress: Progress | None) -> None:
        self._handle = handle
        self._progress = progress
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        if chunk:
            self.digest.update(chunk)
            self.size += len(chunk)
            if self._progress is not None:
                self._progress(len(chunk))
        return chunk

    def drain(self) -> None:
        """Hash whatever the parser did not need to read (trailing whitespace)."""
        while self.read(READ_CHUNK):
            pass


def _first_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]


class JsonArrayFile:
    """One JSON array of records on disk; `sha256` and `size` are set once streamed."""

    def __init__(self, path: Path, *, what: str, id_field: str) -> None:
        self.path = Path(path)
        self.what = what  # e.g. "question objects", in messages
        self.id_field = id_field  # e.g. "question_id", to name a record in messages
        self.sha256: str | None = None
        self.size = 0
        self.records = 0

    def fail(self, index: int, raw: Any, message: str) -> RecallbenchError:
        ident = raw.get(self.id_field) if isinstance(raw, dict) else None
        return record_error(self.path, index, self.id_field, ident, message)

    def stream(self, progress: Progress | None = None) -> Iterator[tuple[int, Any]]:
        """(index, raw record) in file order; one-line errors for bad JSON and for an object
        that repeats a key."""
        first = _first_byte(self.path)
        if first != b"[":
            found = "an empty file" if not first else repr(first.decode(errors="replace"))
            raise RecallbenchError(
                f"{self.path}: expected a JSON array of {self.what}, found {found}"
            )
        index = -1
        with open(self.path, "rb") as handle:
            reader = _HashingReader(handle, progress)
            parser = _ijson_backend.items(
                reader, "item", use_float=True, buf_size=READ_CHUNK, map_type=StrictObject
            )
            try:
                # a Ctrl-C must not land inside the C parser's callbacks
                for index, raw in enumerate(interrupts_between(parser)):  # noqa: B007
                    repeated = StrictObject.take_repeated()
                    if repeated is not None:
                        raise self.fail(index, raw, f"an object repeats the key {repeated!r}")
                    yield index, raw
            except (ijson.JSONError, UnicodeDecodeError) as exc:
                where = f"after record[{index}]" if index >= 0 else "before the first record"
                reason = (str(exc).strip().splitlines() or ["unreadable"])[0]  # yajl adds a caret
                raise RecallbenchError(f"{self.path}: invalid JSON {where}: {reason}") from None
            reader.drain()
        if index < 0:
            raise RecallbenchError(f"{self.path}: the array holds no records")
        self.records = index + 1
        self.size = reader.size
        self.sha256 = reader.digest.hexdigest()


def generated_sidecar(path: Path, sha256: str) -> dict[str, Any] | None:
    """The generator's sidecar next to `path` when it records these bytes' sha256."""
    sidecar = Path(str(path) + GENERATED_SIDECAR_SUFFIX)
    try:
        meta = orjson.loads(sidecar.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if isinstance(meta, dict) and meta.get("sha256") == sha256:
        return meta
    return None
