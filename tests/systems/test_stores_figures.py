"""`recallbench compare` over the built-in systems available here, on the fixtures (what CI
runs), and the figures table of `docs/stores.md` generated from its output: every system
without a server of its own here, those with one in test_stores_figures_servers.py (two
files, so that `make test`'s two workers run the two compares at once: tests/storesfigures.py)."""

from __future__ import annotations

from pathlib import Path

from storesfigures import SERVER_EXTRAS, assert_rows_match_the_docs, built_in_systems, docs_table


def test_the_docs_table_has_a_row_per_built_in_system_in_order() -> None:
    labels = [line.split(" | ", 1)[0] for line in docs_table().splitlines()[2:]]
    assert labels == [f"| `{r['name']}`" for r in built_in_systems()]


def test_compare_over_every_built_in_system_matches_the_docs(tmp_path: Path) -> None:
    names = [r["name"] for r in built_in_systems() if r["extra"] not in SERVER_EXTRAS]
    assert len(names) > 1
    assert_rows_match_the_docs(names, tmp_path)
