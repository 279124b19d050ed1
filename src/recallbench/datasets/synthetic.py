"""Shared pieces of the format-faithful generators (invented words, nothing from real data)."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from recallbench.builddir.artifacts import create_temp

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"
COMMON_WORDS = [
    "i",
    "my",
    "me",
    "we",
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "so",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "with",
    "about",
    "from",
    "that",
    "this",
    "it",
    "is",
    "was",
    "were",
    "be",
    "been",
    "have",
    "had",
    "do",
    "did",
    "not",
    "just",
    "really",
    "also",
    "very",
    "some",
    "more",
    "most",
    "when",
    "then",
    "what",
    "which",
    "who",
    "how",
    "can",
    "could",
    "would",
    "should",
    "will",
    "maybe",
    "think",
    "know",
    "want",
    "need",
    "like",
    "get",
    "got",
    "go",
    "went",
    "make",
    "made",
    "time",
    "day",
    "week",
    "last",
    "next",
    "new",
    "good",
    "great",
    "little",
    "lot",
    "thing",
    "things",
    "you",
    "your",
    "yes",
    "no",
    "thanks",
    "please",
    "help",
    "idea",
    "plan",
]


def allocate(total: int, weights: dict[K, int]) -> list[K]:
    """Largest-remainder allocation of `total` items to the weighted keys, in key order."""
    whole = sum(weights.values())
    raw = {k: total * w / whole for k, w in weights.items()}
    counts = {k: int(v) for k, v in raw.items()}
    rest = total - sum(counts.values())
    order = list(weights)
    for k in sorted(raw, key=lambda k: (-(raw[k] - counts[k]), order.index(k)))[:rest]:
        counts[k] += 1
    return [k for k in weights for _ in range(counts[k])]


def pseudo_words(
    rng: random.Random, count: int, syllables: Sequence[int], exclude: Collection[str] = ()
) -> list[str]:
    """`count` distinct invented words of consonant-vowel syllables (a number drawn from
    `syllables`), 30% with a closing consonant, none in `exclude`."""
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < count:
        n = rng.choice(syllables)
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(n))
        if rng.random() < 0.3:
            word += rng.choice(CONSONANTS)
        if word not in seen and word not in exclude:
            seen.add(word)
            words.append(word)
    return words


@contextmanager
def one_line_errors(command: str, out: Path) -> Iterator[None]:
    """A generator command's errors as one line (`recallbench COMMAND: error: ...`, exit 1,
    escaped for the terminal as the CLI's own errors are): a `RecallbenchError`'s message,
    an OS error naming its file (`out` when it names none)."""
    import click

    from recallbench.core.errors import RecallbenchError
    from recallbench.core.escape import terminal

    class Failed(click.ClickException):
        def show(self, file: Any = None) -> None:
            click.echo(terminal(f"recallbench {command}: error: {self.message}"), err=True)

    try:
        yield
    except RecallbenchError as exc:
        raise Failed(str(exc)) from None
    except OSError as exc:
        raise Failed(f"{exc.filename or out}: {exc.strerror or exc}") from None


@contextmanager
def generating(command: str, out: Path, total: int, unit: str) -> Iterator[Callable[[int], Any]]:
    """A generator command around its work: errors in one line (`one_line_errors`) and
    progress by `unit` (`progress.bar`: a bar on a terminal, plain lines elsewhere); yields
    what to call as each of the `total` records is written."""
    from recallbench.core import progress

    with one_line_errors(command, out), progress.bar(total, command, unit) as bar:
        yield bar.update


def counted(records: Iterable[R], on_record: Callable[[int], Any] | None) -> Iterator[R]:
    """`records`, calling `on_record(1)` as each one has been taken and the next is asked
    for (a generator's progress: `recallbench.core.progress.bar`'s update)."""
    for record in records:
        yield record
        if on_record is not None:
            on_record(1)


def write_json_array(out: Path, records: Iterable[Any]) -> dict[str, Any]:
    """Stream `records` to `out` as a JSON array, one record per line, through a temp file
    renamed into place (a failure leaves nothing); {"sha256", "size_bytes"} of the bytes."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = create_temp(out)
    try:
        with os.fdopen(fd, "wb") as handle:

            def write(chunk: bytes) -> None:
                digest.update(chunk)
                handle.write(chunk)

            write(b"[\n")
            for n, record in enumerate(records):
                write((b",\n" if n else b"") + orjson.dumps(record))
            write(b"\n]\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"sha256": digest.hexdigest(), "size_bytes": out.stat().st_size}


def write_sidecar(out: Path, sidecar: dict[str, Any]) -> dict[str, Any]:
    """Write the generator's sidecar (`<out>.generated.json`: what made the file, its
    sha256) that readers use to label the file synthetic; return it."""
    from recallbench.builddir.artifacts import atomic_write_bytes
    from recallbench.datasets.jsonstream import GENERATED_SIDECAR_SUFFIX

    atomic_write_bytes(
        Path(str(out) + GENERATED_SIDECAR_SUFFIX),
        orjson.dumps(sidecar, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS),
    )
    return sidecar
