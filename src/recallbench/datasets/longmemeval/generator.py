"""Format-faithful synthetic LongMemEval data, for tests and benchmarks only.

It is NOT LongMemEval: the words are made up and nothing here was derived from the real
files. It reproduces their *format* so the reader, the pairing rules and a run's cost
can be exercised on any machine:

* a JSON array of objects with ``question_id``, ``question_type``, ``question``,
  ``answer`` (usually a string, sometimes an integer), ``question_date``,
  ``haystack_dates``, ``haystack_session_ids``, ``haystack_sessions``,
  ``answer_session_ids``;
* question ids shaped ``<8 hex>``, ``gpt4_<8 hex>`` and abstention ``<id>_abs`` (about
  6%, like 30 of 500); the six question types in the real proportions;
* evidence session ids ``answer_<hex>``, ``answer_<hex>_<N>``, ``answer_ultrachat_<N>``,
  ``answer_<hex>_abs_<N>``; filler ids ``<hex>_<N>``, ``sharegpt_<id>_<N>``,
  ``ultrachat_<N>`` drawn from a pool shared across questions;
* sessions of alternating user / assistant turns; ``has_answer`` on every turn of an
  evidence session and (by default, like the cleaned S file) no ``has_answer`` key on
  other sessions' turns; ``has_answer_keys="all"`` puts ``has_answer: false`` everywhere;
* dates like ``2023/05/30 (Tue) 23:40``, chronological, with some same-day sessions out
  of order;
* evidence that shares some but not all of its question's vocabulary, inside sessions
  whose topic vocabulary other (filler) sessions share too.

``turn_labels_only=True`` omits ``answer_session_ids`` (the turn-level-only fallback).
Deterministic for a seed; streaming output, so memory does not grow with the file.
Next to the file it writes ``<file>.generated.json`` (parameters + sha256), which the
reader uses to label the data "synthetic" instead of "unknown".
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.datasets.synthetic import COMMON_WORDS as _COMMON
from recallbench.datasets.synthetic import (
    allocate,
    counted,
    generating,
    pseudo_words,
    write_json_array,
    write_sidecar,
)

GENERATOR_VERSION = 1
SHAPES = ("s", "m", "oracle")
DEFAULT_SESSIONS = {"s": 50, "m": 500, "oracle": 0}
DEFAULT_SESSION_CHARS = 4000
#: The real question-type counts over 500 questions.
TYPE_COUNTS = {
    "multi-session": 133,
    "temporal-reasoning": 133,
    "knowledge-update": 78,
    "single-session-user": 70,
    "single-session-assistant": 56,
    "single-session-preference": 30,
}
ABSTENTION_SHARE = 30 / 500
#: pool size per filler slot; 2.0 gives ~79% distinct sessions (S: ~19.2k unique of ~24k)
POOL_SHARE = {"s": 2.0, "m": 2.0, "oracle": 1.0}

_UNICODE = ("café", "naïve", "résumé", "Zürich", "jalapeño", "façade", "smörgåsbord", "😊")
_TOPICS = 48
_WORDS_PER_TOPIC = 120

_QUESTION_TEMPLATES = (
    "What did I decide about the {0} {1} for {E} and the {2} {3}?",
    "How many {0} did I {1} with {E} before the {2} {3} started?",
    "Which {0} {1} did {E} recommend for my {2} {3}?",
    "When did I last talk about the {0} {1} at {E} during the {2} {3}?",
    "Can you remind me what I said about {E} and my {0} {1} {2} {3}?",
)
_EVIDENCE_OPENERS = (
    "By the way,",
    "Oh, and I should mention that",
    "Quick update:",
    "Something I keep forgetting to say:",
    "For context,",
)
_ASSISTANT_OPENERS = ("As I suggested earlier,", "To recap my recommendation,", "In short,")


class _Vocabulary:
    def __init__(self, seed: int) -> None:
        rng = random.Random(f"vocab:{seed}")
        words = pseudo_words(rng, _TOPICS * _WORDS_PER_TOPIC, (2, 2, 3, 3, 3, 4), _COMMON)
        self.topics = [
            words[t * _WORDS_PER_TOPIC : (t + 1) * _WORDS_PER_TOPIC] for t in range(_TOPICS)
        ]
        # a topic's words are twice as likely as common words; a few non-ASCII words
        self.pools = [topic * 2 + list(_COMMON) + list(_UNICODE) for topic in self.topics]
        total = sum(len(w) + 1 for w in self.pools[0])
        self.mean_word = total / len(self.pools[0])


def _prose(rng: random.Random, pool: list[str], chars: int) -> str:
    words = rng.choices(pool, k=max(3, int(chars / 6.2)))
    for i in range(11, len(words), 12):
        words[i] += "."
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _date(when: dt.datetime) -> str:
    return when.strftime("%Y/%m/%d (%a) %H:%M")


class _Generator:
    def __init__(
        self,
        shape: str,
        questions: int,
        seed: int,
        sessions_per_question: int,
        session_chars: int,
        has_answer_keys: str,
        turn_labels_only: bool,
    ) -> None:
        self.shape = shape
        self.questions = questions
        self.seed = seed
        self.spq = sessions_per_question
        self.chars = session_chars
        self.all_keys = has_answer_keys == "all"
        self.turn_labels_only = turn_labels_only
        self.vocab = _Vocabulary(seed)
        slots = max(1, questions * max(self.spq - 2, 1))
        self.pool_size = max(self.spq * 2, int(slots * POOL_SHARE[shape]), 1)
        self.base_date = dt.datetime(2023, 1, 1, 8, 0)

    # -- sessions -------------------------------------------------------------------
    def _turns(
        self,
        rng: random.Random,
        topic: int,
        evidence: dict[int, str] | None,
        labelled: bool,
    ) -> list[dict[str, Any]]:
        """Alternating turns; user turns hold ~`chars` characters, assistant ones half."""
        pool = self.vocab.pools[topic]
        pairs = rng.randint(2, 5)
        user_chars = self.chars / pairs
        turns: list[dict[str, Any]] = []
        for i in range(pairs * 2):
            role = "user" if i % 2 == 0 else "assistant"
            size = user_chars if role == "user" else user_chars / 2
            content = _prose(rng, pool, size * rng.uniform(0.7, 1.3))
            turn: dict[str, Any] = {"role": role, "content": content}
            if evidence is not None and i in evidence:
                cut = rng.randint(0, len(content) // 2)
                cut = content.rfind(" ", 0, cut) + 1
                turn["content"] = content[:cut] + evidence[i] + " " + content[cut:]
            if labelled:
                turn["has_answer"] = evidence is not None and i in evidence
            turns.append(turn)
        return turns

    def pool_session(self, i: int) -> tuple[str, list[dict[str, Any]]]:
        """Filler session `i` of the shared pool: the same id and turns wherever it is used."""
        rng = random.Random(self.seed * 1_000_003 + i)
        kind = i % 3
        scrambled = (i * 2654435761 + self.seed * 40503) & 0xFFFFFFFF
        if kind == 0:
            sid = f"{scrambled:08x}_{rng.randint(1, 4)}"
        elif kind == 1:
            sid = f"sharegpt_{_b36(scrambled)}_{rng.randint(0, 9)}"
        else:
            sid = f"ultrachat_{i + 100000}"
        topic = rng.randrange(_TOPICS)
        return sid, self._turns(rng, topic, None, self.all_keys)

    # -- questions ------------------------------------------------------------------
    def instances(self) -> Iterator[dict[str, Any]]:
        rng = random.Random(f"questions:{self.seed}")
        types = allocate(self.questions, TYPE_COUNTS)
        rng.shuffle(types)
        n_abs = round(self.questions * ABSTENTION_SHARE)
        if n_abs == 0 and self.questions >= 5:
            n_abs = 1
        abstention = set(rng.sample(range(self.questions), n_abs))
        used_hex: set[str] = set()
        ultrachat_evidence = 900000
        for q in range(self.questions):
            qrng = random.Random(f"q:{self.seed}:{q}")
            qtype = types[q]
            while True:
                qhex = f"{qrng.getrandbits(32):08x}"
                if qhex not in used_hex:
                    used_hex.add(qhex)
                    break
            qid = f"gpt4_{qhex}" if qtype == "temporal-reasoning" and qrng.random() < 0.5 else qhex
            is_abs = q in abstention
            if is_abs:
                qid += "_abs"
            n_evidence = {
                "multi-session": qrng.randint(2, 4),
                "temporal-reasoning": qrng.randint(1, 3),
                "knowledge-update": 2,
            }.get(qtype, 1)
            if qtype == "multi-session" and qrng.random() < 0.1:
                n_evidence = qrng.randint(5, 6)
            topic = qrng.randrange(_TOPICS)
            words = self.vocab.topics[topic]
            keys = qrng.sample(words, 4)
            entity = qrng.choice(self.vocab.topics[(topic + 7) % _TOPICS]).capitalize()
            template = qrng.choice(_QUESTION_TEMPLATES)
            asked = entity if not is_abs else qrng.choice(words).capitalize()
            question = template.format(*keys, E=asked)
            answer: str | int
            answer = (
                qrng.randint(2, 9)
                if template.startswith("How many")
                else (f"The {qrng.choice(words)} {qrng.choice(words)}")
            )

            # evidence sessions
            evidence_sessions: list[tuple[str, list[dict[str, Any]]]] = []
            for j in range(n_evidence):
                if is_abs:
                    sid = f"answer_{qhex}_abs_{j + 1}"
                elif qtype == "single-session-assistant" and qrng.random() < 0.3:
                    ultrachat_evidence += 1
                    sid = f"answer_ultrachat_{ultrachat_evidence}"
                elif n_evidence == 1:
                    sid = f"answer_{qhex}"
                else:
                    sid = f"answer_{qhex}_{j + 1}"
                shared = qrng.sample(keys, qrng.randint(1, 3))  # some, never all, key words
                extra = qrng.sample(words, 3)
                pieces = [*shared, *extra]
                qrng.shuffle(pieces)
                if qrng.random() < 0.75:
                    pieces.insert(qrng.randrange(len(pieces) + 1), entity)
                assistant_side = qtype == "single-session-assistant"
                opener = qrng.choice(_ASSISTANT_OPENERS if assistant_side else _EVIDENCE_OPENERS)
                sentence = f"{opener} {' '.join(pieces)}."
                turns_rng = random.Random(f"e:{self.seed}:{q}:{j}")
                turn_index = 1 if assistant_side else 0  # first assistant / first user turn
                turns = self._turns(turns_rng, topic, {turn_index: sentence}, True)
                evidence_sessions.append((sid, turns))

            # haystack
            if self.shape == "oracle":
                haystack = list(evidence_sessions)
            else:
                spread = 0.1 if self.shape == "s" else 0.02
                total = max(n_evidence + 1, round(self.spq * qrng.uniform(1 - spread, 1 + spread)))
                n_filler = min(total - n_evidence, self.pool_size)
                filler = [
                    self.pool_session(i) for i in qrng.sample(range(self.pool_size), n_filler)
                ]
                haystack = filler
                for ev in evidence_sessions:
                    haystack.insert(qrng.randrange(len(haystack) + 1), ev)
            start = self.base_date + dt.timedelta(days=qrng.randrange(0, 400))
            when = start
            dates: list[str] = []
            for _ in haystack:
                when += dt.timedelta(minutes=qrng.randrange(30, 60 * 24 * 3))
                dates.append(_date(when))
            for i in range(len(dates) - 1):  # some same-day sessions out of order
                if dates[i][:10] == dates[i + 1][:10] and qrng.random() < 0.3:
                    dates[i], dates[i + 1] = dates[i + 1], dates[i]
            question_date = _date(when + dt.timedelta(days=qrng.randrange(1, 30), minutes=17))
            answer_ids = [sid for sid, _ in evidence_sessions]
            qrng.shuffle(answer_ids)
            record: dict[str, Any] = {
                "question_id": qid,
                "question_type": qtype,
                "question": question,
                "answer": answer,
                "question_date": question_date,
                "haystack_dates": dates,
                "haystack_session_ids": [sid for sid, _ in haystack],
                "haystack_sessions": [turns for _, turns in haystack],
            }
            if not self.turn_labels_only:
                record["answer_session_ids"] = answer_ids
            yield record


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            break
    return out.rjust(7, "0")


def generate(
    out: Path,
    *,
    shape: str,
    questions: int,
    seed: int,
    sessions_per_question: int | None = None,
    session_chars: int = DEFAULT_SESSION_CHARS,
    has_answer_keys: str = "evidence",
    turn_labels_only: bool = False,
    on_question: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Write synthetic data to `out` (atomically) and its sidecar; return the sidecar dict.
    `on_question(1)` as each question's instance is written (progress)."""
    if shape not in SHAPES:
        raise RecallbenchError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    if questions < 1:
        raise RecallbenchError("--questions must be at least 1")
    if session_chars < 20:
        raise RecallbenchError("--session-chars must be at least 20")
    if has_answer_keys not in ("evidence", "all"):
        raise RecallbenchError("has_answer keys must be 'evidence' or 'all'")
    spq = DEFAULT_SESSIONS[shape] if sessions_per_question is None else sessions_per_question
    if shape != "oracle" and spq < 2:
        raise RecallbenchError("--sessions-per-question must be at least 2")
    gen = _Generator(shape, questions, seed, spq, session_chars, has_answer_keys, turn_labels_only)
    written = write_json_array(Path(out), counted(gen.instances(), on_question))
    sidecar = {
        "generator": "recallbench.datasets.longmemeval.generator",
        "generator_version": GENERATOR_VERSION,
        "note": "synthetic, format-faithful data; not LongMemEval",
        "parameters": {
            "shape": shape,
            "questions": questions,
            "seed": seed,
            "sessions_per_question": spq if shape != "oracle" else None,
            "session_chars": session_chars,
            "has_answer_keys": has_answer_keys,
            "turn_labels_only": turn_labels_only,
        },
        **written,
    }
    return write_sidecar(Path(out), sidecar)


def _cli() -> Any:
    """`recallbench longmemeval generate` (built on first use: click is imported lazily)."""
    import click

    from recallbench.core.escape import terminal

    @click.group("longmemeval")
    def group() -> None:
        """LongMemEval helpers (the stages read a LongMemEval file with --dataset longmemeval)."""

    @group.command("generate")
    @click.option(
        "--shape",
        type=click.Choice(SHAPES),
        required=True,
        help="s: ~50 sessions/question, m: ~500, oracle: evidence only.",
    )
    @click.option("--questions", type=click.IntRange(min=1), required=True)
    @click.option("--seed", type=int, required=True)
    @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
    @click.option(
        "--sessions-per-question",
        type=click.IntRange(min=2),
        default=None,
        help="Default: 50 (s), 500 (m).",
    )
    @click.option(
        "--session-chars",
        type=click.IntRange(min=20),
        default=DEFAULT_SESSION_CHARS,
        show_default=True,
        help="Characters of user text per session (assistant turns add about half).",
    )
    @click.option(
        "--has-answer-keys",
        type=click.Choice(["evidence", "all"]),
        default="evidence",
        show_default=True,
        help="evidence: has_answer only on evidence sessions' turns (like cleaned S); all: on every turn.",
    )
    @click.option(
        "--turn-labels-only",
        is_flag=True,
        help="Omit answer_session_ids (exercises the turn-level gold fallback).",
    )
    def generate_cmd(
        shape: str,
        questions: int,
        seed: int,
        out: Path,
        sessions_per_question: int | None,
        session_chars: int,
        has_answer_keys: str,
        turn_labels_only: bool,
    ) -> None:
        """Write format-faithful SYNTHETIC data (not LongMemEval) for tests and benchmarks."""
        with generating("longmemeval generate", out, questions, "question") as advance:
            meta = generate(
                out,
                shape=shape,
                questions=questions,
                seed=seed,
                sessions_per_question=sessions_per_question,
                session_chars=session_chars,
                has_answer_keys=has_answer_keys,
                turn_labels_only=turn_labels_only,
                on_question=advance,
            )
        click.echo(
            terminal(
                f"{out}: {questions} synthetic questions, shape {shape}, "
                f"{meta['size_bytes']:,} bytes, sha256 {meta['sha256']}"
            )
        )

    return group
