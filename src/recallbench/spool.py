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
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
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
