"""LoCoMo as downloaded: the per-conversation layout (a directory of <n>.json files, the zip,
one such file) read as one dataset, with the array file's scopes and figures; its members
streamed one at a time, a malformed one named in one line; and a file of the other dataset
recognised in one line. Synthetic data only (the generator writes every layout)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.commands.pipeline import run_pipeline
from recallbench.core.errors import RecallbenchError
from recallbench.datasets.locomo.generator import ZIP_FOLDER, generate, per_conversation
from recallbench.datasets.locomo.reader import open_source

SHAPE = {
    "conversations": 3,
    "sessions": (3, 5),
    "turns_per_session": (3, 6),
    "questions_per_conversation": (12, 16),
    "seed": 11,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same conversations in the three layouts."""
    where = tmp_path_factory.mktemp("layouts")
    out = {"array": where / "locomo10.json", "directory": where / "locomo10_v2"}
    out["zip"] = where / "locomo-main.zip"
    for layout, path in out.items():
        generate(path, layout=layout, **SHAPE)
    return out


def _normalized(result: dict[str, Any]) -> bytes:
    """The result without the data's identity (file names and digests differ by layout)."""
    data = dict(result)
    data["dataset"] = {k: v for k, v in data["dataset"].items() if k != "identity"}
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize("unit", ["session", "turn"])
def test_every_layout_gives_the_array_files_results(
    files: dict[str, Path], tmp_path: Path, unit: str
) -> None:
    """Byte-identical normalized results (and scopes) from the array file, the directory and
    the zip, at both units, with category 5 kept (every question scored)."""
    results, scopes = {}, {}
    for layout, path in files.items():
        run = run_pipeline(
            "locomo",
            {"data": path},
            tmp_path / layout,
            options={"unit": unit, "categories": "all"},
            system="bm25",
            top_k=10,
            sample=1,
        )
        results[layout] = _normalized(run.result)
        scopes[layout] = (tmp_path / layout / "scopes.jsonl").read_bytes()
        identity = run.result["dataset"]["identity"]
        assert identity["known"] and identity["label"].startswith("synthetic data"), identity
    assert results["directory"] == results["array"]
    assert results["zip"] == results["array"]
    assert scopes["directory"] == scopes["zip"] == scopes["array"]
    assert json.loads(results["array"])["counts"]["per_category"]["5"]["scored"] > 0


def test_the_generated_layout_is_the_downloads_shape(files: dict[str, Path]) -> None:
    """One object per conversation, named by its number, with the conversation's keys at the
    top level and no sample_id; the zip's members under data/multimodal_dialog/locomo10_v2/."""
    assert sorted(p.name for p in files["directory"].iterdir()) == ["1.json", "2.json", "3.json"]
    first = json.loads((files["directory"] / "1.json").read_text())
    assert {"speaker_a", "speaker_b", "session_1", "session_1_date_time", "qa"} <= set(first)
    assert {"events_session_1", "session_1_observation", "session_1_summary"} <= set(first)
    assert "sample_id" not in first and "conversation" not in first
    assert list(first)[-1] == "qa"
    with zipfile.ZipFile(files["zip"]) as archive:
        assert archive.namelist() == [f"{ZIP_FOLDER}/{n}.json" for n in (1, 2, 3)]
        assert archive.read(f"{ZIP_FOLDER}/1.json") == (files["directory"] / "1.json").read_bytes()
    array = json.loads(files["array"].read_text())
    assert per_conversation(array[0]) == (1, first)
    assert all(q["evidence"] for q in first["qa"] if q["category"] == 5)  # as in the real file


def test_one_conversation_file_is_a_one_conversation_dataset(files: dict[str, Path]) -> None:
    source = open_source({"data": files["directory"] / "2.json"}, {})
    scopes = [s.scope_id for s in source.stream() if hasattr(s, "memories")]
    assert scopes == ["conv-2"]
    assert source.identity()["label"].startswith("LoCoMo per-conversation file (1 conversation")


def test_members_are_read_one_at_a_time(files: dict[str, Path], tmp_path: Path) -> None:
    """A malformed third member stops the stream only after the first two conversations were
    yielded: nothing ahead of the conversation at hand is parsed."""
    broken = tmp_path / "v2"
    broken.mkdir()
    for n in (1, 2):
        (broken / f"{n}.json").write_bytes((files["directory"] / f"{n}.json").read_bytes())
    (broken / "3.json").write_text('{"speaker_a": "A", "qa": [}')
    source = open_source({"data": broken}, {})
    seen = []
    with pytest.raises(RecallbenchError) as info:
        for sample in source.samples():
            seen.append(sample.sample_id)
    assert seen == ["conv-1", "conv-2"]
    assert str(info.value).startswith(f"{broken / '3.json'}: invalid JSON: ")
    assert "\n" not in str(info.value)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return path


def _member(files: dict[str, Path], n: int, **change: Any) -> bytes:
    obj = json.loads((files["directory"] / f"{n}.json").read_text())
    obj.update(change)
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda f, d: _zip(d / "a.zip", {f"{ZIP_FOLDER}/7.json": _member(f, 1, qa=[{"question": "Q?", "category": 9}])}),
            "a.zip: data/multimodal_dialog/locomo10_v2/7.json: field 'qa[0].category' must be one of 1-5, not 9",
        ),
        (
            lambda f, d: _zip(d / "b.zip", {f"{ZIP_FOLDER}/7.json": _member(f, 1, session_2=[{"speaker": "A", "text": "x"}])}),
            "b.zip: data/multimodal_dialog/locomo10_v2/7.json: field 'session_2[0].dia_id' is missing",
        ),
        (
            lambda f, d: _zip(d / "c.zip", {"locomo10.json": b"[]"}),
            "c.zip: no locomo10_v2/<n>.json member",
        ),
        (
            lambda f, d: _zip(d / "d.zip", {f"x/{ZIP_FOLDER}/1.json": b"{}", f"{ZIP_FOLDER}/1.json": b"{}"}),
            "both hold conversation 1",
        ),
        (
            lambda f, d: _zip(d / "e.zip", {f"{ZIP_FOLDER}/1.json": b'{"qa": [], "qa": []}'}),
            "e.zip: data/multimodal_dialog/locomo10_v2/1.json: an object repeats the key 'qa'",
        ),
        (
            lambda f, d: _zip(d / "g.zip", {f"{ZIP_FOLDER}/1.json": b'{"qa": [], "speaker_a": "\\ud800"}'}),
            "g.zip: data/multimodal_dialog/locomo10_v2/1.json: field 'speaker_a' holds a lone UTF-16 surrogate",
        ),
        (
            lambda f, d: _zip(d / "h.zip", {f"{ZIP_FOLDER}/1.json": b"[1, 2]"}),
            "h.zip: data/multimodal_dialog/locomo10_v2/1.json: expected one JSON object (a conversation), found a list",
        ),
    ],
)  # fmt: skip
def test_a_malformed_member_is_one_line_naming_it(
    files: dict[str, Path], tmp_path: Path, make: Any, message: str
) -> None:
    path = make(files, tmp_path)
    with pytest.raises(RecallbenchError) as info:
        list(open_source({"data": path}, {}).stream())
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_directory_holds_only_numbered_conversations(tmp_path: Path) -> None:
    folder = tmp_path / "v2"
    folder.mkdir()
    with pytest.raises(RecallbenchError, match="a directory without <n>.json files"):
        open_source({"data": folder}, {})
    (folder / ".DS_Store").write_bytes(b"\0")
    (folder / "README.md").write_text("not read")
    (folder / "1.json").write_text("{}")
    (folder / "01.json").write_text("{}")
    with pytest.raises(RecallbenchError, match=r"01.json and 1.json both hold conversation 1"):
        open_source({"data": folder}, {})
    (folder / "01.json").unlink()
    (folder / "notes.json").write_text("{}")
    with pytest.raises(RecallbenchError, match=r"notes.json: not a conversation file"):
        open_source({"data": folder}, {})


def test_identity_digests_and_progress(files: dict[str, Path], tmp_path: Path) -> None:
    """A directory's sha256 is its listing's (it changes with any member); the zip's is the
    zip's; progress counts every byte on disk; an edited copy is no longer 'synthetic'."""
    import hashlib

    from recallbench.datasets.locomo.layout import directory_digest

    folder = files["directory"]
    listing = [
        (p.name, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.iterdir(), key=lambda p: int(p.stem))
    ]
    for path, sha in ((folder, directory_digest(listing)), (files["zip"], None)):
        source = open_source({"data": path}, {})
        steps: list[int] = []
        list(source.stream(steps.append))
        identity = source.identity()
        expected = sha or hashlib.sha256(path.read_bytes()).hexdigest()
        assert identity["files"][0]["sha256"] == expected
        assert identity["files"][0]["name"] == path.name
        assert sum(steps) == source.size_bytes == identity["files"][0]["size_bytes"]
        unstreamed = open_source({"data": path}, {}).identity()  # hashed without parsing
        assert unstreamed["files"][0]["sha256"] == expected
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in folder.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    (tmp_path / "copy.generated.json").write_bytes(
        (folder.parent / "locomo10_v2.generated.json").read_bytes()
    )
    assert open_source({"data": copy}, {}).identity()["known"] is True
    (copy / "2.json").write_bytes((copy / "2.json").read_bytes() + b" ")
    assert (
        open_source({"data": copy}, {})
        .identity()["label"]
        .startswith("LoCoMo per-conversation directory (3 conversation files")
    )


def test_validate_reads_a_directory_and_names_the_other_dataset(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """validate --data DIR works; a file of the other dataset is one line saying which
    --dataset reads it, in both directions (the array, the directory, the zip, one member)."""
    from recallbench.datasets.longmemeval.generator import generate as generate_longmemeval

    runner = CliRunner()
    build = ["--build-dir", str(tmp_path / "b")]
    ok = runner.invoke(
        main, [*build, "validate", "--dataset", "locomo", "--data", str(files["directory"])]
    )
    assert ok.exit_code == 0, ok.output
    lme = tmp_path / "s.json"
    generate_longmemeval(
        lme, shape="s", questions=4, seed=1, sessions_per_question=3, session_chars=60
    )
    cases = [("locomo", lme, "a LongMemEval file: use --dataset longmemeval")]
    for path in (files["array"], files["directory"], files["zip"], files["directory"] / "1.json"):
        cases.append(("longmemeval", path, "a LoCoMo file: use --dataset locomo"))
    for dataset, path, says in cases:
        result = runner.invoke(
            main, [*build, "validate", "--dataset", dataset, "--data", str(path)]
        )
        assert result.exit_code == 1, result.output
        assert result.stderr.strip() == (
            f"recallbench validate: error: {path}: this looks like {says}"
        )


def test_the_generator_replaces_only_its_own_directory(files: dict[str, Path], tmp_path: Path):
    out = tmp_path / "v2"
    generate(out, layout="directory", conversations=1, sessions=2, turns_per_session=2, seed=1)
    generate(out, layout="directory", conversations=2, sessions=2, turns_per_session=2, seed=1)
    assert sorted(p.name for p in out.iterdir()) == ["1.json", "2.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    (out / "mine.txt").write_text("a user's file")
    with pytest.raises(
        RecallbenchError, match="is not a per-conversation directory this generator"
    ):
        generate(out, layout="directory", conversations=1, sessions=2, turns_per_session=2)
    assert (out / "mine.txt").exists()


def test_no_output_is_written_into_a_data_directory(files: dict[str, Path], tmp_path: Path):
    """The per-conversation directory is an input with everything in it: an output inside
    it is refused before any work."""
    inside = files["directory"] / "results.json"
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "run", "--dataset", "locomo", "--system", "bm25"]
        + ["--data", str(files["directory"]), "--output", str(inside)],
    )
    assert result.exit_code == 1, result.output
    assert "would overwrite the data file this command reads" in result.stderr
    assert not inside.exists()


def test_the_generators_lines_show_control_characters_escaped(tmp_path: Path) -> None:
    """A generator's closing line and its one-line error name the path as the CLI's own
    lines do (`escape.terminal`): a CR in it cannot rewrite the line."""
    made = CliRunner().invoke(
        main, ["locomo", "generate", "--out", str(tmp_path / "a\rb.json"), "--conversations", "1"]
    )
    assert made.exit_code == 0, made.output
    assert "\r" not in made.stdout and "aU+000Db.json: 1 synthetic conversations" in made.stdout
    (tmp_path / "c\rd").write_text("not a directory")
    refused = CliRunner().invoke(
        main, ["locomo", "generate", "--out", str(tmp_path / "c\rd"), "--layout", "directory"]
    )
    assert refused.exit_code == 1
    assert "\r" not in refused.stderr and "cU+000Dd exists" in refused.stderr


def test_a_members_errors_name_its_fields_as_the_member_holds_them(tmp_path: Path) -> None:
    """Every field a member's error names is the member's own (`session_1[0]`), never the
    array file's `conversation.session_1[0]`, in the message's second reference too."""
    out = tmp_path / "d"
    generate(out, conversations=1, seed=0, layout="directory")
    (member,) = sorted(out.iterdir())
    doc = json.loads(member.read_text())
    doc["session_1"][1]["dia_id"] = doc["session_1"][0]["dia_id"]
    member.write_text(json.dumps(doc))
    refused = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "validate", "--dataset", "locomo", "--data", str(out)],
    )
    assert refused.exit_code == 1
    assert f"{member}: field 'session_1[1].dia_id'" in refused.stderr
    assert "repeats the dia_id of 'session_1[0]'" in refused.stderr
    assert "conversation." not in refused.stderr
