"""LongMemEval reader: every shape, both has_answer layouts, releases, malformed records,
and the reader's errors as one line through `recallbench validate --dataset longmemeval`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from recallbench.builddir.artifacts import file_sha256
from recallbench.cli.main import main
from recallbench.core.errors import RecallbenchError
from recallbench.datasets import jsonstream
from recallbench.datasets.longmemeval import reader
from recallbench.datasets.longmemeval.generator import generate
from recallbench.datasets.longmemeval.reader import DataFile, identify, open_source
from recallbench.datasets.longmemeval.records import Instance

SMALL = {"session_chars": 120}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lme-reader")
    out = {}
    for shape, spq in (("s", 8), ("m", 30), ("oracle", None)):
        out[shape] = root / f"{shape}.json"
        generate(out[shape], shape=shape, questions=20, seed=3, sessions_per_question=spq, **SMALL)
    out["all-keys"] = root / "all-keys.json"
    generate(
        out["all-keys"],
        shape="s",
        questions=20,
        seed=3,
        sessions_per_question=8,
        has_answer_keys="all",
        **SMALL,
    )
    return out


def _instances(path: Path) -> list[Instance]:
    return list(DataFile(path).instances())


def validate(build: Path, data: Path, *extra: str):
    """`recallbench --build-dir BUILD validate --dataset longmemeval --data FILE ...`."""
    return CliRunner().invoke(
        main,
        ["--build-dir", str(build), "validate", "--dataset", "longmemeval", "--data", str(data)]
        + list(extra),
    )


@pytest.mark.parametrize("shape", ["s", "m", "oracle"])
def test_reads_every_shape(files: dict[str, Path], shape: str) -> None:
    source = DataFile(files[shape])
    items = list(source.instances())
    assert len(items) == 20 == source.records
    assert source.sha256 == file_sha256(files[shape])
    raw = orjson.loads(files[shape].read_bytes())
    for inst, rec in zip(items, raw, strict=True):
        assert inst.question_id == rec["question_id"]
        assert inst.session_ids == tuple(rec["haystack_session_ids"])
        assert inst.answer_session_ids == tuple(rec["answer_session_ids"])
        assert inst.dates == tuple(rec["haystack_dates"])
        assert [[t.content for t in s] for s in inst.sessions] == [
            [t["content"] for t in s] for s in rec["haystack_sessions"]
        ]
    sizes = [len(i.session_ids) for i in items]
    if shape == "oracle":  # evidence sessions only
        assert all(all(s.startswith("answer_") for s in i.session_ids) for i in items)
        assert max(sizes) <= 6
    else:
        assert min(sizes) >= (7 if shape == "s" else 29)


def test_cleaned_layout_has_answer_only_on_evidence_sessions(files: dict[str, Path]) -> None:
    for inst in _instances(files["s"]):
        gold = set(inst.answer_session_ids or ())
        for sid, turns in zip(inst.session_ids, inst.sessions, strict=True):
            keys = {t.has_answer is not None for t in turns}
            assert keys == ({True} if sid in gold else {False}), sid


def test_all_keys_layout_reads_too(files: dict[str, Path]) -> None:
    items = _instances(files["all-keys"])
    assert all(t.has_answer is not None for i in items for s in i.sessions for t in s)
    # same content as the cleaned-like file, only the keys differ
    assert [i.question_id for i in items] == [i.question_id for i in _instances(files["s"])]


def test_format_details(files: dict[str, Path]) -> None:
    raw = orjson.loads(files["s"].read_bytes())
    ids = [r["question_id"] for r in raw]
    assert any(q.endswith("_abs") for q in ids)
    answers = {type(r["answer"]) for r in raw}
    assert str in answers
    date = raw[0]["haystack_dates"][0]
    assert len(date) == len("2023/05/30 (Tue) 23:40") and date[4] == "/" and date[10:12] == " ("
    assert any(t["role"] == "assistant" for s in raw[0]["haystack_sessions"] for t in s)
    prefixes = {sid.split("_")[0] for r in raw for sid in r["haystack_session_ids"]}
    assert {"answer", "sharegpt", "ultrachat"} <= prefixes


def test_streams_one_instance_at_a_time(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "READ_CHUNK", 4096)
    seen: list[int] = []
    source = DataFile(files["m"])
    stream = source.instances(progress=seen.append)
    next(stream)
    assert sum(seen) < source.size / 4  # the first record came before most of the file was read
    rest = list(stream)
    assert len(rest) == 19 and sum(seen) == source.size


def test_source_streams_scopes_with_byte_progress(files: dict[str, Path]) -> None:
    """The dataset source: byte progress over the whole file, identity after the stream."""
    source = open_source({"data": files["s"]}, {})
    assert source.options == {"session_text": "user", "unit": "session"}
    assert [lv.name for lv in source.levels] == ["session"]
    seen: list[int] = []
    items = list(source.stream(progress=seen.append))
    assert sum(seen) == source.size_bytes == files["s"].stat().st_size
    assert len(items) == 20
    identity = source.identity()
    assert identity["dataset"] == "longmemeval" and identity["known"]
    assert identity["files"] == [
        {
            "role": "data",
            "name": "s.json",
            "size_bytes": files["s"].stat().st_size,
            "sha256": file_sha256(files["s"]),
        }
    ]
    assert "synthetic" in identity["label"] and "not LongMemEval" in identity["label"]
    # the six types in the dataset's own order
    assert source.categories == reader.QUESTION_TYPES
    assert source.summary()["records"] == 20
    turn = open_source({"data": files["s"]}, {"unit": "turn"})
    assert [(lv.name, lv.prefix) for lv in turn.levels] == [("session", ""), ("turn", "turn_")]


def test_release_identification(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sha = file_sha256(files["s"])
    assert identify(files["s"], sha)["kind"] == "synthetic"
    monkeypatch.setitem(
        reader.KNOWN_RELEASES,
        sha,
        {"file": "longmemeval_s_cleaned.json", "release": "cleaned", "shape": "s", "size_bytes": 1},
    )
    meta = identify(files["s"], sha)
    assert meta["known"] and "longmemeval_s_cleaned.json (cleaned release" in meta["label"]
    bare = tmp_path / "bare.json"
    bare.write_bytes(files["oracle"].read_bytes())  # no sidecar next to it
    meta = identify(bare, file_sha256(bare))
    assert meta["kind"] == "unknown" and not meta["known"]


def test_known_digests_are_the_published_ones() -> None:
    assert {v["file"] for v in reader.KNOWN_RELEASES.values()} == {
        "longmemeval_oracle.json",
        "longmemeval_s_cleaned.json",
    }
    assert all(len(k) == 64 for k in reader.KNOWN_RELEASES)


def _good_record(qid: str = "q1") -> dict:
    return {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": "Where?",
        "answer": "Here",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/01 (Mon) 10:00"],
        "haystack_session_ids": ["answer_1"],
        "haystack_sessions": [[{"role": "user", "content": "Here it is", "has_answer": True}]],
        "answer_session_ids": ["answer_1"],
    }


def _broken(change) -> list:
    rec = _good_record()
    change(rec)
    return [_good_record("q0"), rec]


BROKEN = [
    (lambda r: r.update(haystack_sessions={}), "field 'haystack_sessions' must be a list"),
    (lambda r: r.pop("question_id"), "field 'question_id' is missing"),
    (lambda r: r.update(question=3), "field 'question' must be a string"),
    (lambda r: r.update(question=""), "field 'question' is empty"),  # the reader accepted it
    (lambda r: r.update(question=" \n "), "field 'question' is empty"),
    (lambda r: r["haystack_sessions"][0][0].update(role="bot"), "'haystack_sessions[0][0].role'"),
    (
        lambda r: r["haystack_sessions"][0][0].update(content=None),
        "'haystack_sessions[0][0].content'",
    ),
    (
        lambda r: r["haystack_sessions"][0][0].update(has_answer="yes"),
        ".has_answer' must be a boolean",
    ),
    (
        lambda r: r.update(haystack_session_ids=["a", "b"]),
        "has 1 sessions but 'haystack_session_ids' has 2",
    ),
    (lambda r: r.update(haystack_dates=[]), "'haystack_dates' has 0 dates"),
    (
        lambda r: r.update(answer_session_ids="answer_1"),
        "field 'answer_session_ids' must be a list",
    ),
    (
        lambda r: r["haystack_sessions"].__setitem__(0, "text"),
        "'haystack_sessions[0]' must be a list of turns",
    ),
]


@pytest.mark.parametrize(("change", "message"), BROKEN)
def test_malformed_record_names_index_and_field(tmp_path: Path, change, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(_broken(change)))
    with pytest.raises(RecallbenchError) as err:
        _instances(path)
    text = str(err.value)
    assert text.startswith(f"{path}: record[1]")
    assert message in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "found an empty file"),
        (b'{"question_id": "x"}', "expected a JSON array"),
        (b"[]", "holds no records"),
        (
            b"[" + orjson.dumps(_good_record()) + b', {"question_id": ',
            "invalid JSON after record[0]",
        ),
        (b"[1]", "record[0]: must be an object"),
    ],
)
def test_malformed_file(tmp_path: Path, payload: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(payload)
    with pytest.raises(RecallbenchError) as err:
        _instances(path)
    assert message in str(err.value)


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("recallbench validate: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        (b'"Here it is"', b'"Here \\ud800it is"', "haystack_sessions[0][0].content"),
        (b'"q1"', b'"q1\\ud800"', "question_id"),  # was read as 'q1?', unseen by the id check
        (b'"answer_1"', b'"\\udc00answer_1"', "haystack_session_ids[0]"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_record_and_field(
    tmp_path: Path, old: bytes, new: bytes, field: str
) -> None:
    raw = orjson.dumps([_good_record("q0"), _good_record("q1")])
    at = raw.index(b'"q1"')  # change the second record only
    path = tmp_path / "bad.json"
    path.write_bytes(raw[:at] + raw[at:].replace(old, new, 1))
    line = _one_line_error(validate(tmp_path / "b", path))
    assert f"{path}: record[1] (question_id " in line
    assert f"field '{field}' holds a lone UTF-16 surrogate escape" in line
    assert not (tmp_path / "b" / "suite.json").exists()


def test_cli_reports_malformed_record_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(_broken(lambda r: r.update(haystack_sessions={}))))
    line = _one_line_error(validate(tmp_path / "b", path))
    assert "record[1] (question_id 'q1'): field 'haystack_sessions' must be a list" in line
    assert not (tmp_path / "b" / "suite.json").exists()


def test_duplicate_question_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_bytes(orjson.dumps([_good_record(), _good_record()]))
    line = _one_line_error(validate(tmp_path / "b", path))
    assert "duplicate question_id 'q1' (first at record[0])" in line


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    line = _one_line_error(validate(tmp_path / "b", tmp_path / "nope.json"))
    assert str(tmp_path / "nope.json") in line


def test_bad_reader_options_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_bytes(orjson.dumps([_good_record()]))
    with pytest.raises(RecallbenchError, match="--session-text must be one of user, all"):
        open_source({"data": path}, {"session_text": "both"})
    with pytest.raises(RecallbenchError, match="--unit must be one of session, turn"):
        open_source({"data": path}, {"unit": "word"})
    with pytest.raises(RecallbenchError, match="LongMemEval has no option 'speed'"):
        open_source({"data": path}, {"speed": 1})
    with pytest.raises(RecallbenchError, match="needs --data FILE"):
        open_source({}, {})
    usage = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path / "b"), "validate", "--dataset", "longmemeval"]
    )
    assert usage.exit_code == 2 and "--dataset longmemeval needs --data FILE" in usage.output


def test_unknown_file_warns(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_bytes(orjson.dumps([_good_record()]))
    result = validate(tmp_path / "b", path)
    assert result.exit_code == 0, result.output
    assert "warning: unknown file (sha256 matches no known LongMemEval release)" in result.stderr
    suite = orjson.loads((tmp_path / "b" / "suite.json").read_bytes())["data"]
    assert suite["identity"]["known"] is False
    assert suite["counts"]["scopes"] == suite["counts"]["queries"] == 1
