"""Plots: deterministic SVG bytes, listed in results.json, linked from report.md and
compare.md by relative paths that resolve, the forest plot of two real systems, and the docs'
committed baseline plots kept current."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import orjson
import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.commands.compare import compare_results
from recallbench.commands.pipeline import Run, run_pipeline
from recallbench.report import plots
from recallbench.report.comparison import render_markdown

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "benchmarks" / "retrieval"
BASELINE = FIXTURES / "baseline.json"
DOCS_IMG = ROOT / "docs" / "img"
SVG = "{http://www.w3.org/2000/svg}"
LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


def docs_plots():
    """scripts/docs_plots.py, the docs' plot tool, loaded as a module."""
    spec = importlib.util.spec_from_file_location("docs_plots", ROOT / "scripts" / "docs_plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def texts(svg: bytes) -> list[str]:
    """Every text of an SVG (it parses: a well-formed document)."""
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]


def baseline() -> dict:
    return orjson.loads(BASELINE.read_bytes())


@pytest.fixture(scope="module")
def drawn() -> dict[str, bytes]:
    """The report plots of the committed baseline, drawn once."""
    return plots.report_plots(baseline())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """hotmem and bm25 on the committed fixture suite, in process."""
    paths = {"corpus": FIXTURES / "corpus.jsonl", "queries": FIXTURES / "queries.jsonl"}
    return {
        name: run_pipeline("fixtures", paths, tmp_path_factory.mktemp(name), system=name)
        for name in ("hotmem", "bm25")
    }


@pytest.fixture(scope="module")
def comparison(runs: dict[str, Run]) -> dict:
    return compare_results([r.result for r in runs.values()], list(runs), resamples=1000)


@pytest.fixture(scope="module")
def compare_drawn(comparison: dict) -> dict[str, bytes]:
    return plots.compare_plots(comparison)


# --- determinism -----------------------------------------------------------------------


def test_same_result_gives_byte_identical_svg_in_one_process(drawn: dict[str, bytes]) -> None:
    assert list(drawn) == ["report-plots/category-bars.svg", "report-plots/recall-at-k.svg"]
    assert plots.report_plots(baseline()) == drawn
    for svg in drawn.values():
        assert b"<dc:date>" not in svg  # no date
        assert texts(svg)  # parses, text kept as text (svg.fonttype none)


def test_same_bytes_in_another_process_which_writes_nothing_outside(
    drawn: dict[str, bytes], tmp_path: Path
) -> None:
    """A fresh interpreter (fresh matplotlib font list, another hash seed) draws the same
    bytes, and importing matplotlib leaves HOME and TMPDIR as they were."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    code = (
        "import hashlib, json, sys, orjson\n"
        "from recallbench.report import plots\n"
        "r = orjson.loads(open(sys.argv[1], 'rb').read())\n"
        "out = plots.report_plots(r)\n"
        "print(json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in out.items()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONHASHSEED="12345")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(BASELINE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout) == {k: hashlib.sha256(v).hexdigest() for k, v in drawn.items()}
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []


def test_a_changed_result_changes_the_plot(drawn: dict[str, bytes]) -> None:
    changed = baseline()
    cat = changed["dataset"]["categories"][0]
    changed["metrics"]["per_category"][cat]["recall@5"]["value"] = 0.25
    assert plots.category_bars(changed) != drawn["report-plots/category-bars.svg"]


# --- what the plots show -----------------------------------------------------------------


def test_category_bars_show_every_category_with_values_and_counts(
    drawn: dict[str, bytes],
) -> None:
    result = baseline()
    shown = texts(drawn["report-plots/category-bars.svg"])
    headline = [m["name"] for m in plots.headline_measures(result)]
    assert headline == ["recall@5", "mrr@5", "ndcg@5"]
    labels = result["dataset"]["category_labels"]
    for cat in result["dataset"]["categories"]:
        assert labels.get(cat, cat) in shown
        cell = result["metrics"]["per_category"][cat]["recall@5"]
        if cell["value"] is None:
            assert "n/a" in shown
        else:
            assert f"{cell['value']:.3f} (n={cell['denominator']})" in shown
    overall = result["metrics"]["overall"]["ndcg@5"]
    assert f"{overall['value']:.3f} (n={overall['denominator']})" in shown


def test_recall_curve_matches_the_scored_recall_at_its_ks(drawn: dict[str, bytes]) -> None:
    """The curve is recomputed from the rankings; where the result holds recall@k, it agrees."""
    result = baseline()
    curves = plots.recall_curves(result)
    assert curves["negative_or_no_answer"] == {"n": 0, "recall": None}  # no relevant memory
    for k in (1, 5):
        assert curves["overall"]["recall"][k - 1] == pytest.approx(
            result["metrics"]["overall"][f"recall@{k}"]["value"]
        )
        for cat in result["dataset"]["categories"]:
            cell = result["metrics"]["per_category"][cat][f"recall@{k}"]
            if cell["value"] is not None:
                assert curves[cat]["recall"][k - 1] == pytest.approx(cell["value"])
                assert curves[cat]["n"] == cell["denominator"]
    for row in curves.values():  # recall never falls as k grows
        if row["recall"]:
            assert row["recall"] == sorted(row["recall"])
    shown = texts(drawn["report-plots/recall-at-k.svg"])
    assert "memory level, every k" in shown
    assert any("negative_or_no_answer" in t for t in shown)  # named as not drawn


def test_a_second_level_is_drawn_at_its_scored_ks() -> None:
    """A conversational result (session level plus turn measures at k 1 and 5) gets a turn
    panel; the result has no per-query turn rankings, so only the scored ks are drawn."""
    result = copy.deepcopy(baseline())
    result["dataset"]["levels"].append({"name": "turn", "prefix": "turn_", "description": ""})
    for k in (1, 5):
        m = next(m for m in result["run"]["measures"] if m["name"] == f"recall@{k}")
        result["run"]["measures"].append({**m, "name": f"turn_recall@{k}", "level": "turn"})
        for cells in [result["metrics"]["overall"], *result["metrics"]["per_category"].values()]:
            cells[f"turn_recall@{k}"] = cells[f"recall@{k}"]
    shown = texts(plots.recall_at_k(result))
    assert "memory level, every k" in shown and "turn level, scored at k = 1, 5" in shown


# --- the report: listed, linked, written -----------------------------------------------------


def test_results_list_the_plots_outside_the_fingerprinted_data(runs: dict[str, Run]) -> None:
    run = runs["hotmem"]
    env = run.envelopes["results"]
    assert env["plots"] == [
        {"file": f, "sha256": hashlib.sha256(svg).hexdigest()} for f, svg in run.plots.items()
    ]
    assert "plots" not in env["data"]
    links = LINK.findall(run.markdown)
    assert links == list(run.plots)


def test_written_run_has_every_linked_plot_beside_its_report(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    from recallbench.builddir.artifacts import publish

    run = runs["hotmem"]
    publish(run.files(tmp_path / "build"))
    report = tmp_path / "build" / "report.md"
    for link in LINK.findall(report.read_text(encoding="utf-8")):
        assert (report.parent / link).read_bytes() == run.plots[link]
    elsewhere = tmp_path / "out" / "r.md"  # the script's --report PATH
    publish(run.report_files(elsewhere))
    assert sorted(p.relative_to(elsewhere.parent) for p in elsewhere.parent.rglob("*.svg")) == [
        Path(f) for f in sorted(run.plots)
    ]


def test_cli_report_writes_the_linked_plots(runs: dict[str, Run], tmp_path: Path) -> None:
    from recallbench.builddir.artifacts import publish

    run = runs["bm25"]
    build = tmp_path / "build"
    publish(run.files(build))
    for plot in run.plots:
        (build / plot).unlink()
    r = CliRunner().invoke(main, ["--build-dir", str(build), "report"])
    assert r.exit_code == 0, r.output
    assert "plot" not in r.stdout  # stdout holds the summary table only
    report = build / "report.md"
    links = LINK.findall(report.read_text(encoding="utf-8"))
    assert links == ["report-plots/category-bars.svg", "report-plots/recall-at-k.svg"]
    env = orjson.loads((build / "results.json").read_bytes())
    for link, listed in zip(links, env["plots"], strict=True):
        data = (report.parent / link).read_bytes()
        assert listed == {"file": link, "sha256": hashlib.sha256(data).hexdigest()}
        assert data == run.plots[link]  # the CLI stage draws what the in-process run drew


def test_a_command_keeps_matplotlibs_font_list_in_its_build_dir(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    """`recallbench report` in a fresh process: matplotlib's font list goes to
    BUILD/.cache/matplotlib (nothing to HOME or TMPDIR), and the next process reads it
    instead of building it again (the file is not rewritten)."""
    from recallbench.builddir.artifacts import publish

    build, home, tmp = tmp_path / "build", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    publish(runs["bm25"].files(build))
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    recallbench = str(Path(sys.executable).parent / "recallbench")
    cmd = [recallbench, "--build-dir", str(build), "-q", "report"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    (font_list,) = (build / ".cache" / "matplotlib").glob("fontlist-*.json")
    stamp = font_list.stat().st_mtime_ns
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert font_list.stat().st_mtime_ns == stamp
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []


# --- compare -------------------------------------------------------------------------------


def test_forest_plot_of_two_systems_on_the_fixture_suite(
    comparison: dict, compare_drawn: dict[str, bytes]
) -> None:
    shown = texts(compare_drawn["compare-plots/forest.svg"])
    pair = comparison["comparisons"][0]
    assert (pair["reference"], pair["challenger"]) == ("hotmem", "bm25")
    for metric in pair["metrics"]:
        assert metric in shown  # one panel per mean measure
    for row in ["overall", *pair["metrics"]["ndcg@5"]["per_category"]]:
        assert row in shown
    assert {"bm25", "sign-flip p < 0.05 (Holm)", "overall, 95% bootstrap CI"} <= set(shown)
    bars = texts(compare_drawn["compare-plots/bars.svg"])
    for metric, m in pair["metrics"].items():
        o = m["overall"]
        assert f"{metric} (n={o['queries']})" in bars
        assert f"{o['reference_mean']:.3f}" in bars and f"{o['challenger_mean']:.3f}" in bars


def test_compare_markdown_links_its_plots(
    comparison: dict, compare_drawn: dict[str, bytes]
) -> None:
    files = compare_drawn
    assert list(files) == ["compare-plots/forest.svg", "compare-plots/bars.svg"]
    text = render_markdown(comparison, plots=[(f, plots.caption(f)) for f in files])
    assert LINK.findall(text) == list(files)
    assert LINK.findall(render_markdown(comparison)) == []


def test_cli_compare_writes_the_plots_beside_compare_md(
    runs: dict[str, Run], compare_drawn: dict[str, bytes], tmp_path: Path
) -> None:
    """compare over saved results.json files draws the same bytes as the comparison made in
    process (same results, seed and resamples), beside its --report."""
    from recallbench.builddir.artifacts import publish

    saved = []
    for name, run in runs.items():
        publish(run.files(tmp_path / name))
        saved += ["--result", str(tmp_path / name / "results.json")]
    report = tmp_path / "cmp" / "side.md"
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "compare", *saved, "--resamples", "1000"]
        + ["--output", str(tmp_path / "cmp" / "side.json"), "--report", str(report)],
    )
    assert r.exit_code == 0, r.output
    links = LINK.findall(report.read_text(encoding="utf-8"))
    assert links == ["compare-plots/forest.svg", "compare-plots/bars.svg"]
    for link in links:
        assert (report.parent / link).read_bytes() == compare_drawn[link]


# --- the docs' committed plots ---------------------------------------------------------------


def assert_docs_plots_current(fresh: dict[str, bytes]) -> None:
    stale = []
    for name, svg in fresh.items():
        committed = (DOCS_IMG / name).read_bytes()
        if committed == svg:
            continue
        made_with = re.search(rb"Matplotlib v([^,<]+)", committed)
        if made_with and made_with.group(1).decode() != matplotlib.__version__:
            pytest.skip(
                f"docs/img/{name} was drawn with matplotlib {made_with.group(1).decode()}, "
                f"this is {matplotlib.__version__}: bytes are comparable only with the same one"
            )
        stale.append(name)
    assert not stale, f"docs/img/{stale} differ from a fresh drawing: run `make baseline`"


def test_docs_baseline_plots_are_current(drawn: dict[str, bytes]) -> None:
    """docs/img holds the plots of the committed baseline; `make baseline` regenerates them."""
    fresh = {f"baseline-{Path(f).name}": svg for f, svg in drawn.items()}
    tool = docs_plots()
    assert tool.baseline_plots.__doc__ and "baseline-<plot>.svg" in tool.baseline_plots.__doc__
    assert tool.baseline_plots(baseline()) == fresh
    assert sorted(fresh) == ["baseline-category-bars.svg", "baseline-recall-at-k.svg"]
    assert_docs_plots_current(fresh)


def test_docs_compare_plots_are_current() -> None:
    """docs/img's comparison of the reference systems on the fixtures (docs/compare.md) is
    what the four systems give now; `make baseline` regenerates it."""
    fresh = docs_plots().docs_compare_plots()
    assert sorted(fresh) == ["compare-bars.svg", "compare-forest.svg"]
    assert_docs_plots_current(fresh)


def test_write_baseline_plots_entry_point(drawn: dict[str, bytes], tmp_path: Path) -> None:
    assert docs_plots().main(["--baseline", str(BASELINE), "--out", str(tmp_path)]) == 0
    written = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert written == {f"baseline-{Path(f).name}": svg for f, svg in drawn.items()}


# --- text from data is drawn as written ------------------------------------------------

DOLLARS = ["$5 or $10", "$x$", "$\\undefinedcommand{y}$", "cost in $ and \\$", "a\nb\u202ec"]


def test_dollar_signs_and_control_characters_in_labels_are_drawn_literally() -> None:
    """A `$...$` pair in a category label, a system, a dataset, a measure or a comparison's
    labels is not mathtext: no exception (an unknown command used to raise a long
    traceback), and "$5 or $10" is drawn as written (issue 27, item 8)."""
    result = copy.deepcopy(baseline())
    cats = result["dataset"]["categories"]
    for cat, label in zip(cats, DOLLARS, strict=False):
        result["dataset"]["category_labels"][cat] = label
    result["system"]["name"] = "$sys$"
    result["dataset"]["dataset"] = "$5 or $10"
    drawn = [t for svg in plots.report_plots(result).values() for t in texts(svg)]
    for label in ("$5 or $10", "$x$", "$\\undefinedcommand{y}$", "cost in $ and \\$"):
        assert sum(t.startswith(label) for t in drawn) >= 2, label  # both plots
    assert any(t.startswith("aU+000AbU+202Ec") for t in drawn)  # one line, no bidi override
    assert any("$sys$ on $5 or $10" in t for t in drawn)
    doc = compare_results(
        [result, copy.deepcopy(result)], ["$ref$", "$5 or $10 \\frac"], resamples=100
    )
    drawn = [t for svg in plots.compare_plots(doc).values() for t in texts(svg)]
    assert "$5 or $10 \\frac" in drawn and "$ref$" in drawn
    assert any("against $ref$" in t for t in drawn)
