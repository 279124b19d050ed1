"""`vipune` and `vipune-semantic`: the vipune memory store (Rust, repository `randomm/vipune`)
driven through its public command line only.

The binary is found as `RECALLBENCH_VIPUNE` (a path) or `vipune` on PATH; without one both
systems are listed as unavailable with how to get it. One SQLite database per store
(`--db-path <store dir>/vipune.db`, project `-p recallbench`):

* ingest: `vipune --json --db-path DB -p recallbench add --force -m '{"memory_id": ...}'
  TEXT`, one call per memory (`--force`: vipune otherwise refuses a text whose similarity
  to a stored one is >= 0.85); vipune makes its own ids, mapped to ours in `ids.json`.
  There is no batch form to use instead: vipune 0.1.8's `add` takes exactly one TEXT
  argument (`Commands::Add { text, metadata, force }`, src/commands.rs), reads no stdin or
  file, and its CLI reference's "batch import" is a shell loop of `vipune add`;
* search: `vipune --json --db-path DB -p recallbench search [--hybrid] --recency 0
  -l LIMIT QUERY` (recency 0: its default 0.3 mixes in the insertion time), vipune's order
  and score; `vipune` is its hybrid search (FTS5 + semantic, RRF k = 25), `vipune-semantic`
  its plain semantic search;
* count and digest: `vipune --json ... list --limit N`.

Every call runs with vipune's home inside the store (`vipune_environment`): HOME, the XDG
directories and `VIPUNE_MODEL_CACHE` point at `<store dir>/vipune-home` (`vipune version`,
which has no store, at a temporary directory), so vipune neither creates `~/.vipune` nor
reads the user's `~/.config/vipune/config.toml`. Its model stays where vipune's model
download (hf-hub) keeps it: `HF_HOME` when set, else `~/.cache/huggingface`, the one place
outside the store it reads (and writes, on its first use only).

vipune's own limits (vipune 0.1.8, `src/memory/store.rs`) are checked before it is called,
each refused in one line naming the limit: at most `MAX_LIMIT` (10,000) results of `search
-l` and `list --limit` (it has no offset, so a store of more memories cannot be counted or
digested and is refused at ingest), texts of at most `MAX_TEXT_BYTES` (100,000) bytes of
UTF-8, no empty or whitespace-only text; an empty or whitespace-only query has no hits
without calling vipune (vipune refuses it). vipune's errors (with `--json`, a JSON object
`{"error": ...}` on stdout, exit 1) are shown by their `error` field.

vipune embeds with its own model (its default is bge-small-en-v1.5 through ONNX Runtime,
fetched by vipune on first use; `VIPUNE_EMBEDDING_MODEL` picks another, and the recorded
configuration says which), so these systems have no embedder capability (no prep cache) and
no clone path. Ties in its RRF are ordered by random ids, so equal scores may come back in another
order run after run. The binary cannot be built on our machines (its crates and model are
out of reach), so its contract test runs only where the binary is present.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes
from recallbench.core.errors import RecallbenchError
from recallbench.core.escape import terminal
from recallbench.systems.adapters import claim, existing
from recallbench.systems.base import Hit, StoreRecord, TimedCalls
from recallbench.systems.packaging import check_new_ids, records_digest
from recallbench.systems.registry import find_binary, register

DB = "vipune.db"
IDS = "ids.json"
PROJECT = "recallbench"
RECENCY = "0"
TIMEOUT_S = 600
#: vipune's home inside a store: HOME, XDG directories, its model cache dir
HOME_DIR = "vipune-home"
#: vipune's MAX_SEARCH_LIMIT: the most `search -l` and `list --limit` return
MAX_LIMIT = 10_000
#: vipune's MAX_INPUT_LENGTH: the most bytes (UTF-8) of a memory's text or a query
MAX_TEXT_BYTES = 100_000
#: what Rust's `str::trim` removes (Unicode White_Space): vipune refuses a text or query
#: that is empty once trimmed
RUST_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
RUST_WHITESPACE += "\u2028\u2029\u202f\u205f\u3000"
#: the variables `vipune_environment` sets (any value the user had is replaced)
PINNED = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "VIPUNE_MODEL_CACHE",
    "VIPUNE_DATABASE_PATH",
    "HF_HOME",
)


def vipune_binary() -> str:
    found = find_binary("vipune")
    if found is None:
        raise RecallbenchError(
            "vipune: no binary (set RECALLBENCH_VIPUNE to its path or put `vipune` on PATH)"
        )
    return found


def vipune_environment(home: Path, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a vipune call: `base` with HOME, the XDG directories and
    `VIPUNE_MODEL_CACHE` inside `home`, `VIPUNE_DATABASE_PATH` removed (the database is
    `--db-path`), and `HF_HOME` kept where vipune's model is: the user's `HF_HOME`, else the
    hf-hub default under the user's real home."""
    hf_home = base.get("HF_HOME") or str(
        Path(base.get("HOME") or Path.home()) / ".cache" / "huggingface"
    )
    env = {key: value for key, value in base.items() if key not in PINNED}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        VIPUNE_MODEL_CACHE=str(home / ".vipune" / "models"),
        HF_HOME=hf_home,
    )
    return env


def vipune_command(binary: str, db: Path, *args: str) -> list[str]:
    """The argument vector of one vipune call on database `db`."""
    return [binary, "--json", "--db-path", str(db), "-p", PROJECT, *args]


def vipune_error(stdout: str, stderr: str) -> str:
    """vipune's reason for a failed call, for one line: the `error` field of the JSON object
    it prints on stdout with `--json`, else the last line of stderr (clap's usage errors,
    a crash), else of stdout; control characters shown as U+XXXX."""
    try:
        reply = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        reply = None
    if isinstance(reply, dict) and isinstance(reply.get("error"), str) and reply["error"]:
        detail = reply["error"]
    else:
        lines = (stderr or "").strip().splitlines() or (stdout or "").strip().splitlines()
        detail = lines[-1] if lines else "no output"
    return terminal(" ".join(detail.split())[:500])


def is_blank(text: str) -> bool:
    """True when vipune would refuse `text` as empty (nothing left after Rust's trim)."""
    return not text.strip(RUST_WHITESPACE)


def check_text(memory_id: str, text: str) -> None:
    """Refuse up front, naming the memory, a text vipune refuses: empty or whitespace-only,
    or longer than MAX_TEXT_BYTES bytes of UTF-8."""
    if is_blank(text):
        raise RecallbenchError(
            f"vipune add: memory {terminal(memory_id)!r}: vipune refuses an empty or "
            "whitespace-only text"
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise RecallbenchError(
            f"vipune add: memory {terminal(memory_id)!r}: text of {size:,} bytes, more than "
            f"the {MAX_TEXT_BYTES:,} bytes vipune accepts"
        )


def check_limit(command: str, limit: int, what: str) -> None:
    """Refuse up front a `-l`/`--limit` above vipune's MAX_LIMIT (it has no offset to page)."""
    if limit > MAX_LIMIT:
        raise RecallbenchError(
            f"vipune {command}: {what} {limit:,}, more than the {MAX_LIMIT:,} vipune returns "
            "in one call (it has no offset to page with)"
        )


class VipuneStore:
    def __init__(self, system: VipuneSystem, directory: Path) -> None:
        self._system = system
        self.directory = directory
        ids = directory / IDS
        saved = orjson.loads(ids.read_bytes()) if ids.exists() else {"ids": {}, "identifiers": {}}
        self._ids: dict[str, str] = saved["ids"]  # vipune id -> memory id
        self._identifiers: dict[str, str] = saved["identifiers"]  # memory id -> identifier

    def _run(self, *args: str) -> Any:
        home = self.directory / HOME_DIR
        if home.is_symlink() or (home.exists() and not home.is_dir()):
            raise RecallbenchError(f"{home}: not a directory of the store (a link?); remove it")
        home.mkdir(exist_ok=True)
        command = vipune_command(self._system.binary, self.directory / DB, *args)
        with self._system._inside():
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                env=vipune_environment(home, os.environ),
            )
        if proc.returncode != 0:
            raise RecallbenchError(
                f"vipune {args[0]}: exit {proc.returncode}: {vipune_error(proc.stdout, proc.stderr)}"
            )
        try:
            return orjson.loads(proc.stdout)
        except orjson.JSONDecodeError:
            raise RecallbenchError(
                f"vipune {args[0]}: not JSON: {terminal(proc.stdout[:200])!r}"
            ) from None

    def _save(self) -> None:
        atomic_write_bytes(
            self.directory / IDS,
            orjson.dumps(
                {"ids": self._ids, "identifiers": self._identifiers}, option=orjson.OPT_SORT_KEYS
            ),
        )

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        check_new_ids(self._ids.values(), records)
        total = len(self._ids) + len(records)
        if total > MAX_LIMIT:
            raise RecallbenchError(
                f"vipune add: {total:,} memories in one store, more than the {MAX_LIMIT:,} "
                "vipune lists in one call (list --limit, no offset): the store could not be "
                "counted or digested; nothing added"
            )
        for r in records:
            check_text(r.memory_id, r.text)
        for r in records:
            meta = orjson.dumps({"memory_id": r.memory_id}).decode()
            reply = self._run("add", "--force", "-m", meta, "--", r.text)
            if reply.get("status") != "added":
                raise RecallbenchError(f"vipune add: {reply!r}")
            self._ids[str(reply["id"])] = r.memory_id
            self._identifiers[r.memory_id] = r.identifier
        self._save()
        return self.count()

    def search(self, query: str, limit: int) -> list[Hit]:
        if limit <= 0 or not self._ids or is_blank(query):
            return []  # vipune refuses a blank query: it has no hits
        check_limit("search", limit, "limit")
        size = len(query.strip(RUST_WHITESPACE).encode("utf-8", "surrogatepass"))
        if size > MAX_TEXT_BYTES:
            raise RecallbenchError(
                f"vipune search: a query of {size:,} bytes, more than the {MAX_TEXT_BYTES:,} "
                "bytes vipune accepts"
            )
        hybrid = ["--hybrid"] if self._system.hybrid else []
        reply = self._run("search", *hybrid, "--recency", RECENCY, "-l", str(limit), "--", query)
        hits = []
        for row in reply.get("results", []):
            memory_id = self._ids[str(row["id"])]
            score = row.get("score", row.get("similarity", 0.0))
            hits.append(Hit(memory_id, round(float(score), 6), self._identifiers[memory_id]))
        return hits

    def _listed(self) -> list[tuple[str, str]]:
        if not self._ids:
            return []
        limit = len(self._ids) + 1  # one more, so that a memory we did not add shows
        if limit > MAX_LIMIT:
            check_limit("list", len(self._ids), "a store of")  # refused at ingest already
            limit = MAX_LIMIT
        reply = self._run("list", "--limit", str(limit))
        return [(self._ids[str(m["id"])], m["content"]) for m in reply.get("memories", [])]

    def count(self) -> int:
        return len(self._listed())

    def digest(self) -> str:
        return records_digest(self._listed())

    def close(self) -> None:
        self._ids, self._identifiers = {}, {}


def vipune_embedder(environ: Mapping[str, str], version: Any) -> str:
    """The embedding model vipune uses, as far as the harness knows it: vipune reports none,
    and reads no config file here (its home is the store's), so it is `VIPUNE_EMBEDDING_MODEL`
    when set, else vipune's default, as configured in that vipune version."""
    chosen = (environ.get("VIPUNE_EMBEDDING_MODEL") or "").strip()
    if chosen:
        return f"{chosen} (VIPUNE_EMBEDDING_MODEL), ONNX Runtime"
    return f"vipune's default model, as configured in vipune {version or '(version unknown)'}"


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
        # vipune opens (creates) its database before any command, version too: a
        # temporary home and database, removed afterwards
        with tempfile.TemporaryDirectory(prefix="recallbench-vipune-") as scratch:
            home = Path(scratch) / HOME_DIR
            home.mkdir()
            proc = subprocess.run(
                vipune_command(self.binary, Path(scratch) / DB, "version"),
                capture_output=True,
                text=True,
                timeout=60,
                env=vipune_environment(home, os.environ),
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
            "embedder": vipune_embedder(os.environ, reported),
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
