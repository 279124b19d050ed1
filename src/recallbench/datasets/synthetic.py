"""Shared pieces of the format-faithful generators (invented words, nothing from real data)."""

from __future__ import annotations

import random
from collections.abc import Collection, Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

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
