"""Strict JSON (`recallbench.core.strictjson`): duplicate keys named by their path, short
value errors for everything else."""

from __future__ import annotations

import json
import time

import pytest

from recallbench.core.strictjson import DuplicateKey, loads_object


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
    start = time.process_time()  # this process's CPU seconds: other processes' load is not in it
    for _ in range(5000):
        loads_object(line)
    assert time.process_time() - start < 5  # about 0.05 s on a laptop
