#!/usr/bin/env python3
"""A protocol fixture for the vipune adapter's tests: NOT vipune.

It reproduces, for exactly what tests/systems/test_vipune_adapter.py checks, the command-line
protocol of vipune 0.1.8 (repository randomm/vipune) as its source states it; it stores
memories in a JSON file instead of SQLite and scores by shared words instead of embeddings,
so no figure from it says anything about vipune. Followed from vipune's source:

* `src/main.rs` `main`/`run`: global `--json`, `-p`, `--db-path`; `Config::load()` then
  `config.ensure_directories()` run before `--db-path` is applied, and the database is opened
  (created) before any command, `version` included; with `--json` an error is
  `print_json(&ErrorResponse { error })` (pretty-printed, on stdout) and exit 1.
* `src/config/mod.rs` `Config::default`/`load`/`ensure_directories`: database
  `$HOME/.vipune/memories.db`, model cache `$HOME/.vipune/models`, overridden by
  `VIPUNE_DATABASE_PATH` / `VIPUNE_MODEL_CACHE` (`src/config/env_parser.rs`); the parent of
  the database path and the model cache are created. (vipune also reads
  `$XDG_CONFIG_HOME/vipune/config.toml`, `src/config/loader.rs`; the fixture does not.)
* `src/memory/store.rs`: `MAX_SEARCH_LIMIT` 10,000 and `validate_limit` ("Invalid input:
  Limit N exceeds maximum allowed (10000)"), `MAX_INPUT_LENGTH` 100,000 bytes and
  `validate_input_length` ("Input cannot be empty", "Input too long: N characters (max:
  100000)"); `src/memory/search.rs`: the query is trimmed first.
* `src/commands.rs`: `add TEXT [-m META] [--force]` -> `{"status": "added", "id"}`;
  `search QUERY [-l N] [--recency W] [--hybrid]` -> `{"results": [{id, content,
  similarity, created_at}]}`; `list [-l|--limit N]` -> `{"memories": [...]}` newest first;
  `version` -> `{"version", "name"}`.

Each call appends its argument vector to `$VIPUNE_FIXTURE_LOG` when that is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

VERSION = "0.1.8"
MAX_SEARCH_LIMIT = 10_000
MAX_INPUT_LENGTH = 100_000
RUST_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
RUST_WHITESPACE += "\u2028\u2029\u202f\u205f\u3000"


class VipuneError(Exception):
    pass


def validate_limit(limit: int) -> None:
    if limit == 0:
        raise VipuneError("Invalid input: Limit must be greater than 0")
    if limit > MAX_SEARCH_LIMIT:
        raise VipuneError(
            f"Invalid input: Limit {limit} exceeds maximum allowed ({MAX_SEARCH_LIMIT})"
        )


def validate_input_length(text: str) -> None:
    if not text.strip(RUST_WHITESPACE):
        raise VipuneError("Input cannot be empty")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_INPUT_LENGTH:
        raise VipuneError(f"Input too long: {size} characters (max: {MAX_INPUT_LENGTH})")


def home() -> Path:
    return Path(os.environ.get("HOME") or ".")


def run(args: argparse.Namespace) -> dict:
    database = Path(os.environ.get("VIPUNE_DATABASE_PATH") or home() / ".vipune" / "memories.db")
    models = Path(os.environ.get("VIPUNE_MODEL_CACHE") or home() / ".vipune" / "models")
    database.parent.mkdir(parents=True, exist_ok=True)  # ensure_directories
    models.mkdir(parents=True, exist_ok=True)
    if args.db_path:
        database = Path(args.db_path)
    memories = json.loads(database.read_text()) if database.exists() else []
    if not database.exists():
        database.write_text("[]")  # MemoryStore::new opens (creates) it
    project = args.project or "default"
    mine = [m for m in memories if m["project_id"] == project]
    if args.command == "version":
        return {"version": VERSION, "name": "vipune"}
    if args.command == "add":
        validate_input_length(args.text)
        memory = {
            "id": str(uuid.uuid4()),
            "project_id": project,
            "content": args.text,
            "metadata": args.metadata,
            "created_at": f"2026-01-01T00:00:{len(memories):09d}Z",
        }
        database.write_text(json.dumps([*memories, memory]))
        return {"status": "added", "id": memory["id"]}
    if args.command == "search":
        validate_limit(args.limit)
        query = args.query.strip(RUST_WHITESPACE)
        validate_input_length(query)
        words = set(query.lower().split())
        scored = [(len(words & set(m["content"].lower().split())), m) for m in mine]
        scored.sort(key=lambda pair: (-pair[0], pair[1]["created_at"]))
        return {
            "results": [
                {
                    "id": m["id"],
                    "content": m["content"],
                    "similarity": score / max(len(words), 1),
                    "created_at": m["created_at"],
                }
                for score, m in scored[: args.limit]
            ]
        }
    validate_limit(args.limit)  # list
    newest = sorted(mine, key=lambda m: m["created_at"], reverse=True)[: args.limit]
    return {"memories": [{k: m[k] for k in ("id", "content", "created_at")} for m in newest]}


def main() -> int:
    if os.environ.get("VIPUNE_FIXTURE_LOG"):
        with open(os.environ["VIPUNE_FIXTURE_LOG"], "a") as log:
            log.write(json.dumps(sys.argv[1:]) + "\n")
    parser = argparse.ArgumentParser(prog="vipune")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-p", "--project")
    parser.add_argument("--db-path")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add")
    add.add_argument("text")
    add.add_argument("-m", "--metadata")
    add.add_argument("--force", action="store_true")
    search = commands.add_parser("search")
    search.add_argument("query")
    search.add_argument("-l", "--limit", type=int, default=5)
    search.add_argument("--recency", type=float)
    search.add_argument("--hybrid", action="store_true")
    listing = commands.add_parser("list")
    listing.add_argument("-l", "--limit", type=int, default=10)
    commands.add_parser("version")
    args = parser.parse_args()
    try:
        reply = run(args)
    except VipuneError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}, indent=2))
        else:
            print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(reply, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
