"""The scope spool (`recallbench.builddir.scopespool`): its two readers, a task reading its scope and its
slice of queries, and the refusals of a spool that is not the validated one; the structure
spool beside it, read only for a structured system."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from recallbench.builddir.scopespool import (
    SPOOL,
    STRUCTURE_SPOOL,
    SpoolWriter,
    ValidateSpools,
    read_scope,
    scope_refs,
    stream_scopes,
)
from recallbench.core.errors import ArtifactError
from recallbench.core.model import Memory, Query, Scope, Turn
from recallbench.engine.workerstate import task_scope
from recallbench.stages.validate import place_spool


def make_scope(n: int) -> Scope:
    memories = tuple(
        Memory(f"m{n}-{i}", f"text {n} {i} é\n", {"session": (f"s{i}",)}) for i in range(3)
    )
    queries = tuple(
        Query(f"q{n}-{j}", "cat", f"question {j}", {"session": {"s0": 1}}) for j in range(5)
    )
    return Scope(f"scope-{n}", memories, queries)


def write_spool(tmp_path: Path, count: int = 3) -> dict[str, Any]:
    """A suite envelope (only what the readers use) and its spool of `count` scopes."""
    writer = SpoolWriter(tmp_path / SPOOL)
    scopes = []
    for n in range(count):
        scope = make_scope(n)
        scopes.append({"scope_id": scope.scope_id, "spool": writer.add(scope.to_dict())})
    spool = writer.close()
    (tmp_path / SPOOL).unlink(missing_ok=True)
    writer.tmp.rename(tmp_path / SPOOL)
    return {
        "data": {"spool": spool, "scopes": scopes, "counts": {"scopes": count}},
        "spool_path": str(tmp_path / SPOOL),
    }


def test_both_readers_give_every_scope_as_validate_wrote_it(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    data = (tmp_path / SPOOL).read_bytes()
    assert suite["data"]["spool"] == {
        "file": SPOOL,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }
    lines = data.splitlines(keepends=True)
    expected = [make_scope(n).to_dict() for n in range(3)]
    assert [s for _, s in stream_scopes(suite)] == expected
    refs = dict(scope_refs(suite))
    assert [read_scope(refs[i]) for i in range(3)] == expected
    # the index: contiguous lines covering the file, each with its own sha256
    assert [(r["offset"], r["bytes"]) for r in refs.values()] == [
        (sum(map(len, lines[:i])), len(lines[i])) for i in range(3)
    ]
    assert [r["sha256"] for r in refs.values()] == [hashlib.sha256(x).hexdigest() for x in lines]


def test_a_task_reads_its_scope_and_its_slice_of_queries(tmp_path: Path) -> None:
    refs = dict(scope_refs(write_spool(tmp_path)))
    assert task_scope({"ref": refs[1]}) == make_scope(1)
    sliced = task_scope({"ref": refs[1], "queries": (1, 3)})
    assert [q.query_id for q in sliced.queries] == ["q1-1", "q1-2"]
    assert sliced.memories == make_scope(1).memories
    assert task_scope({"scope": make_scope(2).to_dict()}) == make_scope(2)


@pytest.mark.parametrize("damage", ["flipped", "shifted", "missing", "foreign"])
def test_a_task_refuses_a_line_that_is_not_the_validated_one(tmp_path: Path, damage: str) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    refs = dict(scope_refs(suite))
    data = path.read_bytes()
    ref = refs[1]
    if damage == "flipped":  # one byte of scope 1's line
        at = ref["offset"] + ref["bytes"] // 2
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    elif damage == "shifted":  # same size, the lines no longer where the index says
        path.write_bytes(b"\n" + data[:-1])
    elif damage == "missing":
        path.unlink()
    else:  # a well-formed line of another scope where scope 1's should be
        ref = {**ref, "scope_id": "scope-9"}
    with pytest.raises(ArtifactError) as caught:
        read_scope(ref)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert message.endswith("run `recallbench validate` again")
    if damage in ("flipped", "foreign"):  # the other lines still read
        assert read_scope(refs[0]) == make_scope(0).to_dict()


def test_the_parent_checks_the_spool_is_there_and_whole(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    path.write_bytes(path.read_bytes() + b"{}\n")
    with pytest.raises(ArtifactError, match="not the scope spool suite.json describes"):
        next(scope_refs(suite))
    path.unlink()
    with pytest.raises(ArtifactError, match="the scope spool validate wrote is missing"):
        next(scope_refs(suite))


def test_stream_refuses_another_spool_of_the_same_size(tmp_path: Path) -> None:
    suite = write_spool(tmp_path)
    path = tmp_path / SPOOL
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[1] + lines[0] + lines[2])  # same bytes, scopes out of order
    with pytest.raises(ArtifactError, match="not the scope spool suite.json describes"):
        list(stream_scopes(suite))


def test_a_suite_from_the_gzip_spool_era_is_refused(tmp_path: Path) -> None:
    """suite.json written by a recallbench whose spool was scopes.jsonl.gz (no per-scope
    places): both readers refuse it in one line, before reading anything."""
    suite = write_spool(tmp_path)
    old = {
        "data": {
            **suite["data"],
            "spool": {**suite["data"]["spool"], "file": "scopes.jsonl.gz"},
            "scopes": [{"scope_id": s["scope_id"]} for s in suite["data"]["scopes"]],
        },
        "spool_path": str(tmp_path / "scopes.jsonl.gz"),
    }
    for read in (scope_refs, stream_scopes):
        with pytest.raises(ArtifactError) as caught:
            next(read(old))
        assert "made by another recallbench version" in str(caught.value)
        assert str(caught.value).endswith("run `recallbench validate` again")


# --- the structure spool ------------------------------------------------------------------


def with_structure(n: int) -> Scope:
    """Scope `n` as a reader hands it over: plain memories and queries, and its structure
    as plain data (`Scope.structure`)."""
    plain = make_scope(n)
    structure = {
        "memories": [
            {"turns": [{"text": f"turn {n} {i}", "role": "user", "turn_id": "1"}], "date": f"d{i}"}
            for i in range(3)
        ],
        "queries": [{"date": f"q{j}"} if j % 2 else {} for j in range(5)],
    }
    return Scope(plain.scope_id, plain.memories, plain.queries, structure)


def structured(n: int) -> Scope:
    """Scope `n` as a structured system's task gets it: the structure in place."""
    plain = make_scope(n)
    memories = tuple(
        replace(m, turns=(Turn(f"turn {n} {i}", role="user", turn_id="1"),), date=f"d{i}")
        for i, m in enumerate(plain.memories)
    )
    queries = tuple(
        replace(q, date=f"q{j}" if j % 2 else None) for j, q in enumerate(plain.queries)
    )
    return Scope(plain.scope_id, memories, queries)


def validate_spools(tmp_path: Path, scopes: list[Scope]) -> dict[str, Any]:
    """What validate writes of `scopes` (both spools, placed) and the suite envelope's
    parts the readers use."""
    writers = ValidateSpools(tmp_path / SPOOL)
    index = [{"scope_id": s.scope_id, **writers.add(s)} for s in scopes]
    data = {**writers.close(), "scopes": index, "counts": {"scopes": len(scopes)}}
    suite = {"data": data, "spool_path": str(tmp_path / SPOOL), **writers.temps()}
    place_spool(suite)
    return suite


@pytest.fixture
def side(tmp_path: Path) -> dict[str, Any]:
    """Three scopes, the middle one without structure (as a fixture scope has none)."""
    return validate_spools(tmp_path, [with_structure(0), make_scope(1), with_structure(2)])


def test_the_structure_lies_beside_the_scope_spool(side, tmp_path: Path) -> None:
    """The scope spool has the bytes it had before structured records (as written for
    plain scopes); the structure is in its own file, one line per scope that has some."""
    plain = tmp_path / "plain"
    plain.mkdir()
    write_spool(plain)
    assert (tmp_path / SPOOL).read_bytes() == (plain / SPOOL).read_bytes()
    data = (tmp_path / STRUCTURE_SPOOL).read_bytes()
    assert side["data"]["structure_spool"] == {
        "file": STRUCTURE_SPOOL,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }
    assert ["structure" in s for s in side["data"]["scopes"]] == [True, False, True]
    lines = data.splitlines()
    assert [orjson.loads(line)["scope_id"] for line in lines] == ["scope-0", "scope-2"]


def test_only_a_structured_reader_gets_the_structure(side) -> None:
    plain = [make_scope(n) for n in range(3)]
    full = [structured(0), make_scope(1), structured(2)]
    assert [Scope.from_dict(s) for _, s in stream_scopes(side)] == plain
    assert [Scope.from_dict(s) for _, s in stream_scopes(side, structured=True)] == full
    refs = dict(scope_refs(side))
    assert not any("structure" in r for r in refs.values())
    assert [task_scope({"ref": refs[n]}) for n in range(3)] == plain
    assert all(m.turns == () and m.date is None for n in range(3) for m in plain[n].memories)
    refs = dict(scope_refs(side, structured=True))
    assert [task_scope({"ref": refs[n]}) for n in range(3)] == full
    sliced = task_scope({"ref": refs[2], "queries": (1, 3)})
    assert [q.date for q in sliced.queries] == ["q1", None]


@pytest.mark.parametrize("damage", ["flipped", "missing", "longer"])
def test_a_structured_reader_refuses_a_structure_spool_that_is_not_the_validated_one(
    side, tmp_path: Path, damage: str
) -> None:
    """Refused in one line naming the file and the command to rerun; a reader for a
    system that does not ask for structure never opens the file."""
    path = tmp_path / STRUCTURE_SPOOL
    data = path.read_bytes()
    if damage == "flipped":
        path.write_bytes(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(data + b"{}\n")
    for read in (
        lambda: list(stream_scopes(side, structured=True)),
        lambda: [read_scope(r) for _, r in scope_refs(side, structured=True)],
    ):
        with pytest.raises(ArtifactError) as caught:
            read()
        message = str(caught.value)
        assert message.startswith(f"{path}: ") and "structure spool" in message
        assert message.endswith("run `recallbench validate` again")
    assert [Scope.from_dict(s) for _, s in stream_scopes(side)] == [make_scope(n) for n in range(3)]


def test_no_structure_no_file(tmp_path: Path) -> None:
    """Scopes without structure (the fixtures): no structure spool and no key for it in
    suite.json; one that an earlier validate left in the build dir is removed."""
    (tmp_path / STRUCTURE_SPOOL).write_bytes(b"left by an earlier validate\n")
    suite = validate_spools(tmp_path, [make_scope(0)])
    assert "structure_spool" not in suite["data"] and "structure" not in suite["data"]["scopes"][0]
    assert not (tmp_path / STRUCTURE_SPOOL).exists()
    assert [Scope.from_dict(s) for _, s in stream_scopes(suite, structured=True)] == [make_scope(0)]
