"""report.html's and compare.html's data files (`recallbench.report.pagedata`): where each
query's texts go, byte-identical pages and files for the same inputs (any worker count),
the script escaping of what they hold, and the data directory published whole (no stale
chunk of an earlier, larger report)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest
from conftest import run_generated_longmemeval

from recallbench.builddir.artifacts import StagedTree, publish
from recallbench.commands.pipeline import write_run
from recallbench.core.errors import RecallbenchError
from recallbench.core.escape import script_json
from recallbench.engine.tasks import Execution
from recallbench.report import REPORT_DATA_DIR
from recallbench.report.pagedata import (
    CHUNK_BYTES,
    CHUNK_QUERIES,
    FIRST_SLICE_BYTES,
    FIRST_SLICE_QUERIES,
    PageChunks,
    chunk_script,
)

HOSTILE = "</script><script>alert(1)</script><!-- \u2028 \u2029 & ]]>"
CHUNK = re.compile(r'recallbenchPageData\("report",("[0-9a-f]+"),(\d+),(\[.*\])\);\n', re.S)


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build of 120 generated LongMemEval questions (more than the page's first slice),
    written to disk."""
    work = tmp_path_factory.mktemp("generated")
    run = run_generated_longmemeval(work)
    write_run(run, work / "build")
    run.close()
    return work


# --- where the records go ------------------------------------------------------------------


def test_the_first_slice_and_the_chunks_are_bounded_by_queries_and_bytes() -> None:
    chunks = PageChunks("report", "ab")
    small = script_json({"id": "q", "t": "x" * 100})
    where = [chunks.add(small) for _ in range(FIRST_SLICE_QUERIES + 2 * CHUNK_QUERIES + 1)]
    assert where[:FIRST_SLICE_QUERIES] == [0] * FIRST_SLICE_QUERIES  # in the page itself
    assert where[FIRST_SLICE_QUERIES:] == [1] * CHUNK_QUERIES + [2] * CHUNK_QUERIES + [3]
    # a record too large for what is left of the slice closes it: every later one is in a file
    big = script_json({"id": "b", "t": "y" * (FIRST_SLICE_BYTES // 3)})
    chunks = PageChunks("report", "ab")
    assert [chunks.add(big) for _ in range(5)][:3] == [0, 0, 1]
    assert chunks.add(small) != 0
    # a chunk closes before it would pass CHUNK_BYTES; a record larger than that is alone
    huge = script_json({"id": "h", "t": "z" * (CHUNK_BYTES + 10)})
    chunks = PageChunks("report", "ab")
    assert chunks.add(huge) == 1 and chunks.add(small) == 2 and chunks.add(huge) == 3
    inline, data = chunks.finish()
    assert inline == [] and data.names == ["0001.js", "0002.js", "0003.js"]
    sizes = [len(data.read(n)) for n in data.names]
    assert sizes[1] < 200 and min(sizes[0], sizes[2]) > CHUNK_BYTES
    data.close()


def test_a_data_file_is_one_call_with_the_pages_token_and_its_records() -> None:
    records = [script_json({"id": f"q{i}"}) for i in range(3)]
    payload = chunk_script("report", "f00d", 7, records)
    assert payload == (
        b'recallbenchPageData("report","f00d",7,[{"id":"q0"},{"id":"q1"},{"id":"q2"}]);\n'
    )


# --- escaping ------------------------------------------------------------------------------


def test_script_json_keeps_a_hostile_text_inert_in_a_page_and_in_a_data_file() -> None:
    text = script_json({"t": HOSTILE, "id": "q<1>"})
    for inert in ("<", ">", "&", "\u2028", "\u2029"):
        assert inert not in text
    assert orjson.loads(text) == {"t": HOSTILE, "id": "q<1>"}  # the same value comes back
    assert text == (
        '{"id":"q\\u003c1\\u003e","t":"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)'
        '\\u003c/script\\u003e\\u003c!-- \\u2028 \\u2029 \\u0026 ]]\\u003e"}'
    )
    payload = chunk_script("report", "ab", 1, [text]).decode("utf-8")
    assert "</" not in payload and "<!--" not in payload and "\u2028" not in payload
    assert orjson.loads(CHUNK.fullmatch(payload).group(3)) == [{"t": HOSTILE, "id": "q<1>"}]


# --- byte-identical pages and files ----------------------------------------------------------


def test_the_page_and_its_data_files_are_byte_identical_for_any_worker_count(
    generated: Path, tmp_path: Path
) -> None:
    """The same suite run again with 2 workers: the same report.html and the same data
    files, byte for byte; the page has more queries than its first slice, so some texts are
    in files, and every query is in exactly one place."""
    build = generated / "build"
    html = (build / "report.html").read_bytes()
    data = files_of(build / REPORT_DATA_DIR)
    assert list(data) == ["0001.js", "0002.js"]  # 120 queries: 50 in the page, 50 + 20
    again = run_generated_longmemeval(tmp_path, execution=Execution(workers=2))
    try:
        assert again.html == html
        assert {n: again.html_data.read(n) for n in again.html_data.names} == data
    finally:
        again.close()
    page = orjson.loads(re.search(rb'id="rb-data">(.*?)</script>', html, re.S).group(1))
    placed = [q["c"] for q in page["queries"]]
    assert placed == sorted(placed) and placed.count(0) == FIRST_SLICE_QUERIES
    in_files = [
        r["id"]
        for name in data
        for r in orjson.loads(CHUNK.fullmatch(data[name].decode()).group(3))
    ]
    assert [r["id"] for r in page["inline"]] + in_files == [q["id"] for q in page["queries"]]
    token = CHUNK.fullmatch(data["0001.js"].decode()).group(1)
    assert (
        orjson.loads(token) == page["chunks"]["token"] == again.envelopes["results"]["fingerprint"]
    )


def test_the_cli_report_writes_the_same_page_and_files_as_the_run(
    generated: Path, tmp_path: Path
) -> None:
    from conftest import cli, load_json

    build = generated / "build"
    before = (build / "report.html").read_bytes(), files_of(build / REPORT_DATA_DIR)
    markdown = (build / "report.md").read_text(encoding="utf-8")
    result = cli(build, "report")
    assert result.exit_code == 0, result.output
    assert "2 data files beside it" in result.stderr
    assert ((build / "report.html").read_bytes(), files_of(build / REPORT_DATA_DIR)) == before
    # report.md too, but for its clock (the result read back has its keys sorted: the
    # dataset figures were in the reader's order in run's report.md before issue 39)
    generated_line = re.compile(r"^Generated .*$", re.M)
    again = (build / "report.md").read_text(encoding="utf-8")
    assert generated_line.sub("", again) == generated_line.sub("", markdown)
    sidecar = load_json(build / "timings" / "results.json")["html"]
    assert sidecar["data_files"] == 2
    assert sidecar["data_bytes"] == sum(len(b) for b in before[1].values())
    assert not [p for p in build.iterdir() if p.name.startswith(".recallbench-")]  # unstaged


def test_a_smaller_report_leaves_no_stale_data_file(generated: Path, tmp_path: Path) -> None:
    """The data directory is replaced whole: the fixture suite's report (one data file)
    written where the 120-question report (two) was leaves only its own file."""
    import shutil

    from conftest import run_fixtures

    build = tmp_path / "build"
    shutil.copytree(generated / "build", build)
    assert len(list((build / REPORT_DATA_DIR).iterdir())) == 2
    run = run_fixtures(build)
    write_run(run, build)
    assert files_of(build / REPORT_DATA_DIR) == {"0001.js": run.html_data.read("0001.js")}
    run.close()


# --- the data directory, published whole ---------------------------------------------------


def _tree(tmp_path: Path, names: list[str]) -> StagedTree:
    src = tmp_path / f"src-{'-'.join(names)}"
    src.mkdir()
    for name in names:
        (src / name).write_bytes(name.encode())
    return StagedTree({name: src / name for name in names})


def test_a_staged_tree_replaces_the_directory_whole(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report-data"
    publish({target: _tree(tmp_path, ["0001.js", "0002.js", "0003.js"])})
    assert sorted(os.listdir(target)) == ["0001.js", "0002.js", "0003.js"]
    publish({target: _tree(tmp_path, ["0001.js"]), tmp_path / "out" / "page.html": b"x"})
    assert os.listdir(target) == ["0001.js"] and (target / "0001.js").read_bytes() == b"0001.js"
    assert sorted(os.listdir(tmp_path / "out")) == ["page.html", "report-data"]  # no temp left
    publish({target: StagedTree({})})  # a page with no data files: the old directory goes
    assert not target.exists() and os.listdir(tmp_path / "out") == ["page.html"]


def test_a_staged_tree_is_never_written_through_a_link_or_over_a_file(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_bytes(b"keep")
    link = tmp_path / "report-data"
    link.symlink_to(elsewhere)
    with pytest.raises(RecallbenchError, match="report-data is a symlink"):
        publish({link: _tree(tmp_path, ["0001.js"])})
    assert os.listdir(elsewhere) == ["keep.txt"] and link.is_symlink()
    link.unlink()
    link.write_bytes(b"a file")
    with pytest.raises(RecallbenchError, match="report-data is a file, not a directory"):
        publish({link: _tree(tmp_path, ["0002.js"])})
    assert link.read_bytes() == b"a file"


def test_a_failed_publish_keeps_the_previous_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report-data"
    publish({target: _tree(tmp_path, ["0001.js", "0002.js"])})
    broken = _tree(tmp_path, ["0001.js"])
    broken.files["0001.js"] = tmp_path / "missing"  # the staged file is gone: publish fails
    with pytest.raises(FileNotFoundError):
        publish({target: broken, tmp_path / "page.html": b"new"})
    assert sorted(os.listdir(target)) == ["0001.js", "0002.js"]
    left = sorted(os.listdir(tmp_path))
    assert left == ["report-data", "src-0001.js", "src-0001.js-0002.js"]  # nothing else


def test_data_files_are_staged_under_the_scratch_directory_and_removed(tmp_path: Path) -> None:
    chunks = PageChunks("report", "ab", scratch=tmp_path)
    for _ in range(FIRST_SLICE_QUERIES + 1):
        chunks.add(script_json({"id": "q"}))
    _, data = chunks.finish()
    staged = [p for p in tmp_path.iterdir()]
    assert len(staged) == 1 and staged[0].name.startswith(".recallbench-")
    assert os.listdir(staged[0]) == ["0001.js"]
    data.close()
    assert list(tmp_path.iterdir()) == []


def test_report_refuses_a_symlinked_data_dir_beside_its_page_writing_nothing(
    generated: Path, tmp_path: Path
) -> None:
    """`report --report out/r.md` where out/report-data is a symlink: one line naming it,
    exit 1, nothing written beside it (not even report-plots/) nor where the link points."""
    from conftest import cli

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / REPORT_DATA_DIR).symlink_to(elsewhere)
    result = cli(generated / "build", "report", "--report", out / "r.md")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"recallbench report: error: {out / REPORT_DATA_DIR} is a symlink (to {elsewhere}); "
        "recallbench does not write through links, so remove it or give another path"
    ]
    assert os.listdir(out) == [REPORT_DATA_DIR] and os.listdir(elsewhere) == []
