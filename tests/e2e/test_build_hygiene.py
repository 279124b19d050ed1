"""Build-dir hygiene (issue 27, files): nothing recallbench writes in a build directory or a
vector cache goes through a link, no output lands on an input or on another output, temp
names stay short, and a failed or killed command leaves nothing of its own behind.

Each test names the behaviour it holds; each failed on 2706fe9."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import Result
from conftest import CORPUS, QUERIES, cli, copy_build

from recallbench.builddir.lock import LOCK_NAME
from recallbench.builddir.scopespool import STRUCTURE_SPOOL


def one_line_error(result: Result, command: str) -> str:
    """Exit 1, exactly one error line on stderr, no traceback, nothing on stdout."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"recallbench {command}: error: "), lines[0]
    return lines[0]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under `root`: file -> bytes, directory -> None (links not followed)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = None if path.is_dir() and not path.is_symlink() else path.read_bytes()
    return out


@pytest.fixture
def build(staged_build: Path, tmp_path: Path) -> Path:
    """A private copy of the staged fixture build (all seven stages, bm25-free: HotMem)."""
    return copy_build(staged_build, tmp_path / "build")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the build with a file in it that must never change."""
    where = tmp_path / "outside"
    where.mkdir()
    (where / "precious.txt").write_bytes(b"not recallbench's\n")
    (where / "rows-precious").mkdir()
    (where / "rows-precious" / "keep.bin").write_bytes(b"\x00" * 8)
    return where


# --- item 9: a symlinked directory inside the build dir is never followed ------------------


@pytest.mark.parametrize("entry", ["timings", "report-plots", ".cache", "vectors", "stores"])
def test_a_symlinked_build_dir_entry_is_refused_and_nothing_is_written_through_it(
    build: Path, outside: Path, entry: str
) -> None:
    """`report` (timings/, report-plots/, matplotlib's .cache/) and every other command
    followed a symlinked entry and wrote, or a cache's clean-up deleted, outside the build."""
    before = tree(outside)
    target = build / entry
    if target.exists():
        shutil.rmtree(target)
    target.symlink_to(outside, target_is_directory=True)
    line = one_line_error(cli(build, "report"), "report")
    assert str(target) in line and "symlink" in line
    assert tree(outside) == before


@pytest.mark.parametrize(
    "entry", ["timings/results.json", "report-plots/recall-at-k.svg", "report.html"]
)
def test_a_symlinked_or_hard_linked_file_in_the_build_is_refused(
    build: Path, outside: Path, entry: str
) -> None:
    """A link to an outside file at a place a stage writes, at any depth: refused before
    any work, the outside file unchanged (a symlink, then a hard link)."""
    victim = outside / "precious.txt"
    place = build / entry
    place.unlink()
    place.symlink_to(victim)
    line = one_line_error(cli(build, "report"), "report")
    assert str(place) in line
    place.unlink()
    os.link(victim, place)
    line = one_line_error(cli(build, "report"), "report")
    assert str(place) in line and "hard link" in line
    assert victim.read_bytes() == b"not recallbench's\n"


def test_a_hard_linked_artifact_is_refused(build: Path, outside: Path) -> None:
    """results.json hard-linked to a file outside: report refuses it, the other name keeps
    its bytes."""
    victim = outside / "copy.json"
    os.link(build / "results.json", victim)
    before = victim.read_bytes()
    line = one_line_error(cli(build, "report"), "report")
    assert "results.json" in line and "hard link" in line
    assert victim.read_bytes() == before


def test_a_report_under_a_symlinked_directory_of_the_build_is_refused(
    build: Path, outside: Path
) -> None:
    """--report BUILD/sub/report.md with BUILD/sub a symlink: the parent is not followed."""
    before = tree(outside)
    (build / "sub").symlink_to(outside, target_is_directory=True)
    line = one_line_error(cli(build, "report", "--report", build / "sub" / "report.md"), "report")
    assert str(build / "sub") in line
    assert tree(outside) == before


def test_a_vector_cache_behind_a_symlink_in_the_build_is_never_written_or_cleaned(
    tmp_path: Path, outside: Path
) -> None:
    """BUILD/vectors/<embedder> a symlink: the cache writer refuses it; the rows-* clean-up
    used to delete the outside directory's rows-* folders."""
    from recallbench.builddir.lock import build_lock
    from recallbench.core.errors import RecallbenchError
    from recallbench.engine.vectorcache import CacheWriter

    build = tmp_path / "build"
    (build / "vectors").mkdir(parents=True)
    (build / "vectors" / "hash-embedder").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with build_lock(build, "test"), pytest.raises(RecallbenchError, match="is a symlink"):
        CacheWriter(build / "vectors" / "hash-embedder", "hash")
    assert tree(outside) == before


# --- item 10: validate never writes through a symlinked scopes.jsonl ---------------------


def test_validate_refuses_a_symlinked_scope_spool(tmp_path: Path, outside: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "scopes.jsonl").symlink_to(outside / "precious.txt")
    line = one_line_error(
        cli(build, "validate", "--corpus", CORPUS, "--queries", QUERIES), "validate"
    )
    assert "scopes.jsonl" in line and "symlink" in line
    assert (outside / "precious.txt").read_bytes() == b"not recallbench's\n"
    assert not (build / "suite.json").exists()


# --- item 12: prep --cache writes only into a cache it made -------------------------------


def test_prep_refuses_a_directory_that_is_not_its_cache(build: Path, tmp_path: Path) -> None:
    """A manifest.json and rows-* folder recallbench did not make: refused, both kept."""
    cache = tmp_path / "not-a-cache"
    (cache / "rows-mine").mkdir(parents=True)
    (cache / "rows-mine" / "data.bin").write_bytes(b"mine")
    (cache / "manifest.json").write_bytes(b'{"mine": true}\n')
    before = tree(cache)
    line = one_line_error(cli(build, "prep", "--cache", cache, "--workers", "1"), "prep")
    assert str(cache) in line and "not a vector cache recallbench made" in line
    assert tree(cache) == before


def test_prep_refuses_the_home_directory_and_root_as_its_cache(
    build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for cache, why in ((home, "your home directory"), (Path("/"), "the filesystem root")):
        line = one_line_error(cli(build, "prep", "--cache", cache, "--workers", "1"), "prep")
        assert why in line
    assert list(home.iterdir()) == []


def test_prep_writes_its_cache_into_a_new_directory_and_again_over_it(
    build: Path, tmp_path: Path
) -> None:
    """The marker makes a cache prep made its own: a second prep replaces it."""
    cache = tmp_path / "cache"
    for _ in range(2):
        result = cli(build, "-q", "prep", "--cache", cache, "--workers", "1")
        assert result.exit_code == 0, result.output
    assert (cache / ".recallbench-cache").is_file() and (cache / "manifest.json").is_file()
    assert len([p for p in cache.iterdir() if p.name.startswith("rows-")]) == 1


# --- item 13: an output is never an input, a build artifact, or another output ------------


def test_run_refuses_an_output_that_is_its_dataset_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(CORPUS.read_bytes())
    line = one_line_error(
        cli(
            tmp_path / "build",
            "run",
            "--corpus",
            corpus,
            "--queries",
            QUERIES,
            "--output",
            corpus,
        ),
        "run",
    )
    assert "corpus" in line
    assert corpus.read_bytes() == CORPUS.read_bytes()


def test_run_refuses_an_output_hard_linked_to_its_dataset_file(tmp_path: Path) -> None:
    """The same file under another name (compared by device and inode)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(CORPUS.read_bytes())
    os.link(corpus, tmp_path / "other-name.json")
    one_line_error(
        cli(
            tmp_path / "build",
            "run",
            "--corpus",
            corpus,
            "--queries",
            QUERIES,
            "--report",
            tmp_path / "other-name.md",
            "--output",
            tmp_path / "other-name.json",
        ),
        "run",
    )
    assert corpus.read_bytes() == CORPUS.read_bytes()


def test_compare_refuses_an_output_that_is_one_of_its_results(build: Path, tmp_path: Path) -> None:
    first = tmp_path / "a" / "results.json"
    first.parent.mkdir()
    first.write_bytes((build / "results.json").read_bytes())
    before = first.read_bytes()
    line = one_line_error(
        cli(
            build,
            "compare",
            "--result",
            first,
            "--result",
            build / "results.json",
            "--output",
            first,
        ),
        "compare",
    )
    assert "--result" in line
    assert first.read_bytes() == before


@pytest.mark.parametrize("artifact", ["scores.json", "suite.json", "scopes.jsonl", LOCK_NAME])
def test_report_refuses_an_output_over_an_upstream_artifact(build: Path, artifact: str) -> None:
    before = (build / artifact).read_bytes()
    line = one_line_error(cli(build, "report", "--output", build / artifact), "report")
    assert artifact in line
    assert (build / artifact).read_bytes() == before


def test_report_refuses_an_output_over_the_structure_spool(build: Path) -> None:
    """validate's structure spool is the build's even when this dataset has none (a later
    validate of LongMemEval writes it there)."""
    line = one_line_error(cli(build, "report", "--output", build / STRUCTURE_SPOOL), "report")
    assert STRUCTURE_SPOOL in line
    assert not (build / STRUCTURE_SPOOL).exists()


def test_report_refuses_one_path_for_two_of_its_outputs(build: Path, tmp_path: Path) -> None:
    """--output F --report F kept only the Markdown; --output r.html --report r.md would
    have lost the JSON to the HTML page."""
    same = tmp_path / "r.out"
    line = one_line_error(cli(build, "report", "--output", same, "--report", same), "report")
    assert "--output" in line and "--report" in line
    one_line_error(
        cli(build, "report", "--output", tmp_path / "r.html", "--report", tmp_path / "r.md"),
        "report",
    )
    assert not same.exists() and not (tmp_path / "r.html").exists()


# --- item 14: a legal long output name works ---------------------------------------------


def test_a_240_byte_output_name_is_written(build: Path, tmp_path: Path) -> None:
    """The temp name was the final name plus a suffix: over 255 bytes for a legal name."""
    name = "r" * 235 + ".json"
    assert len(name.encode()) == 240
    result = cli(build, "-q", "report", "--output", tmp_path / name)
    assert result.exit_code == 0, result.output
    assert (tmp_path / name).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --- item 15 (part) and issue 26: nothing left behind -------------------------------------


def test_leftover_compare_work_directories_are_removed_by_the_next_command(
    build: Path,
) -> None:
    """A killed compare's BUILD/compare-*/ folders were never removed; compare-plots/ (the
    comparison's plots) is not a work directory and stays."""
    for name in ("compare-x1y2z3_a", "compare-vectors-abc123de"):
        (build / name / "stores").mkdir(parents=True)
        (build / name / "stores" / "hotmem.sqlite").write_bytes(b"left over")
    (build / "compare-plots").mkdir()
    (build / "compare-plots" / "kept.svg").write_bytes(b"<svg/>")
    result = cli(build, "-q", "score")
    assert result.exit_code == 0, result.output
    assert not (build / "compare-x1y2z3_a").exists()
    assert not (build / "compare-vectors-abc123de").exists()
    assert (build / "compare-plots" / "kept.svg").read_bytes() == b"<svg/>"


def test_a_failed_command_leaves_no_lock_or_build_dir_it_created(tmp_path: Path) -> None:
    new = tmp_path / "new" / "build"
    one_line_error(cli(new, "hydrate"), "hydrate")
    assert not (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(cli(empty, "hydrate"), "hydrate")
    assert list(empty.iterdir()) == []


def test_a_symlinked_store_of_the_build_is_refused(build: Path, outside: Path) -> None:
    """A kept store moved outside and linked back: query opened it (a database a later
    stage may write) through the link."""
    store = build / "stores" / "00000"
    moved = outside / "store"
    shutil.move(store, moved)
    store.symlink_to(moved, target_is_directory=True)
    before = tree(outside)
    line = one_line_error(cli(build, "query"), "query")
    assert str(store) in line
    assert tree(outside) == before


SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "retrieval_eval.py"


@pytest.mark.parametrize("clash", ["corpus", "baseline"])
def test_the_script_refuses_an_output_over_its_input(tmp_path: Path, clash: str) -> None:
    """The script shares the check: --output onto its --corpus, --write-baseline onto its
    --check-baseline."""
    import subprocess
    import sys

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(CORPUS.read_bytes())
    baseline = tmp_path / "baseline.json"
    baseline.write_bytes(b"{}\n")
    args = ["--corpus", corpus, "--queries", QUERIES]
    if clash == "corpus":
        args += ["--output", corpus]
    else:
        args += ["--write-baseline", baseline, "--check-baseline", baseline]
    proc = subprocess.run(
        [sys.executable, SCRIPT, "-q", *map(str, args)], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("recallbench retrieval_eval: error: ") and "overwrite" in line
    assert corpus.read_bytes() == CORPUS.read_bytes() and baseline.read_bytes() == b"{}\n"


def test_prep_refuses_a_cache_of_its_own_holding_a_link(
    build: Path, tmp_path: Path, outside: Path
) -> None:
    """A cache prep made, with its manifest replaced by a symlink: refused before any work
    (the manifest's rename would otherwise be the only guard), the target unchanged."""
    cache = tmp_path / "cache"
    assert cli(build, "-q", "prep", "--cache", cache, "--workers", "1").exit_code == 0
    (cache / "manifest.json").unlink()
    (cache / "manifest.json").symlink_to(outside / "precious.txt")
    line = one_line_error(cli(build, "prep", "--cache", cache, "--workers", "1"), "prep")
    assert "manifest.json is a symlink" in line
    assert (outside / "precious.txt").read_bytes() == b"not recallbench's\n"
