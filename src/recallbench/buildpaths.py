"""Checks on the build directory before anything is written into it.

recallbench owns its build directory (``make clean`` empties it), so ``--build-dir`` must
not name a directory that holds other things by nature: the filesystem root, the home
directory, the current directory, or a directory containing the home or current directory
(``..``). A symlinked build directory is fine. Inside the build directory, recallbench
writes only through real directories: ``safe_child`` refuses a child that is a symlink
(``build/store -> /somewhere/else``), so a write cannot land outside the build directory.

Both checks inspect the filesystem at call time; they guard against mistakes, not against
another process racing to swap paths.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath

from recallbench.errors import RecallbenchError


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, OSError):  # no HOME and no passwd entry
        return None


def _is_ancestor_or_same(candidate: Path, other: Path) -> bool:
    return candidate == other or candidate in other.parents


def check_build_dir(path: Path | str) -> Path:
    """Return ``Path(path)`` if it is acceptable as a build directory (it need not exist yet).

    Refused with a one-line RecallbenchError:

    * "" (or only spaces), "." and anything else resolving to the current directory, or to
      a directory that contains it (e.g. "..");
    * "/" and anything resolving to a filesystem root (``/``, ``C:\\``);
    * the home directory, or a directory that contains it (e.g. "/home");
    * a path that exists but is not a directory ("<path> is a file, not a directory");
    * a path under a regular file ("<path>: <ancestor> is a file, not a directory");
    * a path whose nearest existing part is a dangling symlink.

    Symlinks are followed (a symlinked build directory is fine).
    """
    text = os.fspath(path)
    if not text.strip():
        raise RecallbenchError(
            "the build directory is empty; give a directory, e.g. --build-dir build"
        )
    given = Path(text)
    try:
        resolved = given.resolve()  # absolute, symlinks followed, ".." applied
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise RecallbenchError(f"build directory {text} cannot be resolved: {exc}") from None
    if resolved == Path(resolved.anchor) or resolved.parent == resolved:
        raise RecallbenchError(
            f"build directory {text} is the filesystem root {resolved}; use a directory of its own, e.g. build"
        )
    home = _home()
    if home is not None and _is_ancestor_or_same(resolved, home):
        what = (
            "your home directory" if resolved == home else f"a parent of your home directory {home}"
        )
        raise RecallbenchError(
            f"build directory {text} is {what}; use a directory of its own, e.g. build"
        )
    cwd = Path.cwd().resolve()
    if _is_ancestor_or_same(resolved, cwd):
        what = (
            "the current directory"
            if resolved == cwd
            else f"a parent of the current directory {cwd}"
        )
        raise RecallbenchError(
            f"build directory {text} is {what}; use a directory of its own, e.g. build"
        )
    _check_existing_part(given, text)
    return given


def _check_existing_part(given: Path, text: str) -> None:
    """The nearest existing part of `given` (itself or an ancestor) must be a directory."""
    for candidate in (given, *given.parents):
        try:
            st = os.stat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.islink(candidate):
                raise RecallbenchError(
                    f"{text}: {candidate} is a symlink to {os.readlink(candidate)}, which does not exist"
                ) from None
            continue
        except OSError as exc:
            raise RecallbenchError(
                f"{text}: cannot inspect {candidate}: {exc.strerror or exc}"
            ) from None
        if stat.S_ISDIR(st.st_mode):
            return
        kind = "a file" if stat.S_ISREG(st.st_mode) else "a special file"
        if candidate == given:
            raise RecallbenchError(f"build directory {text} is {kind}, not a directory")
        raise RecallbenchError(f"{text}: {candidate} is {kind}, not a directory")


def safe_child(build_dir: Path, name: str | PurePath) -> Path:
    """Return ``build_dir / name`` after checking that no part of it below `build_dir` is a
    symlink (parts that do not exist yet are fine).

    `name` is relative ("store" or "store/snapshot.json"); an absolute name or one with
    ".." is a ValueError (a programming error). A symlink is a one-line RecallbenchError:
    "build/store is a symlink (to /elsewhere); recallbench writes there, so remove it or
    use another --build-dir".
    """
    rel = PurePath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(
            f"build directory child must be a relative path without '..', got {name!r}"
        )
    current = Path(build_dir)
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            try:
                target = os.readlink(current)
            except OSError:
                target = "?"
            raise RecallbenchError(
                f"{current} is a symlink (to {target}); recallbench writes there, so remove it or use another --build-dir"
            )
    return current
