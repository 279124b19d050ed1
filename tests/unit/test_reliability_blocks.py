"""The reliability building blocks: build lock, safe input reading, strict JSON, the id
grammar, build-directory checks, and the `make clean` guard."""

from __future__ import annotations

import calendar
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recallbench import buildpaths, inputs
from recallbench.buildpaths import check_build_dir, safe_child
from recallbench.errors import RecallbenchError
from recallbench.ids import MAX_ID_LENGTH, id_problem, md_cell, trec_safe
from recallbench.inputs import (
    DEFAULT_DATA_LIMIT,
    DEFAULT_INPUT_LIMIT,
    LIMIT_ENV,
    check_regular_file,
    input_limit,
    read_input,
)
from recallbench.jsonstrict import DuplicateKey, loads_object
from recallbench.lock import LOCK_NAME, build_lock

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

# --------------------------------------------------------------------------- lock

HOLDER = """
import sys
from pathlib import Path
from recallbench.lock import build_lock
with build_lock(Path(sys.argv[1]), "recallbench query"):
    print("locked", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills us)
"""

CONTENDER = """
import sys
from pathlib import Path
from recallbench.errors import RecallbenchError
from recallbench.lock import build_lock
try:
    with build_lock(Path(sys.argv[1]), "recallbench score"):
        print("acquired", flush=True)
except RecallbenchError as exc:
    print(exc, flush=True)
    sys.exit(exc.exit_code)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def start_holder(build: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(build)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "locked\n", line
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def contend(build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CONTENDER, str(build)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )


def test_second_process_is_refused_with_holder_pid(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = start_holder(build)
    try:
        refused = contend(build)
        assert refused.returncode == 1, refused
        message = refused.stdout.strip()
        assert "\n" not in message
        assert re.fullmatch(
            re.escape(f"{build} is in use by pid {holder.pid} (`recallbench query`, started ")
            + r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
            + re.escape("); wait for it to finish or use another --build-dir"),
            message,
        ), message
        # the same from inside this process
        with (
            pytest.raises(RecallbenchError, match=f"in use by pid {holder.pid} "),
            build_lock(build, "x"),
        ):
            pass
    finally:
        stop(holder)
    assert holder.returncode == 0
    assert contend(build).stdout == "acquired\n"


def test_lock_of_killed_holder_is_taken_over(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = start_holder(build)
    lock_file = build / LOCK_NAME
    assert json.loads(lock_file.read_text())["pid"] == holder.pid
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    # the dead holder's details are still in the file; the kernel dropped its flock
    assert json.loads(lock_file.read_text())["pid"] == holder.pid
    with build_lock(build, "recallbench report"):
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    stop(holder)


def test_lock_file_content(tmp_path: Path) -> None:
    build = tmp_path / "new" / "build"  # created on demand
    before = time.time()
    with build_lock(build, "recallbench query") as lock_file:
        assert lock_file == build / LOCK_NAME
        info = json.loads(lock_file.read_text())
        assert set(info) == {"pid", "command", "started"}
        assert info["pid"] == os.getpid()
        assert info["command"] == "recallbench query"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["started"])
        started = calendar.timegm(time.strptime(info["started"], "%Y-%m-%dT%H:%M:%SZ"))
        assert before - 2 <= started <= time.time() + 2
    assert lock_file.exists() and lock_file.read_text() == ""  # kept, emptied


def test_nested_use_in_one_process_does_not_deadlock(tmp_path: Path) -> None:
    build = tmp_path / "build"
    with build_lock(build, "outer"):
        with build_lock(build, "inner"), build_lock(Path(str(build) + "/"), "inner2"):
            pass
        # the outer lock is still held after the inner blocks end
        assert contend(build).returncode == 1
        assert json.loads((build / LOCK_NAME).read_text())["command"] == "outer"
    assert contend(build).stdout == "acquired\n"


def test_lock_released_on_exception(tmp_path: Path) -> None:
    build = tmp_path / "build"
    with pytest.raises(KeyError), build_lock(build, "x"):
        raise KeyError("boom")
    assert contend(build).stdout == "acquired\n"


def test_lock_filesystem_problems_are_user_errors(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with (
        pytest.raises(RecallbenchError, match="cannot create build directory"),
        build_lock(afile / "build", "x"),
    ):
        pass
    build = tmp_path / "build"
    build.mkdir()
    (build / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecallbenchError, match="is a symlink"), build_lock(build, "x"):
        pass
    assert not (tmp_path / "elsewhere").exists()


# --------------------------------------------------------------------------- inputs


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

    monkeypatch.setattr(inputs.os, "read", failing_read)
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


# --------------------------------------------------------------------------- strict JSON


def test_loads_object_plain() -> None:
    raw = b'{"id": "q1", "relevance": {"m-001": 2, "m-002": 1}, "tags": [{"a": 1}, {"a": 1}]}'
    value = loads_object(raw)
    assert value == json.loads(raw)
    assert type(value) is dict and type(value["relevance"]) is dict
    assert loads_object('{"caf\u00e9": "\u6587"}') == {"caf\u00e9": "\u6587"}


@pytest.mark.parametrize(
    ("raw", "key", "path"),
    [
        (b'{"id": "a", "id": "b"}', "id", "id"),
        (b'{"relevance": {"m-001": 1, "m-002": 0, "m-001": 2}}', "m-001", "relevance.m-001"),
        (b'{"turns": [{"k": 1}, {"k": 1, "k": 2}]}', "k", "turns[1].k"),
        (b'{"a": {"b": {"c": {"x": 1, "x": 1}}}}', "x", "a.b.c.x"),
        (b'{"meta": {"a.b": 1, "a.b": 2}}', "a.b", 'meta["a.b"]'),
        (b'{"": 1, "": 2}', "", '[""]'),
    ],
)
def test_duplicate_keys(raw: bytes, key: str, path: str) -> None:
    with pytest.raises(DuplicateKey) as err:
        loads_object(raw)
    assert err.value.key == key
    assert err.value.path == path
    assert isinstance(err.value, ValueError)
    assert path in str(err.value)


def test_duplicate_outer_reported_before_inner() -> None:
    with pytest.raises(DuplicateKey) as err:
        loads_object(b'{"a": {"x": 1, "x": 2}, "a": {"y": 1, "y": 2}}')
    assert err.value.path == "a"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"a": 1', "invalid JSON"),
        (b"", "invalid JSON"),
        (b'{"a": 1} x', "invalid JSON"),
        (b"[1, 2]", "expected a JSON object, got an array"),
        (b'"s"', "expected a JSON object, got a string"),
        (b'{"a": NaN}', "NaN is not valid JSON"),
        (b'{"a": -Infinity}', "-Infinity is not valid JSON"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b'\xef\xbb\xbf{"a": 1}', "byte order mark"),
        (b"[" * 200_000, "nested too deeply"),
    ],
)
def test_json_errors_are_short_value_errors(raw: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as err:
        loads_object(raw)
    assert not isinstance(err.value, DuplicateKey)
    assert reason in str(err.value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


def test_loads_object_is_fast_enough_for_jsonl() -> None:
    line = json.dumps(
        {"id": "q-1", "text": "words " * 40, "relevance": {f"m-{i:03d}": i % 3 for i in range(30)}}
    ).encode()
    start = time.perf_counter()
    for _ in range(5000):
        loads_object(line)
    assert time.perf_counter() - start < 5  # about 0.05 s on a laptop


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "is empty"),
        ("x" * (MAX_ID_LENGTH + 1), "201 characters long (at most 200)"),
        ("#q1", "starts with '#'"),
        ("a\x00b", "U+0000 (control character) at character 2"),
        ("a\x7f", "U+007F"),
        ("ab\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE (invisible format character) at character 3"),
        ("\u200bdoc", "U+200B ZERO WIDTH SPACE"),
        ("a\u200fb", "U+200F"),
        ("a\u2066b", "U+2066"),
        ("\ufeffdoc", "U+FEFF"),
        ("a\ud800", "U+D800 (surrogate)"),
        ("a\ue000", "U+E000 (private-use character)"),
        ("a\u0378", "U+0378 (unassigned code point)"),
        ("a|b", "'|' (U+007C) at character 2, which breaks Markdown tables"),
        ("a`b", "'`' (U+0060) at character 2"),
        ("a b", "whitespace U+0020 SPACE at character 2"),
        ("a\tb", "whitespace U+0009"),
        ("a\nb", "whitespace U+000A"),
        ("a\u00a0b", "whitespace U+00A0 NO-BREAK SPACE"),
        ("a\u3000b", "whitespace U+3000"),
    ],
)
def test_id_problem_refuses(value: str, expected: str) -> None:
    problem = id_problem(value)
    assert problem is not None and expected in problem, problem
    with pytest.raises(ValueError, match="TREC field"):
        trec_safe(value)


@pytest.mark.parametrize(
    "value", ["m-001", "q_1.2", "a#b", "x" * MAX_ID_LENGTH, "caf\u00e9", "\u6587\u6863-7", "{k}~!"]
)
def test_id_problem_accepts(value: str) -> None:
    assert id_problem(value) is None
    assert trec_safe(value) is value


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("plain", "plain"),
        ("a|b", "a\\|b"),
        ("`code`", "\\`code\\`"),
        ("back\\slash", "back\\\\slash"),
        ("a\\|b", "a\\\\\\|b"),
        ("one\ntwo\r\nthree\rfour", "one two three four"),
        ("tab\there", "tab here"),
        ("nul\x00", "nulU+0000"),
        ("rlo\u202eevil", "rloU+202Eevil"),
        ("zw\u200bsp", "zwU+200Bsp"),
        ("line\u2028sep", "line sep"),
        ("caf\u00e9 \u6587", "caf\u00e9 \u6587"),
        ("", ""),
    ],
)
def test_md_cell(text: str, cell: str) -> None:
    assert md_cell(text) == cell


# --------------------------------------------------------------------------- build dirs


@pytest.mark.parametrize("value", ["", "  ", ".", "./", "/", "//", "/.."])
def test_check_build_dir_refuses_root_like(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecallbenchError) as err:
        check_build_dir(value)
    assert "\n" not in str(err.value)


def test_check_build_dir_refuses_home_and_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "users" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecallbenchError, match="is your home directory"):
        check_build_dir(home)
    with pytest.raises(RecallbenchError, match="is a parent of your home directory"):
        check_build_dir(tmp_path / "users")
    assert check_build_dir(home / "build") == home / "build"


def test_check_build_dir_refuses_current_dir_and_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    for value in (".", "build/..", str(project)):
        with pytest.raises(RecallbenchError, match="is the current directory"):
            check_build_dir(value)
    with pytest.raises(RecallbenchError, match="is a parent of the current directory"):
        check_build_dir("..")
    assert check_build_dir("build") == Path("build")
    assert check_build_dir(Path("out/build")) == Path("out/build")


def test_check_build_dir_under_or_at_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    afile = tmp_path / "results.json"
    afile.write_text("{}")
    with pytest.raises(RecallbenchError) as err:
        check_build_dir(afile / "build" / "deeper")
    assert str(err.value) == f"{afile / 'build' / 'deeper'}: {afile} is a file, not a directory"
    with pytest.raises(RecallbenchError, match="is a file, not a directory"):
        check_build_dir(afile)
    with pytest.raises(RecallbenchError, match="is a file, not a directory"):
        check_build_dir("results.json/build")


def test_check_build_dir_symlinks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert check_build_dir("link") == Path("link")  # a symlinked build dir is fine
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RecallbenchError, match="symlink to .* which does not exist"):
        check_build_dir("dangling/build")
    (tmp_path / "to-root").symlink_to("/")
    with pytest.raises(RecallbenchError, match="filesystem root"):
        check_build_dir("to-root")


def test_safe_child(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "store").mkdir(parents=True)
    assert safe_child(build, "store") == build / "store"
    assert safe_child(build, "runs.json") == build / "runs.json"  # need not exist
    assert safe_child(build, "store/snap.json") == build / "store" / "snap.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(build / "store")
    (build / "store").symlink_to(elsewhere)
    for name in ("store", "store/snap.json"):
        with pytest.raises(RecallbenchError) as err:
            safe_child(build, name)
        assert str(err.value).startswith(f"{build / 'store'} is a symlink (to {elsewhere})")
        assert "\n" not in str(err.value)
    for bad in ("../x", "/etc/passwd", ""):
        with pytest.raises(ValueError):
            safe_child(build, bad)
    assert buildpaths.safe_child(build, "other") == build / "other"


# --------------------------------------------------------------------------- make clean

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_make
@pytest.mark.parametrize("build", ["", " ", "/", "//", ".", "..", "~", "/.."])
def test_make_clean_refuses_root_like_build(build: str) -> None:
    result = make("-n", "clean", f"BUILD={build}")
    assert result.returncode != 0
    assert "rm -rf /" not in result.stdout + result.stderr
    assert "find" not in result.stdout
    assert "refusing BUILD=" in result.stderr


@needs_make
def test_make_clean_quotes_build_with_spaces() -> None:
    result = make("-n", "clean", "BUILD=/tmp/a b")
    assert result.returncode == 0, result.stderr
    assert 'cd -- "/tmp/a b"' in result.stdout
    assert "rm -rf .nox" in result.stdout


@needs_make
def test_make_clean_empties_build_but_keeps_readme(tmp_path: Path) -> None:
    # run in a scratch directory (-f ROOT/Makefile) so the checkout's .nox is left alone
    build = tmp_path / "my build"
    (build / "store").mkdir(parents=True)
    for name in ("README.md", "results.json", ".recallbench.lock", "store/snap.json"):
        (build / name).write_text("x")
    (tmp_path / ".nox").mkdir()
    outside = tmp_path / "keep.txt"
    outside.write_text("x")
    result = make("clean", "BUILD=my build", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in build.iterdir()) == ["README.md"]
    assert not (tmp_path / ".nox").exists()
    assert outside.exists()


@needs_make
def test_make_clean_refuses_symlink_to_the_current_directory(tmp_path: Path) -> None:
    # the shell-side guard (after resolving symlinks); only ever pointed at tmp_path, so a
    # broken guard could not delete anything outside it
    (tmp_path / "here link").symlink_to(tmp_path)
    marker = tmp_path / "marker"
    marker.write_text("x")
    result = make("clean", "BUILD=here link", cwd=tmp_path)
    assert result.returncode != 0
    assert "refusing BUILD='here link'" in result.stderr
    assert marker.exists()
