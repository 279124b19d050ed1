"""Escaping where data meets an output: one rule per output kind.

Every string that comes from a dataset, a store, a plugin or a path is data. Each output
kind has one function here that makes such a string safe for it, and the writers of that
output call it where the string meets the output, never at their callers' sites.

- `terminal(text)`: one line on a terminal (the summary table, messages).
"""

from __future__ import annotations

import unicodedata
from typing import Any


def terminal(text: Any) -> str:
    """`text` for one terminal line: every control, format or surrogate character
    (ESC, CR, LF, TAB, NUL, bidi overrides, zero-width characters) is shown as ``U+XXXX``,
    so no string can move the cursor, rewrite a row or set the terminal's title."""
    text = str(text)
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        f"U+{ord(ch):04X}" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text
    )
