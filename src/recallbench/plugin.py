"""The plugin surface: the one module a third-party system imports from.

A plugin (a package registering a factory under the entry-point group
``recallbench.systems``, see docs/own-store.md) imports what it implements and uses from
here, never from recallbench's internal modules:

* the seam (`recallbench.systems.base`): the records and hits it exchanges (`StoreRecord`,
  `Hit`, and `Turn`, a structured record's turn), what a store declares it keeps of a text
  (`InputLimit`), what a clone path returns and raises (`PackageInfo`, `Corruption`,
  `SnapshotRejected`), `MissingVector`, `VectorLookup`, the protocols it implements
  (`System`, `Store`, `LexicalStore`, `ClonePath`, `Embedder`) and `TimedCalls`;
* the packaging helpers (`recallbench.systems.packaging`): `records_digest`,
  manifest-checked packages, the generic corruptions, JSON-lines records and `RecordsClone`;
* `RecallbenchError` (a one-line user error) and `get_system` (to borrow a built-in's
  embedder, as the LanceDB example does).

`PLUGIN_API` is this surface's version, recorded in every results envelope
(``provenance.plugin_api``). Policy: a name in `__all__` is never moved or renamed without
the old name working for at least one release, with a DeprecationWarning; its major number
changes only when a name is removed or its contract changes incompatibly, its minor number
when something is added that a plugin may opt into (docs/own-store.md keeps the changelog).
"""

from __future__ import annotations

from recallbench.core.errors import RecallbenchError
from recallbench.systems import get_system
from recallbench.systems.base import (
    ClonePath,
    Corruption,
    Embedder,
    Hit,
    InputLimit,
    LexicalStore,
    MissingVector,
    PackageInfo,
    SnapshotRejected,
    Store,
    StoreRecord,
    System,
    TimedCalls,
    Turn,
    VectorLookup,
)
from recallbench.systems.packaging import (
    MANIFEST,
    RECORDS_FILE,
    RecordsClone,
    check_manifest,
    check_new_ids,
    check_record_count,
    copy_package,
    edit_text,
    jsonl_bytes,
    jsonl_records,
    package_size,
    payload_files,
    raw_byte_corruption,
    record_json,
    records_digest,
    stale_jsonl_corruption,
    write_manifest,
)

#: the plugin surface's version, "major.minor" (see the module docstring for what changes
#: it; docs/own-store.md's changelog says what each step added)
PLUGIN_API = "1.1"

__all__ = [
    "MANIFEST",
    "PLUGIN_API",
    "RECORDS_FILE",
    "ClonePath",
    "Corruption",
    "Embedder",
    "Hit",
    "InputLimit",
    "LexicalStore",
    "MissingVector",
    "PackageInfo",
    "RecallbenchError",
    "RecordsClone",
    "SnapshotRejected",
    "Store",
    "StoreRecord",
    "System",
    "TimedCalls",
    "Turn",
    "VectorLookup",
    "check_manifest",
    "check_new_ids",
    "check_record_count",
    "copy_package",
    "edit_text",
    "get_system",
    "jsonl_bytes",
    "jsonl_records",
    "package_size",
    "payload_files",
    "raw_byte_corruption",
    "record_json",
    "records_digest",
    "stale_jsonl_corruption",
    "write_manifest",
]
