"""Streaming a dataset file that is one JSON array of records, for every reader.

`JsonArrayFile.stream()` parses one record at a time with ijson (its C backend when
present) while the same bytes are hashed (sha256) and counted for a progress bar, so a
2.7 GB file never loads whole and its digest describes exactly what was parsed. An object
that repeats a key is refused (only validate reads a data file; later stages read the
spool it writes). A Ctrl-C is held until the parser is between two records. Every error is
one line naming the file and the record.

A lone surrogate escape (`\ud800` without its low half, or `\udc00` alone) is not text:
the C parser would turn a lone high one into `?` (in ids and texts, unseen by every later
check) and report a lone low one as invalid JSON at position 0. The raw bytes are checked
as they are read (`_SurrogateScan`); when one is found, the file is parsed again with
ijson's Python backend, which keeps it, to name the record and the field.

Nesting is limited to `MAX_DEPTH` (64) arrays and objects, the top-level array counted:
ijson's parsers keep a path per open level, so memory grows with the square of the depth
(a 217 KB file nested 100,000 deep took 22 GB). The raw bytes are scanned for depth
before the parser sees them (`_DepthScan`: escapes and strings skipped, the rest counted
with numpy), so a deeper file is refused in one line naming the record, in memory
independent of its depth.

`read_object(...)` reads one JSON object (a file, or a member of an archive) with the same
checks as a record of the array's stream (LoCoMo's per-conversation layout uses it).

`generated_sidecar(path, sha256)` reads the sidecar a recallbench generator writes next to
a synthetic file (``<file>.generated.json``), when it describes these very bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import numpy as np
import orjson

from recallbench.core.errors import RecallbenchError
from recallbench.core.strictjson import StrictObject, interrupts_between

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
    a parser's own dict or list type (`strictjson.StrictObject`) is still an object."""
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


#: a \uXXXX escape of a UTF-16 surrogate (high D800-DBFF, low DC00-DFFF)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ESCAPE_LENGTH = 6


class _SurrogateScan:
    """Finds a lone surrogate escape in a JSON text fed chunk by chunk (`found`)."""

    #: bytes of one chunk kept for the next: a pair or a run of backslashes split across
    TAIL = 64

    def __init__(self) -> None:
        self._tail = b""
        self.found = False

    def feed(self, chunk: bytes, final: bool = False) -> None:
        if self.found:
            return
        if b"\\u" not in chunk and b"\\u" not in self._tail + chunk[:2] and not final:
            self._tail = chunk[-self.TAIL :]  # most chunks: no escape at all, no copy
            return
        buf = self._tail + chunk
        if b"\\u" in buf:
            # an escape this close to the end is judged with the next chunk
            limit = len(buf) if final else len(buf) - 2 * _ESCAPE_LENGTH
            for match in _SURROGATE_ESCAPE.finditer(buf):
                start = match.start()
                if start >= limit:
                    break
                if _escaped(buf, start) and _lone(buf, start):
                    self.found = True
                    return
        self._tail = buf[-self.TAIL :]


def _escaped(buf: bytes, start: int) -> bool:
    """The backslash at `start` begins an escape (an even run of backslashes before it)."""
    run = 0
    while start - run - 1 >= 0 and buf[start - run - 1] == 0x5C:
        run += 1
    return run % 2 == 0


def _lone(buf: bytes, start: int) -> bool:
    """The surrogate escape at `start` is not half of a high-low pair."""
    high = buf[start + 3] in b"89abAB"  # \\uD8.. - \\uDB..; a low one is \\uDC.. - \\uDF..
    if high:
        after = _SURROGATE_ESCAPE.match(buf, start + _ESCAPE_LENGTH)
        return after is None or buf[start + _ESCAPE_LENGTH + 3] not in b"cdefCDEF"
    before = start - _ESCAPE_LENGTH
    if before >= 0 and _SURROGATE_ESCAPE.match(buf, before) and _escaped(buf, before):
        return buf[before + 3] not in b"89abAB"
    return True


def _surrogate_field(value: Any, where: str = "") -> str | None:
    """The path (`a.b[2].c`) of the first string in `value` holding a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "(the record)"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if _surrogate_field(key) is not None:
                return f"{where}.{key!r}" if where else f"a key {key!r}"
            found = _surrogate_field(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _surrogate_field(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


#: the deepest nesting of arrays and objects a streamed file may have, its top-level array
#: counted (a LongMemEval record's turns are at depth 5, LoCoMo's at most 6)
MAX_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
#: every byte but the ones that matter for depth: quotes, brackets, braces and commas
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{},')))
#: an opening bracket or brace counts +1, a closing one -1 (as int8), a comma 0
_STEPS = bytes.maketrans(b"[{]},", b"\x01\x01\xff\xff\x00")


class NestedTooDeep(Exception):
    """Raised from a read when the bytes about to be parsed nest deeper than MAX_DEPTH."""

    def __init__(self, record: int) -> None:
        super().__init__(record)
        self.record = record


class _DepthScan:
    """The nesting depth of a JSON text fed chunk by chunk, outside strings: `feed` raises
    NestedTooDeep (with the index of the top-level array's item it is in) beyond
    MAX_DEPTH. State between chunks: the depth, a pending backslash, whether a string is
    open, and how many items of the top-level array have begun."""

    def __init__(self) -> None:
        self._depth = 0
        self._escape = b""
        self._in_string = False
        self._records = 0  # commas at depth 1 so far: the index of the current record

    def feed(self, chunk: bytes) -> None:
        buf = self._escape + chunk
        if b"\\" in buf:
            buf = _ESCAPE.sub(b"", buf)  # an escape pair never opens or closes anything
        self._escape = b"\\" if buf.endswith(b"\\") else b""  # its pair is in the next chunk
        kept = buf.translate(None, _NOT_STRUCTURE)
        if self._in_string:
            kept = b'"' + kept
        kept = _STRING.sub(b"", kept)
        open_quote = kept.find(b'"')
        self._in_string = open_quote >= 0
        if self._in_string:
            kept = kept[:open_quote]
        if not kept:
            return
        steps = np.frombuffer(kept.translate(_STEPS), dtype=np.int8)
        depths = self._depth + np.cumsum(steps, dtype=np.int64)
        at_top = (steps == 0) & (depths == 1)
        deepest = int(depths.max())
        if deepest > MAX_DEPTH:
            first = int(np.argmax(depths > MAX_DEPTH))
            raise NestedTooDeep(self._records + int(np.count_nonzero(at_top[:first])))
        self._records += int(np.count_nonzero(at_top))
        self._depth = int(depths[-1])


class _HashingReader:
    """A binary file wrapper that hashes (and reports) every byte the parser reads, and
    scans it for lone surrogate escapes."""

    def __init__(self, handle: BinaryIO, progress: Progress | None) -> None:
        self._handle = handle
        self._progress = progress
        self.digest = hashlib.sha256()
        self.size = 0
        self.surrogates = _SurrogateScan()
        self.depth = _DepthScan()

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        if chunk:
            self.depth.feed(chunk)  # before the parser sees these bytes
            self.digest.update(chunk)
            self.size += len(chunk)
            self.surrogates.feed(chunk)
            if self._progress is not None:
                self._progress(len(chunk))
        else:
            self.surrogates.feed(b"", final=True)
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

    def _lone_surrogate(self) -> RecallbenchError:
        """The record and field holding the lone surrogate the raw scan found (parsed
        again with ijson's Python backend, which keeps lone surrogates)."""
        index = -1
        try:
            with open(self.path, "rb") as handle:
                for index, raw in enumerate(_python_items(handle)):  # noqa: B007
                    field = _surrogate_field(raw)
                    if field is not None:
                        return self.fail(
                            index,
                            raw,
                            f"field '{field}' holds a lone UTF-16 surrogate escape "
                            "(\\ud800-\\udfff without its pair), which is not text",
                        )
        except (ijson.JSONError, UnicodeDecodeError, ValueError):
            pass
        where = f"after record[{index}]" if index >= 0 else "before the first record"
        return RecallbenchError(
            f"{self.path}: a lone UTF-16 surrogate escape {where}, outside any field; "
            "it is not text"
        )

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
                    if reader.surrogates.found:
                        raise self._lone_surrogate()
                    repeated = StrictObject.take_repeated()
                    if repeated is not None:
                        raise self.fail(index, raw, f"an object repeats the key {repeated!r}")
                    yield index, raw
            except NestedTooDeep as deep:
                raise record_error(
                    self.path,
                    deep.record,
                    self.id_field,
                    None,
                    f"arrays and objects nested deeper than {MAX_DEPTH} levels (the "
                    "top-level array counted); a record of this format is at most "
                    "a few levels deep",
                ) from None
            except (ijson.JSONError, UnicodeDecodeError) as exc:
                reader.surrogates.feed(b"", final=True)  # the bytes read so far, all judged
                if reader.surrogates.found:
                    raise self._lone_surrogate() from None
                where = f"after record[{index}]" if index >= 0 else "before the first record"
                reason = _invalid_json(exc)
                raise RecallbenchError(f"{self.path}: invalid JSON {where}: {reason}") from None
            reader.drain()
            if reader.surrogates.found:
                raise self._lone_surrogate()
        if index < 0:
            raise RecallbenchError(f"{self.path}: the array holds no records")
        self.records = index + 1
        self.size = reader.size
        self.sha256 = reader.digest.hexdigest()


def _python_items(handle: BinaryIO, prefix: str = "item") -> Iterator[Any]:
    import ijson.backends.python as python_backend

    return python_backend.items(handle, prefix, use_float=True)


def _invalid_json(exc: Exception) -> str:
    """A parser's error as one line (yajl adds a caret on further lines)."""
    return (str(exc).strip().splitlines() or ["unreadable"])[0]


def read_object(
    opener: Callable[[], BinaryIO], label: str, what: str, progress: Progress | None = None
) -> tuple[dict[str, Any], str, int]:
    """One JSON document that must be an object (a whole file, an archive member: `opener`
    opens it as a binary stream, again when a lone surrogate must be located), parsed with
    `JsonArrayFile.stream`'s checks: repeated keys, lone surrogate escapes, nesting deeper
    than MAX_DEPTH, a Ctrl-C held until the parse is done. Returns (the object, the sha256
    of its bytes, their count); every error is one line starting with `label`, e.g.
    ``locomo10_v2/26.json: invalid JSON: ...``. `what` names the object ("a conversation")."""
    StrictObject.take_repeated()  # forget what an earlier, failed parse left
    with opener() as handle:
        reader = _HashingReader(handle, progress)
        parser = _ijson_backend.items(
            reader, "", use_float=True, buf_size=READ_CHUNK, map_type=StrictObject
        )
        try:
            found = list(interrupts_between(parser))
            reader.drain()
        except NestedTooDeep:
            raise RecallbenchError(
                f"{label}: arrays and objects nested deeper than {MAX_DEPTH} levels"
            ) from None
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            reader.surrogates.feed(b"", final=True)
            if not reader.surrogates.found:
                raise RecallbenchError(f"{label}: invalid JSON: {_invalid_json(exc)}") from None
    if reader.surrogates.found:
        field = None
        try:
            with opener() as again:
                field = next((_surrogate_field(v) for v in _python_items(again, "")), None)
        except (ijson.JSONError, UnicodeDecodeError, ValueError):
            pass
        where = f"field '{field}'" if field else "a string"
        raise RecallbenchError(
            f"{label}: {where} holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without "
            "its pair), which is not text"
        )
    repeated = StrictObject.take_repeated()
    if repeated is not None:
        raise RecallbenchError(f"{label}: an object repeats the key {repeated!r}")
    if not found or not isinstance(found[0], dict):
        kind = type_name(found[0]) if found else "nothing"
        raise RecallbenchError(f"{label}: expected one JSON object ({what}), found {kind}")
    return found[0], reader.digest.hexdigest(), reader.size


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
