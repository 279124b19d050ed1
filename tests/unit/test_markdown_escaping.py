"""Markdown escaping (recallbench.core.escape) and report.md / compare.md built from hostile data:
rendered by Python-Markdown (what mkdocs uses) and by markdown-it (CommonMark with raw HTML,
GFM tables), every string a dataset, a store, a plugin or a path holds stays text, and the
page keeps its headings, its tables' cells and no element or attribute it did not have."""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path

import pytest
from hostile import (
    HOSTILE_PLUGIN,
    LABELS,
    MARKDOWN_PAYLOAD,
    PLUGIN_TEXT,
    REPORT_H2,
    hostile_document,
    hostile_suite,
    html_structure,
    install_hostile_plugin,
    markdown_renderers,
    run_pipeline_on,
)

from recallbench.commands.compare import compare_results
from recallbench.commands.pipeline import Run
from recallbench.core import escape, ids
from recallbench.report.comparison import render_markdown as render_compare
from recallbench.report.run_sections import render_markdown

RENDERERS = markdown_renderers()

#: Markdown, HTML and layout constructs a string from data may hold
CONSTRUCTS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<a href='javascript:alert(1)'>x</a>",
    "<!-- comment",
    "<http://example.org>",
    "[x](javascript:alert(1))",
    "![i](x.png)",
    "[ref]: javascript:alert(1)",
    "[^note]",
    "*em* **strong** _u_ __uu__",
    "x_*y*_z",
    "`code` ``more``",
    "~~strike~~",
    "a|b | c",
    "\\|x\\",
    "# heading",
    "x ##",
    "- item",
    "+ item",
    "1. one",
    "12) two",
    "---",
    "***",
    "> quote",
    "{: onclick=alert(1) }",
    "&lt;b&gt; &amp; &#60;",
    "line\nbreak\r\n## Conclusion\rx",
    "tab\tand\u2028separator\u2029",
    "bidi \u202eevil\u2066 zero\u200bwidth nul\x00 esc\x1b]0;title\x07",
    "  padded  ",
    "snake_case_id mem-fin-001 q-semantic-001",
    "$5 or $10",
]


def visible(text: str) -> str:
    """The text a reader must see: invisible characters as U+XXXX, nothing else changed."""
    return escape.terminal(text)


def rendered_text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


# --- the functions ----------------------------------------------------------------------


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("text", CONSTRUCTS)
def test_markdown_renders_as_exactly_the_text_in_every_context(renderer: str, text: str) -> None:
    """In a paragraph, a list item, a heading, bold text and a table cell: only the
    context's own elements, and the text itself (invisible characters as U+XXXX)."""
    render, e, want = RENDERERS[renderer], escape.markdown(text), visible(text)
    contexts = {
        "p": (f"before {e} after", {"p"}, f"before {want} after"),
        "li": (f"- {e}", {"ul", "li"}, want),
        "h2": (f"## {e}", {"h2"}, want),
        "strong": (f"**{e}** x", {"p", "strong"}, f"{want} x"),
    }
    for src, allowed, shown in contexts.values():
        out = render(src)
        assert set(html_structure(out)["tags"]) <= allowed, (src, out)
        assert rendered_text(out) == shown.strip(), (src, out)
    cell = escape.markdown_cell(text)
    table = html_structure(render(f"| a | b |\n|---|---|\n| {cell} | z |"))
    assert table["tables"] == [[2, 2]] and table["attributes"] == []


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("text", ["a`b", "`lead", "trail`", "``", "x|y <b>*s*</b>", "a\nb"])
def test_markdown_code_shows_the_text_in_one_code_span(renderer: str, text: str) -> None:
    out = RENDERERS[renderer](f"- {escape.markdown_code(text)} after")
    structure = html_structure(out)
    assert structure["tags"] == {"ul": 1, "li": 1, "code": 1}
    code = re.search(r"<code>(.*)</code>", out, re.S)
    assert code and html.unescape(code.group(1)).strip() == visible(text).strip()


def test_ordinary_text_is_unchanged() -> None:
    for text in ("mem-fin-001", "q-semantic-001", "exact_lexical", "hotmem 0.2.6", "recall@5"):
        assert escape.markdown(text) == text
    assert escape.markdown("1.5 is a number, 2. is a list") == "1.5 is a number, 2. is a list"
    assert escape.markdown("2. a list") == "2\\. a list"


def test_ids_md_cell_is_the_escape_rule() -> None:
    assert ids.md_cell is escape.markdown_cell
    assert ids.md_cell("a|b\n<i>") == "a\\|bU+000A&lt;i>"


def test_plot_text_and_terminal_show_line_separators() -> None:
    assert escape.plot_text("a\nb\u2028c\u202e$x$") == "aU+000AbU+2028cU+202E$x$"
    assert escape.terminal("row\u2029next") == "rowU+2029next"


# --- report.md and compare.md from hostile data ------------------------------------------

PLOTS = [("report-plots/category-bars.svg", "Headline measures per category")]


def assert_same_structure(clean: str, hostile: str, *, headings: bool = True) -> None:
    for name, render in RENDERERS.items():
        a, b = html_structure(render(clean)), html_structure(render(hostile))
        assert b["tags"] == a["tags"], name
        assert b["tables"] == a["tables"], name
        assert b["attributes"] == a["attributes"], name
        if headings:
            assert b["headings"] == a["headings"], name
        else:
            assert len(b["headings"]) == len(a["headings"]), name


def test_report_md_keeps_every_string_of_the_result_as_text(fixture_run: Run) -> None:
    """Every string of the result that is data (memory, query and scope ids, category
    labels and ids, file names, notes, the system's configuration keys and values, drop
    rules, reasons, descriptions, the dataset's summary) carries headings, rows, HTML,
    links and emphasis: the rendered page has the same elements, attributes, headings and
    table cells as the clean one (issue 27, item 4)."""
    clean = render_markdown(fixture_run.result, {}, "2025-01-01T00:00:00Z", "0", PLOTS)
    hostile = render_markdown(
        hostile_document(fixture_run.result), {}, "2025-01-01T00:00:00Z", "0", PLOTS
    )
    assert hostile.count(MARKDOWN_PAYLOAD.splitlines()[2]) > 100  # the payload is in it
    assert_same_structure(clean, hostile)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The hostile suite (markup in a query id and a memory id), its corpus in a file whose
    name holds markup, run through the hostile plugin."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        install_hostile_plugin(monkeypatch)
        work = tmp_path_factory.mktemp("hostile-md")
        corpus, queries = hostile_suite(work / "data")
        named = corpus.with_name("corpus-<img src=x onerror=alert(5)>[l](javascript:x)|#.jsonl")
        corpus.rename(named)
        return run_pipeline_on(work / "build", named, queries, system=HOSTILE_PLUGIN)


def assert_intact_report(markdown: str) -> None:
    """The report's own headings once each, every table rectangular, no link, script,
    frame or image but the plots, no event handler or style attribute."""
    for name, render in RENDERERS.items():
        page = html_structure(render(markdown))
        assert page["headings"] == REPORT_H2, name
        for table in page["tables"]:
            assert len(set(table)) == 1, (name, table)
        assert not {"a", "script", "iframe", "object", "em", "del", "s"} & set(page["tags"])
        assert all(
            tag == "img" and attr == "src" and value.startswith("report-plots/")
            for tag, attr, value in page["attributes"]
        ), page["attributes"]


def test_a_hostile_suite_and_file_name_stay_text_in_report_md(hostile_run: Run) -> None:
    """Ids holding HTML and a link, a file name holding an image tag, a link and a pipe
    (issue 27, item 4)."""
    text = hostile_run.markdown
    assert "mem-&lt;b>\"fin'&lt;/b>-001" in text
    assert "corpus-&lt;img src=x onerror=alert(5)>\\[l\\](javascript:x)\\|#.jsonl" in text
    assert_intact_report(text)


def test_a_plugin_cannot_forge_a_section_of_report_md(hostile_run: Run) -> None:
    """A plugin's configuration keys and values, corruption names and descriptions and its
    lexical matcher's name hold '## Conclusion' and 'Rule 9 fired' lines, a table row, a
    script and a link: one Conclusion, no forged rule, every table rectangular (issue 27,
    item 6)."""
    text = hostile_run.markdown
    assert text.count("\n## Conclusion\n") == 1
    assert not re.search(r"^\*\*Rule 9", text, re.M)
    system = hostile_run.result["system"]
    assert any(k.startswith("key\n") for k in system)
    assert hostile_run.result["roundtrip"]["corruption_checks"][0]["name"].endswith(PLUGIN_TEXT)
    assert_intact_report(text)


def test_compare_md_keeps_result_labels_and_every_string_as_text(fixture_run: Run) -> None:
    """`--result` labels (directory names) holding a line break and a heading, pipes, HTML
    and a link, over results whose every string is hostile: compare.md has the clean one's
    elements, tables and number of headings, and each heading shows the labels as written
    (issue 27, item 5)."""
    plots = [("compare-plots/forest.svg", "Paired differences")]
    results = [fixture_run.result, copy.deepcopy(fixture_run.result)]
    clean_doc = compare_results(results, ["a", "b"], resamples=50)
    clean_doc["notes"] = ["a note"]
    hostile = [hostile_document(r) for r in results]
    doc = compare_results(hostile, LABELS, resamples=50)
    doc["notes"] = ["a note" + MARKDOWN_PAYLOAD]
    clean, text = render_compare(clean_doc, plots=plots), render_compare(doc, plots=plots)
    assert_same_structure(clean, text, headings=False)
    for render in RENDERERS.values():
        headings = html_structure(render(text))["headings"]
        assert headings[2] == f"h2 {visible(LABELS[1])} against {visible(LABELS[0])}"


def test_compare_md_of_saved_results_in_hostile_directories(tmp_path: Path) -> None:
    """The labels compare gives `--result` files (their directories' names) are written
    into compare.md as text: through the CLI, directories named with a heading and HTML."""
    from conftest import cli

    paths = []
    for name in ("x\n## Conclusion", "y|<b>z<img src=x onerror=alert(1)>[l](javascript:1)"):
        directory = tmp_path / name
        directory.mkdir()
        results = cli(directory, "run", "--system", "bm25")
        assert results.exit_code == 0, results.output
        paths.append(directory / "results.json")
    out = tmp_path / "cmp"
    result = cli(out, "compare", "--result", paths[0], "--result", paths[1], "--resamples", "100")
    assert result.exit_code == 0, result.output
    text = (out / "compare.md").read_text(encoding="utf-8")
    for render in RENDERERS.values():
        page = html_structure(render(text))
        assert [h for h in page["headings"] if h.startswith("h2 ")][-1] == "h2 Reading this"
        # the title, each system's means, the pair, the configurations, Reading this
        assert len(page["headings"]) == 5
        assert not {"a", "b", "script"} & set(page["tags"])
        assert all(len(set(t)) == 1 for t in page["tables"])


def test_the_pull_request_block_keeps_every_string_as_text(
    fixture_run: Run, tmp_path: Path
) -> None:
    """check-baseline's block (`--markdown`) from a baseline and a changed result whose
    every string is hostile (the system's configuration keys and values, category ids and
    labels, query ids, file names, notes): the clean block's elements, tables, attributes
    and headings (issue 41)."""
    from recallbench.builddir.artifacts import dumps
    from recallbench.commands.baseline import check
    from recallbench.report.baseline_diff import markdown_block

    changed = copy.deepcopy(fixture_run.result)
    changed["system"]["scoring_weights"]["cosine"] = 0.4
    query = changed["queries"][0]
    query["returned"][:2] = query["returned"][1::-1]
    query["metrics"]["ndcg@5"] = 0.25
    changed["metrics"]["overall"]["ndcg@5"]["value"] = 0.5
    blocks = []
    for n, transform in enumerate((copy.deepcopy, hostile_document)):
        baseline = tmp_path / str(n) / "baseline.json"
        baseline.parent.mkdir()
        baseline.write_bytes(dumps(transform(fixture_run.result)))
        blocks.append(markdown_block(check(baseline, transform(changed), resamples=100)))
    clean, text = blocks
    assert text.count(MARKDOWN_PAYLOAD.splitlines()[2]) > 10  # the payload is in it
    assert "lost: " in clean and "scoring weights" in clean
    assert_same_structure(clean, text)
