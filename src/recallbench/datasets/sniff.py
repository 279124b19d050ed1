"""A file of another dataset, recognised: one line saying which `--dataset` reads it.

A LoCoMo file given as `--dataset longmemeval` (or the reverse) would otherwise stop at
its first record with "field 'question_id' is missing", which says nothing of the cause.
Each reader asks `refuse_other` about its first record, and the LongMemEval reader asks
`locomo_layout` about a path that is not a JSON array (a directory, a zip, one object).
Only the message changes: such a file is refused either way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError

#: keys only one dataset's records have (any one of them is enough)
_HALLMARKS: dict[str, frozenset[str]] = {
    "locomo": frozenset({"sample_id", "conversation", "speaker_a", "session_1"}),
    "longmemeval": frozenset({"question_id", "haystack_sessions", "haystack_session_ids"}),
}
_TITLES = {"locomo": "LoCoMo", "longmemeval": "LongMemEval"}
#: a per-conversation LoCoMo object's keys, near its start
_CONVERSATION_KEY = re.compile(rb'"(?:speaker_a|speaker_b|session_1|session_1_date_time)"\s*:')


def other_dataset(raw: Any, reading: str) -> str | None:
    """The dataset a record (a parsed JSON object) looks like, when not `reading`'s."""
    if not isinstance(raw, dict):
        return None
    for name, keys in _HALLMARKS.items():
        if name != reading and keys & set(raw) and not _HALLMARKS[reading] & set(raw):
            return name
    return None


def wrong_dataset(path: Path, name: str) -> RecallbenchError:
    """`PATH: this looks like a LoCoMo file: use --dataset locomo`."""
    return RecallbenchError(f"{path}: this looks like a {_TITLES[name]} file: use --dataset {name}")


def refuse_other(path: Path, raw: Any, reading: str) -> None:
    """Raise `wrong_dataset` when `raw` (a record of `path`) is another dataset's."""
    other = other_dataset(raw, reading)
    if other is not None:
        raise wrong_dataset(path, other)


def locomo_layout(path: Path) -> bool:
    """Whether `path` looks like LoCoMo's per-conversation layout: a directory of
    ``<n>.json`` files, a zip with ``locomo10_v2/<n>.json`` members, or one JSON object
    with a conversation's keys near its start."""
    import zipfile

    from recallbench.datasets.locomo.layout import (
        CONVERSATION,
        DIRECTORY,
        MEMBER_NAME,
        ZIP,
        ZIP_MEMBER,
        layout_of,
    )

    try:
        layout = layout_of(path)
        if layout == DIRECTORY:
            return any(MEMBER_NAME.fullmatch(p.name) for p in Path(path).iterdir())
        if layout == ZIP:
            with zipfile.ZipFile(path) as archive:
                return any(ZIP_MEMBER.search(name) for name in archive.namelist())
        if layout == CONVERSATION:
            with open(path, "rb") as handle:
                return bool(_CONVERSATION_KEY.search(handle.read(1 << 16)))
    except (OSError, ValueError, RuntimeError, zipfile.BadZipFile):
        return False
    return False
