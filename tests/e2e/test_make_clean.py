"""The `make clean` guard: root-like and symlinked BUILD values refused, spaces quoted, the
build directory emptied but its README kept."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_make
@pytest.mark.parametrize("build", ["", " ", "/", "//", ".", "..", "~", "/.."])
def test_make_clean_refuses_root_like_build(build: str) -> None:
    result = make("-n", "clean", f"BUILD={build}")
    assert result.returncode != 0
    assert "rm -rf /" not in result.stdout + result.stderr
    assert "find" not in result.stdout
    assert "refusing BUILD=" in result.stderr


@needs_make
def test_make_clean_quotes_build_with_spaces() -> None:
    result = make("-n", "clean", "BUILD=/tmp/a b")
    assert result.returncode == 0, result.stderr
    assert 'cd -- "/tmp/a b"' in result.stdout
    assert "rm -rf .nox" in result.stdout


@needs_make
def test_make_clean_empties_build_but_keeps_readme(tmp_path: Path) -> None:
    # run in a scratch directory (-f ROOT/Makefile) so the checkout's .nox is left alone
    build = tmp_path / "my build"
    (build / "store").mkdir(parents=True)
    for name in ("README.md", "results.json", ".recallbench.lock", "store/snap.json"):
        (build / name).write_text("x")
    (tmp_path / ".nox").mkdir()
    outside = tmp_path / "keep.txt"
    outside.write_text("x")
    result = make("clean", "BUILD=my build", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in build.iterdir()) == ["README.md"]
    assert not (tmp_path / ".nox").exists()
    assert outside.exists()


@needs_make
def test_make_clean_refuses_symlink_to_the_current_directory(tmp_path: Path) -> None:
    # the shell-side guard (after resolving symlinks); only ever pointed at tmp_path, so a
    # broken guard could not delete anything outside it
    (tmp_path / "here link").symlink_to(tmp_path)
    marker = tmp_path / "marker"
    marker.write_text("x")
    result = make("clean", "BUILD=here link", cwd=tmp_path)
    assert result.returncode != 0
    assert "refusing BUILD='here link'" in result.stderr
    assert marker.exists()
