"""Format-faithful synthetic LoCoMo data, for tests and benchmarks only.

It is NOT LoCoMo: every word is made up and nothing here was derived from the real file
(which is CC BY-NC 4.0 and must never enter the project). It reproduces the *format* of
``locomo10.json`` and its traps, so the reader and the stages can be exercised anywhere:

* a JSON array of samples ``{"qa", "conversation", "event_summary", "observation",
  "session_summary", "sample_id"}``; ``conversation`` holds ``speaker_a``, ``speaker_b``
  and, per session N, ``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``) and
  ``session_N`` (turns ``{"speaker", "dia_id": "D<N>:<i>", "text"}``);
* by default 19-32 sessions of 10-30 turns per conversation (one to three sentences per
  turn), like the real 369-689 turns per conversation;
* about 7% of turns share an image: ``img_url`` (a list of ``.invalid`` URLs),
  ``blip_caption`` and ``query``; a few short stock turns repeat word for word;
* every other conversation has ``session_N_date_time`` keys after its last session, with
  no ``session_N`` (dates of sessions that do not exist);
* questions in the real category proportions (1: 282, 2: 321, 3: 96, 4: 841, 5: 446 of
  1,986); category-5 items carry ``adversarial_answer`` and, for about 40% of them, no
  ``answer``; some temporal answers are integers (years);
* messy evidence: several ids in one entry (separators ``;``, ``,``, space), stray spaces
  (also around the colon), extra ids pointing at turns that do not exist, an occasional
  unparseable entry; and per conversation one question left with nothing to find, in
  turn: an empty evidence list (conversation 0, 3, ...), only unresolvable ids (1, 4, ...),
  only an unparseable entry (2, 5, ...);
* a question has three key words, two of its evidence's topic and one of another topic of
  the conversation; each evidence turn gets a planted sentence holding zero to two of the
  first two (plus other words of its topic, which other sessions on that topic use too),
  so a lexical retriever finds the evidence often, not always (BM25 over session memories,
  seed 0: any evidence session in the top 5 for about 80% of scored questions).

Category-5 (adversarial) questions carry clean evidence ids of real turns, as in the real
file, where all 446 do: the reader drops them by default and scores them with
``--categories all``.

Deterministic for a seed (same arguments, same bytes). The file is written atomically
(temporary file + rename); next to it ``<file>.generated.json`` records the generator,
parameters, the sha256 and the counts the reader should find, which the reader uses to
label the file "synthetic ... not LoCoMo".

``layout`` writes the same conversations in LoCoMo's other layout, one object per
conversation (`layout.as_sample`'s inverse): ``"directory"`` as ``OUT/<n>.json``,
``"zip"`` as the zip ``OUT`` with members ``data/multimodal_dialog/locomo10_v2/<n>.json``
(fixed timestamps and modes, so the same bytes each time); ``n`` is the array file's
``conv-<n>``. Each object holds ``speaker_a``, ``speaker_b``, per session
``session_<i>_date_time``, ``session_<i>``, ``events_session_<i>``,
``session_<i>_observation`` and ``session_<i>_summary``, the dates of sessions that do not
exist, and ``qa`` last. The sidecar's sha256 is the one the reader computes for that layout.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from recallbench.core.errors import RecallbenchError
from recallbench.datasets.synthetic import (
    COMMON_WORDS,
    allocate,
    counted,
    generating,
    pseudo_words,
    write_json_array,
    write_sidecar,
)

#: the generator's name recorded in every sidecar (kept from before the module moved into
#: datasets/locomo/, so sidecars and their bytes stay the same)
GENERATOR = "recallbench.datasets.locomo_generator"
GENERATOR_VERSION = 1
#: The real file's question counts per category (1,986 questions).
CATEGORY_COUNTS: dict[int, int] = {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
DEFAULT_QUESTIONS = (150, 250)  # real: 1,986 over 10 conversations

_TOPICS = 32
_WORDS_PER_TOPIC = 60
_STOCK_TURNS = ("Thanks so much!", "Talk soon!", "Take care!", "Wow, that is great!")
_OPENERS = ("Oh, and", "By the way,", "Guess what:", "I forgot to say that", "Funny thing,")
_SEPARATORS = ("; ", ",", " ", ";", ", ")
_TEMPLATES = {
    1: "What do {A}'s {0} and the {1} have in common with {2}?",
    2: "When did {A} {0} the {1} {2}?",
    3: "Would {A} likely enjoy a {0} {1} near the {2}?",
    4: "What {0} did {A} mention about the {1} {2}?",
    5: "What did {B} say about the {0} {1} {2}?",
}

#: the shared function words less the nine the LongMemEval generator added to them, so a
#: seed gives the same conversations as before the lists were shared (GENERATOR_VERSION 1)
_COMMON = [
    w
    for w in COMMON_WORDS
    if w not in {"most", "which", "who", "should", "thanks", "please", "help", "idea", "plan"}
]


def _span(value: int | tuple[int, int], name: str, minimum: int) -> tuple[int, int]:
    lo, hi = (value, value) if isinstance(value, int) else tuple(value)
    if not minimum <= lo <= hi:
        raise RecallbenchError(f"{name} must be a range lo <= hi with lo >= {minimum}")
    return lo, hi


class _Vocabulary:
    def __init__(self, seed: int) -> None:
        rng = random.Random(f"locomo-vocab:{seed}")
        words = pseudo_words(rng, _TOPICS * _WORDS_PER_TOPIC + 200, (2, 2, 3, 3, 4), _COMMON)
        self.topics = [
            words[t * _WORDS_PER_TOPIC : (t + 1) * _WORDS_PER_TOPIC] for t in range(_TOPICS)
        ]
        self.names = [w.capitalize() for w in words[_TOPICS * _WORDS_PER_TOPIC :]]
        # a topic's words are about as frequent as all common words together
        self.pools = [topic + list(_COMMON) for topic in self.topics]


def _sentence(rng: random.Random, pool: list[str]) -> str:
    words = rng.choices(pool, k=rng.randint(6, 16))
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice((".", ".", ".", "!", "?"))


def _when(moment: dt.datetime) -> str:
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment:%B}, {moment.year}"


class _Conversation:
    """One sample under construction (turns are mutable dicts until written)."""

    def __init__(self, gen: _Generator, c: int) -> None:
        self.c = c
        rng = self.rng = random.Random(f"locomo:{gen.seed}:{c}")
        vocab = gen.vocab
        self.vocab = vocab
        self.speakers = rng.sample(vocab.names, 2)
        self.topics = rng.sample(range(_TOPICS), 4)
        self.sample_id = f"conv-{c + 1}"
        n_sessions = rng.randint(*gen.sessions)
        when = dt.datetime(2022, 1, 1, 9, 0) + dt.timedelta(days=rng.randrange(500))
        self.sessions: list[dict[str, Any]] = []
        self.images = 0
        speaker = rng.randrange(2)
        for n in range(1, n_sessions + 1):
            when += dt.timedelta(days=rng.randint(3, 30), minutes=rng.randrange(0, 600))
            when = when.replace(hour=rng.randint(8, 21), minute=rng.randrange(60))
            topic = rng.choice(self.topics)
            pool = vocab.pools[topic]
            turns = []
            for i in range(1, rng.randint(*gen.turns) + 1):
                if rng.random() > 0.1:  # usually the other speaker talks next
                    speaker = 1 - speaker
                turn: dict[str, Any] = {"speaker": self.speakers[speaker], "dia_id": f"D{n}:{i}"}
                if rng.random() < 0.04:
                    turn["text"] = rng.choice(_STOCK_TURNS)
                else:
                    turn["text"] = " ".join(
                        _sentence(rng, pool) for _ in range(rng.choice((1, 1, 2, 2, 3)))
                    )
                if rng.random() < 0.07:
                    words = rng.sample(vocab.topics[topic], 3)
                    turn["img_url"] = [f"https://img.invalid/{rng.getrandbits(48):012x}.jpg"]
                    turn["blip_caption"] = f"a photo of a {words[0]} {words[1]} on a {words[2]}"
                    turn["query"] = f"{words[0]} {words[1]}"
                    self.images += 1
                turns.append(turn)
            self.sessions.append({"n": n, "date": _when(when), "topic": topic, "turns": turns})
        self.extra_dates = []
        if c % 2 == 0:  # date keys for sessions that do not exist
            for k in range(1, rng.randint(1, 3) + 1):
                when += dt.timedelta(days=rng.randint(3, 30))
                self.extra_dates.append((n_sessions + k, _when(when)))
        self.qa: list[dict[str, Any]] = []

    # -- questions ------------------------------------------------------------------------
    def questions(self, gen: _Generator, counts: dict[str, Any]) -> None:
        rng = self.rng
        total = rng.randint(*gen.questions)
        categories = allocate(total, CATEGORY_COUNTS)
        rng.shuffle(categories)
        answerable = [q for q, cat in enumerate(categories) if cat != 5]
        trap = answerable[len(answerable) // 2] if answerable else None
        for q, cat in enumerate(categories):
            counts["questions"][str(cat)] += 1
            self.qa.append(self._question(q, cat, q == trap, counts))

    def _pick_turns(self, cat: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        rng = self.rng
        sessions = self.sessions
        if cat == 1:
            chosen = rng.sample(sessions, min(len(sessions), rng.randint(2, 3)))
            picks = [(s, rng.choice(s["turns"])) for s in chosen]
            if rng.random() < 0.3:
                s = chosen[0]
                picks.append((s, rng.choice(s["turns"])))
        else:
            s = rng.choice(sessions)
            picks = [(s, rng.choice(s["turns"]))]
            if cat in (2, 3) and rng.random() < 0.3:
                picks.append((s, rng.choice(s["turns"])))
        unique: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for s, t in sorted(picks, key=lambda p: (p[0]["n"], int(p[1]["dia_id"].split(":")[1]))):
            unique.setdefault(t["dia_id"], (s, t))
        return list(unique.values())

    def _question(self, q: int, cat: int, trap: bool, counts: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        picks = self._pick_turns(cat)
        first_session = picks[0][0]
        words = self.vocab.topics[first_session["topic"]]
        # two key words of the evidence topic and one of another topic of the conversation
        others = [t for t in self.topics if t != first_session["topic"]] or self.topics
        keys = [*rng.sample(words, 2), rng.choice(self.vocab.topics[rng.choice(others)])]
        teller = picks[0][1]["speaker"]
        other = self.speakers[1] if teller == self.speakers[0] else self.speakers[0]
        for _, turn in picks:  # plant 0-2 of the key words, among other topic words
            pieces = rng.sample(keys[:2], rng.choices((0, 1, 2), (15, 55, 30))[0])
            pieces += rng.sample(words, 3 - len(pieces))
            rng.shuffle(pieces)
            turn["text"] += f" {rng.choice(_OPENERS)} {' '.join(pieces)}."
        question = _TEMPLATES[cat].format(*keys, A=teller, B=other)
        item: dict[str, Any] = {"question": question}
        if cat == 1:
            item["answer"] = f"{keys[0]}, {keys[1]}"
        elif cat == 2:
            date = first_session["date"].split(" on ", 1)[1]
            item["answer"] = int(date[-4:]) if rng.random() < 0.2 else date.replace(",", "")
        elif cat == 3:
            item["answer"] = f"Likely yes; {keys[0]}"
        elif cat == 4:
            item["answer"] = f"the {keys[1]} {keys[2]}"
        else:
            if rng.random() >= 0.4:
                item["answer"] = f"the {keys[0]} {keys[1]}"
            item["adversarial_answer"] = f"the {keys[0]} {keys[2]}"
        ids = [t["dia_id"] for _, t in picks]
        item["evidence"] = self._evidence(ids, cat, trap, counts)
        item["category"] = cat
        return item

    def _evidence(self, ids: list[str], cat: int, trap: bool, counts: dict[str, Any]) -> list:
        rng = self.rng
        if cat == 5:  # clean: the reader drops these before looking at evidence
            counts["adversarial"] += 1
            counts["evidence_entries"] += len(ids)
            return ids
        if trap:
            counts["no_evidence"] += 1
            kind = self.c % 3
            if kind == 0:
                return []
            counts["evidence_entries"] += 1
            if kind == 1:  # an id in a session that has only a date, or none at all
                n = self.extra_dates[0][0] if self.extra_dates else len(self.sessions) + 2
                counts["unresolved_evidence_ids"] += 1
                return [f"D{n}:{rng.randint(1, 9)}"]
            counts["unparseable_evidence_entries"] += 1
            return [f"D{len(self.sessions)}:"]
        entries = list(ids)
        if len(entries) > 1 and rng.random() < 0.15:  # several ids in one entry
            cut = rng.randint(2, len(entries))
            entries = [rng.choice(_SEPARATORS).join(entries[:cut]), *entries[cut:]]
            counts["multi_id_evidence_entries"] += 1
        if rng.random() < 0.03:  # an extra id past the end of a real session
            s = rng.choice(self.sessions)
            entries.insert(
                rng.randrange(len(entries) + 1), f"D{s['n']}:{len(s['turns']) + rng.randint(1, 5)}"
            )
            counts["unresolved_evidence_ids"] += 1
        if rng.random() < 0.01:  # an unparseable entry next to good ones
            entries.append(rng.choice(("D", "", "see above")))
            counts["unparseable_evidence_entries"] += 1
        out = []
        for entry in entries:
            roll = rng.random()
            if roll < 0.04:
                entry = rng.choice((" ", "  ")) + entry
            elif roll < 0.06:
                entry += " "
            elif roll < 0.07 and ":" in entry:
                entry = entry.replace(":", rng.choice((" : ", " :", ": ")), 1)
            out.append(entry)
        counts["evidence_entries"] += len(out)
        return out

    # -- output ---------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        rng = self.rng
        a, b = self.speakers
        conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
        events: dict[str, Any] = {}
        observation: dict[str, Any] = {}
        summaries: dict[str, Any] = {}
        for s in self.sessions:
            n = s["n"]
            conversation[f"session_{n}_date_time"] = s["date"]
            conversation[f"session_{n}"] = s["turns"]
            pool = self.vocab.pools[s["topic"]]
            picked = rng.sample(s["turns"], min(2, len(s["turns"])))
            events[f"events_session_{n}"] = {
                a: [_sentence(rng, pool)],
                b: [] if rng.random() < 0.3 else [_sentence(rng, pool)],
                "date": s["date"].split(" on ", 1)[1],
            }
            observation[f"session_{n}_observation"] = {
                name: [[_sentence(rng, pool), t["dia_id"]] for t in picked if t["speaker"] == name]
                for name in (a, b)
            }
            summaries[f"session_{n}_summary"] = " ".join(_sentence(rng, pool) for _ in range(3))
        for n, date in self.extra_dates:
            conversation[f"session_{n}_date_time"] = date
        return {
            "qa": self.qa,
            "conversation": conversation,
            "event_summary": events,
            "observation": observation,
            "session_summary": summaries,
            "sample_id": self.sample_id,
        }


class _Generator:
    def __init__(
        self,
        conversations: int,
        sessions: tuple[int, int],
        turns: tuple[int, int],
        questions: tuple[int, int],
        seed: int,
    ) -> None:
        self.conversations = conversations
        self.sessions = sessions
        self.turns = turns
        self.questions = questions
        self.seed = seed
        self.vocab = _Vocabulary(seed)


#: the layouts `generate` writes: the array file, or one object per conversation
LAYOUTS = ("array", "directory", "zip")
#: where the LoCoMo repository's zip holds the per-conversation files
ZIP_FOLDER = "data/multimodal_dialog/locomo10_v2"


def per_conversation(record: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(the conversation's number, its object in the per-conversation layout) for one sample
    of the array file: the conversation's keys at the top level, each session's annotations
    after its turns, ``qa`` last; no ``sample_id``."""
    number = int(record["sample_id"].removeprefix("conv-"))
    conversation = record["conversation"]
    out: dict[str, Any] = {}
    for key, value in conversation.items():
        out[key] = value
        if key.startswith("session_") and key[len("session_") :].isdigit():
            n = key[len("session_") :]
            out[f"events_session_{n}"] = record["event_summary"][f"events_session_{n}"]
            out[f"session_{n}_observation"] = record["observation"][f"session_{n}_observation"]
            out[f"session_{n}_summary"] = record["session_summary"][f"session_{n}_summary"]
    out["qa"] = record["qa"]
    return number, out


def _write_directory(out: Path, records: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """Each conversation as ``out/<n>.json``, written into a temporary directory renamed into
    place (a directory an earlier call wrote is replaced; anything else there is refused)."""
    import shutil
    import tempfile

    from recallbench.datasets.locomo.layout import MEMBER_NAME, directory_digest

    if out.exists() and not (
        out.is_dir()
        and not out.is_symlink()
        and all(MEMBER_NAME.fullmatch(p.name) for p in out.iterdir())
    ):
        raise RecallbenchError(
            f"{out} exists and is not a per-conversation directory this generator wrote; "
            "remove it or give another path"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # a new directory's usual mode, not mkdtemp's 0700
    try:
        members = []
        for record in records:
            number, obj = per_conversation(record)
            payload = orjson.dumps(obj)
            (staging / f"{number}.json").write_bytes(payload)
            members.append((f"{number}.json", hashlib.sha256(payload).hexdigest(), len(payload)))
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "gone")
            os.replace(staging, out)
            shutil.rmtree(old)
        else:
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "sha256": directory_digest((name, digest) for name, digest, _ in members),
        "size_bytes": sum(size for _, _, size in members),
        "layout": "directory",
    }


def _write_zip(out: Path, records: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """Each conversation as the zip member ``ZIP_FOLDER/<n>.json`` (deflated, with a fixed
    timestamp and mode), through a temp file renamed into place."""
    import zipfile

    from recallbench.builddir.artifacts import create_temp, file_sha256

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp(out)
    try:
        with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w") as archive:
            for record in records:
                number, obj = per_conversation(record)
                info = zipfile.ZipInfo(f"{ZIP_FOLDER}/{number}.json", (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, orjson.dumps(obj), compresslevel=6)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"sha256": file_sha256(out), "size_bytes": out.stat().st_size, "layout": "zip"}


def _new_counts() -> dict[str, Any]:
    return {
        "conversations": 0,
        "sessions": 0,
        "turns": 0,
        "turns_with_images": 0,
        "session_dates_without_sessions": 0,
        "questions": {str(c): 0 for c in CATEGORY_COUNTS},
        "questions_total": 0,
        "adversarial": 0,
        "no_evidence": 0,
        "evidence_entries": 0,
        "multi_id_evidence_entries": 0,
        "unparseable_evidence_entries": 0,
        "unresolved_evidence_ids": 0,
    }


def generate(
    path: Path,
    *,
    conversations: int = 10,
    sessions: int | tuple[int, int] = (19, 32),
    turns_per_session: int | tuple[int, int] = (10, 30),
    questions_per_conversation: int | tuple[int, int] = DEFAULT_QUESTIONS,
    seed: int = 0,
    layout: str = "array",
    on_conversation: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Write synthetic LoCoMo-format data to `path` (atomically) and its sidecar;
    `on_conversation(1)` as each conversation is written (progress).

    Ranges are inclusive ``(lo, hi)`` pairs (or one integer). `layout`: ``"array"`` (the
    array file ``locomo10.json``), ``"directory"`` or ``"zip"`` (the per-conversation
    layout, the same conversations; see the module docstring). Returns the sidecar dict:
    generator, parameters, sha256, size and the counts the reader should find.
    """
    if conversations < 1:
        raise RecallbenchError("conversations must be at least 1")
    if layout not in LAYOUTS:
        raise RecallbenchError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    span_s = _span(sessions, "sessions", 1)
    span_t = _span(turns_per_session, "turns_per_session", 1)
    span_q = _span(questions_per_conversation, "questions_per_conversation", 1)
    gen = _Generator(conversations, span_s, span_t, span_q, seed)
    counts = _new_counts()

    def records() -> Iterator[dict[str, Any]]:
        for c in range(conversations):
            conv = _Conversation(gen, c)
            conv.questions(gen, counts)
            counts["conversations"] += 1
            counts["sessions"] += len(conv.sessions)
            counts["turns"] += sum(len(s["turns"]) for s in conv.sessions)
            counts["turns_with_images"] += conv.images
            counts["session_dates_without_sessions"] += len(conv.extra_dates)
            yield conv.record()

    writer = {"array": write_json_array, "directory": _write_directory, "zip": _write_zip}
    written = writer[layout](Path(path), counted(records(), on_conversation))
    counts["questions_total"] = sum(counts["questions"].values())
    sidecar = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "note": "synthetic, format-faithful data; not LoCoMo",
        "parameters": {
            "conversations": conversations,
            "sessions": list(span_s),
            "turns_per_session": list(span_t),
            "questions_per_conversation": list(span_q),
            "seed": seed,
        },
        **written,
        "counts": counts,
    }
    return write_sidecar(Path(path), sidecar)


def _cli() -> Any:
    """`recallbench locomo generate` (built on first use: click is imported lazily)."""
    import click

    from recallbench.core.escape import terminal

    @click.group("locomo")
    def group() -> None:
        """LoCoMo helpers (the stages read a LoCoMo file with --dataset locomo --data FILE)."""

    @group.command("generate")
    @click.option("--out", type=click.Path(path_type=Path), required=True)
    @click.option("--conversations", type=click.IntRange(min=1), default=10, show_default=True)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option(
        "--layout",
        type=click.Choice(LAYOUTS),
        default="array",
        show_default=True,
        help="array: one JSON array (locomo10.json); directory: OUT/<n>.json, one object per "
        "conversation; zip: OUT as the LoCoMo repository's zip holds them "
        f"({ZIP_FOLDER}/<n>.json).",
    )
    def generate_cmd(out: Path, conversations: int, seed: int, layout: str) -> None:
        """Write format-faithful SYNTHETIC data (not LoCoMo) for tests and benchmarks."""
        with generating("locomo generate", out, conversations, "conversation") as advance:
            meta = generate(
                out, conversations=conversations, seed=seed, layout=layout, on_conversation=advance
            )
        click.echo(
            terminal(
                f"{out}: {conversations} synthetic conversations ({layout}), "
                f"{meta['size_bytes']:,} bytes, sha256 {meta['sha256']}"
            )
        )

    return group
