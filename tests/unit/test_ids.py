"""The id grammar (`recallbench.core.ids`): what an id may not hold, and Markdown table cells."""

from __future__ import annotations

import pytest

from recallbench.core.ids import MAX_ID_LENGTH, id_problem, md_cell, trec_safe


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "is empty"),
        ("x" * (MAX_ID_LENGTH + 1), "201 characters long (at most 200)"),
        ("#q1", "starts with '#'"),
        ("a\x00b", "U+0000 (control character) at character 2"),
        ("a\x7f", "U+007F"),
        ("ab\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE (invisible format character) at character 3"),
        ("\u200bdoc", "U+200B ZERO WIDTH SPACE"),
        ("a\u200fb", "U+200F"),
        ("a\u2066b", "U+2066"),
        ("\ufeffdoc", "U+FEFF"),
        ("a\ud800", "U+D800 (surrogate)"),
        ("a\ue000", "U+E000 (private-use character)"),
        ("a\u0378", "U+0378 (unassigned code point)"),
        ("a|b", "'|' (U+007C) at character 2, which breaks Markdown tables"),
        ("a`b", "'`' (U+0060) at character 2"),
        ("a b", "whitespace U+0020 SPACE at character 2"),
        ("a\tb", "whitespace U+0009"),
        ("a\nb", "whitespace U+000A"),
        ("a\u00a0b", "whitespace U+00A0 NO-BREAK SPACE"),
        ("a\u3000b", "whitespace U+3000"),
    ],
)
def test_id_problem_refuses(value: str, expected: str) -> None:
    problem = id_problem(value)
    assert problem is not None and expected in problem, problem
    with pytest.raises(ValueError, match="TREC field"):
        trec_safe(value)


@pytest.mark.parametrize(
    "value", ["m-001", "q_1.2", "a#b", "x" * MAX_ID_LENGTH, "caf\u00e9", "\u6587\u6863-7", "{k}~!"]
)
def test_id_problem_accepts(value: str) -> None:
    assert id_problem(value) is None
    assert trec_safe(value) is value


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("plain", "plain"),
        ("a|b", "a\\|b"),
        ("`code`", "\\`code\\`"),
        ("back\\slash", "back\\\\slash"),
        ("a\\|b", "a\\\\\\|b"),
        ("one\ntwo\r\nthree", "oneU+000AtwoU+000DU+000Athree"),
        ("tab\there", "tabU+0009here"),
        ("nul\x00", "nulU+0000"),
        ("rlo\u202eevil", "rloU+202Eevil"),
        ("zw\u200bsp", "zwU+200Bsp"),
        ("line\u2028sep", "lineU+2028sep"),
        ("caf\u00e9 \u6587", "caf\u00e9 \u6587"),
        ("", ""),
    ],
)
def test_md_cell(text: str, cell: str) -> None:
    assert md_cell(text) == cell
