"""Stream a LoCoMo file (``locomo10.json``) one conversation at a time, as scopes and drops.

The array file is read here; LoCoMo's other layout, one JSON object per conversation (the
repository zip's ``locomo10_v2/<n>.json``: a directory, the zip itself, or one such file), is
read by `recallbench.datasets.locomo.layout` into the same samples, so both give the same
scopes and figures.

LoCoMo (Maharana et al., ACL 2024; snap-research/locomo) is a JSON array of samples, each
one long conversation between two speakers (``conversation``: ``session_N`` lists of turns
``{"speaker", "dia_id", "text"}``, some with ``img_url`` / ``blip_caption``) and its
questions (``qa``: ``{"question", "answer", "evidence", "category"}``). The data is
CC BY-NC 4.0: it is never part of this project; users pass the path of their own copy.

Mapping onto the internal model (`recallbench.core.model`):

* **One scope per conversation**, ``scope_id`` = ``sample_id``, in file order. The
  conversation is stored once and every question of the sample is asked of that store.
  A conversation none of whose questions is scored yields no scope (storing it would
  measure nothing): it contributes only its drops, and `summary()` counts it under
  ``conversations_without_scored_questions``.
* **Sessions** exist where a ``session_N`` key holds a non-empty list of turns, in the
  order of N; ``session_N_date_time`` keys without a session are ignored (counted). Session
  ids are ``D<N>``; turn ids are the turn's ``dia_id`` in canonical form ``D<N>:<i>``
  (integers without leading zeros or spaces: the file's own ``dia_id`` when well formed).
  A turn belongs to the session whose list holds it.
* **Units.** ``unit="session"`` (default): one memory per session, text = its turns' texts
  joined by ``"\\n"`` (one turn per line), ``units = {"session": ("D3",)}``, levels
  ``(session,)``. ``unit="turn"``: one memory per turn, ``units = {"turn": ("D3:4",),
  "session": ("D3",)}``, levels ``(session, turn)`` with the turn measures prefixed
  ``turn_``; session figures then rank sessions by their first retrieved turn.
* **Text rule** of one turn: ``f"{speaker}: {text}"``, and when the turn has a non-blank
  ``blip_caption``, ``f" [shares an image: {caption}]"`` is appended (the caption with
  surrounding whitespace removed). Speaker and text are kept verbatim; dates, ``img_url``,
  ``query`` and the annotation keys (``event_summary``, ``observation``,
  ``session_summary``) are not part of any text.
* **Structure** (only for a system that declares `structured`, see `model.Turn`): each
  memory carries its turns (speaker, the text after the speaker prefix, position in the
  session as turn id) and its session's ``session_N_date_time``, verbatim; questions have
  no date in LoCoMo. Handed over as plain data (`model.Scope.structure`), which validate
  writes to the structure spool.
* **No leakage.** Memory ids are opaque: ``"m" + sha256(f"{sample_id}\\x1f{unit_id}")[:20]``
  (unit_id = the session or turn id); the identifier is the constant ``locomo``. Memories of
  one conversation with identical text (e.g. two turns "A: Thanks!") are stored once, as
  HotMem keeps one row per identifier + text: the memory stands for all of their ids, in
  conversation order (counted as ``merged_duplicate_texts``).
* **Queries.** ``query_id = f"{sample_id}:q{i}"`` (i = 0-based position in ``qa``),
  category = the category number as a string, ``"1"``..``"5"`` (labels: 1 multi-hop,
  2 temporal, 3 open-domain, 4 single-hop, 5 adversarial, as in LoCoMo's evaluation
  code; the paper's prose numbers them differently). Relevance: ``session`` level = the
  session of every resolved evidence turn, grade 2; with unit ``turn`` also the ``turn``
  level = every resolved evidence turn, grade 2.
* **Evidence** entries are strings that may hold several ids, separators and stray spaces
  (``"D1:3; D2:5"``, ``" D4:1"``, ``"D10:2,D10:3"``): every ``D<int>:<int>`` pattern is
  extracted (spaces around the colon tolerated, case-insensitive ``D``). Entries with no
  pattern are counted as unparseable, ids naming no turn of the conversation as
  unresolved; both are counted over every question, category 5 included.
* **Drops**, yielded before their conversation's scope, in question order: a category-5
  question is dropped as ``adversarial`` by default (most published retrieval figures
  leave category 5 out), any other question left without a resolvable evidence turn as
  ``no_evidence``. With ``categories="all"`` category-5 questions are scored like the
  others, with their evidence (in the real file every one of them carries evidence ids),
  and the option is recorded in the suite; a category-5 question without a resolvable
  evidence turn is then dropped as ``no_evidence``.

A malformed record stops the stream with one line naming the file, the record index, the
sample id and the field, e.g.::

    locomo10.json: record[3] (sample_id 'conv-30'): field 'qa[17].category' must be one of 1-5, not 7
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import file_sha256
from recallbench.core.errors import RecallbenchError
from recallbench.core.ids import opaque_id
from recallbench.core.model import Drop, Level, Memory, Query, Scope, memory_structure
from recallbench.datasets.base import UNITS
from recallbench.datasets.jsonstream import (
    JsonArrayFile,
    generated_sidecar,
    record_error,
)
from recallbench.datasets.jsonstream import type_name as _type_name
from recallbench.datasets.sniff import refuse_other

NAME = "locomo"
#: HotMem's project/organisation scope for every stored memory.
STORE_IDENTIFIER = "locomo"
DEFAULT_UNIT = "session"

CATEGORY_NAMES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
CATEGORIES: tuple[str, ...] = tuple(CATEGORY_NAMES)
CATEGORY_LABELS: dict[str, str] = {c: f"{c} {name}" for c, name in CATEGORY_NAMES.items()}
ADVERSARIAL_CATEGORY = "5"
#: the question sets (`--categories`): categories 1-4 (the default), or all five
CATEGORIES_DEFAULT = "1-4"
CATEGORIES_ALL = "all"
CATEGORY_SETS: tuple[str, ...] = (CATEGORIES_DEFAULT, CATEGORIES_ALL)

DROP_ADVERSARIAL = "adversarial"
DROP_NO_EVIDENCE = "no_evidence"
ADVERSARIAL_DETAIL = (
    "category 5 (adversarial): left out by default, as in most published retrieval figures "
    "(--categories all scores it)"
)
DROP_RULES: dict[str, str] = {
    DROP_ADVERSARIAL: (
        "Category 5 (adversarial) questions ask with a premise the conversation does not "
        "support; their evidence ids still point at real turns, but most published "
        "retrieval figures leave them out, so they are dropped and counted by default "
        "(--categories all scores them, in their own row)."
    ),
    DROP_NO_EVIDENCE: (
        "Questions whose evidence holds no id of an existing turn of their conversation "
        "(empty, unparseable or unresolved evidence) have nothing to find; they are "
        "dropped and counted."
    ),
}

NOTES: tuple[str, ...] = (
    "One conversation is one scope: it is stored once and all its questions are asked of "
    "that store.",
    "Category numbers are read as in LoCoMo's evaluation code: 1 multi-hop, 2 temporal, "
    "3 open-domain, 4 single-hop, 5 adversarial. The numbering has been read differently "
    "in the literature (the paper's prose lists the types in another order): compare by "
    "number and name.",
    "Category 5 (adversarial) questions are dropped and counted, so they are not in any "
    "denominator (--categories all scores them); questions left without a resolvable "
    "evidence turn are dropped too.",
    "Turn text is 'speaker: text', plus ' [shares an image: caption]' when the turn has a "
    "blip_caption; a session's text is its turns' texts, one per line. Dates are not "
    "part of the text.",
)

#: the note that replaces the category-5 note with --categories all
ALL_CATEGORIES_NOTE = (
    "Category 5 (adversarial) questions are kept (--categories all): scored with their "
    "evidence turns, in their own row, and in the overall figures, which the default "
    "(categories 1-4) leaves them out of; questions left without a resolvable evidence "
    "turn are dropped."
)

#: one evidence id: D<session>:<turn>, spaces around the colon tolerated
EVIDENCE_ID = re.compile(r"[Dd]\s*(\d+)\s*:\s*(\d+)")
_DIA_ID = re.compile(r"\s*[Dd]\s*(\d+)\s*:\s*(\d+)\s*")
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_KEY = re.compile(r"session_(\d+)_date_time")
#: the conversation's two speakers' names (strings)
_SPEAKER_KEYS = ("speaker_a", "speaker_b")


# -- parsing helpers ---------------------------------------------------------------------


def parse_evidence(entry: str) -> tuple[tuple[int, int], ...]:
    """Every ``D<session>:<turn>`` id in one evidence entry, as (session, turn) numbers."""
    return tuple((int(s), int(t)) for s, t in EVIDENCE_ID.findall(entry))


def turn_key_id(key: tuple[int, int]) -> str:
    """The canonical turn id ``D<N>:<i>`` of a (session, turn) pair."""
    return f"D{key[0]}:{key[1]}"


def session_id(number: int) -> str:
    return f"D{number}"


def turn_text(speaker: str, text: str, blip_caption: str | None = None) -> str:
    """The stored text of one turn (see the module docstring for the rule)."""
    out = f"{speaker}: {text}"
    caption = blip_caption.strip() if isinstance(blip_caption, str) else ""
    if caption:
        out += f" [shares an image: {caption}]"
    return out


def structure_turns(turns: Sequence[Turn], first: int = 1) -> list[dict[str, str]]:
    """Turns as a structured record carries them, as plain data (`model.Turn.to_dict`'s
    form, no `Turn` built): speaker and content; the turn id is the 1-based position in
    the session, from `first`."""
    return [
        {"text": t.content, "speaker": t.speaker, "turn_id": str(position)}
        for position, t in enumerate(turns, first)
    ]


# -- checked records ---------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    turn_id: str  # canonical D<N>:<i>
    session_id: str  # D<N> of the session whose list holds the turn
    text: str  # the stored text (speaker prefix, image caption)
    has_image: bool
    speaker: str = ""  # verbatim (a structured record's turn)
    content: str = ""  # the text without the speaker prefix (image caption kept)


@dataclass(frozen=True)
class Session:
    session_id: str
    number: int
    turns: tuple[Turn, ...]
    date: str | None = None  # session_N_date_time, verbatim (a structured record's date)


@dataclass(frozen=True)
class Question:
    position: int
    question: str
    category: str
    #: the evidence entries as in the file ([] when the key is missing)
    evidence: tuple[str, ...]
    has_evidence_key: bool


@dataclass(frozen=True)
class Sample:
    index: int
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    empty_sessions: int
    dates_without_sessions: int


def _fail(path: Path, index: int, sample_id: Any, message: str) -> RecallbenchError:
    return record_error(path, index, "sample_id", sample_id, message)


def check_sample(raw: Any, index: int, path: Path, member: str | None = None) -> Sample:
    """Check one raw sample against the LoCoMo schema; return it as a `Sample`. `member`:
    the per-conversation file it came from (`layout.as_sample` shaped it): an error then
    names that file and the field as the file holds it, without the array file's
    ``conversation.`` wrapper (``locomo10_v2/26.json: field 'session_1[1].dia_id' ...``)."""
    if not isinstance(raw, dict):
        raise _fail(path, index, None, f"must be an object, not {_type_name(raw)}")
    sid = raw.get("sample_id")

    root = "" if member is not None else "conversation."  # where the sessions are held

    def fail(message: str) -> RecallbenchError:
        if member is not None:
            return RecallbenchError(f"{member}: {message}")
        return _fail(path, index, sid, message)

    if "sample_id" not in raw:
        raise fail("field 'sample_id' is missing")
    if not isinstance(sid, str):
        raise fail(f"field 'sample_id' must be a string, not {_type_name(sid)}")
    if not sid.strip():
        raise fail("field 'sample_id' must not be empty")
    if any(ch.isspace() for ch in sid):
        raise fail("field 'sample_id' must not contain whitespace")
    for name, kind, what in (("conversation", dict, "an object"), ("qa", list, "a list")):
        if name not in raw:
            raise fail(f"field '{name}' is missing")
        if not isinstance(raw[name], kind):
            raise fail(f"field '{name}' must be {what}, not {_type_name(raw[name])}")
    conversation: dict[str, Any] = raw["conversation"]

    # sessions, in the order of their numbers
    numbered: dict[int, str] = {}
    dates: set[int] = set()
    for key in conversation:
        if match := _SESSION_KEY.fullmatch(key):
            number = int(match.group(1))
            if number in numbered:
                raise fail(
                    f"field '{root}{key}' repeats session {number} ('{root}{numbered[number]}')"
                )
            numbered[number] = key
        elif match := _DATE_KEY.fullmatch(key):
            dates.add(int(match.group(1)))
            if not isinstance(conversation[key], str):
                raise fail(
                    f"field '{root}{key}' must be a string, not {_type_name(conversation[key])}"
                )
        elif key in _SPEAKER_KEYS and not isinstance(conversation[key], str):
            raise fail(f"field '{root}{key}' must be a string, not {_type_name(conversation[key])}")
    sessions: list[Session] = []
    seen_turns: dict[tuple[int, int], str] = {}
    empty = 0
    for number in sorted(numbered):
        key = numbered[number]
        turns_raw = conversation[key]
        if not isinstance(turns_raw, list):
            raise fail(f"field '{root}{key}' must be a list of turns, not {_type_name(turns_raw)}")
        if not turns_raw:
            empty += 1
            continue
        sess = session_id(number)
        turns: list[Turn] = []
        for t, turn in enumerate(turns_raw):
            where = f"{root}{key}[{t}]"
            if not isinstance(turn, dict):
                raise fail(f"field '{where}' must be an object, not {_type_name(turn)}")
            for name in ("speaker", "dia_id", "text"):
                if name not in turn:
                    raise fail(f"field '{where}.{name}' is missing")
                if not isinstance(turn[name], str):
                    raise fail(
                        f"field '{where}.{name}' must be a string, not {_type_name(turn[name])}"
                    )
            dia = _DIA_ID.fullmatch(turn["dia_id"])
            if dia is None:
                raise fail(
                    f"field '{where}.dia_id' must look like 'D<session>:<turn>', "
                    f"not {turn['dia_id']!r}"
                )
            turn_key = (int(dia.group(1)), int(dia.group(2)))
            if turn_key in seen_turns:
                raise fail(
                    f"field '{where}.dia_id' {turn['dia_id']!r} repeats the dia_id of "
                    f"'{seen_turns[turn_key]}'"
                )
            seen_turns[turn_key] = where
            caption = turn.get("blip_caption")
            if caption is not None and not isinstance(caption, str):
                raise fail(
                    f"field '{where}.blip_caption' must be a string, not {_type_name(caption)}"
                )
            img = turn.get("img_url")
            has_image = bool(img) or bool(caption and caption.strip())
            text = turn_text(turn["speaker"], turn["text"], caption)
            turns.append(
                Turn(
                    turn_id=turn_key_id(turn_key),
                    session_id=sess,
                    text=text,
                    has_image=has_image,
                    speaker=turn["speaker"],
                    content=text[len(turn["speaker"]) + 2 :],
                )
            )
        date = conversation.get(f"session_{number}_date_time")
        sessions.append(Session(sess, number, tuple(turns), date))
    with_turns = {s.number for s in sessions}

    questions: list[Question] = []
    for q, item in enumerate(raw["qa"]):
        where = f"qa[{q}]"
        if not isinstance(item, dict):
            raise fail(f"field '{where}' must be an object, not {_type_name(item)}")
        if "question" not in item:
            raise fail(f"field '{where}.question' is missing")
        question = item["question"]
        if not isinstance(question, str):
            raise fail(f"field '{where}.question' must be a string, not {_type_name(question)}")
        if not question.strip():
            raise fail(f"field '{where}.question' must not be empty")
        if "category" not in item:
            raise fail(f"field '{where}.category' is missing")
        category = item["category"]
        if isinstance(category, bool) or not isinstance(category, int):
            raise fail(f"field '{where}.category' must be an integer, not {_type_name(category)}")
        if str(category) not in CATEGORY_NAMES:
            raise fail(f"field '{where}.category' must be one of 1-5, not {category}")
        for name in ("answer", "adversarial_answer"):  # a string or a number, not nested
            if isinstance(item.get(name), dict | list):
                raise fail(
                    f"field '{where}.{name}' must be a string or a number, "
                    f"not {_type_name(item[name])}"
                )
        evidence = item.get("evidence", [])
        if evidence is None:
            evidence = []
        if not isinstance(evidence, list):
            raise fail(f"field '{where}.evidence' must be a list, not {_type_name(evidence)}")
        for e, entry in enumerate(evidence):
            if not isinstance(entry, str):
                raise fail(
                    f"field '{where}.evidence[{e}]' must be a string, not {_type_name(entry)}"
                )
        questions.append(
            Question(
                position=q,
                question=question,
                category=str(category),
                evidence=tuple(evidence),
                has_evidence_key="evidence" in item,
            )
        )
    return Sample(
        index=index,
        sample_id=sid,
        sessions=tuple(sessions),
        questions=tuple(questions),
        empty_sessions=empty,
        dates_without_sessions=len(dates - with_turns),
    )


def _member_sample(raw: dict[str, Any], index: int, path: Path, label: str) -> Sample:
    """A per-conversation member checked as a sample (`check_sample` with its `member`)."""
    return check_sample(raw, index, path, member=label)


# -- streaming ---------------------------------------------------------------------------


def identify(path: Path, sha256: str, conversations: Any = None) -> dict[str, Any]:
    """{"known": bool, "label": sentence}: synthetic data from our generator, or unknown.
    `conversations`: the per-conversation layout (`layout.Conversations`) read, if any."""
    meta = generated_sidecar(path, sha256)
    if meta is not None:
        params = meta.get("parameters")
        params = params if isinstance(params, dict) else {}
        counts = meta.get("counts")
        questions = counts.get("questions_total") if isinstance(counts, dict) else None
        return {
            "known": True,
            "generated": True,
            "label": (
                "synthetic data from the recallbench generator "
                f"({params.get('conversations')} conversations, {questions} questions, "
                f"seed {params.get('seed')}) - not LoCoMo"
            ),
        }
    if conversations is not None:
        count = len(conversations.members)
        kind = {"directory": "directory", "zip": "zip"}.get(conversations.layout, "file")
        return {
            "known": False,
            "label": f"LoCoMo per-conversation {kind} ({count} conversation file"
            f"{'s' if count != 1 else ''}; sha256 matches no release recorded here)",
        }
    return {
        "known": False,
        "label": "LoCoMo-format file (sha256 matches no release recorded here)",
    }


@dataclass
class _Counts:
    conversations: int = 0
    conversations_without_scored_questions: int = 0
    sessions: int = 0
    empty_sessions: int = 0
    session_dates_without_sessions: int = 0
    turns: int = 0
    turns_with_images: int = 0
    memories: int = 0
    merged_duplicate_texts: int = 0
    questions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    scored: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    dropped: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys((DROP_ADVERSARIAL, DROP_NO_EVIDENCE), 0)
    )
    evidence_entries: int = 0
    multi_id_evidence_entries: int = 0
    unparseable_evidence_entries: int = 0
    unresolved_evidence_ids: int = 0
    questions_without_evidence_key: int = 0


class LoCoMoSource:
    """An opened LoCoMo file (the `recallbench.datasets.base.Source` protocol)."""

    name = NAME
    categories = CATEGORIES
    category_labels = CATEGORY_LABELS
    drop_rules = DROP_RULES
    notes = NOTES

    def __init__(
        self, path: Path, unit: str = DEFAULT_UNIT, categories: str = CATEGORIES_DEFAULT
    ) -> None:
        if unit not in UNITS:
            raise RecallbenchError(f"--unit must be one of {', '.join(UNITS)}, not {unit!r}")
        if categories not in CATEGORY_SETS:
            raise RecallbenchError(
                f"--categories must be one of {', '.join(CATEGORY_SETS)}, not {categories!r}"
            )
        self.path = Path(path)
        from recallbench.core.inputfiles import check_regular_file, input_limit
        from recallbench.datasets.locomo.layout import ARRAY, Conversations, layout_of

        self.unit = unit
        #: the array file, or the per-conversation layout (a directory, the zip, one file)
        self.layout = layout_of(self.path)
        self._conversations: Conversations | None = None
        if self.layout == ARRAY:
            self.size_bytes = check_regular_file(self.path, "LoCoMo file", input_limit("data"))
        else:
            self._conversations = Conversations(self.path, self.layout, input_limit("data"))
            self.size_bytes = self._conversations.size
        self._array = JsonArrayFile(self.path, what="LoCoMo samples", id_field="sample_id")
        self.options: dict[str, Any] = {"unit": unit}
        # recorded only when not the default, so default runs keep their artifacts unchanged
        self.keep_adversarial = categories == CATEGORIES_ALL
        if self.keep_adversarial:
            self.options["categories"] = categories
            self.notes = tuple(
                ALL_CATEGORIES_NOTE if note.startswith("Category 5") else note for note in NOTES
            )
        session_level = Level("session", "", "a LoCoMo session (D<N>)")
        if unit == "session":
            self.levels: tuple[Level, ...] = (session_level,)
        else:
            self.levels = (session_level, Level("turn", "turn_", "a LoCoMo turn (D<N>:<i>)"))
        self.sha256: str | None = None
        self._counts = _Counts()

    # -- the stream ----------------------------------------------------------------------

    def samples(self, progress: Callable[[int], Any] | None = None) -> Iterator[Sample]:
        """Every sample, checked, in file order (a per-conversation layout's in the order of
        the conversations' numbers); sets `sha256` when exhausted."""
        if self._conversations is not None:
            for index, raw, label in self._conversations.records(progress):
                yield _member_sample(raw, index, self.path, label)
            self.sha256 = self._conversations.sha256
            return
        seen: dict[str, int] = {}
        for index, raw in self._array.stream(progress):
            if index == 0:
                refuse_other(self.path, raw, NAME)  # a LongMemEval file: say so
            sample = check_sample(raw, index, self.path)
            if sample.sample_id in seen:
                raise _fail(
                    self.path,
                    index,
                    sample.sample_id,
                    f"field 'sample_id' repeats record[{seen[sample.sample_id]}]",
                )
            seen[sample.sample_id] = index
            yield sample
        self.size_bytes = self._array.size
        self.sha256 = self._array.sha256

    def stream(self, progress: Callable[[int], Any] | None = None) -> Iterator[Scope | Drop]:
        """Per conversation: its drops (question order), then its scope (if any query)."""
        self._counts = counts = _Counts()
        for sample in self.samples(progress):
            yield from self._convert(sample, counts)

    def _convert(self, sample: Sample, counts: _Counts) -> Iterator[Scope | Drop]:
        sid = sample.sample_id
        counts.conversations += 1
        counts.sessions += len(sample.sessions)
        counts.empty_sessions += sample.empty_sessions
        counts.session_dates_without_sessions += sample.dates_without_sessions
        turn_session = {}
        for session in sample.sessions:
            counts.turns += len(session.turns)
            for turn in session.turns:
                counts.turns_with_images += turn.has_image
                turn_session[turn.turn_id] = session.session_id

        queries: list[Query] = []
        for q in sample.questions:
            counts.questions[q.category] += 1
            counts.questions_without_evidence_key += not q.has_evidence_key
            resolved: dict[str, None] = {}
            unresolved: list[str] = []
            unparseable: list[str] = []
            for entry in q.evidence:
                counts.evidence_entries += 1
                ids = parse_evidence(entry)
                if not ids:
                    unparseable.append(entry)
                    continue
                if len(ids) > 1:
                    counts.multi_id_evidence_entries += 1
                for key in ids:
                    tid = turn_key_id(key)
                    if tid in turn_session:
                        resolved.setdefault(tid, None)
                    else:
                        unresolved.append(tid)
            counts.unparseable_evidence_entries += len(unparseable)
            counts.unresolved_evidence_ids += len(unresolved)
            query_id = f"{sid}:q{q.position}"
            if q.category == ADVERSARIAL_CATEGORY and not self.keep_adversarial:
                counts.dropped[DROP_ADVERSARIAL] += 1
                yield Drop(query_id, q.category, DROP_ADVERSARIAL, ADVERSARIAL_DETAIL, sid)
                continue
            problems = []
            if unparseable:
                problems.append("unparseable evidence " + ", ".join(repr(e) for e in unparseable))
            if unresolved:
                problems.append("evidence ids naming no turn: " + ", ".join(unresolved))
            if not resolved:
                detail = "no evidence turn of this conversation"
                if not q.evidence:
                    detail += " (empty evidence list)"
                elif problems:
                    detail += " (" + "; ".join(problems) + ")"
                counts.dropped[DROP_NO_EVIDENCE] += 1
                yield Drop(query_id, q.category, DROP_NO_EVIDENCE, detail, sid)
                continue
            relevance: dict[str, dict[str, int]] = {
                "session": {turn_session[t]: 2 for t in resolved}
            }
            if self.unit == "turn":
                relevance["turn"] = dict.fromkeys(resolved, 2)
            counts.scored[q.category] += 1
            queries.append(
                Query(
                    query_id=query_id,
                    category=q.category,
                    text=q.question,
                    relevance=relevance,
                    notes=("; ".join(problems) + " (ignored)") if problems else "",
                )
            )
        if not queries:
            counts.conversations_without_scored_questions += 1
            return
        memories, structure = self._memories(sample, counts)
        # questions have no date in LoCoMo
        scope_structure = {"memories": structure, "queries": [{} for _ in queries]}
        yield Scope(sid, memories, tuple(queries), scope_structure)

    def _memories(
        self, sample: Sample, counts: _Counts
    ) -> tuple[tuple[Memory, ...], list[dict[str, Any]]]:
        """One memory per unit, identical texts merged (in conversation order), and each
        one's structure (`model.Scope.structure`'s memory entries)."""
        by_text: dict[str, list[tuple[str, str]]] = {}  # text -> [(unit id, session id)]
        #: each text's structure (plain data): the turns and session date of its first holder
        structure: dict[str, dict[str, Any]] = {}
        for session in sample.sessions:
            if self.unit == "session":
                text = "\n".join(t.text for t in session.turns)
                by_text.setdefault(text, []).append((session.session_id, session.session_id))
                if text not in structure:
                    turns = structure_turns(session.turns)
                    structure[text] = memory_structure(turns, session.date)
            else:
                for position, turn in enumerate(session.turns, 1):
                    by_text.setdefault(turn.text, []).append((turn.turn_id, session.session_id))
                    if turn.text not in structure:
                        turns = structure_turns([turn], position)
                        structure[turn.text] = memory_structure(turns, session.date)
        memories = []
        for text, owners in by_text.items():
            counts.merged_duplicate_texts += len(owners) - 1
            sessions = tuple(dict.fromkeys(s for _, s in owners))
            if self.unit == "session":
                units: dict[str, tuple[str, ...]] = {"session": sessions}
            else:
                units = {"turn": tuple(u for u, _ in owners), "session": sessions}
            memories.append(
                Memory(
                    memory_id=opaque_id(sample.sample_id, owners[0][0]),
                    text=text,
                    units=units,
                    identifier=STORE_IDENTIFIER,
                )
            )
        if len({m.memory_id for m in memories}) != len(memories):  # pragma: no cover
            raise RuntimeError(f"opaque id collision in sample {sample.sample_id}")
        counts.memories += len(memories)
        return tuple(memories), [structure[text] for text in by_text]

    # -- what the stages ask -------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        if self.sha256 is None:  # not streamed (yet): hash the file on its own
            if self._conversations is not None:
                self.sha256 = self._conversations.digest()
            else:
                self.sha256 = file_sha256(self.path)
        known = identify(self.path, self.sha256, self._conversations)
        return {
            "dataset": NAME,
            "files": [
                {
                    "role": "data",
                    "name": self.path.name,
                    "size_bytes": self.size_bytes,
                    "sha256": self.sha256,
                }
            ],
            "known": known["known"],
            **({"generated": True} if known.get("generated") else {}),
            "label": known["label"],
        }

    def summary(self) -> dict[str, Any]:
        c = self._counts
        return {
            "unit": self.unit,
            "conversations": c.conversations,
            "conversations_without_scored_questions": c.conversations_without_scored_questions,
            "sessions": c.sessions,
            "empty_sessions": c.empty_sessions,
            "session_dates_without_sessions": c.session_dates_without_sessions,
            "turns": c.turns,
            "turns_with_images": c.turns_with_images,
            "memories": c.memories,
            "merged_duplicate_texts": c.merged_duplicate_texts,
            "questions": dict(c.questions),
            "questions_total": sum(c.questions.values()),
            "scored": dict(c.scored),
            "scored_total": sum(c.scored.values()),
            "dropped": dict(c.dropped),
            "evidence_entries": c.evidence_entries,
            "multi_id_evidence_entries": c.multi_id_evidence_entries,
            "unparseable_evidence_entries": c.unparseable_evidence_entries,
            "unresolved_evidence_ids": c.unresolved_evidence_ids,
            "questions_without_evidence_key": c.questions_without_evidence_key,
        }


def open_source(paths: Mapping[str, Path], options: Mapping[str, Any]) -> LoCoMoSource:
    """Open a LoCoMo file: ``paths = {"data": PATH}``, ``options`` may hold ``unit`` and
    ``categories`` ("1-4" or "all")."""
    roles = set(paths) - {"data"}
    if roles:
        raise RecallbenchError(f"LoCoMo has no file role {sorted(roles)[0]!r} (only 'data')")
    if paths.get("data") is None:
        raise RecallbenchError("--dataset locomo needs --data FILE (your copy of locomo10.json)")
    known = ("unit", "categories")
    unknown = sorted(k for k, v in options.items() if k not in known and v is not None)
    if unknown:
        raise RecallbenchError(f"LoCoMo has no option {unknown[0]!r} (only 'unit', 'categories')")
    unit = options.get("unit")
    if unit is None:
        unit = DEFAULT_UNIT
    return LoCoMoSource(Path(paths["data"]), unit, options.get("categories") or CATEGORIES_DEFAULT)
