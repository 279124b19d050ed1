"""vectorprep: prep's progress bar knows its total from the start (the distinct texts of
validate's spool), so it shows an ETA: `prep hotmem: 0/136 text` rather than
`0text [00:00, ?text/s]`. On the fixtures with HotMem's hash embedder (no model)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from recallbench.builddir.artifacts import read_artifact
from recallbench.cli.main import main
from recallbench.core import progress
from recallbench.engine.vectorcache import MANIFEST
from recallbench.engine.vectorprep import distinct_texts

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("prep-progress") / "build"
    args = [
        "--corpus",
        str(FIXTURES / "corpus.jsonl"),
        "--queries",
        str(FIXTURES / "queries.jsonl"),
    ]
    done = CliRunner().invoke(main, ["--build-dir", str(build), "-q", "validate", *args])
    assert done.exit_code == 0, done.output
    return build


def test_the_total_is_the_distinct_texts_prep_embeds(validated: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done = CliRunner().invoke(
        main,
        ["--build-dir", str(validated), "-q", "prep", "--cache", str(cache), "--system", "hotmem"],
    )
    assert done.exit_code == 0, done.output
    texts = orjson.loads((cache / MANIFEST).read_bytes())["texts"]
    # the fixtures repeat one text: 80 memories + 57 queries, 136 distinct
    assert texts == {"seen": 137, "distinct": 136}
    assert distinct_texts(read_artifact(validated, "suite")) == texts["distinct"]


def test_the_bar_shows_the_total_from_the_start(
    validated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interactive stderr (forced): the bar's first frame already reads 0/136."""
    monkeypatch.setattr(progress, "enabled", lambda: True)
    done = CliRunner().invoke(
        main,
        [
            "--build-dir",
            str(validated),
            "prep",
            "--cache",
            str(tmp_path / "c"),
            "--system",
            "hotmem",
        ],
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.output
    frames = [f.strip() for f in done.stderr.split("\r") if f.strip().startswith("prep hotmem")]
    assert frames, done.stderr
    # the first frame: a percentage of a known total, and the ETA tqdm gives one (<?)
    assert frames[0].startswith("prep hotmem:   0%"), frames[0]
    assert "| 0/136 [00:00<" in frames[0], frames[0]
    assert all("/136 [" in f for f in frames), frames


def test_one_count_decides_the_plan_with_or_without_a_bar(
    validated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quiet or not a terminal, the spool is counted once (reading and hashing, no
    tokenizing): the count caps the plan at the batches and is said with it."""
    import recallbench.engine.vectorprep as vectorprep

    calls: list[object] = []
    count = vectorprep.distinct_texts
    monkeypatch.setattr(
        vectorprep, "distinct_texts", lambda *args: calls.append(args) or count(*args)
    )
    monkeypatch.setattr(progress, "enabled", lambda: False)
    made = vectorprep.make_vector_cache(
        read_artifact(validated, "suite"), validated / "c2", "hotmem"
    )
    assert len(calls) == 1 and made["texts"]["distinct"] == 136


def test_a_cache_keeps_its_texts_when_only_forms_are_missing() -> None:
    """Forms are added to a cache of the current layout whose transforms join the store's;
    a cache that placed its forms among its texts (an older recallbench) is remade, and a
    role would never hold two transforms."""
    from recallbench.engine.vectorprep import BATCHING, current_layout, joined_transforms

    assert joined_transforms(None, {"query": "strip"}) == {"query": "strip"}
    assert joined_transforms({"memory": "strip"}, {"query": "strip"}) == {
        "memory": "strip",
        "query": "strip",
    }
    assert joined_transforms({"query": "strip"}, {"query": "lower"}) is None
    plain = {"batching": BATCHING}
    assert current_layout(plain)
    assert current_layout({**plain, "text_transforms": {"query": "strip"}, "forms": {"rows": 0}})
    assert not current_layout({**plain, "text_transforms": {"query": "strip"}})
    assert not current_layout({"batching": {**BATCHING, "window": 64}})
