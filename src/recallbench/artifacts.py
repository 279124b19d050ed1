"""Read and write the JSON artifacts that stages exchange in the build directory.

Every artifact is an envelope::

    {"artifact": "<kind>", "schema_version": N, "recallbench_version": "...",
     "inputs": {"<name>": "<sha256>", ...}, "fingerprint": "<sha256 of data>", "data": {...}}

`inputs` records the fingerprints of what the artifact was made from, so a later stage
can refuse an upstream artifact that is stale (made from other inputs) or from another
schema, with a message naming the stage to rerun. Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from recallbench import __version__
from recallbench.errors import ArtifactError

SCHEMA_VERSION = 1

#: artifact kind -> (file name in the build dir, the command that makes it)
ARTIFACTS: dict[str, tuple[str, str]] = {
    "suite": ("suite.json", "recallbench validate"),
    "hydrate": ("hydrate.json", "recallbench hydrate"),
    "runs": ("runs.json", "recallbench query"),
    "roundtrip": ("roundtrip.json", "recallbench snapshot-roundtrip"),
    "scores": ("scores.json", "recallbench score"),
    "results": ("results.json", "recallbench report"),
    "decision": ("decision.json", "recallbench decide"),
}

_DUMP_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def dumps(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, 2-space indent, trailing newline."""
    return orjson.dumps(obj, option=_DUMP_OPTIONS)


def fingerprint(obj: Any) -> str:
    """sha256 of the canonical compact JSON of `obj`."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write `payload` to `path` through a temp file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def artifact_path(build_dir: Path, kind: str) -> Path:
    return Path(build_dir) / ARTIFACTS[kind][0]


def envelope(kind: str, data: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any]:
    """Wrap stage output `data` with its kind, schema version and input fingerprints."""
    return {
        "artifact": kind,
        "schema_version": SCHEMA_VERSION,
        "recallbench_version": __version__,
        "inputs": dict(inputs),
        "fingerprint": fingerprint(data),
        "data": data,
    }


def write_envelope(build_dir: Path, env: Mapping[str, Any]) -> Path:
    """Atomically write an envelope made by `envelope()` (plus any extra top-level keys)
    into `build_dir` under its kind's file name; return the path."""
    path = artifact_path(build_dir, env["artifact"])
    atomic_write_bytes(path, dumps(env))
    return path


def load_envelope(path: Path, kind: str, command: str) -> dict[str, Any]:
    """Read the envelope at `path`, checking that it exists, is a `kind` artifact of our
    schema version and matches its fingerprint. Errors name `command` as the fix."""
    if not path.is_file():
        raise ArtifactError(f"{path}: missing; run `{command}` first")
    try:
        env = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc}); run `{command}` again") from None
    if not isinstance(env, dict) or env.get("artifact") != kind or "data" not in env:
        raise ArtifactError(f"{path}: not a recallbench {kind} artifact; run `{command}`")
    if env.get("schema_version") != SCHEMA_VERSION:
        raise ArtifactError(
            f"{path}: schema version {env.get('schema_version')} is not {SCHEMA_VERSION}; "
            f"run `{command}` again"
        )
    if env.get("fingerprint") != fingerprint(env["data"]):
        raise ArtifactError(
            f"{path}: content does not match its fingerprint; run `{command}` again"
        )
    return env


def read_artifact(build_dir: Path, kind: str) -> dict[str, Any]:
    """Read fixture-lane artifact `kind` from `build_dir` (see `load_envelope`)."""
    return load_envelope(artifact_path(build_dir, kind), kind, ARTIFACTS[kind][1])


def require_made_from(
    env: Mapping[str, Any],
    *upstreams: Mapping[str, Any],
    registry: Mapping[str, tuple[str, str]] = ARTIFACTS,
) -> None:
    """Refuse `env` unless it was made from each `upstream` artifact as it is now (stale).

    `registry` maps kinds to (file name, command) for the message.
    """
    kind = env["artifact"]
    for upstream in upstreams:
        up_kind = upstream["artifact"]
        if env.get("inputs", {}).get(up_kind) != upstream["fingerprint"]:
            raise ArtifactError(
                f"{registry[kind][0]} is stale (made from another {registry[up_kind][0]}); "
                f"run `{registry[kind][1]}` again"
            )
