"""`recallbench protocols` on a generated LoCoMo file: one table of every definition, each
figure equal to the run that definition names on its own, and the difference from the
default split into parts that sum to it; its files, escaping and one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.datasets.locomo.generator import generate

PARTS = ("unit", "k_counting", "questions", "measure")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("protocols") / "locomo10.json"
    generate(
        path,
        conversations=2,
        sessions=(5, 7),
        turns_per_session=(4, 8),
        questions_per_conversation=(30, 40),
        seed=3,
    )
    return path


@pytest.fixture(scope="module")
def table(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    build = tmp_path_factory.mktemp("protocols-build")
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(build), "protocols", "--dataset", "locomo", "--data", str(data)]
        + ["--system", "bm25"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((build / "protocols.json").read_text())
    return {"doc": doc, "stdout": result.stdout, "stderr": result.stderr, "build": build}


def _figures(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(protocol, figure label) -> the figure."""
    return {
        (p["name"], f["label"]): f
        for p in doc["protocols"]
        for d in p["definitions"]
        for f in d["figures"]
    }


def _overall(tmp: Path, data: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp), "-q", "run", "--dataset", "locomo", "--data", str(data)]
        + ["--system", "bm25", *args],
    )
    assert result.exit_code == 0, result.output
    return json.loads((tmp / "results.json").read_text())["data"]["metrics"]["overall"]


def test_the_table_prints_every_protocol(table: dict[str, Any]) -> None:
    lines = table["stdout"].splitlines()
    assert "protocol" in lines[1] and "difference" in lines[1] and "+ k counting" in lines[1]
    names = {p["name"] for p in table["doc"]["protocols"]}
    assert names == {
        "default",
        "turn unit",
        "category 5 kept",
        "locomo-sessions-of-top-turns",
        "locomo-session-expanded",
    }
    for name in names:
        assert any(line.startswith(name) for line in lines[2:]), name
    assert "any gold session among the sessions of the top k turns" in table["stdout"]
    assert [r["unit"] for r in table["doc"]["runs"]] == ["session", "turn"]
    for name in ("protocols.json", "protocols.md", "protocols.html"):
        assert (table["build"] / name).is_file()
    assert "wrote " in table["stderr"]


def test_the_json_names_its_schema(table: dict[str, Any]) -> None:
    """protocols.json's schema name is a format name readers match on, not a module path:
    moving the module must not change it."""
    assert table["doc"]["schema"] == "recallbench.protocols"
    assert table["doc"]["schema_version"] == 1


def test_the_parts_sum_to_the_difference(table: dict[str, Any]) -> None:
    """Every figure: difference = figure - default, = the sum of its four parts; a part is
    zero where its choice is the default's; some part of each kind is not zero."""
    figures = _figures(table["doc"])
    moved = set()
    for (name, label), f in figures.items():
        k = f["k"]
        default = figures[("default", f"recall_any@{k}")]["value"]
        assert math.isclose(f["difference"], f["value"] - default, abs_tol=1e-12), (name, label)
        assert math.isclose(math.fsum(f["parts"].values()), f["difference"], abs_tol=1e-12)
        assert set(f["parts"]) == set(PARTS)
        moved |= {part for part, d in f["parts"].items() if d != 0}
    assert moved == set(PARTS)
    turn = figures[("turn unit", "recall_any@5")]
    assert turn["parts"]["unit"] == turn["difference"]  # only the unit differs
    kept = figures[("category 5 kept", "recall_any@5")]
    assert kept["parts"]["questions"] == kept["difference"]
    harness = figures[("locomo-sessions-of-top-turns", "any@5")]
    assert harness["parts"]["unit"] == turn["difference"]  # the same first step


def test_each_figure_is_the_run_it_names(table: dict[str, Any], data: Path, tmp_path: Path):
    """The default, --unit turn, --categories all and each preset, run on their own, give
    the table's figures: a protocol differs by definition only, never by ranker."""
    figures = _figures(table["doc"])
    runs = {
        "default": (_overall(tmp_path / "a", data), "recall_any@{k}"),
        "turn unit": (_overall(tmp_path / "b", data, "--unit", "turn"), "recall_any@{k}"),
        "category 5 kept": (
            _overall(tmp_path / "c", data, "--categories", "all"),
            "recall_any@{k}",
        ),
    }
    expanded = _overall(tmp_path / "d", data, "--preset", "locomo-session-expanded")
    top_turns = _overall(tmp_path / "e", data, "--preset", "locomo-sessions-of-top-turns")
    for k in (1, 5, 10):
        assert (
            figures[("locomo-sessions-of-top-turns", f"any@{k}")]["value"]
            == (top_turns[f"turn_sessions_any@{k}"]["value"])
        )
        for name, (overall, measure) in runs.items():
            cell = overall[measure.format(k=k)]
            figure = figures[(name, f"recall_any@{k}")]
            assert figure["value"] == cell["value"] and figure["questions"] == cell["denominator"]
        assert (
            figures[("locomo-session-expanded", f"session-expanded strict@{k}")]["value"]
            == (expanded[f"turn_sessions_all@{k}"]["value"])
        )
        assert (
            figures[("locomo-session-expanded", f"turn-id any@{k}")]["value"]
            == (expanded[f"turn_recall_any@{k}"]["value"])
        )


def test_json_and_markdown_agree(table: dict[str, Any]) -> None:
    markdown = (table["build"] / "protocols.md").read_text()
    page = (table["build"] / "protocols.html").read_text()
    for (name, label), f in _figures(table["doc"]).items():
        assert f"| {name} |" in markdown and f"| {label} |" in markdown
        assert f"{f['value']:.3f}" in markdown and f"{f['value']:.3f}" in page
    assert markdown.count("\n| ") >= len(_figures(table["doc"]))
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page


def test_strings_from_data_are_escaped_in_every_output() -> None:
    from recallbench.commands.protocols import render_html, render_markdown, render_text

    hostile = "<script>alert(1)</script>|*x*\x1b[2J"
    doc = {
        "system": hostile,
        "dataset": {"identity": {"label": hostile}},
        "protocols": [
            {
                "name": hostile,
                "how": hostile,
                "used_by": hostile,
                "definitions": [
                    {
                        "counts": "c",
                        "unit": "turn",
                        "questions": "all",
                        "figures": [
                            {
                                "label": hostile,
                                "value": 0.5,
                                "questions": 3,
                                "difference": 0.0,
                                "parts": dict.fromkeys(PARTS, 0.0),
                            }
                        ],
                    }
                ],
            }
        ],
        "notes": [hostile],
    }
    page = render_html(doc)
    assert "<script>" not in page and "&lt;script&gt;" in page and "\x1b" not in page
    markdown = render_markdown(doc)
    assert "<script>" not in markdown and "\\|" in markdown and "\x1b" not in markdown
    assert "\x1b" not in render_text(doc) and "U+001B" in render_text(doc)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "longmemeval"], "protocols covers --dataset locomo"),
        (["--unit", "turn"], "protocols runs every unit and category itself; drop --unit"),
        (["--categories", "all"], "drop --categories"),
        (["--k", "5,20", "--top-k", "10"], "every k must be at most --top-k 10"),
    ],
)
def test_bad_arguments_are_one_line(data: Path, tmp_path: Path, args: list[str], message: str):
    base = ["--build-dir", str(tmp_path), "protocols", "--data", str(data), "--system", "bm25"]
    if "--dataset" not in args:
        base += ["--dataset", "locomo"]
    result = CliRunner().invoke(main, base + args)
    assert result.exit_code in (1, 2), result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "protocols.json").exists()


def test_an_output_over_the_data_is_refused_before_any_work(data: Path, tmp_path: Path) -> None:
    before = data.read_bytes()
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "protocols", "--dataset", "locomo", "--data", str(data)]
        + ["--system", "bm25", "--output", str(data)],
    )
    assert result.exit_code == 1
    assert "would overwrite the data file this command reads" in result.stderr
    assert data.read_bytes() == before


def test_protocols_resolves_its_system_once_for_both_units(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One registry lookup for the session-unit and the turn-unit run (was one per unit)."""
    from plugintools import count_lookups

    looked_up = count_lookups(monkeypatch)
    result = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "protocols", "--dataset", "locomo", "--data", str(data)]
        + ["--system", "bm25"],
    )
    assert result.exit_code == 0, result.output
    assert looked_up == ["bm25"]
