"""The rows of `docs/stores.md`'s figures table for the built-in systems that start a server
of their own (PostgreSQL, Milvus Lite), from `recallbench compare` on the fixtures beside the
reference: the other half of test_stores_figures.py (tests/storesfigures.py)."""

from __future__ import annotations

from pathlib import Path

from storesfigures import SERVER_EXTRAS, assert_rows_match_the_docs, built_in_systems


def test_compare_over_the_server_systems_matches_the_docs(tmp_path: Path) -> None:
    names = [r["name"] for r in built_in_systems() if r["extra"] in SERVER_EXTRAS]
    assert names, "no built-in system starts a server: is `make setup` installed?"
    assert_rows_match_the_docs(names, tmp_path)
