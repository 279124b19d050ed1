"""LoCoMo as downloaded: the array file, or the per-conversation layout, read as one dataset.

* **array**: ``locomo10.json``, one JSON array of samples (``sample_id``, ``conversation``,
  ``qa``, annotations), streamed by `jsonstream.JsonArrayFile` (the reader's own path).
* **per conversation**: what the LoCoMo repository's zip holds under
  ``data/multimodal_dialog/locomo10_v2/``: ten files ``<n>.json``, each one JSON object with
  ``speaker_a``, ``speaker_b``, ``session_<i>`` (the turns), ``session_<i>_date_time``,
  ``events_session_<i>``, ``session_<i>_observation``, ``session_<i>_summary`` and ``qa``;
  no ``sample_id`` and no ``conversation`` wrapper. The file's number names the
  conversation: ``26.json`` is the array file's ``conv-26``. It is read given as the
  directory of those files, as the zip itself (its ``.../locomo10_v2/<n>.json`` members), or
  as one such file (a one-conversation dataset).

`Conversations` (its `records`) yields each conversation of a per-conversation layout (the
layout told by `layout_of`), in the order of its number (the array file's order), shaped as
a sample of the array file (``sample_id`` ``conv-<n>``, the object's other keys under
``conversation``, its ``qa``), so one checker reads both. One member is parsed at a time
(`jsonstream.read_object`: the same checks as the array's stream); a malformed member stops
the stream with one line naming the file or member, e.g. ``locomo10_v2.zip:
data/multimodal_dialog/locomo10_v2/26.json: invalid JSON: ...``.

Identity: the zip's (or the one file's) sha256; a directory's is the sha256 of its members'
listing, one line ``<name> <sha256>`` per member in conversation order (`directory_digest`),
so renaming, editing, adding or removing a member changes it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from recallbench.core.errors import RecallbenchError

ARRAY = "array"
DIRECTORY = "directory"
ZIP = "zip"
CONVERSATION = "conversation"
#: a zip member of the per-conversation layout, wherever its locomo10_v2/ directory lies
ZIP_MEMBER = re.compile(r"(?:^|/)locomo10_v2/([0-9]+)\.json$")
#: a file of the per-conversation layout: the conversation's number
MEMBER_NAME = re.compile(r"([0-9]+)\.json")
#: the zip formats' signatures (a local file header; an empty archive's end record)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
#: the one key of a per-conversation object that is not the conversation's
QA_KEY = "qa"


def sample_id(number: int) -> str:
    """The array file's name of conversation `number` (``conv-26``)."""
    return f"conv-{number}"


def layout_of(path: Path) -> str:
    """`DIRECTORY`, `ZIP`, `CONVERSATION` (one object: a file starting with ``{``) or
    `ARRAY` (anything else, which the array reader checks; a path that is no regular file
    is never opened here, so a FIFO cannot block)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return ARRAY  # the array reader names the problem
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if not stat.S_ISREG(mode):
        return ARRAY
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return ARRAY  # the array reader names the problem
    if head[:4] in _ZIP_MAGIC:
        return ZIP
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    return CONVERSATION if first == b"{" else ARRAY


@dataclass(frozen=True)
class Member:
    """One conversation file: its number, its name (a zip member's path), how to open it,
    and its size on disk (a zip member's compressed size)."""

    number: int
    name: str
    open: Callable[[], BinaryIO]
    size: int


class Conversations:
    """A per-conversation layout on disk (a directory, a zip or one file): its members in
    conversation order, read one at a time (`records`); `sha256` once read."""

    def __init__(self, path: Path, layout: str, limit: int) -> None:
        self.path = Path(path)
        self.layout = layout
        self.limit = limit
        self.sha256: str | None = None
        self._archive: Any = None
        self.members = self._members()
        #: the bytes on disk, for a byte progress bar: the zip's, or the members' in all
        self.size = self.path.stat().st_size if layout == ZIP else sum(m.size for m in self.members)

    # -- the members ---------------------------------------------------------------------
    def _members(self) -> list[Member]:
        if self.layout == DIRECTORY:
            found = self._directory_members()
        elif self.layout == ZIP:
            found = self._zip_members()
        else:
            found = [self._one_file()]
        by_number: dict[int, Member] = {}
        for member in found:
            if member.number in by_number:
                raise RecallbenchError(
                    f"{self.path}: {by_number[member.number].name} and {member.name} both "
                    f"hold conversation {member.number}"
                )
            by_number[member.number] = member
        return [by_number[n] for n in sorted(by_number)]

    def _directory_members(self) -> list[Member]:
        from recallbench.core.inputfiles import check_regular_file

        try:
            names = sorted(os.listdir(self.path))
        except OSError as exc:
            raise RecallbenchError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        out = []
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue  # .DS_Store, a README: not the layout's
            match = MEMBER_NAME.fullmatch(name)
            if match is None:
                raise RecallbenchError(
                    f"{self.path / name}: not a conversation file of LoCoMo's per-conversation "
                    "layout (named <n>.json, n the conversation's number)"
                )
            file = self.path / name
            size = check_regular_file(file, "LoCoMo conversation file", self.limit)
            out.append(Member(int(match[1]), name, _opener(file), size))
        if not out:
            raise RecallbenchError(
                f"{self.path}: a directory without <n>.json files; give LoCoMo's "
                "per-conversation directory (locomo10_v2/), its zip, or locomo10.json"
            )
        return out

    def _zip_members(self) -> list[Member]:
        from recallbench.core.inputfiles import LIMIT_ENV, check_regular_file, human_bytes

        check_regular_file(self.path, "LoCoMo zip", self.limit)
        out = []
        for info in self._open_archive().infolist():
            match = ZIP_MEMBER.search(info.filename)
            if info.is_dir() or match is None:
                continue
            if info.file_size > self.limit:
                raise RecallbenchError(
                    f"{self.path}: {info.filename} is {human_bytes(info.file_size)} unpacked, "
                    f"above the limit of {human_bytes(self.limit)}; to allow it set {LIMIT_ENV}"
                )
            out.append(
                Member(int(match[1]), info.filename, self._member_opener(info), info.compress_size)
            )
        self.close()
        if not out:
            raise RecallbenchError(
                f"{self.path}: no locomo10_v2/<n>.json member (LoCoMo's per-conversation "
                "layout); give locomo10.json or the locomo10_v2/ directory instead"
            )
        return out

    def _open_archive(self) -> Any:
        import zipfile

        if self._archive is None:
            try:
                self._archive = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError) as exc:
                raise RecallbenchError(f"{self.path}: not a readable zip file ({exc})") from None
        return self._archive

    def _member_opener(self, info: Any) -> Callable[[], BinaryIO]:
        def open_member() -> BinaryIO:
            try:
                return self._open_archive().open(info)
            except (RuntimeError, NotImplementedError) as exc:  # encrypted, unknown method
                raise RecallbenchError(f"{self.path}: {info.filename}: {exc}") from None

        return open_member

    def close(self) -> None:
        """Close the zip (opened again when read)."""
        if self._archive is not None:
            self._archive.close()
            self._archive = None

    def _one_file(self) -> Member:
        from recallbench.core.inputfiles import check_regular_file

        match = MEMBER_NAME.fullmatch(self.path.name)
        if match is None:
            raise RecallbenchError(
                f"{self.path}: one JSON object, as in LoCoMo's per-conversation layout, but "
                "not named <n>.json (n, the conversation's number, names it); give its "
                "directory, the zip, or locomo10.json (a JSON array of samples)"
            )
        size = check_regular_file(self.path, "LoCoMo file", self.limit)
        return Member(int(match[1]), self.path.name, _opener(self.path), size)

    def label(self, member: Member) -> str:
        """How messages name a member: the zip and the member, the directory's file, or
        the one file."""
        if self.layout == ZIP:
            return f"{self.path}: {member.name}"
        return str(self.path / member.name if self.layout == DIRECTORY else self.path)

    # -- reading -------------------------------------------------------------------------
    def records(
        self, progress: Callable[[int], Any] | None = None
    ) -> Iterator[tuple[int, dict[str, Any], str]]:
        """(index, the conversation as an array file's sample, the member's label) for each
        member in conversation order; sets `sha256` when exhausted."""
        import zipfile
        import zlib

        from recallbench.datasets.jsonstream import read_object

        digests = []
        try:
            for index, member in enumerate(self.members):
                label = self.label(member)
                # a zip's progress counts its packed bytes, one member at a time
                each = None if self.layout == ZIP else progress
                try:
                    raw, digest, _ = read_object(member.open, label, "a conversation", each)
                except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                    raise RecallbenchError(f"{label}: a damaged zip member ({exc})") from None
                if progress is not None and self.layout == ZIP:
                    progress(member.size)
                digests.append((member.name, digest))
                yield index, as_sample(raw, member.number), label
        finally:
            self.close()
        if progress is not None and self.layout == ZIP:  # the headers, other members
            progress(self.size - sum(m.size for m in self.members))
        if self.layout == DIRECTORY:
            self.sha256 = directory_digest(digests)
        elif self.layout == CONVERSATION:
            self.sha256 = digests[0][1]
        else:
            from recallbench.builddir.artifacts import file_sha256

            self.sha256 = file_sha256(self.path)

    def digest(self) -> str:
        """The identity's sha256 without parsing (`records` sets it on the way)."""
        from recallbench.builddir.artifacts import file_sha256

        if self.layout != DIRECTORY:
            return file_sha256(self.path)
        return directory_digest((m.name, file_sha256(self.path / m.name)) for m in self.members)


def directory_digest(members: Any) -> str:
    """sha256 of ``<name> <sha256>\\n`` per member (name, member sha256) in the given order:
    a per-conversation directory's identity."""
    listing = hashlib.sha256()
    for name, digest in members:
        listing.update(f"{name} {digest}\n".encode())
    return listing.hexdigest()


def as_sample(raw: dict[str, Any], number: int) -> dict[str, Any]:
    """A per-conversation object as the array file's sample: ``sample_id`` ``conv-<n>``,
    every key but ``qa`` under ``conversation``, and ``qa`` (left out when missing, so the
    checker names it)."""
    sample: dict[str, Any] = {
        "sample_id": sample_id(number),
        "conversation": {k: v for k, v in raw.items() if k != QA_KEY},
    }
    if QA_KEY in raw:
        sample[QA_KEY] = raw[QA_KEY]
    return sample


def _opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: open(path, "rb")
