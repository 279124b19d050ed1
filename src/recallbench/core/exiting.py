"""Ending a command's process without the interpreter's teardown.

Once a command is done, Python's own exit frees every object of every imported module. With
torch and transformers imported (a command that embedded), or a store library, that teardown
takes a user-visible time after the last line is printed, paid again by every command (the
figures: docs/performance.md, "The embedding path against a plain encode"). Nothing a command
writes waits for it: every artifact, cache and store is written, closed and renamed into
place before the command returns.

`exit_process(code)` does, in order, what the interpreter's exit does before its teardown
(`Py_FinalizeEx`): waits for the threads that are not daemons (and runs the thread-exit hooks
that shut down a `concurrent.futures` executor still open), runs the `atexit` handlers
(temporary directories, Ray's shutdown, multiprocessing's, logging's flush), closes every
file object still open as the teardown would when it frees them (`close_open_files`: a
plugin's log it wrote and never closed is complete on disk), flushes stdout and stderr (a
flush that fails turns a success into exit 120, as Python's exit does), and then ends the
process with `os._exit`. Only what ends a process calls it: the console commands
(`run_then_exit`: `recallbench`, `scripts/retrieval_eval.py`) and a spawned pool worker after
its finalizers (`processes._end_spawned_worker`), never a library caller or a test's
in-process runner.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

#: the exit status Python gives a process whose stdout or stderr could not be flushed at exit
EXIT_FLUSH_FAILED = 120


def exit_status(code: object) -> int:
    """The status `sys.exit(code)` ends a process with: None -> 0, an int as it is, anything
    else is printed to stderr and gives 1 (Python's own rule), kept modulo 256 as the
    operating system keeps it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code % 256  # what the operating system keeps of it
    with contextlib.suppress(OSError, ValueError):
        print(code, file=sys.stderr)
    return 1


def exit_process(code: int) -> NoReturn:
    """End this process with `code` after its threads, its `atexit` handlers and the flush
    of stdout and stderr, without freeing its modules (see the module docstring)."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:  # not CPython's threading: leave it all to the interpreter
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    close_open_files()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            if code == 0:
                code = EXIT_FLUSH_FAILED
    os._exit(code)


def open_files() -> list[Any]:
    """Every file object (`io` object) the garbage collector tracks, open or not."""
    import _io
    import gc

    # by its type alone: `isinstance` would also ask the object for its `__class__`, which
    # a proxy answers with code of its own (torch's deprecated `reduce_op` warns)
    return [obj for obj in gc.get_objects() if issubclass(type(obj), _io._IOBase)]


def close_files_opened_here() -> Callable[[], int]:
    """`close_open_files` for a worker process, to call at its exit: the files that exist
    now (a forked worker's are its parent's: another of the parent's threads may have held
    a file's lock at the fork, and flushing the parent's buffer from here would write its
    data twice) are left alone; only the files opened after this call are closed."""
    import weakref

    inherited = weakref.WeakSet(open_files())
    return lambda: close_open_files(skip=inherited)


def close_open_files(skip: Any = ()) -> int:
    """Close every file object still open but the standard streams (and those in `skip`),
    as the interpreter's teardown does when it frees them (`IOBase.__del__` closes, which
    flushes): text files first, then buffered ones, then raw ones, so a layer is flushed
    before the one under it is closed. A file that fails to close is left as it is. Returns
    how many were closed.

    The files are found among the objects the garbage collector tracks (every `io` object
    is one): 25 ms after a run of the core install (0.1 million objects), 0.1-0.2 s with
    MiniLM loaded (0.4 million), against a teardown of 0.2-0.35 s and 1.0-2.1 s there
    (docs/performance.md, "Closing what a system left open")."""
    import _io

    standard = set()
    for stream in (
        sys.stdin,
        sys.stdout,
        sys.stderr,
        sys.__stdin__,
        sys.__stdout__,
        sys.__stderr__,
    ):
        while stream is not None and id(stream) not in standard:
            standard.add(id(stream))
            stream = getattr(stream, "buffer", None) or getattr(stream, "raw", None)
    layers: tuple[list[Any], list[Any], list[Any], list[Any]] = ([], [], [], [])
    for obj in open_files():
        kind = type(obj)
        if id(obj) not in standard and obj not in skip:
            if issubclass(kind, _io._TextIOBase):
                layers[0].append(obj)
            elif issubclass(kind, _io._BufferedIOBase):
                layers[1].append(obj)
            elif issubclass(kind, _io._RawIOBase):
                layers[2].append(obj)
            else:
                layers[3].append(obj)
    closed = 0
    for layer in layers:
        for obj in layer:
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.close()
                    closed += 1
    return closed


def run_then_exit(command: Callable[[], Any]) -> NoReturn:
    """A console command's whole life: `command()` (a click command in standalone mode,
    which ends by raising SystemExit), then `exit_process` with its status. An exception
    other than SystemExit (a bug) propagates and takes Python's own exit, traceback and all."""
    try:
        command()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    exit_process(exit_status(code))
