"""What compare keeps of each system on disk instead of in memory (issue 40: its memory grew
with the systems): the results read back one at a time, the texts read scope by scope from
the one validated spool kept, and compare.html made from them byte for byte the page the
in-memory documents and texts give. The memory itself is measured by
benchmarks/bench_compare.py (docs/performance.md), not here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from recallbench.commands.compare import compare_results, run_compared
from recallbench.datasets.locomo.generator import generate
from recallbench.report import html
from recallbench.report.spooled import QueryLookup, Scratch, SpooledResults

SYSTEMS = ("bm25", "bm25-okapi")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two systems run by `run_compared` on a generated LoCoMo file of 3 conversations (3
    scopes), with what the in-memory path held: each result and each run's texts."""
    root = tmp_path_factory.mktemp("spooled")
    data = root / "locomo.json"
    generate(data, conversations=3, seed=3)
    held: dict[str, list[Any]] = {"results": [], "suites": []}

    def hold(run: Any) -> None:
        held["results"].append(orjson.loads(orjson.dumps(run.result)))
        held["suites"].append(run.envelopes["suite"])

    build = root / "build"
    runs = run_compared("locomo", {"data": data}, SYSTEMS, top_k=10, parent=build, on_run=hold)
    return {"runs": runs, "build": build, **held}


def test_the_results_read_back_are_the_results(compared: dict[str, Any]) -> None:
    results: SpooledResults = compared["runs"].results
    assert len(results) == len(SYSTEMS)
    for i, held in enumerate(compared["results"]):
        assert results[i] == held
        assert list(results[i]) == list(held)  # the keys in their order
        assert list(results.queries(i)) == held["queries"]
        assert results.head(i) == {**held, "queries": None}
    assert list(results[1:]) == compared["results"][1:]
    assert results[-1] == compared["results"][-1]
    with pytest.raises(IndexError):
        results[len(SYSTEMS)]


def test_one_spool_is_kept_for_every_system(compared: dict[str, Any]) -> None:
    (scratch,) = [p for p in compared["build"].iterdir() if p.name.startswith("compare-")]
    assert sorted(p.name for p in scratch.iterdir()) == [
        "result-0000.jsonl",
        "result-0001.jsonl",
        "spool-0001.jsonl",
    ]


@pytest.mark.parametrize("everything", [True, False], ids=["every-text", "large-spool"])
def test_compare_html_from_disk_is_the_in_memory_page(
    compared: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, everything: bool
) -> None:
    """The same page and data files, for a spool whose every text goes in and for one
    larger than ALL_TEXTS_BYTES (only the texts the results use, and the note's count)."""
    if not everything:
        monkeypatch.setattr(html, "ALL_TEXTS_BYTES", 1)
    runs = compared["runs"]
    (scratch,) = [p for p in compared["build"].iterdir() if p.name.startswith("compare-")]
    source = tmp_path / "scopes.jsonl"  # a copy: `keep` moves the spool it keeps
    shutil.copyfile(scratch / "spool-0001.jsonl", source)
    suite = {**compared["suites"][0], "spool_path": str(source)}
    in_memory = html.merged(
        "session", [html.collect_texts(suite, [r]) for r in compared["results"]]
    )
    spooled = html.SpooledTexts("session")
    spooled.keep(suite, compared["results"][0], tmp_path / "spool.jsonl")
    spooled.keep(compared["suites"][0], compared["results"][1], tmp_path / "unused.jsonl")
    assert html.text_stats(spooled) == html.text_stats(in_memory)
    assert html.text_stats(spooled).complete is everything
    doc = compare_results(compared["results"], list(SYSTEMS))
    pages = [
        html.render_compare_page(doc, compared["results"], in_memory),
        html.render_compare_page(doc, runs.results, spooled),
    ]
    assert pages[0].html == pages[1].html
    names = pages[0].data.names
    assert names and names == pages[1].data.names
    assert [pages[0].data.read(n) for n in names] == [pages[1].data.read(n) for n in names]


def test_records_out_of_order_are_found() -> None:
    records = [{"query_id": q} for q in ("a", "b", "c", "d")]
    lookup = QueryLookup(iter(records))
    assert [lookup.get(q) for q in ("a", "c", "b", "x", "d")] == [
        records[0],
        records[2],
        records[1],
        None,
        records[3],
    ]


def test_the_scratch_directory_goes_with_its_last_user(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path)
    results = SpooledResults(scratch)
    results.append({"queries": [{"query_id": "q"}], "system": {}})
    path = scratch.path
    assert path.name.startswith("compare-") and any(path.iterdir())
    del scratch
    assert path.is_dir()  # the results still read from it
    del results
    assert not path.exists()
