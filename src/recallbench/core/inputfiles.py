"""Reading user input files safely: regular files only, with a size limit.

Two default limits:

* ``DEFAULT_INPUT_LIMIT`` (256 MiB) for small inputs read whole into memory: the fixture
  corpus and queries, baselines, configuration;
* ``DEFAULT_DATA_LIMIT`` (16 GiB) for dataset files (LongMemEval and the like), usually
  streamed.

The environment variable ``RECALLBENCH_MAX_INPUT_BYTES`` replaces both limits when set: a
byte count, optionally with a binary suffix (``K``, ``M``, ``G``, ``T``, also written
``KiB`` ... or ``KB`` ...; all mean powers of 1024), e.g. ``RECALLBENCH_MAX_INPUT_BYTES=40G``.
It can raise or lower them. ``input_limit(kind)`` returns the effective limit.

Every refusal is a one-line RecallbenchError naming the file and the reason.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Literal

from recallbench.core.errors import RecallbenchError

MiB = 1024**2
GiB = 1024**3

#: limit for inputs read whole (fixture corpus/queries, baselines): 256 MiB
DEFAULT_INPUT_LIMIT = 256 * MiB
#: limit for dataset files: 16 GiB
DEFAULT_DATA_LIMIT = 16 * GiB
#: the environment variable that replaces both limits
LIMIT_ENV = "RECALLBENCH_MAX_INPUT_BYTES"

_DEFAULTS = {"input": DEFAULT_INPUT_LIMIT, "data": DEFAULT_DATA_LIMIT}
_UNITS = {"": 1, "K": 1024, "M": MiB, "G": GiB, "T": 1024**4}
_SIZE_RE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
_CHUNK = 64 * MiB


def input_limit(kind: Literal["input", "data"]) -> int:
    """The effective byte limit for `kind` ("input": small inputs, "data": dataset files).

    ``RECALLBENCH_MAX_INPUT_BYTES``, when set and non-empty, is the limit for both kinds;
    otherwise DEFAULT_INPUT_LIMIT / DEFAULT_DATA_LIMIT. An unparsable or zero value is a
    RecallbenchError. An unknown `kind` is a ValueError (a programming error).
    """
    if kind not in _DEFAULTS:
        raise ValueError(f"unknown input kind {kind!r}; expected 'input' or 'data'")
    raw = os.environ.get(LIMIT_ENV, "")
    if not raw.strip():
        return _DEFAULTS[kind]
    match = _SIZE_RE.fullmatch(raw)
    value = int(match.group(1)) * _UNITS[match.group(2).upper()] if match else 0
    if value <= 0:
        raise RecallbenchError(
            f"{LIMIT_ENV}={raw!r} is not a positive byte count; use e.g. 1073741824 or 1G"
        )
    return value


def human_bytes(n: int) -> str:
    """'512 B', '3.0 KiB', '256.0 MiB', '16.0 GiB'."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def _kind_of(mode: int) -> str | None:
    """Why a file of this mode cannot be read as input, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO"
    if stat.S_ISCHR(mode):
        return "is a character device"
    if stat.S_ISBLK(mode):
        return "is a block device"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    return "is not a regular file"


def _check_stat(st: os.stat_result, path: Path, what: str, limit_bytes: int) -> int:
    why = _kind_of(st.st_mode)
    if why is not None:
        raise RecallbenchError(f"{what} {path} {why}; give a regular file")
    if st.st_size > limit_bytes:
        raise RecallbenchError(_too_big(path, what, f"is {human_bytes(st.st_size)}", limit_bytes))
    return st.st_size


def _too_big(path: Path, what: str, size_text: str, limit_bytes: int) -> str:
    return (
        f"{what} {path} {size_text}, above the limit of {human_bytes(limit_bytes)} "
        f"({limit_bytes} bytes); to allow it set {LIMIT_ENV} (e.g. {LIMIT_ENV}=64G)"
    )


def _stat_error(exc: OSError, path: Path, what: str) -> RecallbenchError:
    if isinstance(exc, FileNotFoundError):
        return RecallbenchError(f"{what} {path} does not exist")
    if isinstance(exc, NotADirectoryError):
        return RecallbenchError(f"{what} {path} does not exist (a parent is not a directory)")
    return RecallbenchError(f"cannot read {what} {path}: {exc.strerror or exc}")


def check_regular_file(path: Path, what: str, limit_bytes: int) -> int:
    """Return the size of `path` if it is a regular file of at most `limit_bytes` bytes.

    `what` names the input in messages (e.g. "corpus"). Symlinks are followed. Otherwise
    raises a one-line RecallbenchError naming the path and the reason: does not exist,
    is a directory / FIFO / character device / block device / socket ("...; give a regular
    file"), or is larger than the limit (with the limit and how to raise it).
    Never opens the file, so a FIFO cannot block it.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _stat_error(exc, path, what) from None
    return _check_stat(st, path, what, limit_bytes)


def read_input(path: Path, what: str, limit_bytes: int) -> tuple[bytes, str]:
    """Read a regular file whole: return ``(data, sha256 hex of data)``.

    The same bytes are hashed and returned, so a digest recorded next to a parse of `data`
    always describes what was parsed. Refuses what check_regular_file refuses; the check is
    repeated on the opened descriptor (the path cannot be swapped for a FIFO in between),
    and a file that grows past `limit_bytes` while being read is refused too. Any OSError
    is a one-line RecallbenchError naming the path and the system's reason.
    """
    path = Path(path)
    check_regular_file(path, what, limit_bytes)
    flags = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _stat_error(exc, path, what) from None
    try:
        try:
            st = os.fstat(fd)
        except OSError as exc:
            raise _stat_error(exc, path, what) from None
        _check_stat(st, path, what, limit_bytes)
        os.set_blocking(fd, True)  # O_NONBLOCK only kept a FIFO from blocking the open
        chunks: list[bytes] = []
        total = 0
        while True:
            # at most limit + 1 bytes in all: one byte past the limit proves it grew
            want = min(max(st.st_size - total + 1, 64 * 1024), _CHUNK, limit_bytes + 1 - total)
            try:
                chunk = os.read(fd, want)
            except OSError as exc:
                raise RecallbenchError(
                    f"cannot read {what} {path}: {exc.strerror or exc}"
                ) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:
                raise RecallbenchError(
                    _too_big(path, what, "grew past the limit while being read", limit_bytes)
                )
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data, hashlib.sha256(data).hexdigest()
