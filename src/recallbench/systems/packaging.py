"""The packaging helpers the built-in systems share, which a plugin may use too: the content digest every
built-in store uses (`records_digest`), manifest-checked file packages (`write_manifest`,
`check_manifest`, `copy_package`), the generic corruptions (`raw_byte_corruption`,
`stale_jsonl_corruption`), JSON-lines records and `RecordsClone`, a clone path over a
`records.jsonl` package. The seam itself (what a system implements) is
`recallbench.systems.base`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes, file_sha256
from recallbench.core.errors import RecallbenchError
from recallbench.core.model import Turn
from recallbench.systems.base import Corruption, PackageInfo, SnapshotRejected, StoreRecord

MANIFEST = "manifest.json"


def records_digest(pairs: Iterable[tuple[str, str]]) -> str:
    """sha256 hex over (memory id, text) pairs, sorted: the same records give the same
    digest in any order (and in every built-in system)."""
    h = hashlib.sha256()
    for memory_id, text in sorted(pairs):
        h.update(orjson.dumps([memory_id, text]))
        h.update(b"\n")
    return h.hexdigest()


def package_size(package_dir: Path) -> int:
    """Bytes in every file of a package, subdirectories included."""
    return sum(p.stat().st_size for p in Path(package_dir).rglob("*") if p.is_file())


def write_manifest(
    package_dir: Path, package_format: str, record_count: int, files: Sequence[str], **extra: Any
) -> dict[str, Any]:
    """Write `manifest.json`: format, record count, each file's size and sha256, `extra`."""
    package_dir = Path(package_dir)
    manifest = {
        "format": package_format,
        "record_count": record_count,
        "files": {
            name: {
                "size": (package_dir / name).stat().st_size,
                "sha256": file_sha256(package_dir / name),
            }
            for name in files
        },
        **extra,
    }
    atomic_write_bytes(package_dir / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS))
    return manifest


def check_manifest(package_dir: Path, package_format: str) -> dict[str, Any]:
    """Read a `write_manifest` manifest and check every file it lists against it.

    Reasons: `unreadable`, `format`, `missing_file`, `checksum_mismatch` (size or sha256).
    The caller checks the record count (`check_record_count`) and its own fields.
    """
    package_dir = Path(package_dir)
    try:
        manifest = orjson.loads((package_dir / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SnapshotRejected("unreadable", f"manifest unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != package_format:
        raise SnapshotRejected("format", f"{package_dir}: not a {package_format} package")
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise SnapshotRejected("format", f"{package_dir}: the manifest lists no files")
    for name, entry in sorted(files.items()):
        path = package_dir / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise SnapshotRejected("missing_file", f"{path}: missing from the package")
        if path.stat().st_size != entry.get("size") or file_sha256(path) != entry.get("sha256"):
            raise SnapshotRejected(
                "checksum_mismatch", f"{name} does not match its sha256 in the manifest"
            )
    return manifest


def check_record_count(package_dir: Path, manifest: Mapping[str, Any], records_file: str) -> int:
    """The records (lines) of a package's JSONL file; `record_count_mismatch` unless it is
    the count the manifest records."""
    count = (Path(package_dir) / records_file).read_bytes().count(b"\n")
    expected = manifest.get("record_count")
    if count != expected:
        raise SnapshotRejected(
            "record_count_mismatch", f"{count} records, manifest says {expected}"
        )
    return count


def copy_package(package_dir: Path, work_dir: Path, name: str) -> Path:
    """A private copy of a package at `work_dir/name` (which must not exist)."""
    dest = Path(work_dir) / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(package_dir, dest)
    return dest


def payload_files(package_dir: Path) -> list[Path]:
    """Every file of a package except manifests, subdirectories included, by relative path."""
    root = Path(package_dir)
    return sorted(
        (p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST),
        key=lambda p: p.relative_to(root).as_posix(),
    )


def raw_byte_corruption(package_dir: Path, work_dir: Path) -> Corruption:
    """`raw_byte`: one byte flipped in the middle of the package's largest payload file
    (walking subdirectories; ties by path)."""
    dest = copy_package(package_dir, work_dir, "raw_byte")
    files = payload_files(dest)
    if not files:
        raise RecallbenchError(f"{package_dir}: the package holds no payload file")
    target = max(files, key=lambda p: p.stat().st_size)  # max keeps the first of equals
    data = bytearray(target.read_bytes())
    if not data:
        raise RecallbenchError(f"{target}: empty payload file, nothing to flip")
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    rel = target.relative_to(dest).as_posix()
    return Corruption("raw_byte", f"byte {len(data) // 2} of {rel} flipped", dest)


def edit_text(text: str) -> str:
    """The consistent content change the stale-manifest corruptions make."""
    return text + " (edited)"


def stale_jsonl_corruption(
    package_dir: Path, work_dir: Path, relpath: str, field: str
) -> Corruption:
    """`stale_manifest`: the first record's `field` in the JSONL file `relpath` edited and
    the file rewritten validly; the manifest left as it was."""
    dest = copy_package(package_dir, work_dir, "stale_manifest")
    path = dest / relpath
    lines = path.read_bytes().splitlines(keepends=True)
    if not lines:
        raise RecallbenchError(f"{path}: no record to edit")
    record = orjson.loads(lines[0])
    record[field] = edit_text(record[field])
    lines[0] = orjson.dumps(record) + b"\n"
    path.write_bytes(b"".join(lines))
    return Corruption(
        "stale_manifest",
        f"{relpath}: the first record's {field} edited, the manifest kept",
        dest,
    )


def jsonl_records(path: Path) -> list[StoreRecord]:
    """Records from a JSONL file written by `record_json`."""
    with open(path, "rb") as handle:
        return [_record_from_json(orjson.loads(line)) for line in handle if line.strip()]


def _record_from_json(raw: Mapping[str, Any]) -> StoreRecord:
    """A record from the object `record_json` wrote (the harness reads check data so too)."""
    return StoreRecord(
        raw["memory_id"],
        raw["identifier"],
        raw["text"],
        raw["importance"],
        tuple(raw["tags"]),
        tuple(Turn.from_dict(t) for t in raw.get("turns", ())),
        raw.get("session_date"),
    )


def record_json(r: StoreRecord) -> Mapping[str, Any]:
    """A record as one JSON object; its structure (turns, session date) only when it has
    some, so a package of plain records keeps its bytes."""
    out: dict[str, Any] = {
        "memory_id": r.memory_id,
        "identifier": r.identifier,
        "text": r.text,
        "importance": r.importance,
        "tags": list(r.tags),
    }
    if r.turns:
        out["turns"] = [turn.to_dict() for turn in r.turns]
    if r.session_date is not None:
        out["session_date"] = r.session_date
    return out


def jsonl_bytes(records: Iterable[StoreRecord]) -> bytes:
    return b"".join(orjson.dumps(record_json(r)) + b"\n" for r in records)


def check_new_ids(held: Iterable[str], records: Sequence[StoreRecord]) -> None:
    """Refuse a batch that repeats an id (within itself or against the store)."""
    seen = set(held)
    for r in records:
        if r.memory_id in seen:
            raise SnapshotRejected("ingest_dropped", f"duplicate memory id {r.memory_id!r}")
        seen.add(r.memory_id)


#: the records file of stores kept as JSONL (`RecordsClone`)
RECORDS_FILE = "records.jsonl"


class RecordsClone:
    """The clone path of a store kept as `records.jsonl` and rebuilt from it (`bm25`,
    `bm25-okapi`): the package is that file plus a manifest (size, sha256, record count)
    of format `package_format`; restore ingests the records into a fresh store."""

    def __init__(self, system: Any, package_format: str) -> None:
        self._system = system
        self.package_format = package_format

    def snapshot(self, store: Any, package_dir: Path) -> PackageInfo:
        package_dir = Path(package_dir)
        package_dir.mkdir(parents=True, exist_ok=False)
        shutil.copyfile(store.directory / RECORDS_FILE, package_dir / RECORDS_FILE)
        write_manifest(package_dir, self.package_format, store.count(), [RECORDS_FILE])
        return PackageInfo(records=store.count(), size_bytes=package_size(package_dir))

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        manifest = check_manifest(package_dir, self.package_format)
        return check_record_count(package_dir, manifest, RECORDS_FILE)

    def restore(self, package_dir: Path, directory: Path) -> Any:
        self.verify(package_dir, directory)
        store = self._system.open_store(directory)
        store.ingest(jsonl_records(Path(package_dir) / RECORDS_FILE))
        return store

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        return [
            raw_byte_corruption(package_dir, work_dir),
            stale_jsonl_corruption(package_dir, work_dir, RECORDS_FILE, "text"),
        ]
