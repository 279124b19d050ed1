"""Build-directory checks (`recallbench.builddir.paths`): root-like, home, current directory and
its parents, files and symlinks refused; `safe_child` refuses a symlinked child."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from recallbench.builddir import paths
from recallbench.builddir.paths import check_build_dir, safe_child
from recallbench.core.errors import RecallbenchError


@pytest.mark.parametrize("value", ["", "  ", ".", "./", "/", "//", "/.."])
def test_check_build_dir_refuses_root_like(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecallbenchError) as err:
        check_build_dir(value)
    assert "\n" not in str(err.value)


def test_check_build_dir_refuses_home_and_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "users" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecallbenchError, match="is your home directory"):
        check_build_dir(home)
    with pytest.raises(RecallbenchError, match="is a parent of your home directory"):
        check_build_dir(tmp_path / "users")
    assert check_build_dir(home / "build") == home / "build"


def test_check_build_dir_refuses_current_dir_and_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    for value in (".", "build/..", str(project)):
        with pytest.raises(RecallbenchError, match="is the current directory"):
            check_build_dir(value)
    with pytest.raises(RecallbenchError, match="is a parent of the current directory"):
        check_build_dir("..")
    assert check_build_dir("build") == Path("build")
    assert check_build_dir(Path("out/build")) == Path("out/build")


def test_check_build_dir_under_or_at_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    afile = tmp_path / "results.json"
    afile.write_text("{}")
    with pytest.raises(RecallbenchError) as err:
        check_build_dir(afile / "build" / "deeper")
    assert str(err.value) == f"{afile / 'build' / 'deeper'}: {afile} is a file, not a directory"
    with pytest.raises(RecallbenchError, match="is a file, not a directory"):
        check_build_dir(afile)
    with pytest.raises(RecallbenchError, match="is a file, not a directory"):
        check_build_dir("results.json/build")


def test_check_build_dir_symlinks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert check_build_dir("link") == Path("link")  # a symlinked build dir is fine
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RecallbenchError, match="symlink to .* which does not exist"):
        check_build_dir("dangling/build")
    (tmp_path / "to-root").symlink_to("/")
    with pytest.raises(RecallbenchError, match="filesystem root"):
        check_build_dir("to-root")


def test_safe_child(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "store").mkdir(parents=True)
    assert safe_child(build, "store") == build / "store"
    assert safe_child(build, "runs.json") == build / "runs.json"  # need not exist
    assert safe_child(build, "store/snap.json") == build / "store" / "snap.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(build / "store")
    (build / "store").symlink_to(elsewhere)
    for name in ("store", "store/snap.json"):
        with pytest.raises(RecallbenchError) as err:
            safe_child(build, name)
        assert str(err.value).startswith(f"{build / 'store'} is a symlink (to {elsewhere})")
        assert "\n" not in str(err.value)
    for bad in ("../x", "/etc/passwd", ""):
        with pytest.raises(ValueError):
            safe_child(build, bad)
    assert paths.safe_child(build, "other") == build / "other"


def test_make_dirs_below_a_claimed_directory_never_follows_a_symlink(tmp_path: Path) -> None:
    """Issue 27: the one place directories are made inside a build dir or cache."""
    build, elsewhere = tmp_path / "build", tmp_path / "elsewhere"
    build.mkdir()
    elsewhere.mkdir()
    (build / "timings").symlink_to(elsewhere, target_is_directory=True)
    paths.claim_root(build)
    try:
        with pytest.raises(RecallbenchError, match=r"build/timings is a symlink"):
            paths.make_dirs(build / "timings" / "deeper")
        with pytest.raises(RecallbenchError, match=r"build/timings is a symlink"):
            paths.check_target(build / "timings" / "results.json")
        made = paths.make_dirs(build / "a" / "b")
        assert made == [build / "a", build / "a" / "b"]
    finally:
        paths.release_root(build)
    assert list(elsewhere.iterdir()) == []
    # not claimed: a directory the user named, whose links are the user's
    assert paths.make_dirs(build / "timings" / "deeper") == [build / "timings" / "deeper"]


def test_check_target_refuses_a_linked_file_anywhere(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("x")
    (tmp_path / "sym").symlink_to(real)
    os.link(real, tmp_path / "hard")
    with pytest.raises(RecallbenchError, match="is a symlink"):
        paths.check_target(tmp_path / "sym")
    with pytest.raises(RecallbenchError, match="is a hard link"):
        paths.check_target(tmp_path / "hard")
    paths.check_target(tmp_path / "new.txt")  # a new file is fine


def test_check_outputs_compares_resolved_paths_and_inodes(tmp_path: Path) -> None:
    from recallbench.commands.outputpaths import Place, check_outputs

    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    os.link(data, tmp_path / "alias.json")
    (tmp_path / "sym.json").symlink_to(data)
    inputs = [Place("the corpus", data)]
    for name in ("data.jsonl", "alias.json", "sym.json", "./data.jsonl"):
        with pytest.raises(RecallbenchError, match="would overwrite the corpus"):
            check_outputs([Place("--output", tmp_path / name)], inputs)
    with pytest.raises(RecallbenchError, match="another output"):
        check_outputs([Place("--output", tmp_path / "a"), Place("--report", tmp_path / "a")])
    with pytest.raises(RecallbenchError, match="would overwrite the plots"):
        check_outputs(
            [Place("--output", tmp_path / "p" / "x.svg")],
            [Place("the plots", tmp_path / "p", tree=True)],
        )
    check_outputs([Place("--output", tmp_path / "r.json")], inputs)
