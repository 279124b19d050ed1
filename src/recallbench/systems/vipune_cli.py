"""`vipune` and `vipune-semantic`: the vipune memory store (Rust, repository `randomm/vipune`)
driven through its public command line only.

The binary is found as `RECALLBENCH_VIPUNE` (a path) or `vipune` on PATH; without one both
systems are listed as unavailable with how to get it. One SQLite database per store
(`--db-path <store dir>/vipune.db`, project `-p recallbench`):

* ingest: `vipune --json --db-path DB -p recallbench add --force -m '{"memory_id": ...}'
  TEXT`, one call per memory (`--force`: vipune otherwise refuses a text whose similarity
  to a stored one is >= 0.85); vipune makes its own ids, mapped to ours in `ids.json`;
* search: `vipune --json --db-path DB -p recallbench search [--hybrid] --recency 0
  -l TOP_K QUERY` (recency 0: its default 0.3 mixes in the insertion time), vipune's order
  and score; `vipune` is its hybrid search (FTS5 + semantic, RRF k = 25), `vipune-semantic`
  its plain semantic search;
* count and digest: `vipune --json ... list --limit N`.

vipune embeds with its own model (bge-small-en-v1.5 through ONNX Runtime, fetched by vipune
on first use), so these systems have no embedder capability (no prep cache) and no clone
path. Ties in its RRF are ordered by random ids, so equal scores may come back in another
order run after run. The binary cannot be built on our machines (its crates and model are
out of reach), so its contract test runs only where the binary is present.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.artifacts import atomic_write_bytes
from recallbench.errors import RecallbenchError
from recallbench.systems.base import Hit, StoreRecord, TimedCalls
from recallbench.systems.kit import check_new_ids, records_digest
from recallbench.systems.registry import find_binary, register
from recallbench.systems.storekit import claim, existing

DB = "vipune.db"
IDS = "ids.json"
PROJECT = "recallbench"
RECENCY = "0"
TIMEOUT_S = 600


def vipune_binary() -> str:
    found = find_binary("vipune")
    if found is None:
        raise RecallbenchError(
            "vipune: no binary (set RECALLBENCH_VIPUNE to its path or put `vipune` on PATH)"
        )
    return found


class VipuneStore:
    def __init__(self, system: VipuneSystem, directory: Path) -> None:
        self._system = system
        self.directory = directory
        ids = directory / IDS
        saved = orjson.loads(ids.read_bytes()) if ids.exists() else {"ids": {}, "identifiers": {}}
        self._ids: dict[str, str] = saved["ids"]  # vipune id -> memory id
        self._identifiers: dict[str, str] = saved["identifiers"]  # memory id -> identifier

    def _run(self, *args: str) -> Any:
        command = [
            self._system.binary,
            "--json",
            "--db-path",
            str(self.directory / DB),
            "-p",
            PROJECT,
            *args,
        ]
        with self._system._inside():
            proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise RecallbenchError(
                f"vipune {args[0]}: exit {proc.returncode}: {detail[-1] if detail else ''}"
            )
        try:
            return orjson.loads(proc.stdout)
        except orjson.JSONDecodeError:
            raise RecallbenchError(f"vipune {args[0]}: not JSON: {proc.stdout[:200]!r}") from None

    def _save(self) -> None:
        atomic_write_bytes(
            self.directory / IDS,
            orjson.dumps(
                {"ids": self._ids, "identifiers": self._identifiers}, option=orjson.OPT_SORT_KEYS
            ),
        )

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        check_new_ids(self._ids.values(), records)
        for r in records:
            meta = orjson.dumps({"memory_id": r.memory_id}).decode()
            reply = self._run("add", "--force", "-m", meta, "--", r.text)
            if reply.get("status") != "added":
                raise RecallbenchError(f"vipune add: {reply!r}")
            self._ids[str(reply["id"])] = r.memory_id
            self._identifiers[r.memory_id] = r.identifier
        self._save()
        return self.count()

    def search(self, query: str, top_k: int) -> list[Hit]:
        if top_k <= 0 or not self._ids:
            return []
        hybrid = ["--hybrid"] if self._system.hybrid else []
        reply = self._run("search", *hybrid, "--recency", RECENCY, "-l", str(top_k), "--", query)
        hits = []
        for row in reply.get("results", []):
            memory_id = self._ids[str(row["id"])]
            score = row.get("score", row.get("similarity", 0.0))
            hits.append(Hit(memory_id, round(float(score), 6), self._identifiers[memory_id]))
        return hits

    def _listed(self) -> list[tuple[str, str]]:
        if not self._ids:
            return []
        reply = self._run("list", "--limit", str(len(self._ids) + 1))
        return [(self._ids[str(m["id"])], m["content"]) for m in reply.get("memories", [])]

    def count(self) -> int:
        return len(self._listed())

    def digest(self) -> str:
        return records_digest(self._listed())

    def close(self) -> None:
        self._ids, self._identifiers = {}, {}


class VipuneSystem(TimedCalls):
    """vipune through its CLI: hybrid (FTS5 + semantic, RRF) or semantic search."""

    clone = None
    embedder = None
    lexical = False

    def __init__(self, name: str, *, hybrid: bool) -> None:
        self.name = name
        self.hybrid = hybrid
        self.binary = vipune_binary()

    def configuration(self) -> dict[str, Any]:
        proc = subprocess.run(
            [self.binary, "--json", "version"], capture_output=True, text=True, timeout=60
        )
        try:
            reported = orjson.loads(proc.stdout).get("version")
        except (orjson.JSONDecodeError, AttributeError):
            reported = proc.stdout.strip() or None
        return {
            "implementation": "vipune",
            "implementation_version": reported,
            "binary": Path(self.binary).name,
            "backend": f"vipune's SQLite database, one per store (--db-path), project {PROJECT!r}",
            "add": "add --force -m {memory_id}",
            "search": ("search --hybrid" if self.hybrid else "search")
            + f" --recency {RECENCY} -l top_k: vipune's order and score",
            "embedder": "vipune's own (bge-small-en-v1.5, ONNX Runtime)",
        }

    def open_store(self, directory: Path, *, vectors: Any = None) -> VipuneStore:
        claim(directory, self.name)
        store = VipuneStore(self, Path(directory))
        store._save()
        return store

    def attach(self, directory: Path, *, vectors: Any = None) -> VipuneStore:
        existing(directory, self.name)
        return VipuneStore(self, Path(directory))


@register(
    "vipune",
    description="vipune through its CLI: hybrid search (FTS5 + semantic, RRF k = 25), recency 0",
    extra="vipune",
)
def vipune_system() -> VipuneSystem:
    return VipuneSystem("vipune", hybrid=True)


@register(
    "vipune-semantic",
    description="vipune through its CLI: semantic search alone, recency 0",
    extra="vipune",
)
def vipune_semantic_system() -> VipuneSystem:
    return VipuneSystem("vipune-semantic", hybrid=False)
