"""The section model (`report.sections`): report.md and report.html draw the same sections
(`report.run_sections`), so they agree cell by cell; each kind of span and block renders
for Markdown, the terminal and HTML with its output's escaping."""

from __future__ import annotations

import copy
import html.parser
import re
from typing import Any

from markupsafe import Markup

from recallbench.commands.pipeline import Run
from recallbench.report.html import no_texts, render_report_html
from recallbench.report.run_sections import render_markdown
from recallbench.report.sections import (
    Bullets,
    Code,
    Cut,
    Figure,
    Lines,
    Lit,
    Para,
    Section,
    Strong,
    fmt,
    html_sections,
    markdown_text,
    spans_of,
    table,
    terminal_text,
    to_markdown,
    to_terminal,
)

#: what `escape.markdown` writes for a character, back to the character (the fixtures' texts)
_MD_REFERENCES = {"&#32;": " ", "&lt;": "<", "&#126;": "~", "&amp;": "&"}


def markdown_cell(cell: str) -> str:
    """A Markdown table cell as the text it shows (bold markers and escapes removed)."""
    cell = re.sub(r"\\(.)", r"\1", cell.replace("**", ""))
    for ref, ch in _MD_REFERENCES.items():
        cell = cell.replace(ref, ch)
    return cell


def markdown_tables(text: str, skip: str) -> list[list[list[str]]]:
    """Every table of a Markdown document (but those under the `## skip` heading), as rows
    of cell texts, the separator row left out."""
    tables: list[list[list[str]]] = []
    heading, previous = "", ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line
        elif line.startswith("| ") and heading != f"## {skip}":
            if not previous.startswith("|"):
                tables.append([])
            cells = re.split(r"(?<!\\) \| ", line[2:-2])
            tables[-1].append([markdown_cell(c) for c in cells])
        elif line.startswith("|---") and tables:
            pass
        previous = line
    return tables


class _Tables(html.parser.HTMLParser):
    """The tables of an HTML page as rows of cell texts (not the per-query ones, which the
    page's script fills)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None
        self.inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.inside = ("class", "data") not in attrs
            if self.inside:
                self.tables.append([])
        elif tag == "tr" and self.inside:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.inside:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def html_tables(page: bytes) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(page.decode("utf-8"))
    return [t for t in parser.tables if t]


def test_report_md_and_report_html_agree_on_every_table_cell(fixture_run: Run) -> None:
    """Every table of report.md but the local Cost table is in report.html, cell for cell
    and in order. The configuration row of counts is written one way in both (report.md's:
    no thousands separators; report.html wrote `1,234` before the section model)."""
    result = copy.deepcopy(fixture_run.result)
    result["counts"]["memories"] = 1234
    markdown = render_markdown(result, {}, "2025-01-01T00:00:00Z", "9.9.9")
    page = render_report_html(result, no_texts("memory"), version="9.9.9")
    md_tables = markdown_tables(
        markdown, skip="Cost (local diagnostic data, not a cross-machine guarantee)"
    )
    assert ["scopes / memories / queries", "1 / 1234 / 57 scored of 57"] in md_tables[0]
    assert html_tables(page) == md_tables
    assert len(md_tables) >= 5  # configuration, dataset figures, means, slot rates, worst


def test_local_parts_stay_out_of_the_html_page(fixture_run: Run) -> None:
    """The clock ("Generated ...") and the timings (Cost) are in report.md only: the page's
    bytes are a function of the result."""
    timings = {"runs": {"wall_seconds": 1.5, "execution": {"executor": "local", "workers": 1}}}
    markdown = render_markdown(fixture_run.result, timings, "2025-01-01T00:00:00Z", "9.9.9")
    assert "Generated 2025-01-01T00:00:00Z by recallbench 9.9.9." in markdown
    assert "| query stage wall time | 1.50 s (local executor, 1 worker(s)) |" in markdown
    page = render_report_html(fixture_run.result, no_texts("memory"), version="9.9.9").decode(
        "utf-8"
    )
    assert "Generated" not in page and "query stage wall time" not in page
    assert '<section id="report">' not in page  # no banner: nothing under the page's heading
    assert "<details>\n<summary>Definitions of the measures</summary>\n<ul>" in page
    assert '<section id="conclusion">\n<h2>Conclusion</h2>' in page


HOSTILE = "<b>|*x*|</b> `tick` _e_ \u202e"


def sample_sections() -> list[Section]:
    return [
        Section(
            "one",
            "One",
            body=(
                Para(fmt("{a} and {b:.2f}: {c}", a=Strong(HOSTILE), b=0.5, c=Code("a`b"))),
                Para(fmt("Warning: {w}.", w=HOSTILE), quote=True),
                Para("now", local=True),
                table(("name", "value"), [(HOSTILE, Lit("0.500 [0.1, 0.9]"))]),
                Bullets(
                    (fmt("ids: {ids}", ids=Cut(tuple(f"q{i}" for i in range(4)), limit=2)),),
                    fold="the ids",
                ),
                Lines(("1. first", "2. second")),
                Figure("plots/a.svg", "A <plot>"),
            ),
        ),
        Section("cost", "Cost", paragraphs=("1 s",), local=True),
    ]


def test_each_span_and_block_renders_for_markdown() -> None:
    text = to_markdown(sample_sections())
    hostile = markdown_text(HOSTILE)
    assert hostile == "&lt;b>\\|\\*x\\*\\|&lt;/b> \\`tick\\` \\_e\\_ U+202E"
    assert text.split("\n") == [
        "## One",
        "",
        f"**{hostile}** and 0.50: ``a`b``",
        "",
        f"> Warning: {hostile}.",
        "",
        "now",
        "",
        "| name | value |",
        "|---|---|",
        f"| {hostile} | 0.500 [0.1, 0.9] |",
        "",
        "- ids: q0, q1 ... and 2 more; all in results.json",
        "",
        "1\\. first",
        "2\\. second",
        "",
        "![A &lt;plot>](plots/a.svg)",
        "",
        "## Cost",
        "",
        "1 s",
        "",
    ]


def test_each_span_and_block_renders_for_the_terminal() -> None:
    text = to_terminal(sample_sections())
    assert "<b>|*x*|</b> `tick` _e_ U+202E and 0.50: a`b" in text
    assert "- ids: q0, q1 ... and 2 more; all in results.json" in text
    assert "A <plot>: plots/a.svg" in text
    assert terminal_text(fmt("{x}", x="\x1b[2J")) == "U+001B[2J"


def test_each_span_and_block_renders_for_html() -> None:
    """HTML: every text escaped (markup and invisible characters), a cut list whole, a
    figure inline when its bytes are given, local parts left out."""
    (one,) = html_sections(sample_sections(), {"plots/a.svg": b"<svg/>"})
    kinds = [b["kind"] for b in one["blocks"]]
    assert kinds == ["para", "quote", "table", "bullets", "lines", "figures"]
    hostile = "&lt;b&gt;|*x*|&lt;/b&gt; `tick` _e_ U+202E"
    first = one["blocks"][0]["text"]
    assert isinstance(first, Markup)
    assert str(first) == f"<strong>{hostile}</strong> and 0.50: <code>a`b</code>"
    assert str(one["blocks"][2]["rows"][0][0]) == hostile
    assert str(one["blocks"][3]["entries"][0]) == "ids: q0, q1, q2, q3"
    assert one["blocks"][3]["fold"] == "the ids"  # folded in a <details> element
    assert one["blocks"][5]["images"][0]["src"] == "data:image/svg+xml;base64,PHN2Zy8+"
    assert all(b["kind"] != "figures" for b in html_sections(sample_sections())[0]["blocks"])


def test_spans_of_keeps_what_a_describe_function_marks() -> None:
    """A text written with (code, text) formatters, as `RulesSource.describe`, becomes
    spans: its wording literal, the code and the data escaped for each output."""

    def describe(code: Any, text: Any) -> str:
        return f"{code('rules|x')}, from {text('dist*')} 1.0"

    spans = spans_of(describe)
    assert markdown_text(spans) == "`rules|x`, from dist\\* 1.0"
    assert terminal_text(spans) == "rules|x, from dist* 1.0"


def test_the_worked_example_in_architecture_md_is_the_code() -> None:
    """docs/architecture.md's "Adding a report section" shows `misses_section` as it is."""
    import inspect
    from pathlib import Path

    from recallbench.report.run_sections import misses_section

    docs = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    example = docs.split("## Adding a report section", 1)[1].split("```python\n", 1)[1]
    assert example.split("```", 1)[0] == inspect.getsource(misses_section)
