"""Where the code under test comes from (recallbench.core.source): PEP 610 records read through
importlib.metadata, and the git state of an editable checkout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from recallbench.core.source import describe_source, installed_directory, installed_source

needs_git = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="needs git",
)


def installed(
    site: Path, name: str, version: str, direct_url: dict | None, installer: bool = True
) -> None:
    """A distribution's metadata as pip writes it: METADATA, INSTALLER, direct_url.json."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    if installer:
        (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)
    return site


@needs_git
def test_an_editable_checkout_names_its_path_revision_and_local_changes(
    site: Path, tmp_path: Path
) -> None:
    checkout = tmp_path / "store-wc"
    (checkout / "src").mkdir(parents=True)
    (checkout / "src" / "search.py").write_text("W = 0.6\n", encoding="utf-8")
    (checkout / ".gitignore").write_text("*.egg-info/\n", encoding="utf-8")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "release")
    installed(
        site,
        "store_x",
        "0.2.7.dev0",
        {"url": checkout.as_uri(), "dir_info": {"editable": True}},
    )
    revision = git(checkout, "rev-parse", "--short=7", "HEAD")
    (checkout / "src" / "store_x.egg-info").mkdir()  # ignored: not a change
    clean = installed_source("store-x")
    assert clean == {
        "distribution": "store_x",
        "version": "0.2.7.dev0",
        "install": "editable",
        "path": "store-wc",
        "revision": revision,
        "local_changes": False,
    }
    assert describe_source(clean) == f"store_x 0.2.7.dev0, editable store-wc @ {revision}"
    (checkout / "src" / "search.py").write_text("W = 0.4\n", encoding="utf-8")
    dirty = installed_source("store-x", cwd=tmp_path / "elsewhere")
    assert dirty["path"] == "../store-wc" and dirty["local_changes"] is True
    assert describe_source(dirty) == (
        f"store_x 0.2.7.dev0, editable ../store-wc @ {revision} + local changes"
    )
    assert installed_directory("store-x") == (checkout, True)


def test_an_editable_directory_without_git_says_so(site: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    installed(site, "plainstore", "1.0", {"url": plain.as_uri(), "dir_info": {"editable": True}})
    source = installed_source("plainstore")
    assert source["revision"] is None and source["git"] == "not a git checkout"
    assert describe_source(source) == "plainstore 1.0, editable plain (not a git checkout)"


def test_other_installs(site: Path, tmp_path: Path) -> None:
    installed(site, "fromindex", "0.2.6", None)
    installed(site, "byhand", "0.1", None, installer=False)
    installed(site, "copied", "2.0", {"url": (tmp_path / "c").as_uri(), "dir_info": {}})
    installed(
        site,
        "fromgit",
        "3.0",
        {
            "url": "https://user:secret@example.invalid/x.git",
            "vcs_info": {"vcs": "git", "commit_id": "1a2b3c4d5e6f"},
        },
    )
    installed(
        site,
        "fromwheel",
        "4.0",
        {"url": (tmp_path / "w.whl").as_uri(), "archive_info": {}},
    )
    lines = {name: describe_source(installed_source(name)) for name in
             ("fromindex", "byhand", "copied", "fromgit", "fromwheel")}  # fmt: skip
    assert lines == {
        "fromindex": "fromindex 0.2.6, from a package index",
        "byhand": "byhand 0.1 (installed without a record of where from)",
        "copied": "copied 2.0, installed from the directory c (a copy made at install time, "
        "not editable)",
        "fromgit": "fromgit 3.0, from git+https://example.invalid/x.git @ 1a2b3c4",
        "fromwheel": "fromwheel 4.0, from the archive w.whl",
    }
    assert installed_directory("copied") == (tmp_path / "c", False)
    assert installed_directory("fromindex") is None
    assert installed_source("not-installed-anywhere") is None
    assert describe_source(None) == ""
