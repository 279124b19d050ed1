"""The scope spool: every validated scope as one line of plain JSON, written once by validate.

``scopes.jsonl`` lies beside suite.json. suite.json records the file's sha256 and size and,
for each scope (``data.scopes[i].spool``), where its line starts, how many bytes it has and
their sha256. Later stages read it in one of two ways, and neither parses the data file again:

* `stream_scopes`: every scope in order, checked against the whole file's sha256 (prep and
  hydrate, which look at every text in the parent);
* `scope_refs` + `read_scope`: the parent hands each task only where its scope lies (a few
  numbers); the worker reads that one line and checks its sha256 (query, and the round
  trip's sampled scopes). The parent never decodes the texts it does not need.

The lines are contiguous and cover the file, so the per-line digests and the file's size
check every byte a stage reads. A missing, damaged or foreign spool is refused with the
command that makes it again.

`RowSpool` is the other spool: the query stage's rows, written to an unnamed temp file in
the build directory as they come back and read back one at a time (`SpooledRows`), so the
parent's memory does not grow with queries x top-k.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.errors import ArtifactError

SPOOL = "scopes.jsonl"
RERUN = "run `recallbench validate` again"


class SpoolWriter:
    """Scopes as JSON lines in a temp file beside the spool's final path (checked first:
    never a symlink or hard link, its directories real, see `artifacts.create_temp`)."""

    def __init__(self, final: Path) -> None:
        from recallbench.artifacts import create_temp

        self.final = Path(final)
        fd, tmp = create_temp(self.final)
        self.tmp = Path(tmp)
        self._file = os.fdopen(fd, "wb")
        self._digest = hashlib.sha256()
        self._offset = 0

    def add(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Append one scope (plain data); where its line lies: offset, bytes, sha256."""
        line = orjson.dumps(item) + b"\n"
        self._file.write(line)
        self._digest.update(line)
        place = {
            "offset": self._offset,
            "bytes": len(line),
            "sha256": hashlib.sha256(line).hexdigest(),
        }
        self._offset += len(line)
        return place

    def close(self) -> dict[str, Any]:
        """Finish the file; what suite.json records of it: file name, sha256, bytes."""
        self._file.close()
        return {"file": SPOOL, "sha256": self._digest.hexdigest(), "bytes": self._offset}

    def abort(self) -> None:
        self._file.close()
        self.tmp.unlink(missing_ok=True)


def spool_path(suite_env: Mapping[str, Any]) -> Path:
    """The spool's path: `spool_path` beside the envelope (set where suite.json is read)."""
    return Path(suite_env.get("spool_path") or "")


def checked_spool(suite_env: Mapping[str, Any]) -> Path:
    """The spool's path, once it is known to be this format's and of the recorded size."""
    path = spool_path(suite_env)
    _check_format(suite_env, path)
    _check_present(path, suite_env["data"]["spool"]["bytes"])
    return path


def _check_format(suite_env: Mapping[str, Any], path: Path) -> None:
    """Refuse a suite.json whose spool is not this format (an older recallbench's gzip'd
    spool without per-scope places) before any of it is read."""
    data = suite_env["data"]
    if data["spool"].get("file") != SPOOL or any("spool" not in s for s in data["scopes"]):
        raise ArtifactError(
            f"{path}: suite.json was made by another recallbench version (its scope spool "
            f"is not {SPOOL} with each scope's place); {RERUN}"
        )


def _check_present(path: Path, size: int) -> None:
    try:
        actual = path.stat().st_size if path.is_file() else None
    except OSError:
        actual = None
    if actual is None:
        raise ArtifactError(f"{path}: the scope spool validate wrote is missing; {RERUN}")
    if actual != size:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")


def stream_scopes(suite_env: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, scope as plain data) for every scope, in order, read from the spool.

    The file's sha256 must be the one suite.json records (checked as it is read; an
    ArtifactError at the end otherwise), so a stage sees exactly the validated scopes.
    """
    spool = suite_env["data"]["spool"]
    path = checked_spool(suite_env)
    digest = hashlib.sha256()
    index = 0
    with open(path, "rb", buffering=1 << 20) as lines:
        for line in lines:
            digest.update(line)
            try:
                scope = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ArtifactError(f"{path}: damaged scope spool ({exc}); {RERUN}") from None
            yield index, scope
            index += 1
    if digest.hexdigest() != spool["sha256"] or index != suite_env["data"]["counts"]["scopes"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")


def scope_refs(suite_env: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, where scope `index` lies in the spool) for every scope, in order: what a
    task needs to read its scope itself (`read_scope`). Checks the spool is there first."""
    where = str(checked_spool(suite_env).resolve())
    for index, entry in enumerate(suite_env["data"]["scopes"]):
        yield index, {"path": where, "scope_id": entry["scope_id"], **entry["spool"]}


def read_scope(ref: Mapping[str, Any]) -> dict[str, Any]:
    """One scope as plain data, read from its line of the spool and checked (sha256, id)."""
    path = ref["path"]
    try:
        with open(path, "rb", buffering=0) as handle:
            handle.seek(ref["offset"])
            line = handle.read(ref["bytes"])
    except FileNotFoundError:
        raise ArtifactError(f"{path}: the scope spool validate wrote is missing; {RERUN}") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read the scope spool ({exc.strerror})") from None
    if len(line) != ref["bytes"] or hashlib.sha256(line).hexdigest() != ref["sha256"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")
    scope = orjson.loads(line)
    if scope.get("scope_id") != ref["scope_id"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")
    return scope


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
    (iterating holds one row at a time). `recallbench.artifacts` writes it and computes
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
