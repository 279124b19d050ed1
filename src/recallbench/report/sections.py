"""A report section as data, written once and rendered for every output.

A `Section` is a title and a body of blocks: paragraphs (`Para`), a `Table`, bullet points
(`Bullets`), consecutive lines (`Lines`) and figures (`Figure`). The shorthand fields
`paragraphs`, `table` and `bullets` come first, then the blocks of `body`, then the
paragraphs of `after` (`Section.blocks`). Every text is `Text`: a plain string is data,
escaped whole by the renderer for its output; a tuple of spans mixes data (`str`) with the
builder's own wording (`Lit`), bold (`Strong`), code (`Code`) and a long list cut in the
Markdown and the terminal (`Cut`). The renderers here turn a list of sections into Markdown
(`to_markdown`), terminal text (`to_terminal`) and HTML (`html_sections`, drawn by the
template `_sections.html`). Every data string is escaped by the renderer for its output
(`recallbench.core.escape`), never by the builder, so a builder cannot forget it; a `Lit` is
written verbatim in Markdown and escaped like any text in HTML.

Adding a section to a report is one builder function returning a `Section`, listed where
the report lists its sections (`report.run_sections.run_sections` for report.md and
report.html); no renderer changes.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from recallbench.core.escape import html_text, markdown_code, terminal
from recallbench.core.escape import markdown as md

#: how many items of a long list report.md shows (`Cut`)
LIST_LIMIT = 10

T = TypeVar("T")


@dataclass(frozen=True)
class Lit:
    """The builder's own wording (figures it formatted, punctuation): written verbatim in
    Markdown and on the terminal, escaped like any text in HTML. Never data."""

    text: str


@dataclass(frozen=True)
class Strong:
    """Bold text."""

    text: Text


@dataclass(frozen=True)
class Code:
    """A code span showing a data string literally (not in a Markdown table cell)."""

    text: str


@dataclass(frozen=True)
class Cut:
    """A list joined by ", ": Markdown and the terminal show the first `limit` items and
    "... and N more; all in `where`", HTML every item."""

    items: tuple[Text, ...]
    limit: int = LIST_LIMIT
    where: str = "results.json"


def capped(
    items: Sequence[T], limit: int = LIST_LIMIT, where: str = "results.json"
) -> tuple[Sequence[T], str]:
    """The first `limit` items and the line that says what was left out ("... and N more;
    all in results.json"; "" when nothing was)."""
    if len(items) <= limit:
        return items, ""
    return items[:limit], f"... and {len(items) - limit} more; all in {where}"


def cut(items: Sequence[str], limit: int = LIST_LIMIT, where: str = "results.json") -> str:
    """The first `limit` items, comma-separated, and "... and N more; all in results.json"
    (`capped`)."""
    shown, more = capped(items, limit, where)
    return ", ".join(shown) + (f" {more}" if more else "")


Span = str | Lit | Strong | Code | Cut
#: a text: a data string, one span or spans
Text = str | Lit | Strong | Code | Cut | tuple[Span, ...]


def fmt(template: str, **values: Any) -> tuple[Span, ...]:
    """`template` (the builder's wording, `str.format` syntax) with `values` as data spans:
    a str or number (formatted by its field's spec) is data, escaped by the renderer; a
    span or a tuple of spans is kept as it is."""
    out: list[Span] = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if literal:
            out.append(Lit(literal))
        if name is None:
            continue
        value = values[name]
        if isinstance(value, (Lit, Strong, Code, Cut)):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(value)
        else:
            if conversion:
                value = repr(value) if conversion == "r" else str(value)
            out.append(format(value, spec or ""))
    return tuple(out)


def spans_of(write: Callable[[Callable[[str], str], Callable[[str], str]], str]) -> Text:
    """The spans of a text written by a function that takes (code, text) formatters (as
    `systems.rules.RulesSource.describe` does): its own wording as `Lit`, what it passes
    to `code` as `Code` and to `text` as data."""
    spans: list[Span] = []

    def mark(kind: Callable[[str], Span]) -> Callable[[str], str]:
        def put(value: str) -> str:
            spans.append(kind(value))
            return f"\x00{len(spans) - 1}\x00"

        return put

    written = write(mark(Code), mark(str))
    out: list[Span] = []
    for i, piece in enumerate(written.split("\x00")):
        if i % 2:
            out.append(spans[int(piece)])
        elif piece:
            out.append(Lit(piece))
    return tuple(out)


@dataclass(frozen=True)
class Table:
    """Column headers and rows of cells; the first cell of a row heads it."""

    header: tuple[Text, ...]
    rows: tuple[tuple[Text, ...], ...]
    #: the columns whose text is a number, aligned right on the terminal
    numeric: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Para:
    """A paragraph; `quote`: a blockquote in Markdown (a banner or a warning), a note in
    HTML."""

    text: Text
    quote: bool = False
    #: local to this machine or moment (a clock): Markdown and the terminal only, never in
    #: an HTML page, whose bytes are a function of the result
    local: bool = False


@dataclass(frozen=True)
class Bullets:
    """Bullet points (Markdown keeps the blank line after an empty list)."""

    items: tuple[Text, ...]
    #: HTML shows the list folded under this summary (a ``<details>`` element); Markdown
    #: and the terminal list it as usual
    fold: str = ""


@dataclass(frozen=True)
class Lines:
    """Consecutive lines of one paragraph (each text starts its own line)."""

    items: tuple[Text, ...]


@dataclass(frozen=True)
class Figure:
    """A plot: its file relative to the report (the Markdown links it; an HTML page has it
    inline when given its bytes) and its caption."""

    path: str
    caption: str


Block = Para | Table | Bullets | Lines | Figure


@dataclass(frozen=True)
class Section:
    """One section: `key` (its anchor in an HTML page), a title, its level (2: ``##``) and
    its blocks (`blocks`)."""

    key: str
    title: Text
    paragraphs: tuple[Text, ...] = ()
    table: Table | None = None
    bullets: tuple[Text, ...] = ()
    #: paragraphs after the table and bullets
    after: tuple[Text, ...] = ()
    level: int = 2
    #: blocks after the ones above
    body: tuple[Block, ...] = ()
    #: local diagnostics (timings): Markdown and the terminal only, never an HTML page
    local: bool = False

    def blocks(self) -> list[Block]:
        """The section's blocks in order: paragraphs, table, bullets, `body`, `after`."""
        out: list[Block] = [Para(p) for p in self.paragraphs]
        if self.table is not None:
            out.append(self.table)
        if self.bullets:
            out.append(Bullets(self.bullets))
        out += self.body
        out += [Para(p) for p in self.after]
        return out


def table(
    header: Sequence[Text], rows: Sequence[Sequence[Text]], numeric: Sequence[int] = ()
) -> Table:
    """A `Table` from lists (each row as long as the header)."""
    width = len(header)
    for row in rows:
        if len(row) != width:
            raise ValueError(f"a row of {len(row)} cells under {width} headers: {row!r}")
    return Table(tuple(header), tuple(tuple(r) for r in rows), frozenset(numeric))


# --- rendering a text ------------------------------------------------------------------------


def _plain(
    text: Text,
    escape: Callable[[str], str],
    code: Callable[[str], str],
    bold: Callable[[str], str],
) -> str:
    """A text for Markdown or the terminal: data through `escape`, code spans through
    `code`, bold text through `bold`, `Lit` verbatim, a `Cut` shortened."""
    if isinstance(text, str):
        return escape(text)
    if not isinstance(text, tuple):  # one span
        text = (text,)
    out = []
    for span in text:
        if isinstance(span, str):
            out.append(escape(span))
        elif isinstance(span, Lit):
            out.append(span.text)
        elif isinstance(span, Strong):
            out.append(bold(_plain(span.text, escape, code, bold)))
        elif isinstance(span, Code):
            out.append(code(span.text))
        else:
            items = [_plain(item, escape, code, bold) for item in span.items]
            out.append(cut(items, span.limit, span.where))
    return "".join(out)


def markdown_text(text: Text) -> str:
    """A text as inline Markdown (data escaped by `escape.markdown`)."""
    return _plain(text, md, markdown_code, lambda inner: f"**{inner}**")


def terminal_text(text: Text) -> str:
    """A text as one terminal line (every part escaped by `escape.terminal`)."""
    return _plain(text, terminal, terminal, lambda inner: inner)


def html_markup(text: Text) -> Any:
    """A text as HTML markup (`markupsafe.Markup`): every string escaped as the page's
    templates escape theirs (`escape.html_text`, then autoescaping)."""
    from markupsafe import Markup, escape

    if isinstance(text, str):
        return escape(html_text(text))
    if not isinstance(text, tuple):  # one span
        text = (text,)
    out = Markup("")
    for span in text:
        if isinstance(span, str):
            out += escape(html_text(span))
        elif isinstance(span, Lit):
            out += escape(html_text(span.text))
        elif isinstance(span, Strong):
            out += Markup("<strong>") + html_markup(span.text) + Markup("</strong>")
        elif isinstance(span, Code):
            out += Markup("<code>") + escape(html_text(span.text)) + Markup("</code>")
        else:
            out += Markup(", ").join(html_markup(item) for item in span.items)
    return out


# --- rendering sections ----------------------------------------------------------------------


def to_markdown(sections: Sequence[Section]) -> str:
    """The sections as Markdown (every data string escaped by `escape.markdown`)."""
    out: list[str] = []
    for s in sections:
        out += [f"{'#' * s.level} {markdown_text(s.title)}", ""]
        for block in s.blocks():
            if isinstance(block, Para):
                out.append(("> " if block.quote else "") + markdown_text(block.text))
            elif isinstance(block, Table):
                out.append("| " + " | ".join(markdown_text(h) for h in block.header) + " |")
                out.append("|" + "---|" * len(block.header))
                out += [
                    "| " + " | ".join(markdown_text(c) for c in row) + " |" for row in block.rows
                ]
            elif isinstance(block, Bullets):
                out += [f"- {markdown_text(b)}" for b in block.items]
            elif isinstance(block, Lines):
                out += [markdown_text(line) for line in block.items]
            else:
                out.append(f"![{md(block.caption)}]({block.path})")
            out.append("")
    return "\n".join(out)


def terminal_table(t: Table) -> str:
    """A table as aligned terminal lines (every cell escaped by `escape.terminal`)."""
    header = [terminal_text(h) for h in t.header]
    rows = [[terminal_text(c) for c in row] for row in t.rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            f"{c:>{w}}" if i in t.numeric else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def to_terminal(sections: Sequence[Section], *, bullets: bool = True) -> str:
    """The sections as terminal text: the title, paragraphs, the aligned table, bullets
    (`bullets=False` leaves them out: definitions the files carry), lines, figures' files."""
    out: list[str] = []
    for s in sections:
        out += [terminal_text(s.title)]
        for block in s.blocks():
            if isinstance(block, Para):
                out.append(terminal_text(block.text))
            elif isinstance(block, Table):
                out.append(terminal_table(block))
            elif isinstance(block, Bullets):
                if bullets:
                    out += [f"- {terminal_text(b)}" for b in block.items]
            elif isinstance(block, Lines):
                out += [terminal_text(line) for line in block.items]
            else:
                out.append(f"{terminal(block.caption)}: {terminal(block.path)}")
        out.append("")
    return "\n".join(out).rstrip("\n")


def image_entry(name: str, svg: bytes, caption: str) -> dict[str, str]:
    """A plot as the template `_images.html` draws it: its name, its caption and its SVG
    bytes inline (a data: URI)."""
    return {
        "name": name,
        "caption": caption,
        "src": "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii"),
    }


def html_sections(
    sections: Sequence[Section], images: Mapping[str, bytes] | None = None
) -> list[dict]:
    """The sections as the template `_sections.html` reads them, every text as markup
    (`html_markup`); local sections and paragraphs left out; a figure inline when
    `images` has its bytes (by path), else left out. A level-1 section's title is the
    page's own heading (the template draws only its blocks, and nothing when it has none)."""
    images = images or {}
    out = []
    for s in sections:
        if s.local:
            continue
        blocks: list[dict[str, Any]] = []
        for block in s.blocks():
            if isinstance(block, Para):
                if not block.local:
                    blocks.append(
                        {
                            "kind": "quote" if block.quote else "para",
                            "text": html_markup(block.text),
                        }
                    )
            elif isinstance(block, Table):
                blocks.append(
                    {
                        "kind": "table",
                        "header": [html_markup(h) for h in block.header],
                        "rows": [[html_markup(c) for c in row] for row in block.rows],
                    }
                )
            elif isinstance(block, Bullets):
                if block.items:
                    entries = [html_markup(b) for b in block.items]
                    blocks.append({"kind": "bullets", "entries": entries, "fold": block.fold})
            elif isinstance(block, Lines):
                if block.items:  # no empty paragraph for no lines
                    entries = [html_markup(i) for i in block.items]
                    blocks.append({"kind": "lines", "entries": entries})
            elif block.path in images:
                figure = image_entry(block.path, images[block.path], block.caption)
                if blocks and blocks[-1]["kind"] == "figures":  # side by side
                    blocks[-1]["images"].append(figure)
                else:
                    blocks.append({"kind": "figures", "images": [figure]})
        if s.level == 1 and not blocks:  # the page's own heading is the title: nothing to add
            continue
        out.append(
            {"key": s.key, "title": html_markup(s.title), "level": s.level, "blocks": blocks}
        )
    return out
