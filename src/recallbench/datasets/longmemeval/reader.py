"""Stream a LongMemEval file one instance at a time, check every record, name the release.

The files are one JSON array of question objects; the M file is ~2.7 GB, so nothing here
loads a whole file: `DataFile.instances()` parses with ijson (its C backend when present)
and yields one checked `Instance` at a time, while a hashing reader computes the file's
sha256 on the same pass (and feeds an optional byte progress bar). After the stream is
exhausted `DataFile.sha256` holds the digest, and `identify()` names the release.

A malformed record stops the stream with a one-line `RecallbenchError` naming the file,
the record's index in the array (0-based, ``record[17]``), its question id when readable
and the field path, e.g.::

    data.json: record[17] (question_id 'e47becba'): field 'haystack_sessions' must be a list
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.datasets.jsonstream import JsonArrayFile, generated_sidecar, record_error
from recallbench.datasets.longmemeval.records import Instance, check_record

#: sha256 -> what the file is. Only files whose digests are published in the project's
#: reference notes are listed; any other file is "unknown" and gets a warning.
KNOWN_RELEASES: dict[str, dict[str, Any]] = {
    "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c": {
        "file": "longmemeval_oracle.json",
        "release": "cleaned",
        "shape": "oracle",
        "size_bytes": 15_388_478,
    },
    "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442": {
        "file": "longmemeval_s_cleaned.json",
        "release": "cleaned",
        "shape": "s",
        "size_bytes": 277_383_467,
    },
}


class DataFile:
    """A LongMemEval file on disk, read as a stream."""

    def __init__(self, path: Path) -> None:
        from recallbench.core.inputfiles import check_regular_file, input_limit
        from recallbench.datasets.sniff import locomo_layout, wrong_dataset

        self.path = Path(path)
        if locomo_layout(self.path):  # a LoCoMo directory, zip or conversation: say so
            raise wrong_dataset(self.path, "locomo")
        self.size = check_regular_file(self.path, "LongMemEval file", input_limit("data"))
        self.sha256: str | None = None
        self.records = 0
        self._array = JsonArrayFile(self.path, what="question objects", id_field="question_id")

    def instances(self, progress: Callable[[int], Any] | None = None) -> Iterator[Instance]:
        """Yield every record, checked, in file order; set `sha256` when exhausted.

        `progress` is called with the number of bytes read, chunk by chunk.
        """
        from recallbench.datasets.sniff import refuse_other

        for index, raw in self._array.stream(progress):
            if index == 0:
                refuse_other(self.path, raw, NAME)  # a LoCoMo file: say so
            yield check_record(raw, index, self.path)
        self.records = self._array.records
        self.sha256 = self._array.sha256


def identify(path: Path, sha256: str) -> dict[str, Any]:
    """What the file is: a known release, synthetic data from our generator, or unknown.

    {"known": bool, "label": "...", "release": ... } - `label` is the human sentence.
    """
    release = KNOWN_RELEASES.get(sha256)
    if release is not None:
        return {
            "kind": "release",
            "known": True,
            **release,
            "label": f"{release['file']} ({release['release']} release, sha256 matches)",
        }
    meta = generated_sidecar(path, sha256)
    if meta is not None:
        params = meta.get("parameters", {})
        return {
            "kind": "synthetic",
            "known": True,
            "generator": meta.get("generator"),
            "parameters": params,
            "label": (
                "synthetic data from the recallbench generator "
                f"(shape {params.get('shape')}, {params.get('questions')} questions, "
                f"seed {params.get('seed')}) - not LongMemEval"
            ),
        }
    return {
        "kind": "unknown",
        "known": False,
        "label": "unknown file (sha256 matches no known LongMemEval release)",
    }


def describe_file(path: Path, sha256: str, size: int) -> dict[str, Any]:
    """The data file as artifacts record it: name (never the full path), size, sha256."""
    return {"name": Path(path).name, "size_bytes": size, "sha256": sha256}


# -- the dataset source ------------------------------------------------------------------

NAME = "longmemeval"
#: The dataset's six question types, in its own order (report order; unknown types follow).
QUESTION_TYPES: tuple[str, ...] = (
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
)
DROP_RULES = {
    "abstention": "'_abs' in question_id: abstention questions have no evidence location",
    "no_gold": "no gold session left in the haystack (answer_session_ids, or has_answer turns "
    "when a record has none)",
}
NOTES = (
    "Session text: user turns joined by spaces (as LongMemEval's run_retrieval.py indexes "
    "sessions) with --session-text user; every turn as 'role: content' with all.",
    "recall@k is fractional (|gold in top-k| / |gold|, the scope document's figure); "
    "recall_any@k and recall_all@k and ndcg_any@k are LongMemEval's official measures.",
    "Gold = answer_session_ids present in the haystack; when a record has none, the sessions "
    "holding a has_answer turn. Turn-level gold = indexed turns marked has_answer.",
)


OFFICIAL_NOTES = (
    "Gold by LongMemEval's official rule (--gold official, run_retrieval.py): sessions whose "
    "id contains 'answer' and that have a user turn marked has_answer; turn gold = such user "
    "turns. A question left without gold is still scored, vacuously: recall_any 0, "
    "recall_all 1, ndcg_any 0 (the summary counts these questions); these zeros and ones are "
    "the official rule's, not measurements.",
    "The answer_ids_ measures score the same ranking with the default rule's gold: "
    "answer_session_ids present in the haystack; when a record has none, the sessions holding "
    "a has_answer turn.",
)


ABSTENTION_KEPT_NOTE = (
    "Abstention questions ('_abs') are kept (--abstention keep): scored with their "
    "answer_session_ids, the sessions the question was written against, although the event "
    "it asks about never happened; LongMemEval's own retrieval evaluation leaves them out."
)


def _levels(unit: str, gold: str = "answer_session_ids") -> tuple:
    from recallbench.core.model import Level
    from recallbench.datasets.longmemeval.pairs import DEFAULT_RULE_LEVEL, GOLD_OFFICIAL

    official = gold == GOLD_OFFICIAL
    session = Level(
        "session",
        "",
        "a haystack session (official gold)" if official else "a haystack session",
    )
    levels = [session]
    if unit == "turn":
        levels.append(Level("turn", "turn_", "a haystack turn (session id + '_' + position)"))
    if official:
        levels.append(
            Level(
                DEFAULT_RULE_LEVEL,
                f"{DEFAULT_RULE_LEVEL}_",
                "a haystack session, gold = answer_session_ids (the default rule), same ranking",
            )
        )
    return tuple(levels)


class LongMemEvalSource:
    """A LongMemEval file as a dataset source: one scope per scored question."""

    name = NAME
    drop_rules = DROP_RULES
    notes = NOTES

    def __init__(
        self,
        path: Path,
        session_text: str,
        unit: str,
        gold: str = "answer_session_ids",
        abstention: str = "drop",
    ) -> None:
        from recallbench.datasets.base import UNITS
        from recallbench.datasets.longmemeval.pairs import (
            ABSTENTION_DROP,
            ABSTENTION_RULES,
            GOLD_DEFAULT,
            GOLD_OFFICIAL,
            GOLD_RULES,
            SESSION_TEXT_MODES,
        )

        if session_text not in SESSION_TEXT_MODES:
            raise RecallbenchError(
                f"--session-text must be one of {', '.join(SESSION_TEXT_MODES)}, not {session_text!r}"
            )
        if unit not in UNITS:
            raise RecallbenchError(f"--unit must be one of {', '.join(UNITS)}, not {unit!r}")
        if gold not in GOLD_RULES:
            raise RecallbenchError(f"--gold must be one of {', '.join(GOLD_RULES)}, not {gold!r}")
        if abstention not in ABSTENTION_RULES:
            raise RecallbenchError(
                f"--abstention must be one of {', '.join(ABSTENTION_RULES)}, not {abstention!r}"
            )
        self.file = DataFile(path)
        # the default rule is not recorded, so default runs keep their artifacts unchanged
        self.options = {"session_text": session_text, "unit": unit}
        if gold != GOLD_DEFAULT:
            self.options["gold"] = gold
        if abstention != ABSTENTION_DROP:
            self.options["abstention"] = abstention
        self.gold = gold
        self.abstention = abstention
        self.levels = _levels(unit, gold)
        if gold == GOLD_OFFICIAL:  # the default rule's gold note is replaced
            self.notes = NOTES[:2] + OFFICIAL_NOTES
        if abstention != ABSTENTION_DROP:
            self.notes = (*self.notes, ABSTENTION_KEPT_NOTE)
        self._types: list[str] = []
        self._summary: dict[str, Any] = {}

    @property
    def size_bytes(self) -> int:
        return self.file.size

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted(set(QUESTION_TYPES) | set(self._types), key=type_sort_key))

    @property
    def category_labels(self) -> dict[str, str]:
        return {t: t for t in self.categories}

    def stream(self, progress: Callable[[int], Any] | None = None) -> Iterator[Any]:
        from collections import Counter

        from recallbench.core.model import Drop
        from recallbench.datasets.longmemeval.pairs import (
            GOLD_FROM_SESSIONS,
            GOLD_FROM_TURNS,
            GOLD_OFFICIAL,
            is_abstention,
            make_scope,
        )

        gold_sources: Counter[str] = Counter()
        gold_sizes: Counter[int] = Counter()
        stats: Counter[str] = Counter()
        sessions: list[int] = []
        types: set[str] = set()
        first_seen: dict[str, int] = {}
        for inst in self.file.instances(progress=progress):
            if inst.question_id in first_seen:
                raise record_error(
                    self.file.path,
                    inst.index,
                    "question_id",
                    None,
                    f"duplicate question_id {inst.question_id!r} "
                    f"(first at record[{first_seen[inst.question_id]}])",
                )
            first_seen[inst.question_id] = inst.index
            types.add(inst.question_type)
            sessions.append(len(inst.session_ids))
            made = make_scope(
                inst, self.options["session_text"], self.options["unit"], self.gold, self.abstention
            )
            if isinstance(made, Drop):
                yield made
                continue
            scope, gold = made
            gold_sources[gold.source] += 1
            if self.abstention != "drop":
                stats["abstention_questions_scored"] += is_abstention(inst.question_id)
            if self.gold == GOLD_OFFICIAL:
                relevance = scope.queries[0].relevance
                gold_sizes[len(relevance["session"])] += 1
                stats["questions_with_vacuous_gold"] += not relevance["session"]
                if "turn" in relevance:
                    stats["questions_with_vacuous_turn_gold"] += not relevance["turn"]
                stats["questions_without_default_rule_gold"] += not gold.gold
                # identical texts are stored once: the official code indexes every copy,
                # so a BM25's corpus statistics (and ties) can differ for these questions
                unit_level = "turn" if "turn" in relevance else "session"
                units = sum(len(m.units[unit_level]) for m in scope.memories)
                stats["questions_with_identical_texts_stored_once"] += units > len(scope.memories)
            else:
                gold_sizes[len(gold.gold)] += 1
            stats["answer_ids_not_in_haystack"] += len(gold.missing)
            stats["questions_with_answer_ids_not_in_haystack"] += bool(gold.missing)
            stats["duplicate_session_ids_ignored"] += gold.duplicate_ids
            stats["questions_with_duplicate_session_ids"] += bool(gold.duplicate_ids)
            stats["questions_without_user_side_evidence"] += gold.user_side_evidence is False
            stats["questions_without_has_answer_labels"] += gold.user_side_evidence is None
            yield scope
        self._types = sorted(types)
        ordered = sorted(sessions)
        self._summary = {
            "records": self.file.records,
            **({"gold_rule": GOLD_OFFICIAL} if self.gold == GOLD_OFFICIAL else {}),
            "gold_from_answer_session_ids": gold_sources[GOLD_FROM_SESSIONS],
            "gold_from_has_answer_turns": gold_sources[GOLD_FROM_TURNS],
            "gold_sessions_per_question": {str(k): v for k, v in sorted(gold_sizes.items())},
            **{key: stats[key] for key in sorted(stats)},
            "haystack_sessions_total": sum(sessions),
            "haystack_sessions_min": ordered[0] if ordered else 0,
            "haystack_sessions_median": ordered[len(ordered) // 2] if ordered else 0,
            "haystack_sessions_max": ordered[-1] if ordered else 0,
        }
        if gold_sources[GOLD_FROM_TURNS]:
            self._summary["caveat"] = (
                "gold for some questions was aggregated from turn-level has_answer labels (no "
                "answer_session_ids): it is only as complete as those labels"
            )

    def identity(self) -> dict[str, Any]:
        assert self.file.sha256 is not None, "stream() first"
        meta = identify(self.file.path, self.file.sha256)
        return {
            "dataset": NAME,
            "files": [
                describe_file(self.file.path, self.file.sha256, self.file.size) | {"role": "data"}
            ],
            "known": meta["known"],
            "label": meta["label"],
            "release": meta,
        }

    def summary(self) -> dict[str, Any]:
        return dict(self._summary)


def type_sort_key(question_type: str) -> tuple[int, str]:
    """Known types in the dataset's order, then any other type alphabetically."""
    if question_type in QUESTION_TYPES:
        return (QUESTION_TYPES.index(question_type), "")
    return (len(QUESTION_TYPES), question_type)


def open_source(paths: dict[str, Path], options: dict[str, Any]) -> LongMemEvalSource:
    """paths: {"data": FILE}; options: session_text ("user"), unit ("session"), gold
    ("answer_session_ids", or "official"), abstention ("drop", or "keep")."""
    if "data" not in paths:
        raise RecallbenchError("--dataset longmemeval needs --data FILE")
    unknown = sorted(set(options) - {"session_text", "unit", "gold", "abstention"})
    if unknown:
        raise RecallbenchError(f"LongMemEval has no option {unknown[0]!r}")
    return LongMemEvalSource(
        Path(paths["data"]),
        options.get("session_text") or "user",
        options.get("unit") or "session",
        options.get("gold") or "answer_session_ids",
        options.get("abstention") or "drop",
    )
