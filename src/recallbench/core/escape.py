"""Escaping where data meets an output: every rule for every output kind lives here.

Every string that comes from a dataset, a store, a plugin or a path is data. Each output
kind has its rule here, and the writer of that output applies it where the string meets
the output (the report sections' renderers, `report.sections`, for report.md, report.html,
compare.md, compare.html and the terminal tables), never at their callers' sites.

- `terminal(text)`: one line on a terminal (the summary table, messages).
- `markdown(text)`: inline Markdown text (a paragraph, a list item, a heading, a table
  cell): shown literally by CommonMark/GFM renderers (markdown-it, GitHub) and by
  Python-Markdown (what mkdocs uses); `markdown_cell` is the same rule under the name a table
  writer reads best.
- `markdown_code(text)`: a Markdown code span showing `text` literally (never in a table
  cell: GFM splits a cell on a pipe even inside a code span).
- `plot_text(text)`: a string matplotlib draws (labels, titles, legends, tick labels).
- `script_json(obj)`: JSON that stands inside a ``<script>`` element of a page or in a
  JavaScript file the page loads (report.html's data files).
- HTML has two rules, by who escapes the markup: `html_text(text)` for the pages drawn by
  Jinja2 templates with autoescaping (report.html, compare.html: invisible characters
  shown as ``U+XXXX``, line breaks kept; the autoescaping escapes ``& < > " '``), and
  `html(text)` for a page written without a template engine (protocols.html: both at
  once, line breaks shown too).
- `path_text(path)`: a path as valid text, for a label or a document (its bytes that are
  not UTF-8 as ``\\xNN``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

#: control, format, surrogate characters and the line and paragraph separators
_INVISIBLE = ("Cc", "Cf", "Cs", "Zl", "Zp")


def _visible_controls(text: str, keep: str = "", hidden: tuple[str, ...] = _INVISIBLE) -> str:
    """Every character of the `hidden` categories (default: control, format or surrogate
    characters and line separators: line breaks, ESC, NUL, bidi overrides, zero-width
    characters, U+2028, U+2029) but those in `keep` as ``U+XXXX``."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        f"U+{ord(ch):04X}" if ch not in keep and unicodedata.category(ch) in hidden else ch
        for ch in text
    )


def terminal(text: Any) -> str:
    """`text` for one terminal line: every control, format or surrogate character and line
    separator (ESC, CR, LF, TAB, NUL, bidi overrides, zero-width characters, U+2028) is
    shown as ``U+XXXX``, so no string can move the cursor, rewrite a row or set the
    terminal's title."""
    return _visible_controls(str(text))


#: characters with a Markdown meaning that both CommonMark and Python-Markdown let a
#: backslash escape, wherever they are (the pipe: GFM's and Python-Markdown's tables)
_BACKSLASHED = frozenset("\\`*{}[]|")
#: characters a backslash does not escape in Python-Markdown: a character reference instead
#: (raw HTML, autolinks, strikethrough)
_REFERENCED = {"<": "&lt;", "~": "&#126;"}
#: an underscore that could open or close emphasis (not one inside a word: snake_case),
#: an ampersand that could start an entity
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_AMPERSAND = re.compile(r"&(?=[#A-Za-z0-9])")
#: where a block construct could start at the text's beginning (a list item "- ", "+ ", an
#: ordered list "1. " or "1) ", a thematic break "---", a blockquote ">")
_LEADING = re.compile(r"^(?:[-+](?=[\s-]|$)|\d+[.)](?=\s|$)|>)")
#: a hash that could open a heading (at the start) or close one (a trailing run)
_HASH = re.compile(r"^#|#(?=#*\s*$)")
_PLAIN = re.compile(r"[A-Za-z0-9 ,;:/@$%^'?.()=+-]*")


def markdown(text: Any) -> str:
    """`text` as inline Markdown that renders as exactly that text, on one line.

    - control, format and surrogate characters and line separators become ``U+XXXX``: the
      text cannot start a line (a heading, a table row, a list item);
    - ``\\ ` * { } [ ] |`` get a backslash, and so do an underscore at a word's edge and a
      ``#`` at the start or in a trailing run: no emphasis, code span, link, image,
      attribute list, heading or table cell boundary;
    - ``<``, ``~`` and an ``&`` that could start an entity become character references: no
      raw HTML, autolink, entity or strikethrough;
    - a leading list marker (``- ``, ``+ ``, ``1. ``, ``1) ``, ``---``) or ``>`` is
      escaped: no list, thematic break or blockquote where the text begins a list item;
    - spaces at either end become ``&#32;``: the text cannot break the emphasis it is put in.

    Ordinary ids, snake_case names and words are unchanged.
    """
    text = _visible_controls(str(text))
    if _PLAIN.fullmatch(text) and not _LEADING.match(text) and text.strip(" ") == text:
        return text
    lead = _LEADING.match(text)
    marker = lead.end() - 1 if lead else -1  # the character that makes the marker
    escaped = {m.start() for m in _UNDERSCORE.finditer(text)}
    escaped |= {m.start() for m in _HASH.finditer(text)}
    ampersands = {m.start() for m in _AMPERSAND.finditer(text)}
    inner = len(text.rstrip(" ")), len(text) - len(text.lstrip(" "))
    out = []
    for i, ch in enumerate(text):
        if ch == " " and (i >= inner[0] or i < inner[1]):
            out.append("&#32;")
        elif ch in _BACKSLASHED or i in escaped or i == marker:
            out.append("\\" + ch)
        elif ch in _REFERENCED:
            out.append(_REFERENCED[ch])
        elif i in ampersands:
            out.append("&amp;")
        else:
            out.append(ch)
    return "".join(out)


#: a table cell: the same rule (every pipe escaped, no line break)
markdown_cell = markdown


def markdown_code(text: Any) -> str:
    """`text` as a Markdown code span, shown literally: control characters as ``U+XXXX``,
    a fence of more backticks than the longest run in the text, and a space inside the
    fence when the text begins or ends with a backtick. Not for table cells."""
    text = _visible_controls(str(text))
    if not text.strip():
        return markdown(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plot_text(text: Any) -> str:
    """`text` as matplotlib draws it literally, on one line: control characters as
    ``U+XXXX``. The figures are drawn with ``text.parse_math`` off (recallbench.report.plots'
    style), so a ``$`` is a dollar sign, never mathtext."""
    return _visible_controls(str(text))


#: the characters JSON may hold literally that could end a <script> element, open an HTML
#: comment or character reference, or end a JavaScript line in an older engine
_SCRIPT_ESCAPES = (
    ("&", "\\u0026"),
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def script_json(obj: Any) -> str:
    """`obj` as JSON (sorted keys, no spaces) that can stand inside a ``<script>`` element or
    a JavaScript file as an expression: ``<``, ``>``, ``&`` and the two JavaScript line
    separators (U+2028, U+2029) are written as ``\\u`` escapes, so no string can end the
    element (``</script>``), open a comment (``<!--``) or break a line. The same value
    parses back (`JSON.parse`, `orjson.loads`)."""
    import orjson

    text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    for ch, esc in _SCRIPT_ESCAPES:
        if ch in text:
            text = text.replace(ch, esc)
    return text


def html_text(text: Any) -> str:
    """`text` for an HTML page whose template engine escapes markup (report.html,
    compare.html: Jinja2's autoescaping, `markupsafe.escape`): control, format and
    surrogate characters (bidi overrides, zero-width characters, NUL) as ``U+XXXX``;
    newline and tab kept (a text shown with its line breaks). Not escaped for markup
    here: always through the autoescaping renderer."""
    return _visible_controls(str(text), keep="\n\t", hidden=("Cc", "Cf", "Cs"))


def html(text: Any) -> str:
    """`text` as HTML text or a quoted attribute value that shows exactly that text:
    control, format and surrogate characters as ``U+XXXX``, ``& < > " '`` as character
    references, so no string can open an element, end an attribute or start an entity."""
    import html as _html

    return _html.escape(_visible_controls(str(text)), quote=True)


def path_text(path: Any) -> str:
    """`path` (a str or `os.PathLike`) as valid text: a name of bytes that are not UTF-8
    (Python keeps them as lone surrogates, which JSON writers refuse) shows them as
    ``\\xNN`` (``bad\\xff``); any other path is itself."""
    import os

    text = os.fspath(path)
    if isinstance(text, bytes):
        return text.decode("utf-8", "backslashreplace")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text
