"""Checks on the build directory before anything is written into it.

recallbench owns its build directory (``make clean`` empties it), so ``--build-dir`` must
not name a directory that holds other things by nature: the filesystem root, the home
directory, the current directory, or a directory containing the home or current directory
(``..``). A symlinked build directory is fine. Inside the build directory, recallbench
writes only through real directories: ``safe_child`` refuses a child that is a symlink
(``build/store -> /somewhere/else``), so a write cannot land outside the build directory.

Every write goes through the same two checks (`make_dirs` for the directories on the way,
`check_target` for the file itself; `artifacts.publish`, the lock, the spool and the vector
cache call them): below a directory the process has claimed (`claim_root`: the build lock
claims the build directory and a vector cache) every part is inspected with ``lstat`` and
created one at a time, and a symlinked part is refused in one line naming it; the file
written is never a symlink or a hard link (a regular file with a second name), anywhere.
Nothing is written before the refusal.

The checks inspect the filesystem at call time; they guard against mistakes and hostile
directory contents, not against another process racing to swap paths.

When a command claims the build directory (`recallbench.commands.claim`), a link where
recallbench writes is refused before any work (`check_build_entries`: directly in it, anywhere
in `CHECKED_TREES`, directly in `STORE_TREES`), and the work directories a killed `compare`
left are removed (`remove_leftover_work`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import threading
from pathlib import Path, PurePath

from recallbench.core.errors import RecallbenchError
from recallbench.core.escape import path_text

#: claimed directories (absolute path as given, and resolved) -> (claims, option to change)
_roots: dict[str, tuple[int, str]] = {}
_roots_guard = threading.Lock()


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, OSError):  # no HOME and no passwd entry
        return None


def _is_ancestor_or_same(candidate: Path, other: Path) -> bool:
    return candidate == other or candidate in other.parents


def check_build_dir(
    path: Path | str, *, what: str = "build directory", option: str = "--build-dir"
) -> Path:
    """Return ``Path(path)`` if it is acceptable as a build directory (it need not exist yet).

    Refused with a one-line RecallbenchError:

    * "" (or only spaces), "." and anything else resolving to the current directory, or to
      a directory that contains it (e.g. "..");
    * "/" and anything resolving to a filesystem root (``/``, ``C:\\``);
    * the home directory, or a directory that contains it (e.g. "/home");
    * a path that exists but is not a directory ("<path> is a file, not a directory");
    * a path under a regular file ("<path>: <ancestor> is a file, not a directory");
    * a path whose nearest existing part is a dangling symlink;
    * a path that is not valid UTF-8 (artifacts record paths in JSON, which holds text).

    Symlinks are followed (a symlinked build directory is fine). `what` and `option` name
    the directory in messages (a vector cache: ``"vector cache", "--cache"``).
    """
    text = os.fspath(path)
    example = "build" if option == "--build-dir" else "build/vectors"
    if not text.strip():
        raise RecallbenchError(f"the {what} is empty; give a directory, e.g. {option} {example}")
    if path_text(text) != text:
        raise RecallbenchError(
            f"{what} {path_text(text)} is not valid UTF-8 (its artifacts record paths as JSON "
            f"text); use a directory whose path is, e.g. {option} {example}"
        )
    given = Path(text)
    try:
        resolved = given.resolve()  # absolute, symlinks followed, ".." applied
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise RecallbenchError(f"{what} {text} cannot be resolved: {exc}") from None
    if resolved == Path(resolved.anchor) or resolved.parent == resolved:
        raise RecallbenchError(
            f"{what} {text} is the filesystem root {resolved}; use a directory of its own, "
            f"e.g. {example}"
        )
    home = _home()
    if home is not None and _is_ancestor_or_same(resolved, home):
        which = (
            "your home directory" if resolved == home else f"a parent of your home directory {home}"
        )
        raise RecallbenchError(
            f"{what} {text} is {which}; use a directory of its own, e.g. {example}"
        )
    cwd = Path.cwd().resolve()
    if _is_ancestor_or_same(resolved, cwd):
        which = (
            "the current directory"
            if resolved == cwd
            else f"a parent of the current directory {cwd}"
        )
        raise RecallbenchError(
            f"{what} {text} is {which}; use a directory of its own, e.g. {example}"
        )
    _check_existing_part(given, text, what)
    return given


def _check_existing_part(given: Path, text: str, what: str = "build directory") -> None:
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
            raise RecallbenchError(f"{what} {text} is {kind}, not a directory")
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


def claim_root(directory: Path, option: str = "--build-dir") -> None:
    """From now on, every write below `directory` goes through real directories only
    (`make_dirs`, `check_target`); `option` is what a refused user may change. Claims
    nest (each `claim_root` needs its `release_root`)."""
    with _roots_guard:
        for key in {os.path.abspath(directory), os.path.realpath(directory)}:
            count, first = _roots.get(key, (0, option))
            _roots[key] = (count + 1, first)


def release_root(directory: Path) -> None:
    """Undo one `claim_root(directory)`."""
    with _roots_guard:
        for key in {os.path.abspath(directory), os.path.realpath(directory)}:
            count, option = _roots.get(key, (1, ""))
            if count <= 1:
                _roots.pop(key, None)
            else:
                _roots[key] = (count - 1, option)


def _owning_root(path: str) -> tuple[str, str] | None:
    """(the outermost claimed directory `path` lies in, its option), or None."""
    with _roots_guard:
        roots = dict(_roots)
    best: tuple[str, str] | None = None
    for root, (_, option) in roots.items():
        inside = path == root or path.startswith(root.rstrip(os.sep) + os.sep)
        if inside and (best is None or len(root) < len(best[0])):
            best = (root, option)
    return best


def _link_text(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def make_dirs(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; return the ones created (outermost first).

    Below a claimed directory (`claim_root`) every part is checked with ``lstat`` and made
    one at a time, so a symlinked part is never followed: it is a one-line RecallbenchError
    naming it ("build/timings is a symlink (to /elsewhere); recallbench writes there, so
    remove it or use another --build-dir"), as is a part that is a file. Elsewhere (a path
    the user gave) the parents are the user's and are followed.
    """
    target = os.path.abspath(directory)
    if _owning_root(target) is None:
        missing = []
        current = Path(target)
        while not os.path.lexists(current) and current.parent != current:
            missing.append(current)
            current = current.parent
        Path(target).mkdir(parents=True, exist_ok=True)
        return list(reversed(missing))
    return _walk(target, create=True)


def _walk(target: str, *, create: bool) -> list[Path]:
    """Check (and with `create`, make) each part of `target` below its claimed directory."""
    owner = _owning_root(target)
    if owner is None:
        return []
    root, option = owner
    created: list[Path] = []
    current = root
    for part in PurePath(os.path.relpath(target, root)).parts:
        if part == ".":
            continue
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if not create:
                return created
            try:
                os.mkdir(current)
                created.append(Path(current))
                continue
            except FileExistsError:
                st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise RecallbenchError(
                f"{current} is a symlink (to {_link_text(current)}); recallbench writes there, "
                f"so remove it or use another {option}"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise RecallbenchError(
                f"{current} is a file, not a directory; recallbench writes a directory there, "
                f"so remove it or use another {option}"
            )
    return created


def _lstat_target(path: Path) -> os.stat_result | None:
    """`path`'s parents made real (`make_dirs`), then `path`'s own status (None when it does
    not exist); a symlink is refused in one line naming it."""
    make_dirs(path.parent)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise RecallbenchError(
            f"{path} is a symlink (to {_link_text(str(path))}); recallbench does not write "
            "through links, so remove it or give another path"
        )
    return st


def check_target(path: Path) -> None:
    """Make sure `path` can be written without writing through a link: its directories are
    real (`make_dirs`, which creates the missing ones), and the file, when it exists, is
    neither a symlink nor a hard link (a second name of another file) nor a directory.
    A refusal is one line naming the path; nothing is written."""
    path = Path(path)
    st = _lstat_target(path)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        raise RecallbenchError(f"{path} is a directory; give a file path")
    if st.st_nlink > 1:
        raise RecallbenchError(
            f"{path} is a hard link (one of {st.st_nlink} names of the same file); recallbench "
            "does not write to a file that has other names, so remove this one or give "
            "another path"
        )


def check_dir_target(path: Path) -> None:
    """Make sure the directory `path` can be replaced whole (`artifacts.publish` of a
    `StagedTree`): its parents are real (`make_dirs`), and `path`, when it exists, is a real
    directory, not a symlink or a file. Its old contents are moved aside and removed, never
    written through. A refusal is one line naming the path; nothing is written."""
    path = Path(path)
    st = _lstat_target(path)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise RecallbenchError(
            f"{path} is a file, not a directory; recallbench writes a directory there, so "
            "remove it or give another path"
        )


def check_tree(directory: Path) -> None:
    """Refuse a directory recallbench (or a library it lets write there: matplotlib's font
    cache) writes files into, when a part of it below its claimed directory, or anything
    in it, is a symlink or a hard-linked file; one line naming the entry. A missing
    directory is fine. (The timings, the plots, the vector caches are checked whole this
    way before any work, and again file by file as they are written.)"""
    directory = Path(directory)
    _walk(os.path.abspath(directory), create=False)
    if not directory.is_dir():
        return
    for entry in os.scandir(directory):
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
            check_target(Path(entry.path))  # raises, naming it
        elif stat.S_ISDIR(st.st_mode):
            check_tree(Path(entry.path))


#: the work directories `compare` (and `protocols`) make in the build directory
#: (`tempfile`'s names)
_LEFTOVER_WORK = re.compile(r"compare-(?:vectors-)?[a-z0-9_]{8}")


def remove_leftover_work(build_dir: Path) -> list[str]:
    """Remove the work directories a killed `compare` left in `build_dir` (real directories
    named ``compare-XXXXXXXX`` or ``compare-vectors-XXXXXXXX``; links are not followed);
    the caller holds the build lock, so no live command is using them. Returns their names."""
    removed = []
    try:
        entries = list(os.scandir(build_dir))
    except OSError:
        return removed
    for entry in entries:
        if _LEFTOVER_WORK.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed


#: the build directory's subdirectories recallbench (or matplotlib) writes files into in
#: place, checked whole when a command claims the build directory
CHECKED_TREES = ("timings", "report-plots", "compare-plots", ".cache", "vectors")
#: the stages' store directories: removed and made again by their stages, except that a
#: kept store is opened again by later stages, so none of their entries may be a link
STORE_TREES = ("stores", "work", "roundtrip")


def check_build_entries(build_dir: Path) -> None:
    """Refuse, before a command does any work, a build directory holding a link where
    recallbench writes: any symlink or hard-linked file directly in it, or anywhere in
    `CHECKED_TREES`, or directly in one of `STORE_TREES` (what lies deeper in a store is
    the system's own). One line naming the entry."""
    try:
        entries = list(os.scandir(build_dir))
    except FileNotFoundError:
        return
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise RecallbenchError(
                f"{entry.path} is a symlink (to {_link_text(entry.path)}); recallbench writes "
                "in its build directory only through real files and directories, so remove "
                "it or use another --build-dir"
            )
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and entry.name != ".recallbench.lock":
            check_target(Path(entry.path))  # raises, naming it
        if stat.S_ISDIR(st.st_mode) and entry.name in CHECKED_TREES:
            check_tree(Path(entry.path))
        if stat.S_ISDIR(st.st_mode) and entry.name in STORE_TREES:
            for child in os.scandir(entry.path):
                if child.is_symlink():
                    check_target(Path(child.path))  # raises, naming it
