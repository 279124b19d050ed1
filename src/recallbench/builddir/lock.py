"""One recallbench process per build directory at a time.

Usage::

    with build_lock(build_dir, "recallbench query"):
        ...  # read and write artifacts in build_dir

The lock is ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``build_dir/.recallbench.lock``. The kernel
drops a flock when its holder exits for any reason (including SIGKILL or a crash), so a lock
left behind by a dead process is simply taken over by the next caller: there is no pid
checking and no stale-lock timeout. After acquiring, the holder writes one JSON line into the
file (``{"pid": ..., "command": ..., "started": "YYYY-MM-DDTHH:MM:SSZ"}``) so that a refused
caller can say who holds the directory. On release the content is emptied; the file itself
is kept (unlinking a flock file races with other openers), except when the command failed:
then a lock file this holder created is removed, with the directories it created for it when
they are empty (a failed first command leaves nothing behind).

The lock file is opened with ``O_NOFOLLOW`` and must be a regular file with one name: a
symlink or a hard link (another file's second name, which emptying it would empty) is
refused in one line. While held, the directory is claimed (`paths.claim_root`): every
write below it goes through real directories only.

Nested use in one process for the same directory is a no-op for the inner call (it neither
blocks nor releases the outer lock). This is not a lock between threads: within one process
the first holder owns the directory until its ``with`` block ends.

flock needs a local filesystem that supports it (any Linux/macOS local disk; NFS maps it to
POSIX locks); where the call itself fails the caller gets a RecallbenchError.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from recallbench.core.errors import RecallbenchError

#: the lock file's name inside the build directory
LOCK_NAME = ".recallbench.lock"

#: how long a refused caller waits for the holder's details to appear (holder just started)
_INFO_WAIT_SECONDS = 0.5

_held: set[str] = set()
_held_guard = threading.Lock()


def lock_path(build_dir: Path) -> Path:
    """The lock file of `build_dir`."""
    return Path(build_dir) / LOCK_NAME


@contextmanager
def build_lock(build_dir: Path, command: str, *, option: str = "--build-dir") -> Iterator[Path]:
    """Hold the lock of `build_dir` for the duration of the ``with`` block; yield the lock file.

    `command` is what the user ran, shown to anyone refused, e.g. ``"recallbench query"``.
    Creates `build_dir` (and parents) if needed. If another live process holds the lock,
    raises RecallbenchError at once (never waits)::

        build is in use by pid 1234 (`recallbench query`, started 2026-11-29T20:01:02Z);
        wait for it to finish or use another --build-dir

    (one line, wrapped here). A lock whose holder died is taken over silently. Filesystem failures
    (cannot create the directory, lock file is a symlink or a hard link, flock unsupported)
    are RecallbenchError too. Nested use for the same directory in one process: the inner
    call does nothing. `option` names what the refused caller may change (a vector cache's
    lock says ``--cache``). When the block raises, what the lock created is removed
    (`BuildLock.release`).
    """
    lock = BuildLock(build_dir, command, option=option)
    failed = False
    try:
        yield lock.path
    except BaseException:
        failed = True
        raise
    finally:
        lock.release(failed=failed)


class BuildLock:
    """The lock of one directory, held from construction to `release` (see `build_lock`)."""

    def __init__(self, build_dir: Path, command: str, *, option: str = "--build-dir") -> None:
        from recallbench.builddir.paths import claim_root, make_dirs

        self.directory = Path(build_dir)
        self.path = lock_path(self.directory)
        self._fd: int | None = None
        self._created_file = False
        self._created_dirs: list[Path] = []
        self._key = os.path.realpath(self.directory)
        with _held_guard:
            self._nested = self._key in _held
            if not self._nested:
                _held.add(self._key)
        if self._nested:
            return
        try:
            try:
                self._created_dirs = make_dirs(self.directory)
            except OSError as exc:
                raise RecallbenchError(
                    f"cannot create build directory {self.directory}: {exc.strerror or exc}"
                ) from None
            self._fd, self._created_file = _acquire(self.directory, self.path, command, option)
            claim_root(self.directory, option)
        except BaseException:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                self._unlink_created()
                _release(fd)
            self._remove_created_dirs()
            with _held_guard:
                _held.discard(self._key)
            raise

    def release(self, *, failed: bool = False) -> None:
        """Unlock. After a failure (`failed`), remove the lock file when this lock created
        it, and the directories it created when they are empty: a failed command leaves no
        `.recallbench.lock` (or empty build directory) it made."""
        if self._nested or self._fd is None:
            return
        from recallbench.builddir.paths import release_root

        fd, self._fd = self._fd, None
        release_root(self.directory)
        try:
            if failed:
                self._unlink_created()  # while still holding it
        finally:
            _release(fd)
            with _held_guard:
                _held.discard(self._key)
        if failed:
            self._remove_created_dirs()

    def _unlink_created(self) -> None:
        if self._created_file:
            with suppress(OSError):
                self.path.unlink(missing_ok=True)

    def _remove_created_dirs(self) -> None:
        for directory in reversed(self._created_dirs):
            try:
                directory.rmdir()  # only when empty
            except OSError:
                break


def _acquire(build_dir: Path, path: Path, command: str, option: str) -> tuple[int, bool]:
    """Open and flock the lock file, write the holder details; return the descriptor and
    whether this call created the file."""
    flags = os.O_RDWR | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    created = False
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise RecallbenchError(
                f"{path} is a symlink; remove it (recallbench keeps its lock file there)"
            ) from None
        raise RecallbenchError(f"cannot open lock file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise RecallbenchError(f"cannot inspect lock file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        what = (
            "not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else (
                f"a hard link (one of {st.st_nlink} names of the same file, which recallbench "
                "would empty)"
            )
        )
        raise RecallbenchError(
            f"{path} is {what}; remove it (recallbench keeps its lock file there)"
        )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder_text(fd)
        os.close(fd)
        raise RecallbenchError(
            f"{build_dir} is in use by {holder}; wait for it to finish or use another {option}"
        ) from None
    except OSError as exc:
        os.close(fd)
        if created:
            path.unlink(missing_ok=True)
        raise RecallbenchError(f"cannot lock {path}: {exc.strerror or exc}") from None
    info = {
        "pid": os.getpid(),
        "command": command,
        "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    data = (json.dumps(info, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError as exc:  # the lock is held; the details are only a courtesy
        _release(fd)
        if created:
            path.unlink(missing_ok=True)
        raise RecallbenchError(f"cannot write lock file {path}: {exc.strerror or exc}") from None
    return fd, created


def _release(fd: int) -> None:
    """Empty the lock file (still holding it), then unlock and close."""
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass
    finally:
        os.close(fd)  # closing the last descriptor drops the flock


def _holder_text(fd: int) -> str:
    """'pid 1234 (`cmd`, started T)' from the lock file, waiting briefly for a fresh holder."""
    deadline = time.monotonic() + _INFO_WAIT_SECONDS
    info = None
    while True:
        info = _read_info(fd) or info
        # a dead pid means the details are from a crashed holder, not yet overwritten by the
        # new one (or the holder's pid is not visible from here, e.g. another container)
        if info is not None and _alive(info[0]):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if info is None:
        return "another process"
    pid, command, started = info
    return f"pid {pid} (`{command}`, started {started})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: exists, owned by someone else
        return True
    return True


def _read_info(fd: int) -> tuple[int, str, str] | None:
    """The holder's (pid, command, started), or None while the file is empty or partial."""
    try:
        raw = os.pread(fd, 64 * 1024, 0)
        info = json.loads(raw.decode("utf-8"))
        pid, command, started = info["pid"], info["command"], info["started"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not (isinstance(pid, int) and isinstance(command, str) and isinstance(started, str)):
        return None
    if isinstance(pid, bool) or pid <= 0:
        return None
    # one line: the message must not be split by a strange command string
    command = " ".join(command.split())
    return pid, command, started
