"""Strict JSON objects: duplicate keys are an error, not "last one wins".

``loads_object(raw)`` parses one JSON document that must be an object (a JSON file, or
one line of a JSONL file). A key repeated in any object, however deeply nested, raises
``DuplicateKey`` with the key and its JSON path (``relevance.m-001``, ``turns[2].id``,
``meta["a.b"]``). Any other problem (malformed JSON, not UTF-8, NaN/Infinity, not an
object, nested too deeply) raises ValueError with a short one-line reason. DuplicateKey is
a ValueError too, so ``except ValueError`` catches both.

For a file streamed with ijson (`recallbench.datasets.jsonstream`), ``StrictObject`` is the
parser's ``map_type``: it notes a repeated key for the reader to refuse after the record
(``take_repeated``), and ``interrupts_between`` holds a Ctrl-C until the parser is between
two records (raised inside the C parser it would end the process with a SystemError).
"""

from __future__ import annotations

import json
import re
import signal
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")

_SIMPLE_KEY = re.compile(r"[^.\[\]\"\s]+")


class DuplicateKey(ValueError):
    """A JSON object repeats `key`; `path` locates it, e.g. ``relevance.m-001``."""

    def __init__(self, key: str, path: str) -> None:
        self.key = key
        self.path = path
        super().__init__(f"duplicate key {json.dumps(key, ensure_ascii=False)} at {path}")


class _DupDict(dict):
    """A parsed object that had a duplicate key (only exists until the error is raised)."""

    __slots__ = ("dup_key",)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads_object(raw: bytes | str) -> dict[str, Any]:
    """Parse `raw` (UTF-8 bytes, or str) as one JSON object and return it as a dict.

    Raises DuplicateKey(key, path) if any object in it repeats a key (the first such
    object in document order, outer before inner), else ValueError with a short reason.
    """
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    else:
        text = raw
    if text.startswith("\ufeff"):
        raise ValueError("starts with a byte order mark (BOM); save as UTF-8 without BOM")
    found = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        marked = _DupDict(obj)
        for key, _ in pairs:
            if key in seen:
                marked.dup_key = key
                break
            seen.add(key)
        found = True
        return marked

    try:
        value = json.loads(text, object_pairs_hook=pairs_hook, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None
    if found:
        raise _first_duplicate(value)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _step(path: str, key: str) -> str:
    if _SIMPLE_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _first_duplicate(root: Any) -> DuplicateKey:
    """The DuplicateKey of the first marked object in document order (pre-order walk)."""
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _DupDict):
            return DuplicateKey(value.dup_key, _step(path, value.dup_key))
        if isinstance(value, dict):
            children = [(_step(path, k), v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("a duplicate key was seen but not found again")  # pragma: no cover


class StrictObject(dict):
    """A dict that notes a key it already holds: ijson's `map_type` for streamed records.

    ijson's C backend cannot carry an exception out of `map_type`, so a repeated key is
    recorded in `StrictObject.repeated` (the later value is kept meanwhile); the reader
    checks `take_repeated()` after each record and refuses it. For the same reason a Ctrl-C
    must not raise inside `__setitem__`: iterate the parser through `interrupts_between`.
    """

    __slots__ = ()
    repeated: list[str] = []

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self:
            StrictObject.repeated.append(key)
        dict.__setitem__(self, key, value)

    @classmethod
    def take_repeated(cls) -> str | None:
        """The first repeated key since the last call (and forget them all), or None."""
        if not cls.repeated:
            return None
        first = cls.repeated[0]
        cls.repeated.clear()
        return first


def interrupts_between(items: Iterable[_T]) -> Iterator[_T]:
    """Iterate `items` (a C-backend ijson parser with `map_type=StrictObject`) so that a
    Ctrl-C arriving while the parser runs is held and raised between two items.

    A KeyboardInterrupt raised inside a callback of the C parser (`StrictObject.__setitem__`,
    the file's `read`) is not propagated by it: the process dies with a SystemError instead of
    exiting 130 with one line. Only the main thread can own signal handlers; elsewhere the
    items pass through unchanged.
    """
    iterator = iter(items)
    # a handler not installed from Python (None) could not be put back: leave it alone
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is None
    ):
        yield from iterator
        return
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)

    while True:
        previous = signal.signal(signal.SIGINT, hold)
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            signal.signal(signal.SIGINT, previous)
            if held:  # delivered again to the usual handler, now outside the parser
                held.clear()
                signal.raise_signal(signal.SIGINT)
        yield item
