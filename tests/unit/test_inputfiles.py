"""Safe input reading (`recallbench.core.inputfiles`): bytes and their digest, FIFOs and special files
refused without blocking, the size limit and its environment override."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
from pathlib import Path

import pytest

from recallbench.core import inputfiles
from recallbench.core.errors import RecallbenchError
from recallbench.core.inputfiles import (
    DEFAULT_DATA_LIMIT,
    DEFAULT_INPUT_LIMIT,
    LIMIT_ENV,
    check_regular_file,
    input_limit,
    read_input,
)


def test_read_input_returns_bytes_and_their_digest(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    data = b'{"id": "d1"}\n' * 1000
    path.write_bytes(data)
    assert check_regular_file(path, "corpus", 1 << 20) == len(data)
    raw, digest = read_input(path, "corpus", 1 << 20)
    assert raw == data
    assert digest == hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_input(empty, "queries", 10) == (b"", hashlib.sha256(b"").hexdigest())
    link = tmp_path / "link"
    link.symlink_to(path)
    assert read_input(link, "corpus", 1 << 20)[0] == data  # symlinks are followed


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "queries.fifo"
    os.mkfifo(fifo)
    for call in (check_regular_file, read_input):
        with pytest.raises(RecallbenchError) as err:
            call(fifo, "queries", 1000)
        assert str(err.value) == f"queries {fifo} is a FIFO; give a regular file"


def test_special_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        RecallbenchError, match=r"^corpus /dev/zero is a character device; give a regular file$"
    ):
        read_input(Path("/dev/zero"), "corpus", 1000)
    with pytest.raises(RecallbenchError, match="is a directory; give a regular file"):
        read_input(tmp_path, "corpus", 1000)
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(
        RecallbenchError, match=f"^corpus {re.escape(str(missing))} does not exist$"
    ):
        check_regular_file(missing, "corpus", 1000)
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(RecallbenchError, match="is a socket; give a regular file"):
            read_input(sock_path, "corpus", 1000)


def test_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 11)
    assert check_regular_file(path, "baseline", 11) == 11
    with pytest.raises(RecallbenchError) as err:
        read_input(path, "baseline", 10)
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message and "(10 bytes)" in message and LIMIT_ENV in message


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_file_growing_past_limit_while_read_is_refused() -> None:
    # /proc files are regular files that stat as 0 bytes but yield more when read: exactly a
    # file that grows between the size check and the read
    proc_file = Path("/proc/self/status")
    assert check_regular_file(proc_file, "status", 10) == 0
    with pytest.raises(RecallbenchError, match="grew past the limit while being read"):
        read_input(proc_file, "status", 10)


def test_os_error_while_reading_names_path_and_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"{}\n")

    def failing_read(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(inputfiles.os, "read", failing_read)
    with pytest.raises(
        RecallbenchError, match=f"^cannot read corpus {re.escape(str(path))}: Input/output error$"
    ):
        read_input(path, "corpus", 1000)


def test_input_limits_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert input_limit("input") == DEFAULT_INPUT_LIMIT == 256 * 1024**2
    assert input_limit("data") == DEFAULT_DATA_LIMIT == 16 * 1024**3
    monkeypatch.setenv(LIMIT_ENV, "1024")
    assert input_limit("input") == input_limit("data") == 1024
    for text, value in [
        ("1G", 1024**3),
        ("40g", 40 * 1024**3),
        ("512MiB", 512 * 1024**2),
        (" 3K ", 3072),
    ]:
        monkeypatch.setenv(LIMIT_ENV, text)
        assert input_limit("input") == value
    monkeypatch.setenv(LIMIT_ENV, "")
    assert input_limit("data") == DEFAULT_DATA_LIMIT
    for bad in ["abc", "0", "-5", "1.5G", "12X"]:
        monkeypatch.setenv(LIMIT_ENV, bad)
        with pytest.raises(RecallbenchError, match=LIMIT_ENV):
            input_limit("input")
    with pytest.raises(ValueError):
        input_limit("other")  # type: ignore[arg-type]
