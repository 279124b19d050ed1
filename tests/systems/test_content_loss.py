"""Content loss reported (issue 43): a system that declares what its stores keep
(`InputLimit`) gets, in hydrate.json, the result and the report, how many stored texts its
stores cannot have seen whole; a system that declares nothing gets no such key (its result
keeps its bytes)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import CORPUS, QUERIES
from plugintools import WORD_STORE, install_plugin

from recallbench.commands.pipeline import run_pipeline
from recallbench.core.errors import RecallbenchError
from recallbench.systems.base import InputLimit, content_cuts

#: a word-overlap store over the first 90 characters of each text, declared (by characters,
#: or by words counted as its tokens), and one that declares something that is no InputLimit
CUT_PLUGIN = WORD_STORE + textwrap.dedent(
    """
    KEEP = 90


    class CutStore(WordStore):
        def kept(self, text):
            return text[:KEEP]


    def cut_system(name, limit):
        system = WordSystem(name, CutStore)
        system.input_limit = limit
        return system


    def words(texts):
        return [len(t.split()) for t in texts]


    def by_chars():
        return cut_system("cut-chars", InputLimit(chars=KEEP))


    def by_words():
        return cut_system("cut-words", InputLimit(tokens=14, model="words", token_counts=words))


    def undeclared():
        return cut_system("cut-undeclared", None)


    def wrong():
        return cut_system("cut-wrong", {"chars": KEEP})
    """
)
POINTS = {
    "cut-chars": "by_chars",
    "cut-words": "by_words",
    "cut-undeclared": "undeclared",
    "cut-wrong": "wrong",
}


@pytest.fixture
def cut_plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with install_plugin(monkeypatch, tmp_path, "rb_cut_plugin", CUT_PLUGIN, POINTS):
        yield


def run(system: str, work: Path):
    return run_pipeline(
        "fixtures",
        {"corpus": CORPUS, "queries": QUERIES},
        work,
        system=system,
        keep_stores=False,
        sample=1,
    )


def corpus_texts() -> list[str]:
    return [json.loads(line)["fact"] for line in CORPUS.read_text().splitlines()]


def test_a_declared_character_limit_is_reported(cut_plugin, tmp_path: Path) -> None:
    texts = corpus_texts()
    longer = [t for t in texts if len(t) > 90]
    made = run("cut-chars", tmp_path)
    loss = made.envelopes["hydrate"]["data"]["content_loss"]
    assert loss == {
        "input_limit": {
            "chars": 90,
            "tokens": None,
            "model": None,
            "described": "90 characters",
        },
        "texts": len(texts),
        "texts_cut": len(longer),
        "chars_total": sum(map(len, texts)),
        "chars_unseen": sum(len(t) - 90 for t in longer),
        "share_cut": len(longer) / len(texts),
        "share_chars_unseen": sum(len(t) - 90 for t in longer) / sum(map(len, texts)),
    }
    assert 0 < len(longer) < len(texts)
    assert made.result["content_loss"] == loss
    said = (
        f"{len(longer)} of {len(texts)} stored texts ({len(longer) / len(texts):.1%}) exceed "
        "what cut-chars declares its stores keep (90 characters): it cannot have seen them "
        "whole"
    )
    assert said in made.markdown
    assert said in made.html.decode()  # the same section in both


def test_a_declared_token_window_is_counted_with_the_declared_counter(cut_plugin, tmp_path):
    texts = corpus_texts()
    loss = run("cut-words", tmp_path).envelopes["hydrate"]["data"]["content_loss"]
    counts = [len(t.split()) for t in texts]
    assert loss["input_limit"]["described"] == "14 tokens of words"
    assert loss["texts_cut"] == sum(c > 14 for c in counts) > 0
    assert loss["tokens_unseen"] == sum(c - 14 for c in counts if c > 14)
    assert "chars_total" not in loss


def test_no_declaration_no_key(cut_plugin, tmp_path: Path) -> None:
    made = run("cut-undeclared", tmp_path)
    assert "content_loss" not in made.envelopes["hydrate"]["data"]
    assert "content_loss" not in made.result
    assert "Store input limit" not in made.markdown
    assert "declares its stores keep" not in made.html.decode()


def test_a_declaration_that_is_no_input_limit_is_one_line(cut_plugin, tmp_path: Path) -> None:
    with pytest.raises(RecallbenchError, match="input_limit is dict, not a recallbench"):
        run("cut-wrong", tmp_path)


def test_input_limits_are_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="needs chars or tokens"):
        InputLimit()
    with pytest.raises(ValueError, match="needs token_counts"):
        InputLimit(tokens=512)
    with pytest.raises(TypeError, match="whole number"):
        InputLimit(chars=1.5)
    assert content_cuts(InputLimit(chars=3), ["abc", "abcd", ""])["cut"] == [1]
