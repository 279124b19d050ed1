"""The id grammar (document, query and memory ids) and the ids a store sees.

An id is acceptable when it is 1 to 200 characters long and contains none of:

* a Unicode control, format, surrogate, private-use or unassigned character (categories
  Cc, Cf, Cs, Co, Cn): NUL and other C0/C1 controls, zero-width characters (U+200B..U+200D,
  U+FEFF) and bidi controls (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), which make
  two different ids look identical or reorder a report line;
* whitespace of any kind (TREC run and qrels fields are whitespace-separated);
* ``|`` or a backtick (they break Markdown tables and code spans);

and does not start with ``#`` (a comment in TREC files).

``id_problem`` says what is wrong (or None); ``trec_safe`` guards the TREC writer;
``opaque_id`` is the id a store sees for a dataset's unit (a hash revealing neither the
scope nor the unit). Nothing here escapes text: ``md_cell`` is only another name for
`recallbench.core.escape.markdown_cell`, kept importable (every escaping rule is in
`recallbench.core.escape`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from recallbench.core.escape import markdown_cell

#: the longest acceptable id, in characters (code points)
MAX_ID_LENGTH = 200

_REFUSED_CATEGORIES = {
    "Cc": "control character",
    "Cf": "invisible format character",
    "Cs": "surrogate",
    "Co": "private-use character",
    "Cn": "unassigned code point",
}
_MARKDOWN_BREAKERS = {"|": "breaks Markdown tables", "`": "breaks Markdown code"}
# printable ASCII without space, '|' and '`': the fast path for ordinary ids
_PLAIN_ASCII = re.compile(r"[\x21-\x5f\x61-\x7b\x7d\x7e]+")


def _describe(ch: str) -> str:
    """'U+202E RIGHT-TO-LEFT OVERRIDE' (name omitted when Unicode has none)."""
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} {name}" if name else f"U+{ord(ch):04X}"


def id_problem(value: str) -> str | None:
    """None if `value` is an acceptable id, else a short reason.

    The reason reads after the id, e.g. ``f"doc id {value!r} {reason}"``: "is empty",
    "is 250 characters long (at most 200)", "starts with '#' (a TREC comment)",
    "contains whitespace U+0020 SPACE at character 4",
    "contains U+202E RIGHT-TO-LEFT OVERRIDE (invisible format character) at character 2",
    "contains '|' (U+007C) at character 3, which breaks Markdown tables".
    Character positions count from 1.
    """
    if not isinstance(value, str):
        return f"is not a string but {type(value).__name__}"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_ID_LENGTH})"
    if value[0] == "#":
        return "starts with '#' (a TREC comment)"
    if _PLAIN_ASCII.fullmatch(value):
        return None
    for pos, ch in enumerate(value, start=1):
        if ch.isspace():
            return f"contains whitespace {_describe(ch)} at character {pos}"
        category = unicodedata.category(ch)
        if category in _REFUSED_CATEGORIES:
            kind = _REFUSED_CATEGORIES[category]
            return f"contains {_describe(ch)} ({kind}) at character {pos}"
        if ch in _MARKDOWN_BREAKERS:
            return f"contains {ch!r} (U+{ord(ch):04X}) at character {pos}, which {_MARKDOWN_BREAKERS[ch]}"
    return None


def trec_safe(value: str) -> str:
    """Return `value` unchanged if it is an acceptable id, else raise ValueError.

    For the TREC writer: a line is written whole and correct, or not at all.
    """
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"cannot write {value!r} as a TREC field: it {problem}")
    return value


#: kept importable: the Markdown rule lives in `recallbench.core.escape` (every escaping rule does)
md_cell = markdown_cell


def opaque_id(scope_id: str, unit_id: str) -> str:
    """The id the store sees for unit `unit_id` of scope `scope_id` (a LongMemEval question,
    a LoCoMo sample): a hash that reveals neither id nor position."""
    digest = hashlib.sha256(f"{scope_id}\x1f{unit_id}".encode()).hexdigest()
    return "m" + digest[:20]
