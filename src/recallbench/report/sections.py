"""A report section as data, written once and rendered for every output.

A `Section` is a title, paragraphs, an optional `Table` and bullet points, all plain text
(figures already formatted by the section's builder). The renderers here turn a list of
sections into Markdown (`to_markdown`) and terminal text (`to_terminal`); the HTML pages
render the same list through the template `_sections.html` (`html_sections`). Every string
is escaped by the renderer for its output (`recallbench.escape`; jinja's autoescape and
`visible` for HTML), never by the builder, so a builder cannot forget it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recallbench.escape import markdown as md
from recallbench.escape import terminal


@dataclass(frozen=True)
class Table:
    """Column headers and rows of cells (plain text); the first cell of a row heads it."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    #: the columns whose text is a number, aligned right on the terminal
    numeric: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Section:
    """One section: `key` (the HTML anchor), a title, paragraphs, a table, bullets."""

    key: str
    title: str
    paragraphs: tuple[str, ...] = ()
    table: Table | None = None
    bullets: tuple[str, ...] = ()
    #: paragraphs after the table and bullets
    after: tuple[str, ...] = ()
    level: int = 2


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()
) -> Table:
    """A `Table` from lists (each row as long as the header)."""
    width = len(header)
    for row in rows:
        if len(row) != width:
            raise ValueError(f"a row of {len(row)} cells under {width} headers: {row!r}")
    return Table(tuple(header), tuple(tuple(r) for r in rows), frozenset(numeric))


def to_markdown(sections: Sequence[Section]) -> str:
    """The sections as Markdown (every text escaped by `escape.markdown`)."""
    out: list[str] = []
    for s in sections:
        out += [f"{'#' * s.level} {md(s.title)}", ""]
        for p in s.paragraphs:
            out += [md(p), ""]
        if s.table is not None:
            out.append("| " + " | ".join(md(h) for h in s.table.header) + " |")
            out.append("|" + "---|" * len(s.table.header))
            out += ["| " + " | ".join(md(c) for c in row) + " |" for row in s.table.rows]
            out.append("")
        if s.bullets:
            out += [f"- {md(b)}" for b in s.bullets]
            out.append("")
        for p in s.after:
            out += [md(p), ""]
    return "\n".join(out)


def terminal_table(t: Table) -> str:
    """A table as aligned terminal lines (every cell escaped by `escape.terminal`)."""
    header = [terminal(h) for h in t.header]
    rows = [[terminal(c) for c in row] for row in t.rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            f"{c:>{w}}" if i in t.numeric else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def to_terminal(sections: Sequence[Section], *, bullets: bool = True) -> str:
    """The sections as terminal text: the title, paragraphs, the aligned table, bullets
    (`bullets=False` leaves them out: definitions the files carry)."""
    out: list[str] = []
    for s in sections:
        out += [terminal(s.title)]
        out += [terminal(p) for p in s.paragraphs]
        if s.table is not None:
            out.append(terminal_table(s.table))
        if bullets:
            out += [f"- {terminal(b)}" for b in s.bullets]
        out += [terminal(p) for p in s.after]
        out.append("")
    return "\n".join(out).rstrip("\n")


def html_sections(sections: Sequence[Section]) -> list[dict]:
    """The sections as the template `_sections.html` reads them (escaped there)."""
    return [
        {
            "key": s.key,
            "title": s.title,
            "level": s.level,
            "paragraphs": list(s.paragraphs),
            "header": list(s.table.header) if s.table else [],
            "rows": [list(r) for r in s.table.rows] if s.table else [],
            "numeric": sorted(s.table.numeric) if s.table else [],
            "bullets": list(s.bullets),
            "after": list(s.after),
        }
        for s in sections
    ]
