"""The query stage's rows on disk (`recallbench.builddir.queryrows`): written and fingerprinted byte for
byte as a list, read back one at a time, a canonical runs.json read with its rows left in the
file, and the refusals of an edited or broken one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest


def sample_rows() -> list[dict[str, Any]]:
    """Rows of every shape the canonical writer must indent as orjson does: nested objects
    and lists, empty ones, floats, None, non-ASCII and escaped text, keys out of order."""
    return [
        {
            "z": 1,
            "query_id": f"q{i}",
            "hits": [{"score": 0.1 * i, "memory_id": 'm\u00e9\n"x"'}] * (i % 3),
            "levels": {"session": {"ranking": [], "gold": {}, "scores": [1e-300, -0.0]}},
            "missed": {} if i % 2 else {"session": [{"id": "s", "rank": None}]},
        }
        for i in range(5)
    ]


def spooled(tmp_path: Path, rows: list[dict[str, Any]]) -> Any:
    from recallbench.builddir.queryrows import RowSpool

    spool = RowSpool(tmp_path)
    for row in rows:
        spool.add(row)
    return spool.rows()


@pytest.mark.parametrize("count", [0, 1, 5])
def test_spooled_rows_write_and_fingerprint_byte_for_byte_as_a_list(
    tmp_path: Path, count: int
) -> None:
    from recallbench.builddir.artifacts import CanonicalFile, dumps, envelope, publish, stage_files

    rows = sample_rows()[:count]
    lazy = spooled(tmp_path, rows)
    assert lazy == rows and len(lazy) == count and list(lazy) == rows
    data = {"a": [1, {"b": []}], "queries": lazy, "scopes": [{"x": {}}], "top_k": 5}
    plain = {**data, "queries": rows}
    env, plain_env = envelope("runs", data, {"suite": "f"}), envelope("runs", plain, {"suite": "f"})
    assert env["fingerprint"] == plain_env["fingerprint"]
    assert dumps(env) == dumps(plain_env)
    # deeper and at several places, compact too
    nested = {"outer": {"inner": lazy, "again": lazy}}
    assert dumps(nested) == dumps({"outer": {"inner": rows, "again": rows}})
    files = stage_files(tmp_path / "build", env)
    (payload,) = files.values()
    assert isinstance(payload, CanonicalFile)  # written in pieces, never joined first
    publish(files)
    assert (tmp_path / "build" / "runs.json").read_bytes() == dumps(plain_env)


def test_spooled_rows_read_one_at_a_time_and_index_like_a_list(tmp_path: Path) -> None:
    rows = sample_rows()
    lazy = spooled(tmp_path, rows)
    assert lazy[0] == rows[0] and lazy[-1] == rows[-1] and lazy[1:3] == rows[1:3]
    with pytest.raises(IndexError):
        lazy[5]
    assert lazy != rows[:4] and lazy != [*rows[:4], {"other": 1}]
    # the file is unnamed: nothing is left in the directory it was made in
    assert list(tmp_path.iterdir()) == []


def test_a_copy_of_spooled_rows_is_the_list_of_its_rows(tmp_path: Path) -> None:
    import copy
    import pickle

    rows = sample_rows()
    lazy = spooled(tmp_path, rows)
    for copied in (copy.deepcopy(lazy), copy.copy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert type(copied) is list and copied == rows


def test_a_canonical_runs_json_is_read_with_its_rows_left_in_the_file(tmp_path: Path) -> None:
    from recallbench.builddir.artifacts import dumps, envelope, load_envelope
    from recallbench.builddir.queryrows import SpooledRows
    from recallbench.core.errors import ArtifactError

    rows = sample_rows()
    data = {"ks": [1, 5], "levels": ["session"], "queries": rows, "scopes": [{"x": 1}]}
    env = envelope("runs", data, {"suite": "f"})
    path = tmp_path / "runs.json"
    path.write_bytes(dumps(env))
    read = load_envelope(path, "runs", "recallbench query")
    assert isinstance(read["data"]["queries"], SpooledRows)
    assert read == env and dumps(read) == path.read_bytes()
    # no rows, or a layout that is not the canonical one: read whole, the same envelope
    empty = envelope("runs", {**data, "queries": []}, {"suite": "f"})
    path.write_bytes(dumps(empty))
    assert load_envelope(path, "runs", "recallbench query") == empty
    path.write_bytes(orjson.dumps(env))
    assert load_envelope(path, "runs", "recallbench query") == env
    # an edited row is refused by the fingerprint, a broken one as JSON
    text = dumps(env)
    path.write_bytes(text.replace(b'"q3"', b'"q9"'))
    with pytest.raises(ArtifactError, match="does not match its fingerprint"):
        load_envelope(path, "runs", "recallbench query")
    path.write_bytes(text.replace(b'"query_id": "q3"', b'"query_id": q3'))
    with pytest.raises(ArtifactError, match="not valid JSON"):
        load_envelope(path, "runs", "recallbench query")
