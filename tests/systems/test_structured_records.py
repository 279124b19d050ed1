"""Structured records (plugin API 1.1, issue 43): a plugin that declares `structured = True`
receives each memory's turns and session date and each query's date, where the dataset has
them (generated LongMemEval and LoCoMo files); a plugin that does not declare it receives
plain records and `search(query, top_k)`, as before."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import orjson
import pytest
from plugintools import WORD_STORE, install_plugin

from recallbench.builddir.scopespool import SPOOL, STRUCTURE_SPOOL
from recallbench.commands.pipeline import run_pipeline
from recallbench.core.model import Turn

#: two word-overlap stores that note what they are given (in `SEEN`, read by the tests);
#: `plain` is written as a plugin of plugin API 1 is (no `query_date` parameter: a call with
#: one would fail the run), `structured` declares that it wants structure
SPY_PLUGIN = WORD_STORE + textwrap.dedent(
    """
    SEEN = {"records": [], "query_dates": []}


    class SpyStore(WordStore):
        def ingest(self, records):
            SEEN["records"].extend(records)
            return super().ingest(records)


    class StructuredStore(SpyStore):
        def search(self, query, top_k, *, query_date=None):
            SEEN["query_dates"].append(query_date)
            return super().search(query, top_k)


    def plain():
        return WordSystem("spy-plain", SpyStore)  # as written for plugin API 1: no `structured`


    def structured():
        system = WordSystem("spy-structured", StructuredStore)
        system.structured = True
        return system
    """
)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The spy plugin installed as `spy-plain` and `spy-structured`; yields its `SEEN`."""
    points = {"spy-plain": "plain", "spy-structured": "structured"}
    with install_plugin(monkeypatch, tmp_path, "spy_rb_plugin", SPY_PLUGIN, points) as module:
        yield module.SEEN


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small generated LongMemEval file and a small generated LoCoMo file."""
    from recallbench.datasets.locomo.generator import generate as locomo
    from recallbench.datasets.longmemeval.generator import generate as longmemeval

    where = tmp_path_factory.mktemp("structured")
    longmemeval(
        where / "lme.json", shape="s", questions=6, seed=3, sessions_per_question=3,
        session_chars=200,
    )  # fmt: skip
    locomo(where / "locomo.json", conversations=1, questions_per_conversation=6, seed=3)
    return {"longmemeval": where / "lme.json", "locomo": where / "locomo.json"}


def _run(dataset: str, data: dict[str, Path], system: str, work: Path, unit: str) -> None:
    run_pipeline(
        dataset,
        {"data": data[dataset]},
        work,
        system=system,
        options={"unit": unit},
        sample=1,
        keep_stores=False,  # the spy keeps nothing on disk to attach to
    )


@pytest.mark.parametrize("unit", ["session", "turn"])
def test_longmemeval_structure_reaches_a_plugin_that_asks(spies, data, tmp_path, unit) -> None:
    raw = orjson.loads(data["longmemeval"].read_bytes())
    session_dates = {d for q in raw for d in q["haystack_dates"]}
    question_dates = {q["question_date"] for q in raw}
    _run("longmemeval", data, "spy-structured", tmp_path, unit)
    records = spies["records"]
    assert records and all(r.turns for r in records)
    assert {r.session_date for r in records} <= session_dates
    assert all(r.session_date for r in records)
    roles = {t.role for r in records for t in r.turns}
    if unit == "session":  # every turn of the session, both roles, whatever --session-text
        assert roles == {"user", "assistant"}
        assert all([t.turn_id for t in r.turns] == [str(i + 1) for i in range(len(r.turns))]
                   for r in records)  # fmt: skip
    else:  # one user turn per memory (--session-text user), its position in its session
        assert roles == {"user"} and all(len(r.turns) == 1 for r in records)
        assert all(r.turns[0].text == r.text for r in records)
    # turn ids are positions, never dataset ids (a session id names gold: 'answer_...')
    assert all(re.fullmatch(r"[1-9]\d*", t.turn_id) for r in records for t in r.turns)
    assert all(t.speaker is None and t.timestamp is None for r in records for t in r.turns)
    assert spies["query_dates"] and set(spies["query_dates"]) <= question_dates
    assert None not in spies["query_dates"]


@pytest.mark.parametrize("unit", ["session", "turn"])
def test_locomo_structure_reaches_a_plugin_that_asks(spies, data, tmp_path, unit) -> None:
    raw = orjson.loads(data["locomo"].read_bytes())
    conversation = raw[0]["conversation"]
    dates = {v for k, v in conversation.items() if k.endswith("_date_time")}
    speakers = {conversation["speaker_a"], conversation["speaker_b"]}
    _run("locomo", data, "spy-structured", tmp_path, unit)
    records = spies["records"]
    assert records and all(r.turns and r.session_date in dates for r in records)
    assert {t.speaker for r in records for t in r.turns} == speakers
    for r in records:  # the stored text is the turns' "speaker: text" lines
        assert r.text == "\n".join(f"{t.speaker}: {t.text}" for t in r.turns)
        assert all(t.role is None for t in r.turns)
    assert spies["query_dates"] and set(spies["query_dates"]) == {None}  # LoCoMo has none


@pytest.mark.parametrize("dataset", ["longmemeval", "locomo"])
def test_a_plugin_that_does_not_ask_sees_no_change(spies, data, tmp_path, dataset) -> None:
    """Plain records (no turns, no date) and `search(query, top_k)`: its search takes no
    `query_date`, so the run would fail if one were passed."""
    _run(dataset, data, "spy-plain", tmp_path, "session")
    records = spies["records"]
    assert records and all(r.turns == () and r.session_date is None for r in records)
    assert spies["query_dates"] == []


def test_the_fixtures_have_no_structure(spies, tmp_path) -> None:
    from conftest import CORPUS, QUERIES

    run_pipeline(
        "fixtures", {"corpus": CORPUS, "queries": QUERIES}, tmp_path, system="spy-structured",
        sample=1, keep_stores=False,
    )  # fmt: skip
    records = spies["records"]
    assert records and all(r.turns == () and r.session_date is None for r in records)
    assert spies["query_dates"] and set(spies["query_dates"]) == {None}


@pytest.mark.parametrize(("dataset", "keep"), [("longmemeval", False), ("locomo", True)])
def test_a_plain_run_never_reads_or_builds_the_structure(
    data, tmp_path, monkeypatch, dataset, keep
) -> None:
    """The structure costs a system that does not ask for it nothing past validate: the
    scope spool its tasks read holds no turn or date (they are in the structure spool,
    for a system that asks), and no `Turn` is built anywhere in its run (readers, validate,
    hydrate's kept stores, query's transient ones, the round trip)."""
    built = []
    make_turn = Turn.__init__

    def counted(self, *args, **kwargs) -> None:
        built.append(args)
        make_turn(self, *args, **kwargs)

    monkeypatch.setattr(Turn, "__init__", counted)
    run_pipeline(
        dataset, {"data": data[dataset]}, tmp_path, system="bm25", sample=1, keep_stores=keep
    )
    assert built == []
    for line in (tmp_path / SPOOL).read_bytes().splitlines():
        scope = orjson.loads(line)
        assert not any({"turns", "date"} & set(m) for m in scope["memories"])
        assert not any("date" in q for q in scope["queries"])
    lines = (tmp_path / STRUCTURE_SPOOL).read_bytes().splitlines()
    assert lines and all(m["turns"] for s in map(orjson.loads, lines) for m in s["memories"])


def test_a_structured_system_is_refused_without_its_structure_spool(spies, data, tmp_path) -> None:
    """hydrate refuses it in either mode, before any store is built (a transient plan
    would otherwise fail only at query); a system that does not ask runs without it."""
    from recallbench.core.errors import ArtifactError
    from recallbench.stages.hydrate import run_hydrate
    from recallbench.stages.validate import place_spool, run_validate

    suite = run_validate("longmemeval", {"data": data["longmemeval"]}, spool=tmp_path / SPOOL)
    place_spool(suite)
    (tmp_path / STRUCTURE_SPOOL).unlink()
    for keep in (False, True):
        with pytest.raises(ArtifactError, match="structure spool validate wrote is missing"):
            run_hydrate(suite, tmp_path, "spy-structured", keep=keep)
    assert spies["records"] == []
    run_hydrate(suite, tmp_path, "spy-plain", keep=False)
