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

The structure spool: where the dataset has structure (LongMemEval, LoCoMo: each memory's
turns and session date, each query's date; `model.Scope.structure`), validate writes it
to a file of its own beside the scope spool, ``scopes-structure.jsonl``: one line per scope
that has structure, in scope order, ``{"scope_id", "memories": [...], "queries": [...]}``
with one object per memory and per query, by position (``{"turns": [...], "date": ...}``,
``{"date": ...}``, or ``{}``). suite.json records it the same way (``data.structure_spool``:
file, sha256, bytes; ``data.scopes[i].structure``: the scope's line) and has neither key
when the dataset has no structure (then the file is not written). Only a system that asks
for structured records reads it (`structured=True` to both readers): its scopes come back
with the structure in place, as if it were part of the scope's line. Every other system
never opens the file, so structure costs it nothing past validate. A missing or damaged
structure spool is refused, for a structured system, like the scope spool.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from recallbench.core.errors import ArtifactError

SPOOL = "scopes.jsonl"
#: the structure spool's name, beside `SPOOL` (written only when the dataset has structure)
STRUCTURE_SPOOL = "scopes-structure.jsonl"
RERUN = "run `recallbench validate` again"
#: what the messages call the structure spool
STRUCTURE = "structure spool"


class SpoolWriter:
    """Scopes as JSON lines in a temp file beside the spool's final path (checked first:
    never a symlink or hard link, its directories real, see `artifacts.create_temp`)."""

    def __init__(self, final: Path) -> None:
        from recallbench.builddir.artifacts import create_temp

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
        return {"file": self.final.name, "sha256": self._digest.hexdigest(), "bytes": self._offset}

    def abort(self) -> None:
        self._file.close()
        self.tmp.unlink(missing_ok=True)


class ValidateSpools:
    """The files validate writes beside suite.json: the scope spool, and the structure
    spool, begun at the first scope that has structure (`model.Scope.structure`)."""

    def __init__(self, spool: Path) -> None:
        self.scopes = SpoolWriter(spool)
        self.structure: SpoolWriter | None = None

    def add(self, scope: Any) -> dict[str, Any]:
        """Append one `model.Scope`; its places for suite.json's scope index: ``spool``, and
        ``structure`` when it has structure."""
        places = {"spool": self.scopes.add(scope.to_dict())}
        if scope.structure is not None:
            if self.structure is None:
                self.structure = SpoolWriter(self.scopes.final.with_name(STRUCTURE_SPOOL))
            places["structure"] = self.structure.add(
                {"scope_id": scope.scope_id, **scope.structure}
            )
        return places

    def close(self) -> dict[str, Any]:
        """Finish both files; suite.json's ``spool`` and, when written, ``structure_spool``."""
        out = {"spool": self.scopes.close()}
        if self.structure is not None:
            out["structure_spool"] = self.structure.close()
        return out

    def temps(self) -> dict[str, str]:
        """Where the temp files are (`stages.validate.place_spool` moves them into place)."""
        out = {"spool_tmp": str(self.scopes.tmp)}
        if self.structure is not None:
            out["structure_tmp"] = str(self.structure.tmp)
        return out

    def abort(self) -> None:
        self.scopes.abort()
        if self.structure is not None:
            self.structure.abort()


def spool_path(suite_env: Mapping[str, Any]) -> Path:
    """The spool's path: `spool_path` beside the envelope (set where suite.json is read)."""
    return Path(suite_env.get("spool_path") or "")


def structure_path(suite_env: Mapping[str, Any]) -> Path:
    """The structure spool's path: beside the scope spool."""
    return spool_path(suite_env).with_name(STRUCTURE_SPOOL)


def checked_spool(suite_env: Mapping[str, Any]) -> Path:
    """The spool's path, once it is known to be this format's and of the recorded size."""
    path = spool_path(suite_env)
    _check_format(suite_env, path)
    _check_present(path, suite_env["data"]["spool"]["bytes"])
    return path


def checked_structure(suite_env: Mapping[str, Any]) -> Path | None:
    """The structure spool's path, once it is known to be of the recorded size; None when
    the suite has no structure (the dataset has none)."""
    recorded = suite_env["data"].get("structure_spool")
    if recorded is None:
        return None
    path = structure_path(suite_env)
    if recorded.get("file") != STRUCTURE_SPOOL:
        raise ArtifactError(
            f"{path}: suite.json was made by another recallbench version (its structure "
            f"spool is not {STRUCTURE_SPOOL}); {RERUN}"
        )
    _check_present(path, recorded["bytes"], STRUCTURE)
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


def _check_present(path: Path, size: int, what: str = "scope spool") -> None:
    try:
        actual = path.stat().st_size if path.is_file() else None
    except OSError:
        actual = None
    if actual is None:
        raise ArtifactError(f"{path}: the {what} validate wrote is missing; {RERUN}")
    if actual != size:
        raise ArtifactError(f"{path}: not the {what} suite.json describes; {RERUN}")


def add_structure(scope: dict[str, Any], structure: Mapping[str, Any], path: Path | str) -> None:
    """Put a scope's structure (its line of the structure spool, plain data) into the
    scope's plain data: each memory's ``turns`` and ``date``, each query's ``date``, by
    position. A line that is not this scope's is refused."""
    memories, queries = scope["memories"], scope["queries"]
    if (
        structure.get("scope_id") != scope["scope_id"]
        or len(structure.get("memories", ())) != len(memories)
        or len(structure.get("queries", ())) != len(queries)
    ):
        raise ArtifactError(f"{path}: not the {STRUCTURE} suite.json describes; {RERUN}")
    for memory, extra in zip(memories, structure["memories"], strict=True):
        memory.update(extra)
    for query, extra in zip(queries, structure["queries"], strict=True):
        query.update(extra)


def stream_scopes(
    suite_env: Mapping[str, Any], structured: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, scope as plain data) for every scope, in order, read from the spool.

    The file's sha256 must be the one suite.json records (checked as it is read; an
    ArtifactError at the end otherwise), so a stage sees exactly the validated scopes.
    `structured`: each scope with its structure (`add_structure`), read from the structure
    spool and checked the same way; otherwise that file is never opened.
    """
    data = suite_env["data"]
    path = checked_spool(suite_env)
    side = checked_structure(suite_env) if structured else None
    digest = hashlib.sha256()
    index = 0
    with contextlib.ExitStack() as files:
        lines = files.enter_context(open(path, "rb", buffering=1 << 20))
        extra = None
        if side is not None:
            handle = files.enter_context(open(side, "rb", buffering=1 << 20))
            extra = _SideReader(side, handle, data["structure_spool"]["sha256"])
        for line in lines:
            digest.update(line)
            scope = _loads(line, path)
            if extra is not None and index < len(data["scopes"]):
                extra.add(scope, data["scopes"][index].get("structure"))
            yield index, scope
            index += 1
        if extra is not None:
            extra.finish()
    if digest.hexdigest() != data["spool"]["sha256"] or index != data["counts"]["scopes"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")


class _SideReader:
    """The structure spool read in step with the scope spool (`stream_scopes`): each
    scope's line where the index has one, the whole file checked against its sha256."""

    def __init__(self, path: Path, handle: BinaryIO, sha256: str) -> None:
        self.path, self.handle, self.sha256 = path, handle, sha256
        self.digest = hashlib.sha256()

    def add(self, scope: dict[str, Any], place: Mapping[str, Any] | None) -> None:
        """Put the next line's structure into `scope` when the index has one for it."""
        if place is None:
            return
        line = self.handle.read(place["bytes"])
        self.digest.update(line)
        if len(line) != place["bytes"]:
            raise ArtifactError(f"{self.path}: not the {STRUCTURE} suite.json describes; {RERUN}")
        add_structure(scope, _loads(line, self.path, STRUCTURE), self.path)

    def finish(self) -> None:
        """Refuse a file with more bytes, or other bytes, than suite.json records."""
        if self.handle.read(1) or self.digest.hexdigest() != self.sha256:
            raise ArtifactError(f"{self.path}: not the {STRUCTURE} suite.json describes; {RERUN}")


def _loads(line: bytes, path: Path | str, what: str = "scope spool") -> dict[str, Any]:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: damaged {what} ({exc}); {RERUN}") from None


def scope_refs(
    suite_env: Mapping[str, Any], structured: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, where scope `index` lies in the spool) for every scope, in order: what a
    task needs to read its scope itself (`read_scope`). Checks the spool is there first.
    `structured`: each ref also says where the scope's structure lies (``structure``, for
    a scope that has some), and the structure spool is checked too."""
    data = suite_env["data"]
    where = str(checked_spool(suite_env).resolve())
    side = checked_structure(suite_env) if structured else None
    side_where = str(side.resolve()) if side is not None else None
    for index, entry in enumerate(data["scopes"]):
        ref = {"path": where, "scope_id": entry["scope_id"], **entry["spool"]}
        if side_where is not None and "structure" in entry:
            ref["structure"] = {"path": side_where, **entry["structure"]}
        yield index, ref


def read_scope(ref: Mapping[str, Any]) -> dict[str, Any]:
    """One scope as plain data, read from its line of the spool and checked (sha256, id);
    with its structure when `ref` says where it lies (`scope_refs(structured=True)`)."""
    path = ref["path"]
    scope = _loads(_read_line(ref, "scope spool"), path)
    if scope.get("scope_id") != ref["scope_id"]:
        raise ArtifactError(f"{path}: not the scope spool suite.json describes; {RERUN}")
    side = ref.get("structure")
    if side is not None:
        add_structure(
            scope, _loads(_read_line(side, STRUCTURE), side["path"], STRUCTURE), side["path"]
        )
    return scope


def _read_line(place: Mapping[str, Any], what: str) -> bytes:
    """The bytes at `place` (path, offset, bytes) of a spool, checked against its sha256."""
    path = place["path"]
    try:
        with open(path, "rb", buffering=0) as handle:
            handle.seek(place["offset"])
            line = handle.read(place["bytes"])
    except FileNotFoundError:
        raise ArtifactError(f"{path}: the {what} validate wrote is missing; {RERUN}") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    if len(line) != place["bytes"] or hashlib.sha256(line).hexdigest() != place["sha256"]:
        raise ArtifactError(f"{path}: not the {what} suite.json describes; {RERUN}")
    return line
