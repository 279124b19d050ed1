"""The streaming readers (LongMemEval, LoCoMo) refuse nesting beyond `MAX_DEPTH` (64) in one
line naming the file and the record, in memory independent of the depth (a 217 KB file
nested 100,000 deep took 22 GB in ijson), and refuse a nested value where the format has a
string (reliability round three, item 16)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.datasets.jsonstream import MAX_DEPTH, NestedTooDeep, _DepthScan
from recallbench.datasets.locomo.generator import generate as generate_locomo
from recallbench.datasets.longmemeval.generator import generate as generate_longmemeval

DEEP = 100_000
PLACEHOLDER = "@@NESTED@@"


def nested(depth: int, inner: str = "1") -> str:
    """`depth` arrays and objects, alternating, around `inner`."""
    opens = "".join('{"k":' if level % 2 else "[" for level in range(depth))
    closes = "".join("}" if level % 2 else "]" for level in reversed(range(depth)))
    return opens + inner + closes


def _longmemeval(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "lme-base.json"
    generate_longmemeval(path, shape="s", questions=3, seed=1, sessions_per_question=2)
    return orjson.loads(path.read_bytes())


def _locomo(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "locomo-base.json"
    generate_locomo(path, conversations=3, sessions=2, turns_per_session=3, seed=1)
    return orjson.loads(path.read_bytes())


def _with_nesting(records: list[dict[str, Any]], depth: int, where: int = 1) -> bytes:
    """The records as JSON, record `where` holding an extra field nested `depth` deep."""
    records = [dict(r) for r in records]
    records[where]["extra"] = PLACEHOLDER
    return orjson.dumps(records).replace(f'"{PLACEHOLDER}"'.encode(), nested(depth).encode())


def _read_all(dataset: str, path: Path) -> None:
    if dataset == "longmemeval":
        from recallbench.datasets.longmemeval.reader import DataFile

        list(DataFile(path).instances())
    else:
        from recallbench.datasets.locomo.reader import LoCoMoSource

        list(LoCoMoSource(path).samples())


BASES = {"longmemeval": (_longmemeval, "question_id"), "locomo": (_locomo, "sample_id")}


# --- the depth scan ----------------------------------------------------------------------


def _scan(chunks: list[bytes]) -> int | None:
    """The record a scan refuses, or None."""
    scan = _DepthScan()
    try:
        for chunk in chunks:
            scan.feed(chunk)
    except NestedTooDeep as deep:
        return deep.record
    return None


#: strings holding brackets, quotes, escapes and backslashes: none of it is nesting
TRICKY = r'"[[{\"\\", "\\\"[{", "\u005b", "a\\\\", "{\\"'


def test_the_scan_counts_only_structure_at_every_chunk_boundary() -> None:
    """Depth 64 (the top-level array counted) passes, 65 is refused in the record it is in,
    however the bytes are cut into chunks (inside strings, escapes, between brackets)."""
    for allowed in (True, False):
        # the top-level array, the nesting, the innermost list: 64 levels, or 65
        inner = nested(MAX_DEPTH - 2 if allowed else MAX_DEPTH - 1, f"[{TRICKY}]")
        text = f'[1, "x]", {{"a": [{TRICKY}]}}, {inner}, 2]'.encode()
        json.loads(text)  # a valid JSON text
        expected = None if allowed else 3
        assert _scan([text]) == expected
        for cut in range(len(text) + 1):
            assert _scan([text[:cut], text[cut:]]) == expected, cut
    bytewise = nested(MAX_DEPTH + 1).encode()
    assert _scan([bytewise[i : i + 1] for i in range(len(bytewise))]) == 0


@pytest.mark.parametrize("dataset", ["longmemeval", "locomo"])
def test_a_record_nested_too_deep_is_one_line_naming_file_and_record(
    tmp_path: Path, dataset: str
) -> None:
    base, _ = BASES[dataset]
    records = base(tmp_path)
    fine = tmp_path / "fine.json"
    fine.write_bytes(_with_nesting(records, MAX_DEPTH - 2))  # array, record, field: 64
    _read_all(dataset, fine)
    deep = tmp_path / "deep.json"
    deep.write_bytes(_with_nesting(records, MAX_DEPTH - 1))
    with pytest.raises(RecallbenchError) as info:
        _read_all(dataset, deep)
    message = str(info.value)
    assert message.startswith(f"{deep}: record[1]: ") and "\n" not in message
    assert f"nested deeper than {MAX_DEPTH} levels" in message


PROBE = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # old code: MemoryError
    from pathlib import Path
    from recallbench.core.errors import RecallbenchError
    dataset, path = sys.argv[1], Path(sys.argv[2])
    try:
        if dataset == "longmemeval":
            from recallbench.datasets.longmemeval.reader import DataFile
            list(DataFile(path).instances())
        else:
            from recallbench.datasets.locomo.reader import LoCoMoSource
            list(LoCoMoSource(path).samples())
    except RecallbenchError as exc:
        print(exc)
    # the peak of this program's own memory (KiB): VmHWM starts afresh at exec, where
    # ru_maxrss keeps the forking parent's (a pytest worker of a gigabyte or more)
    status = Path("/proc/self/status")
    if status.exists():
        hwm = [line for line in status.read_text().splitlines() if line.startswith("VmHWM:")]
        peak = int(hwm[0].split()[1])
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # bytes on macOS
    print(f"peak {peak}")
    """
)


@pytest.mark.parametrize("dataset", ["longmemeval", "locomo"])
@pytest.mark.parametrize("first", [False, True])
def test_nesting_100000_deep_is_refused_in_small_memory(
    tmp_path: Path, dataset: str, first: bool
) -> None:
    """A file nested 100,000 deep (a record's field, or the record itself) is refused in one
    line, and the reader's peak memory stays far below what ijson took (22 GB)."""
    base, _ = BASES[dataset]
    records = base(tmp_path)
    path = tmp_path / "deep.json"
    if first:
        path.write_bytes(b"[" + nested(DEEP).encode() + b"," + orjson.dumps(records)[1:])
    else:
        path.write_bytes(_with_nesting(records, DEEP, where=2))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, dataset, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", **_pythonpath()},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message, peak = done.stdout.splitlines()
    record = 0 if first else 2
    assert message.startswith(f"{path}: record[{record}]: "), message
    assert f"nested deeper than {MAX_DEPTH} levels" in message
    assert int(peak.split()[1]) < 1_000_000  # KiB: under 1 GB (measured: 45 MB)


def _pythonpath() -> dict[str, str]:
    import os

    return {key: os.environ[key] for key in ("PYTHONPATH", "HOME") if key in os.environ}


# --- a nested value where the format has a string -----------------------------------------


@pytest.mark.parametrize(
    ("dataset", "change", "says"),
    [
        ("longmemeval", lambda r: r.update(answer=["a", "b"]), "field 'answer' must be a string"),
        ("longmemeval", lambda r: r.update(answer={"a": 1}), "field 'answer' must be a string"),
        (
            "longmemeval",
            lambda r: r["haystack_sessions"][0][0].update(content=["x"]),
            "'haystack_sessions[0][0].content' must be a string, not a list",
        ),
        (
            "locomo",
            lambda r: r["conversation"].update(session_1_date_time={"d": 1}),
            "field 'conversation.session_1_date_time' must be a string, not an object",
        ),
        (
            "locomo",
            lambda r: r["conversation"].update(speaker_a=["Ann"]),
            "field 'conversation.speaker_a' must be a string, not a list",
        ),
        (
            "locomo",
            lambda r: r["qa"][0].update(answer={"text": "x"}),
            "field 'qa[0].answer' must be a string or a number, not an object",
        ),
        (
            "locomo",
            lambda r: r["qa"][0].update(adversarial_answer=[1]),
            "field 'qa[0].adversarial_answer' must be a string or a number, not a list",
        ),
    ],
)
def test_a_nested_value_where_the_format_has_a_string_is_refused(
    tmp_path: Path, dataset: str, change: Any, says: str
) -> None:
    base, id_field = BASES[dataset]
    records = base(tmp_path)
    change(records[1])
    path = tmp_path / "nested.json"
    path.write_bytes(orjson.dumps(records))
    with pytest.raises(RecallbenchError) as info:
        _read_all(dataset, path)
    message = str(info.value)
    assert message.startswith(f"{path}: record[1] ({id_field} ") and "\n" not in message
    assert says in message
