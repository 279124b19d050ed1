"""LoCoMo reader and generator: counts, drops, evidence parsing, text rules, units, opaque
ids, one-line errors, and synthetic files (never the real, CC BY-NC data)."""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.core.ids import opaque_id
from recallbench.core.model import Drop, Scope
from recallbench.datasets.base import dataset_policy, family_measures
from recallbench.datasets.locomo.generator import _TEMPLATES, generate
from recallbench.datasets.locomo.reader import (
    CATEGORIES,
    CATEGORY_LABELS,
    DROP_RULES,
    LoCoMoSource,
    open_source,
    parse_evidence,
    turn_text,
)

# -- a hand-written file -------------------------------------------------------------------


def _turn(dia_id: str, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _qa(category: int, evidence: list[str], question: str = "What happened?") -> dict:
    item: dict[str, Any] = {"question": question, "evidence": evidence, "category": category}
    if category == 5:
        item["adversarial_answer"] = "a guess"
    else:
        item["answer"] = "something"
    return item


SAMPLE_A: dict[str, Any] = {
    "qa": [
        _qa(4, ["D1:2"], "What did Bob buy?"),  # q0 scored
        _qa(1, ["D1:2; D2:1"]),  # q1 scored, one entry with two ids
        _qa(2, [" D2:1 "]),  # q2 scored, stray spaces
        _qa(5, ["D1:1"]),  # q3 dropped: adversarial
        _qa(3, []),  # q4 dropped: no evidence (empty)
        _qa(4, ["D3:1"]),  # q5 dropped: no evidence (session 3 has only a date)
        _qa(1, ["D1:1,D1:3", "D9:9", "junk"]),  # q6 scored; 1 unresolved, 1 unparseable
        _qa(2, ["D2 : 2"]),  # q7 scored, spaces around the colon
    ],
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("D1:1", "Ann", "Hi Bob"),
            _turn(
                "D1:2",
                "Bob",
                "I bought a kayak",
                img_url=["https://img.invalid/k.jpg"],
                blip_caption="  a red kayak ",
                query="red kayak",
            ),
            _turn("D1:3", "Ann", "Thanks!"),
        ],
        "session_2_date_time": "9:00 am on 10 May, 2023",
        "session_2": [_turn("D2:1", "Bob", "We went to Oslo"), _turn("D2:2", "Ann", "Thanks!")],
        "session_3_date_time": "9:00 am on 11 May, 2023",
    },
    "event_summary": {"events_session_1": {"Ann": [], "Bob": ["bought a kayak"]}},
    "observation": {"session_1_observation": {"Bob": [["Bob owns a kayak", "D1:2"]]}},
    "session_summary": {"session_1_summary": "Ann and Bob talk."},
    "sample_id": "conv-a",
}
SAMPLE_B: dict[str, Any] = {  # every question dropped: no scope, only drops
    "qa": [_qa(5, ["D1:1"])],
    "conversation": {
        "speaker_a": "Cy",
        "speaker_b": "Di",
        "session_1_date_time": "1:00 pm on 1 June, 2023",
        "session_1": [_turn("D1:1", "Cy", "hello")],
    },
    "sample_id": "conv-b",
}

SESSION_D1 = "Ann: Hi Bob\nBob: I bought a kayak [shares an image: a red kayak]\nAnn: Thanks!"
SESSION_D2 = "Bob: We went to Oslo\nAnn: Thanks!"


def _write(path: Path, samples: Any) -> Path:
    path.write_bytes(orjson.dumps(samples, option=orjson.OPT_INDENT_2))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return _write(tmp_path / "locomo10.json", [SAMPLE_A, SAMPLE_B])


def _read(path: Path, unit: str = "session") -> tuple[LoCoMoSource, list[Scope | Drop]]:
    source = open_source({"data": path}, {"unit": unit})
    return source, list(source.stream())


# -- counts and drops ----------------------------------------------------------------------


def test_counts_by_category_and_drops_match_hand_counts(tiny: Path) -> None:
    source, items = _read(tiny)
    summary = source.summary()
    assert summary["questions"] == {"1": 2, "2": 2, "3": 1, "4": 2, "5": 2}
    assert summary["questions_total"] == 9
    assert summary["scored"] == {"1": 2, "2": 2, "3": 0, "4": 1, "5": 0}
    assert summary["dropped"] == {"adversarial": 2, "no_evidence": 2}
    assert summary["conversations"] == 2
    assert summary["conversations_without_scored_questions"] == 1
    assert summary["sessions"] == 3
    assert summary["session_dates_without_sessions"] == 1
    assert summary["turns"] == 6
    assert summary["turns_with_images"] == 1
    assert summary["evidence_entries"] == 10
    assert summary["multi_id_evidence_entries"] == 2
    assert summary["unparseable_evidence_entries"] == 1
    assert summary["unresolved_evidence_ids"] == 2

    # stream order: conversation A's drops, its scope, then B's drop (B has no scope)
    kinds = [
        (type(i).__name__, getattr(i, "query_id", getattr(i, "scope_id", None))) for i in items
    ]
    assert kinds == [
        ("Drop", "conv-a:q3"),
        ("Drop", "conv-a:q4"),
        ("Drop", "conv-a:q5"),
        ("Scope", "conv-a"),
        ("Drop", "conv-b:q0"),
    ]
    drops = [i for i in items if isinstance(i, Drop)]
    assert [d.reason for d in drops] == ["adversarial", "no_evidence", "no_evidence", "adversarial"]
    assert drops[0].detail.startswith("category 5 (adversarial): left out by default")
    assert "--categories all scores it" in drops[0].detail
    assert drops[0].category == "5" and drops[0].scope_id == "conv-a"
    assert "empty evidence list" in drops[1].detail
    assert "D3:1" in drops[2].detail
    assert set(DROP_RULES) == {"adversarial", "no_evidence"}

    scope = next(i for i in items if isinstance(i, Scope))
    assert [q.query_id for q in scope.queries] == [
        "conv-a:q0",
        "conv-a:q1",
        "conv-a:q2",
        "conv-a:q6",
        "conv-a:q7",
    ]
    assert [q.category for q in scope.queries] == ["4", "1", "2", "1", "2"]
    assert scope.queries[0].text == "What did Bob buy?"


def test_categories_all_scores_category_5_with_its_evidence(tiny: Path) -> None:
    """--categories all: the two category-5 questions are scored with their evidence (D1:1,
    session D1), in category "5"; conversation B, whose one question is category 5, is now a
    scope; the option is recorded and the category-5 note says so."""
    source = open_source({"data": tiny}, {"unit": "turn", "categories": "all"})
    items = list(source.stream())
    summary = source.summary()
    assert summary["scored"] == {"1": 2, "2": 2, "3": 0, "4": 1, "5": 2}
    assert summary["dropped"] == {"adversarial": 0, "no_evidence": 2}
    assert summary["conversations_without_scored_questions"] == 0
    scopes = {i.scope_id: i for i in items if isinstance(i, Scope)}
    assert sorted(scopes) == ["conv-a", "conv-b"]
    adversarial = [q for s in scopes.values() for q in s.queries if q.category == "5"]
    assert [q.query_id for q in adversarial] == ["conv-a:q3", "conv-b:q0"]
    for q in adversarial:
        assert q.relevance == {"session": {"D1": 2}, "turn": {"D1:1": 2}}
    assert [d.reason for d in items if isinstance(d, Drop)] == ["no_evidence", "no_evidence"]
    assert source.options == {"unit": "turn", "categories": "all"}
    assert any(n.startswith("Category 5 (adversarial) questions are kept") for n in source.notes)
    # the default: category 5 dropped, nothing recorded
    default = open_source({"data": tiny}, {"unit": "turn", "categories": "1-4"})
    assert default.options == {"unit": "turn"}
    with pytest.raises(RecallbenchError, match="--categories must be one of 1-4, all, not '5'"):
        open_source({"data": tiny}, {"categories": "5"})


def test_declared_categories_levels_and_measures(tiny: Path) -> None:
    source = open_source({"data": tiny}, {})
    assert source.name == "locomo"
    assert source.options == {"unit": "session"}
    assert source.categories == ("1", "2", "3", "4", "5") == CATEGORIES
    assert CATEGORY_LABELS == {
        "1": "1 multi-hop",
        "2": "2 temporal",
        "3": "3 open-domain",
        "4": "4 single-hop",
        "5": "5 adversarial",
    }
    assert dataset_policy("locomo") is None  # no decision rules
    assert source.size_bytes == tiny.stat().st_size
    notes = " ".join(source.notes)
    assert "differently" in notes and "Category 5" in notes and "blip_caption" in notes
    assert [lv.name for lv in source.levels] == ["session"]
    names = [m.name for m in family_measures("locomo", source.levels, 10)]
    assert names[:4] == ["recall@1", "recall_any@1", "recall_all@1", "ndcg_any@1"]
    assert "ndcg_any@10" in names and not any(n.startswith("turn_") for n in names)

    turn = open_source({"data": tiny}, {"unit": "turn"})
    assert [(lv.name, lv.prefix) for lv in turn.levels] == [("session", ""), ("turn", "turn_")]
    names = [m.name for m in family_measures("locomo", turn.levels, 10)]
    assert names[0] == "recall@1" and "turn_recall_all@5" in names and len(names) == 24
    assert [m.name for m in family_measures("locomo", turn.levels, 5)][-1] == "turn_ndcg_any@5"


# -- evidence parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("D1:3", ((1, 3),)),
        ("D1:3; D2:5", ((1, 3), (2, 5))),
        (" D4:1", ((4, 1),)),
        ("D10:2,D10:3", ((10, 2), (10, 3))),
        ("D3:1 D3:2;D4:7", ((3, 1), (3, 2), (4, 7))),
        ("D4 : 1", ((4, 1),)),
        ("D4: 1", ((4, 1),)),
        ("d4:1", ((4, 1),)),
        ("D04:01", ((4, 1),)),
        ("D8:", ()),
        ("D", ()),
        ("", ()),
        ("junk", ()),
    ],
)
def test_parse_evidence(entry: str, expected: tuple) -> None:
    assert parse_evidence(entry) == expected


def test_relevance_from_messy_evidence(tiny: Path) -> None:
    _, items = _read(tiny, "turn")
    scope = next(i for i in items if isinstance(i, Scope))
    by_id = {q.query_id: q for q in scope.queries}
    assert by_id["conv-a:q0"].relevance == {"session": {"D1": 2}, "turn": {"D1:2": 2}}
    assert by_id["conv-a:q1"].relevance == {
        "session": {"D1": 2, "D2": 2},
        "turn": {"D1:2": 2, "D2:1": 2},
    }
    assert by_id["conv-a:q2"].relevance == {"session": {"D2": 2}, "turn": {"D2:1": 2}}
    assert by_id["conv-a:q6"].relevance == {"session": {"D1": 2}, "turn": {"D1:1": 2, "D1:3": 2}}
    assert "D9:9" in by_id["conv-a:q6"].notes and "junk" in by_id["conv-a:q6"].notes
    assert by_id["conv-a:q7"].relevance == {"session": {"D2": 2}, "turn": {"D2:2": 2}}
    assert by_id["conv-a:q0"].notes == ""

    _, items = _read(tiny, "session")
    scope = next(i for i in items if isinstance(i, Scope))
    assert {q.query_id: dict(q.relevance) for q in scope.queries}["conv-a:q1"] == {
        "session": {"D1": 2, "D2": 2}
    }


# -- text rules and units ------------------------------------------------------------------


def test_turn_text_rule() -> None:
    assert turn_text("Ann", "Hi") == "Ann: Hi"
    assert turn_text("Bob", "Look", "a red kayak") == "Bob: Look [shares an image: a red kayak]"
    assert turn_text("Bob", "Look", "  a kayak \n") == "Bob: Look [shares an image: a kayak]"
    assert turn_text("Bob", "Look", "   ") == "Bob: Look"
    assert turn_text("Bob", "Look", None) == "Bob: Look"


def test_session_unit_memories(tiny: Path) -> None:
    _, items = _read(tiny, "session")
    scope = next(i for i in items if isinstance(i, Scope))
    assert scope.scope_id == "conv-a"
    assert [m.text for m in scope.memories] == [SESSION_D1, SESSION_D2]
    assert [dict(m.units) for m in scope.memories] == [{"session": ("D1",)}, {"session": ("D2",)}]
    assert [m.memory_id for m in scope.memories] == [
        opaque_id("conv-a", "D1"),
        opaque_id("conv-a", "D2"),
    ]


def test_turn_unit_memories_merge_identical_texts(tiny: Path) -> None:
    source, items = _read(tiny, "turn")
    scope = next(i for i in items if isinstance(i, Scope))
    assert [m.text for m in scope.memories] == [
        "Ann: Hi Bob",
        "Bob: I bought a kayak [shares an image: a red kayak]",
        "Ann: Thanks!",  # D1:3 and D2:2 have the same text: stored once, stands for both
        "Bob: We went to Oslo",
    ]
    assert [dict(m.units) for m in scope.memories] == [
        {"turn": ("D1:1",), "session": ("D1",)},
        {"turn": ("D1:2",), "session": ("D1",)},
        {"turn": ("D1:3", "D2:2"), "session": ("D1", "D2")},
        {"turn": ("D2:1",), "session": ("D2",)},
    ]
    assert scope.memories[2].memory_id == opaque_id("conv-a", "D1:3")
    assert source.summary()["memories"] == 4
    assert source.summary()["merged_duplicate_texts"] == 1


def test_ids_the_store_sees_are_opaque(tiny: Path, tmp_path: Path) -> None:
    generated = tmp_path / "gen.json"
    generate(generated, conversations=2, questions_per_conversation=20, seed=5)
    for path in (tiny, generated):
        for unit in ("session", "turn"):
            _, items = _read(path, unit)
            for scope in (i for i in items if isinstance(i, Scope)):
                dataset_ids = {scope.scope_id}
                for m in scope.memories:
                    dataset_ids.update(i for ids in m.units.values() for i in ids)
                for m in scope.memories:
                    assert re.fullmatch(r"m[0-9a-f]{20}", m.memory_id)
                    assert m.identifier == "locomo" and m.tags == () and m.importance == 0.5
                    assert m.duplicate_group is None
                    assert not re.search(r"D\d+:\d+", m.text), m.text
                    assert scope.scope_id not in m.text
                    for dataset_id in dataset_ids:
                        assert dataset_id not in m.memory_id


# -- identity ------------------------------------------------------------------------------


def test_identity_of_an_unknown_file(tiny: Path) -> None:
    source, _ = _read(tiny)
    ident = source.identity()
    assert ident == {
        "dataset": "locomo",
        "files": [
            {
                "role": "data",
                "name": "locomo10.json",
                "size_bytes": tiny.stat().st_size,
                "sha256": hashlib.sha256(tiny.read_bytes()).hexdigest(),
            }
        ],
        "known": False,
        "label": "LoCoMo-format file (sha256 matches no release recorded here)",
    }
    # before streaming, identity() hashes the file itself
    assert open_source({"data": tiny}, {}).identity() == ident


def test_progress_reports_every_byte(tiny: Path) -> None:
    seen: list[int] = []
    list(open_source({"data": tiny}, {}).stream(seen.append))
    assert sum(seen) == tiny.stat().st_size


# -- malformed input: one line, file, record, sample id, field ----------------------------


def _mutated(change) -> list[dict[str, Any]]:
    sample = copy.deepcopy(SAMPLE_A)
    change(sample)
    return [sample]


def _set(path: list[Any], value: Any, *, delete: bool = False):
    def change(sample: dict[str, Any]) -> None:
        target = sample
        for key in path[:-1]:
            target = target[key]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


WHO = "record[0] (sample_id 'conv-a'): "
MALFORMED = [
    (_set(["sample_id"], None, delete=True), "record[0]: field 'sample_id' is missing"),
    (_set(["sample_id"], 26), "record[0]: field 'sample_id' must be a string, not an integer"),
    (_set(["sample_id"], ""), "record[0] (sample_id ''): field 'sample_id' must not be empty"),
    (_set(["conversation"], None, delete=True), WHO + "field 'conversation' is missing"),
    (_set(["conversation"], []), WHO + "field 'conversation' must be an object, not a list"),
    (_set(["qa"], None, delete=True), WHO + "field 'qa' is missing"),
    (_set(["qa"], {}), WHO + "field 'qa' must be a list, not an object"),
    (
        _set(["conversation", "session_2"], "x"),
        WHO + "field 'conversation.session_2' must be a list of turns, not a string",
    ),
    (
        _set(["conversation", "session_1", 1, "dia_id"], None, delete=True),
        WHO + "field 'conversation.session_1[1].dia_id' is missing",
    ),
    (
        _set(["conversation", "session_1", 0, "text"], None, delete=True),
        WHO + "field 'conversation.session_1[0].text' is missing",
    ),
    (
        _set(["conversation", "session_2", 0, "speaker"], None, delete=True),
        WHO + "field 'conversation.session_2[0].speaker' is missing",
    ),
    (
        _set(["conversation", "session_1", 0, "text"], 3),
        WHO + "field 'conversation.session_1[0].text' must be a string, not an integer",
    ),
    (
        _set(["conversation", "session_1", 0, "dia_id"], "turn-1"),
        WHO + "field 'conversation.session_1[0].dia_id' must look like 'D<session>:<turn>'",
    ),
    (
        _set(["conversation", "session_2", 1, "dia_id"], "D1:3"),
        WHO + "field 'conversation.session_2[1].dia_id' 'D1:3' repeats the dia_id of "
        "'conversation.session_1[2]'",
    ),
    (
        _set(["conversation", "session_1", 0, "blip_caption"], ["x"]),
        WHO + "field 'conversation.session_1[0].blip_caption' must be a string, not a list",
    ),
    (_set(["qa", 2], "q"), WHO + "field 'qa[2]' must be an object, not a string"),
    (
        _set(["qa", 2, "question"], None, delete=True),
        WHO + "field 'qa[2].question' is missing",
    ),
    (_set(["qa", 2, "category"], 7), WHO + "field 'qa[2].category' must be one of 1-5, not 7"),
    (
        _set(["qa", 2, "category"], "2"),
        WHO + "field 'qa[2].category' must be an integer, not a string",
    ),
    (
        _set(["qa", 2, "category"], None, delete=True),
        WHO + "field 'qa[2].category' is missing",
    ),
    (_set(["qa", 2, "evidence"], "D1:1"), WHO + "field 'qa[2].evidence' must be a list"),
    (
        _set(["qa", 2, "evidence"], ["D1:1", 4]),
        WHO + "field 'qa[2].evidence[1]' must be a string, not an integer",
    ),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_malformed_samples_are_one_line_errors(tmp_path: Path, change, message: str) -> None:
    path = _write(tmp_path / "bad.json", _mutated(change))
    with pytest.raises(RecallbenchError) as info:
        list(open_source({"data": path}, {}).stream())
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: {message}"), text


def test_duplicate_sample_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "dup.json", [SAMPLE_A, SAMPLE_A])
    with pytest.raises(RecallbenchError, match=re.escape("record[1] (sample_id 'conv-a'): ")):
        list(open_source({"data": path}, {}).stream())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "expected a JSON array of LoCoMo samples, found an empty file"),
        (
            b'{"sample_id": "x"}',
            "one JSON object, as in LoCoMo's per-conversation layout, but not named <n>.json",
        ),
        (b"[]", "the array holds no records"),
        (b"[1]", "record[0]: must be an object, not an integer"),
        (
            b'[{"sample_id": "a", "qa": [], "conversation": {}}, {"sam',
            "invalid JSON after record[0]",
        ),
    ],
)
def test_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(RecallbenchError) as info:
        list(open_source({"data": path}, {}).stream())
    assert str(info.value).startswith(f"{path}: {message}"), str(info.value)
    assert "\n" not in str(info.value)


def test_bad_paths_and_options(tmp_path: Path, tiny: Path) -> None:
    with pytest.raises(RecallbenchError, match="missing.json does not exist"):
        open_source({"data": tmp_path / "missing.json"}, {})
    with pytest.raises(RecallbenchError, match="locomo10.json: not a conversation file of Lo"):
        open_source({"data": tmp_path}, {})  # a directory: the per-conversation layout's?
    with pytest.raises(RecallbenchError, match="is a character device; give a regular file"):
        open_source({"data": Path("/dev/zero")}, {})
    with pytest.raises(RecallbenchError, match="--unit must be one of session, turn, not 'chunk'"):
        open_source({"data": tiny}, {"unit": "chunk"})
    with pytest.raises(RecallbenchError, match="--dataset locomo needs --data FILE"):
        open_source({}, {})
    with pytest.raises(RecallbenchError, match="LoCoMo has no option 'session_text'"):
        open_source({"data": tiny}, {"session_text": "all"})
    assert open_source({"data": tiny}, {"unit": None, "session_text": None}).unit == "session"


# -- the generator -------------------------------------------------------------------------


def test_generator_version_1_output_is_pinned(tmp_path: Path) -> None:
    """GENERATOR_VERSION 1 means these bytes: a seed gives the conversations it always gave
    (3 conversations, seed 0, as first written; a change to the output needs a new version)."""
    meta = generate(tmp_path / "d.json", conversations=3, seed=0)
    assert meta["sha256"] == "0fb0f674fdc755c14cbf7bc33a370f5f68c4d3516f8933d770488322801448c2"


def test_generator_is_deterministic(tmp_path: Path) -> None:
    """(How long this call takes is a figure of benchmarks/bench_generators.py.)"""
    first = generate(tmp_path / "a.json", conversations=2, seed=7)
    second = generate(tmp_path / "b.json", conversations=2, seed=7)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert first["sha256"] == second["sha256"]
    assert first["sha256"] == hashlib.sha256((tmp_path / "a.json").read_bytes()).hexdigest()
    other = generate(tmp_path / "c.json", conversations=2, seed=8)
    assert other["sha256"] != first["sha256"]
    assert not list(tmp_path.glob(".*.tmp"))
    sidecar = orjson.loads((tmp_path / "a.json.generated.json").read_bytes())
    assert sidecar["generator"] == "recallbench.datasets.locomo_generator"
    assert sidecar["parameters"]["seed"] == 7 and sidecar["sha256"] == first["sha256"]
    turns = first["counts"]["turns"]
    assert 2 * 19 * 10 <= turns <= 2 * 32 * 30


def test_generated_file_has_the_traps(tmp_path: Path) -> None:
    path = tmp_path / "gen.json"
    generate(path, conversations=3, questions_per_conversation=120, seed=1)
    data = orjson.loads(path.read_bytes())
    assert [s["sample_id"] for s in data] == ["conv-1", "conv-2", "conv-3"]
    for sample in data:
        assert {"qa", "conversation", "event_summary", "observation", "session_summary"} <= set(
            sample
        )
    qa = [q for s in data for q in s["qa"]]
    adversarial = [q for q in qa if q["category"] == 5]
    assert adversarial and all("adversarial_answer" in q for q in adversarial)
    assert any("answer" not in q for q in adversarial)
    entries = [e for q in qa for e in q["evidence"]]
    assert any(len(parse_evidence(e)) > 1 for e in entries)  # several ids in one entry
    assert any(e != e.strip() for e in entries)  # stray spaces
    assert any(q["evidence"] == [] for q in qa)  # empty evidence
    turns = [t for s in data for k, v in s["conversation"].items() if k[-1].isdigit() for t in v]
    assert any("blip_caption" in t and "img_url" in t for t in turns)
    conv = data[0]["conversation"]
    dates = {k[: -len("_date_time")] for k in conv if k.endswith("_date_time")}
    assert dates - set(conv)  # date keys of sessions that do not exist


def test_reader_accepts_generated_files_and_labels_them_synthetic(tmp_path: Path) -> None:
    path = tmp_path / "gen.json"
    meta = generate(path, conversations=3, questions_per_conversation=(40, 60), seed=2)
    expected = meta["counts"]
    for unit in ("session", "turn"):
        source, items = _read(path, unit)
        summary = source.summary()
        assert summary["questions"] == expected["questions"]
        assert summary["dropped"] == {
            "adversarial": expected["adversarial"],
            "no_evidence": expected["no_evidence"],
        }
        assert expected["no_evidence"] == 3  # one per conversation, of three kinds
        for key in (
            "sessions",
            "turns",
            "turns_with_images",
            "session_dates_without_sessions",
            "evidence_entries",
            "multi_id_evidence_entries",
            "unparseable_evidence_entries",
            "unresolved_evidence_ids",
        ):
            assert summary[key] == expected[key], key
        scopes = [i for i in items if isinstance(i, Scope)]
        assert len(scopes) == 3
        scored = sum(len(s.queries) for s in scopes)
        assert scored == expected["questions_total"] - expected["adversarial"] - 3
        ident = source.identity()
        assert ident["known"] is True
        assert ident["label"].startswith("synthetic data from the recallbench generator (")
        assert ident["label"].endswith("- not LoCoMo")
        assert ident["files"][0]["sha256"] == meta["sha256"]

    # an edited copy no longer matches its sidecar: unknown again
    path.write_bytes(path.read_bytes() + b" ")
    source, _ = _read(path)
    assert source.identity()["known"] is False


def test_generated_category_5_is_scored_with_categories_all_and_only_then(tmp_path: Path):
    """Every generated category-5 question carries evidence of real turns (as in the real
    file): --categories all scores all of them; without it none, and the other questions'
    scopes are the same."""
    path = tmp_path / "gen.json"
    meta = generate(path, conversations=2, questions_per_conversation=(40, 60), seed=4)
    default = open_source({"data": path}, {})
    everything = open_source({"data": path}, {"categories": "all"})
    scopes = {
        name: [i for i in source.stream() if isinstance(i, Scope)]
        for name, source in (("default", default), ("all", everything))
    }
    assert everything.summary()["scored"]["5"] == meta["counts"]["questions"]["5"] > 0
    assert default.summary()["scored"]["5"] == 0
    for mine, theirs in zip(scopes["default"], scopes["all"], strict=True):
        assert mine.memories == theirs.memories
        kept = tuple(q for q in theirs.queries if q.category != "5")
        assert mine.queries == kept


def test_generated_evidence_shares_vocabulary_with_its_question(tmp_path: Path) -> None:
    path = tmp_path / "gen.json"
    generate(path, conversations=1, questions_per_conversation=60, seed=3)
    _, items = _read(path, "turn")
    scope = next(i for i in items if isinstance(i, Scope))
    text_of = {u: m.text for m in scope.memories for u in m.units["turn"]}
    template_words = set(re.findall(r"[a-z]+", " ".join(_TEMPLATES.values()).lower()))
    sharing = 0
    for q in scope.queries:
        # the question's key words: not template words, not speaker names
        keys = set(re.findall(r"\b[a-z]+\b", q.text)) - template_words
        assert len(keys) == 3, q.text
        evidence = " ".join(text_of[t] for t in q.relevance["turn"])
        sharing += bool(keys & set(re.findall(r"[a-z]+", evidence)))
    # most, not necessarily all, evidence shares a key word with its question
    assert 0.6 * len(scope.queries) <= sharing


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        # a lone high surrogate was silently read as '?' (in texts and ids alike)
        (b'"I bought a kayak"', b'"I bought \\ud800 a kayak"', "conversation.session_1[1].text"),
        # a lone low one was "invalid JSON before the first record ... position 0"
        (b'"We went to Oslo"', b'"We went \\udc00to Oslo"', "conversation.session_2[0].text"),
        (b'"D1:2"', b'"D1:2\\udbff"', "qa[0].evidence[0]"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_record_and_field(
    tmp_path: Path, old: bytes, new: bytes, field: str
) -> None:
    raw = orjson.dumps([SAMPLE_B, SAMPLE_A], option=orjson.OPT_INDENT_2)
    assert old in raw
    path = tmp_path / "bad.json"
    path.write_bytes(raw.replace(old, new, 1))
    with pytest.raises(RecallbenchError) as info:
        list(open_source({"data": path}, {}).stream())
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: record[1] (sample_id 'conv-a'): field '{field}' holds a lone")


def test_an_escaped_surrogate_pair_is_text(tmp_path: Path) -> None:
    """A pair (an emoji as json.dump writes it with ensure_ascii) is read as the emoji; an
    escaped backslash before `ud800` is no escape at all."""
    raw = orjson.dumps([SAMPLE_A], option=orjson.OPT_INDENT_2)
    path = tmp_path / "ok.json"
    path.write_bytes(
        raw.replace(b'"Hi Bob"', b'"Hi Bob \\ud83d\\ude00"').replace(
            b'"Thanks!"', b'"Thanks \\\\ud800!"', 1
        )
    )
    _, items = _read(path)
    texts = [m.text for s in items if isinstance(s, Scope) for m in s.memories]
    assert any("Hi Bob \U0001f600" in t for t in texts)
    assert any("Thanks \\ud800!" in t for t in texts)
