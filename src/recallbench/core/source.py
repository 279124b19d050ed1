"""Where the code under test comes from: an installed distribution's version and, from its
PEP 610 record (``direct_url.json``, read through `importlib.metadata`), how it was installed.

`installed_source("hotmem")` is a small record, for example::

    {"distribution": "hotmem", "version": "0.2.7.dev0", "install": "editable",
     "path": "../hotmem-wc", "revision": "1a2b3c4", "local_changes": True}

and `describe_source` its one line: ``hotmem 0.2.7.dev0, editable ../hotmem-wc @ 1a2b3c4 +
local changes``. `install` is one of:

- ``index``: no direct_url.json but an INSTALLER record (pip, uv): from a package index;
- ``editable``: an editable install of a directory (`pip install -e DIR`); its `path`
  relative to the working directory, its git `revision` (short) and whether it has
  `local_changes` (uncommitted or untracked files under it, `git status`), or `git` (why
  git could not tell: not a checkout, git missing);
- ``directory``: a copy of a directory made at install time (`pip install DIR`), its `path`;
- ``vcs``: from a version-control URL (`pip install git+https://...`), `url` and `revision`;
- ``archive``: from a wheel or sdist file or URL, `path` or `url`;
- ``unknown``: neither record (installed by other means).

It imports nothing but the standard library: `scripts/system_under_test.py` (make's
`STORE=`) loads it before the project is installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: seconds a git call may take before the revision is given up
GIT_TIMEOUT = 10


def canonical_name(name: str) -> str:
    """A distribution name as packaging compares them (`Boundary_RB` == `boundary-rb`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _direct_url(dist: importlib.metadata.Distribution) -> dict[str, Any] | None:
    """The distribution's PEP 610 record, None when it has none (or none readable)."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        return None
    return direct if isinstance(direct, dict) and isinstance(direct.get("url"), str) else None


def installed_directory(distribution: str) -> tuple[Path, bool] | None:
    """(the directory, whether editable) of a distribution installed from a local
    directory; None when it is not installed, or not from a directory."""
    try:
        direct = _direct_url(importlib.metadata.distribution(distribution))
    except importlib.metadata.PackageNotFoundError:
        return None
    if direct is None or not isinstance(direct.get("dir_info"), dict):
        return None
    local = _file_path(direct["url"])
    return None if local is None else (local, bool(direct["dir_info"].get("editable")))


def installed_source(distribution: str, cwd: Path | None = None) -> dict[str, Any] | None:
    """How `distribution` is installed in this environment (see the module's doc); None
    when it is not installed. Paths are relative to `cwd` (default: the working directory)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    record: dict[str, Any] = {"distribution": dist.metadata["Name"], "version": dist.version}
    direct = _direct_url(dist)
    if direct is None:
        record["install"] = "index" if dist.read_text("INSTALLER") else "unknown"
        return record
    url = direct["url"]
    local = _file_path(url)
    if isinstance(direct.get("dir_info"), dict) and local is not None:
        editable = bool(direct["dir_info"].get("editable"))
        record["install"] = "editable" if editable else "directory"
        record["path"] = relative_path(local, cwd)
        if editable:
            record.update(git_state(local))
    elif isinstance(direct.get("vcs_info"), dict):
        vcs = direct["vcs_info"]
        record["install"] = "vcs"
        record["url"] = f"{vcs.get('vcs', 'vcs')}+{_without_credentials(url)}"
        commit = vcs.get("commit_id")
        record["revision"] = commit[:7] if isinstance(commit, str) else None
    else:
        record["install"] = "archive"
        if local is not None:
            record["path"] = relative_path(local, cwd)
        else:
            record["url"] = _without_credentials(url)
    return record


def describe_source(source: Mapping[str, Any] | None) -> str:
    """The record as one line (`hotmem 0.2.6, from a package index`); "" for None."""
    if not source:
        return ""
    head = f"{source.get('distribution')} {source.get('version')}"
    install = source.get("install")
    if install == "index":
        return f"{head}, from a package index"
    if install == "editable":
        where = f"{head}, editable {source.get('path')}"
        if source.get("revision"):
            changes = " + local changes" if source.get("local_changes") else ""
            return f"{where} @ {source['revision']}{changes}"
        return f"{where} ({source.get('git') or 'no git revision'})"
    if install == "directory":
        return (
            f"{head}, installed from the directory {source.get('path')} (a copy made at "
            "install time, not editable)"
        )
    if install == "vcs":
        revision = f" @ {source['revision']}" if source.get("revision") else ""
        return f"{head}, from {source.get('url')}{revision}"
    if install == "archive":
        return f"{head}, from the archive {source.get('path') or source.get('url')}"
    return f"{head} (installed without a record of where from)"


def git_state(path: Path) -> dict[str, Any]:
    """{"revision": short HEAD, "local_changes": bool} of the git checkout holding `path`
    (changes counted under `path` only, untracked files included, ignored ones not); else
    {"revision": None, "git": why not}."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(path), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            env=env,
            check=False,
        )

    try:
        head = git("rev-parse", "--short=7", "HEAD")
        if head.returncode != 0:
            lines = head.stderr.strip().splitlines() or ["git rev-parse failed"]
            text = "\n".join(lines)
            if "not a git repository" in text:
                why = "not a git checkout"
            elif "unknown revision" in text or "ambiguous argument 'HEAD'" in text:
                why = "a git checkout without a commit"
            else:
                why = "git: " + next(x for x in lines if x.strip()).removeprefix("fatal: ")
            return {"revision": None, "git": why}
        status = git("status", "--porcelain", "--", ".")
    except FileNotFoundError:
        return {"revision": None, "git": "git is not installed"}
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"revision": None, "git": f"git failed: {exc}"}
    if status.returncode != 0:
        return {"revision": head.stdout.strip(), "local_changes": None}
    return {"revision": head.stdout.strip(), "local_changes": bool(status.stdout.strip())}


def relative_path(path: Path, cwd: Path | None = None) -> str:
    """`path` relative to `cwd` (default: the working directory), else absolute."""
    try:
        return os.path.relpath(path, cwd if cwd is not None else Path.cwd())
    except ValueError:  # another drive
        return str(path)


def _file_path(url: str) -> Path | None:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parsed.path))


def _without_credentials(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    if "@" not in parsed.netloc:
        return url
    return urllib.parse.urlunsplit(parsed._replace(netloc=parsed.netloc.rsplit("@", 1)[1]))
