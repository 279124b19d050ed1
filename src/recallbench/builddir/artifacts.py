"""The one artifact contract: envelopes in the build directory, their stages, their timings.

Every stage artifact (results.json included) is an envelope::

    {"artifact": "<kind>", "schema_version": N, "recallbench_version": "...",
     "inputs": {"<kind>": "<fingerprint>", ...}, "fingerprint": "<sha256>", "data": {...}}

`fingerprint` covers the kind, the schema version, `inputs` and `data` (everything a consumer
trusts), so an edited field of any of them is detected. It does not cover the recallbench
version, and `data` holds nothing machine- or time-specific: the same inputs give the same
fingerprint run after run. Timings go to a sidecar (``timings/<kind>.json``) that names the
fingerprint of the artifact it describes and is never an input of another stage.

`STAGES` is the one definition of the stage order and of each stage's inputs and outputs;
make, nox, the stage commands (`load_inputs`), the in-process chain and the tests take them
from here. All outputs of one stage are published together (`publish`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from recallbench import __version__
from recallbench.builddir.paths import check_target
from recallbench.core.errors import ArtifactError

SCHEMA_VERSION = 2


class Stage(NamedTuple):
    """A design-card stage: its command, the artifact kind it writes, the artifact kinds it
    reads (`inputs`, in the order its function takes them) and the files it writes in the
    build directory (`outputs`, its artifact first; a name ending in / is a directory)."""

    command: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def file(self) -> str:
        """The artifact's file name in the build directory."""
        return self.outputs[0]


#: The seven stages in order (the design card's pipeline). `load_inputs` reads a stage's
#: inputs, the in-process chain (`pipeline.run_pipeline`) passes them, and a test checks
#: them against the stage functions' parameters and the inputs each artifact records.
STAGES: tuple[Stage, ...] = (
    Stage("validate", "suite", (), ("suite.json", "scopes.jsonl", "scopes-structure.jsonl")),
    Stage("hydrate", "hydrate", ("suite",), ("hydrate.json", "timings/hydrate.json", "stores/")),
    Stage("query", "runs", ("suite", "hydrate"), ("runs.json", "timings/runs.json")),
    Stage(
        "snapshot-roundtrip",
        "roundtrip",
        ("suite", "hydrate", "runs"),
        ("roundtrip.json", "timings/roundtrip.json", "roundtrip/"),
    ),
    Stage("score", "scores", ("suite", "runs"), ("scores.json",)),
    Stage(
        "report",
        "results",
        ("suite", "hydrate", "runs", "roundtrip", "scores"),
        (
            "results.json",
            "timings/results.json",
            "report.md",
            "report-plots/",
            "report.html",
            "report-data/",
        ),
    ),
    Stage("decide", "decision", ("suite", "scores", "roundtrip"), ("decision.json",)),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.command for s in STAGES)
#: artifact kind -> (file name in the build dir, the command that makes it)
ARTIFACTS: dict[str, tuple[str, str]] = {
    s.kind: (s.file, f"recallbench {s.command}") for s in STAGES
}
#: what validate reads: the dataset's files, not an artifact
DATASET_INPUT = "the dataset's files (--dataset and its options)"


def stage(command: str) -> Stage:
    """The stage `command` runs (a KeyError for a command that is no stage)."""
    for candidate in STAGES:
        if candidate.command == command:
            return candidate
    raise KeyError(command)


def stage_io_lines() -> list[str]:
    """Each stage's command, then its inputs (the artifacts it is made from) and its outputs
    (the files it writes), one line each (`recallbench stages --io`)."""
    lines = []
    for s in STAGES:
        inputs = " ".join(ARTIFACTS[kind][0] for kind in s.inputs) or DATASET_INPUT
        lines += [s.command, f"  inputs   {inputs}", f"  outputs  {' '.join(s.outputs)}"]
    return lines


TIMINGS_DIR = "timings"

_DUMP_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def _is_lazy(obj: Any) -> bool:
    """A lazy list of JSON values: a Sequence that is not a list, tuple or string (such as
    `recallbench.builddir.queryrows.SpooledRows`, the query stage's rows read back from disk)."""
    return isinstance(obj, Sequence) and not isinstance(obj, (list, tuple, str, bytes))


def canonical_chunks(obj: Any, *, indented: bool = True) -> Iterator[bytes]:
    """The canonical JSON of `obj` in pieces, byte for byte what `orjson.dumps` gives for it
    with every lazy list (`_is_lazy`) a list: indented (`dumps`) or compact (`fingerprint`).

    A lazy list is written one item at a time, so its items are never all in memory: the
    document is dumped with a unique placeholder string for each lazy list, and each
    placeholder is replaced by the list's items, indented to the placeholder's depth."""
    option = _DUMP_OPTIONS if indented else orjson.OPT_SORT_KEYS
    item_option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if indented else 0)
    token = f"recallbench-lazy-{os.urandom(12).hex()}-"
    lazy: list[Sequence[Any]] = []

    def placeholder(value: Any) -> str:
        if not _is_lazy(value):
            raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")
        lazy.append(value)
        return f"{token}{len(lazy) - 1}"

    skeleton = orjson.dumps(obj, option=option, default=placeholder)
    if not lazy:
        yield skeleton
        return
    done = 0
    for match in re.finditer(rb'"' + re.escape(token.encode()) + rb'(\d+)"', skeleton):
        yield skeleton[done : match.start()]
        items = lazy[int(match.group(1))]
        if not indented:
            yield b"["
            for i, item in enumerate(items):
                yield (b"," if i else b"") + orjson.dumps(item, option=item_option)
            yield b"]"
        else:
            line = skeleton.rfind(b"\n", 0, match.start()) + 1
            outer = len(skeleton[line:]) - len(skeleton[line:].lstrip(b" "))
            pad = b"\n" + b" " * (outer + 2)
            empty = True
            for item in items:
                text = orjson.dumps(item, option=item_option).replace(b"\n", pad)
                yield (b"[" if empty else b",") + pad + text
                empty = False
            yield b"[]" if empty else b"\n" + b" " * outer + b"]"
        done = match.end()
    yield skeleton[done:]


def dumps(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, 2-space indent, trailing newline."""
    if _holds_lazy(obj):
        return b"".join(canonical_chunks(obj))
    return orjson.dumps(obj, option=_DUMP_OPTIONS)


def _holds_lazy(obj: Any) -> bool:
    """Whether a lazy list lies in the dicts (and lists) of `obj`."""
    if isinstance(obj, dict):
        return any(_is_lazy(v) or (isinstance(v, dict) and _holds_lazy(v)) for v in obj.values())
    return _is_lazy(obj)


def fingerprint(obj: Any) -> str:
    """sha256 of the canonical compact JSON of `obj` (lazy lists read one item at a time)."""
    digest = hashlib.sha256()
    for chunk in canonical_chunks(obj, indented=False):
        digest.update(chunk)
    return digest.hexdigest()


class CanonicalFile:
    """A payload for `publish`: the canonical JSON of an object that holds a lazy list,
    written in pieces (`canonical_chunks`) instead of made into one bytes object first."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def write_to(self, handle: Any) -> None:
        for chunk in canonical_chunks(self.obj):
            handle.write(chunk)

    def __bytes__(self) -> bytes:
        return b"".join(canonical_chunks(self.obj))


def canonical_payload(obj: Any) -> bytes | CanonicalFile:
    """What `publish` is given for `obj`: its bytes, or a `CanonicalFile` when it holds a
    lazy list (written in pieces, never all in memory)."""
    return CanonicalFile(obj) if _holds_lazy(obj) else dumps(obj)


def envelope_fingerprint(kind: str, inputs: Mapping[str, str], data: Any) -> str:
    """The fingerprint of an envelope: kind, schema version, inputs and data together."""
    return fingerprint(
        {"artifact": kind, "schema_version": SCHEMA_VERSION, "inputs": inputs, "data": data}
    )


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: how temp files start: a short fixed prefix and 16 random hex digits, so a temp name is
#: 34 characters whatever the final name's length (a legal final name never makes an
#: illegal temp name)
TEMP_PREFIX = ".recallbench-"


def create_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside `path` (O_EXCL, never through a link; no `tempfile`/`random`
    import at start-up), with the usual mode of a new file (0666 less the umask) once it is
    renamed into place. The directories on the way are made and checked first
    (`paths.check_target`: no symlinked part in a claimed directory, `path` itself no
    symlink or hard link)."""
    path = Path(path)
    check_target(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = path.parent / f"{TEMP_PREFIX}{os.urandom(8).hex()}.tmp"
        try:
            return os.open(tmp, flags, 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: cannot create a temp file beside it")


class StagedTree:
    """A directory output whose files are already written elsewhere (`files`: name ->
    the file holding its bytes). `publish` copies them into a new directory beside the
    target and renames that into place, so the target directory is replaced whole: a file
    of the previous one that the new one lacks does not remain. No files: the target is
    removed if it is there (nothing of a previous output is left beside the new page)."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        for name in files:
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"a staged file's name must be a plain file name, got {name!r}")
        self.files = dict(sorted(files.items()))

    def write_into(self, directory: Path) -> None:
        """Copy every file into `directory` (a new, empty directory)."""
        import shutil

        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        for name, source in self.files.items():
            fd = os.open(Path(directory) / name, flags, 0o666)
            with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def _temp_dir_beside(path: Path) -> Path:
    """A new empty directory beside `path`, named like `create_temp`'s files."""
    for _ in range(100):
        tmp = path.parent / f"{TEMP_PREFIX}{os.urandom(8).hex()}.tmp"
        try:
            os.mkdir(tmp)
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: cannot create a temp directory beside it")


def publish(files: Mapping[Path, bytes | CanonicalFile | StagedTree]) -> None:
    """Write every file to a temp file beside it, then rename them all into place (a
    `CanonicalFile` payload is written in pieces).

    Nothing is renamed until every payload is fully written, so a failure (a full disk, a
    read-only directory) leaves the previous files as they were and no temp file behind.
    Every target is checked before anything is written (`paths.check_target`), so a
    symlinked or hard-linked target, or a symlinked directory on the way inside a claimed
    build directory, is refused with nothing written. A `StagedTree` payload is a directory:
    built complete in a temp directory beside its target (`paths.check_dir_target`:
    the target is no link and no file), then the previous directory is moved aside, the new
    one renamed into place and the previous one removed.
    """
    import shutil

    from recallbench.builddir.paths import check_dir_target

    # the directories first: checking a file makes its missing parent directories
    for path, payload in files.items():
        if isinstance(payload, StagedTree):
            check_dir_target(Path(path))
    for path, payload in files.items():
        if not isinstance(payload, StagedTree):
            check_target(Path(path))
    staged: list[tuple[str, Path]] = []
    trees: list[tuple[Path | None, Path]] = []
    aside: list[tuple[Path, Path]] = []
    try:
        for path, payload in files.items():
            path = Path(path)
            if isinstance(payload, StagedTree):
                tmp_dir = _temp_dir_beside(path) if payload.files else None
                trees.append((tmp_dir, path))
                if tmp_dir is not None:
                    payload.write_into(tmp_dir)
                continue
            fd, tmp = create_temp(path)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as handle:
                if isinstance(payload, CanonicalFile):
                    payload.write_to(handle)
                else:
                    handle.write(payload)
        for tmp_dir, path in trees:
            if os.path.lexists(path):
                old = _temp_dir_beside(path)
                os.rmdir(old)
                os.rename(path, old)
                aside.append((old, path))
            if tmp_dir is not None:
                os.rename(tmp_dir, path)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        for tmp_dir, _ in trees:
            if tmp_dir is not None and os.path.isdir(tmp_dir):
                shutil.rmtree(tmp_dir, ignore_errors=True)
        for old, path in aside:  # put the previous directories back
            if not os.path.lexists(path):
                os.rename(old, path)
        raise
    for old, _ in aside:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write one file atomically (see `publish`)."""
    publish({Path(path): payload})


def artifact_path(build_dir: Path, kind: str) -> Path:
    return Path(build_dir) / ARTIFACTS[kind][0]


def timing_path(build_dir: Path, kind: str) -> Path:
    return Path(build_dir) / TIMINGS_DIR / f"{kind}.json"


def envelope(kind: str, data: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any]:
    """Wrap stage output `data` with its kind, schema version, inputs and fingerprint."""
    return {
        "artifact": kind,
        "schema_version": SCHEMA_VERSION,
        "recallbench_version": __version__,
        "inputs": dict(inputs),
        "fingerprint": envelope_fingerprint(kind, dict(inputs), data),
        "data": data,
    }


def with_embedder_build(env: dict[str, Any], cache: Mapping[str, Any] | None) -> dict[str, Any]:
    """`env` with `embedder_build` (device, torch version, CPU capability that computed the
    vectors, as the cache's manifest records it) when a vector cache was used: outside the
    fingerprint, so results from two machines still compare; `compare` and
    `check-baseline` say when two results' builds differ."""
    if cache is None:
        return env
    return {**env, "embedder_build": cache.get("embedder_build")}


def inputs_of(*upstreams: Mapping[str, Any]) -> dict[str, str]:
    """{kind: fingerprint} of the upstream envelopes an artifact is made from."""
    return {up["artifact"]: up["fingerprint"] for up in upstreams}


def stage_files(
    build_dir: Path, env: Mapping[str, Any], timing: Mapping[str, Any] | None = None
) -> dict[Path, bytes | CanonicalFile]:
    """The files a stage publishes for envelope `env`: the artifact (a `CanonicalFile` when
    it holds a lazy list, such as the query stage's rows) and its timing sidecar."""
    files = {artifact_path(build_dir, env["artifact"]): canonical_payload(env)}
    if timing is not None:
        sidecar = {
            "label": "local diagnostic: wall time on this machine, not a result",
            "artifact_fingerprint": env["fingerprint"],
            **timing,
        }
        files[timing_path(build_dir, env["artifact"])] = dumps(sidecar)
    return files


def check_envelope(env: Any, kind: str, where: str, command: str) -> dict[str, Any]:
    """`env` if it is an intact `kind` envelope of our schema; else an ArtifactError."""
    if not isinstance(env, dict) or env.get("artifact") != kind or "data" not in env:
        raise ArtifactError(f"{where}: not a recallbench {kind} artifact; run `{command}`")
    if env.get("schema_version") != SCHEMA_VERSION:
        raise ArtifactError(
            f"{where}: schema version {env.get('schema_version')} is not {SCHEMA_VERSION}; "
            f"run `{command}` again"
        )
    inputs = env.get("inputs")
    if not isinstance(inputs, dict) or env.get("fingerprint") != envelope_fingerprint(
        kind, inputs, env["data"]
    ):
        raise ArtifactError(
            f"{where}: content does not match its fingerprint; run `{command}` again"
        )
    return env


#: the artifacts whose rows are read one at a time (`queryrows.lazy_rows_envelope`): runs.json
LAZY_ROWS = frozenset({"runs"})


def load_envelope(path: Path, kind: str, command: str) -> dict[str, Any]:
    """Read the envelope at `path`, checking that it exists, is a `kind` artifact of our
    schema version and matches its fingerprint. Errors name `command` as the fix. A
    canonical runs.json's rows stay in the file, read one at a time (`LAZY_ROWS`); its
    fingerprint is checked over them all the same."""
    path = Path(path)
    try:
        if kind in LAZY_ROWS:
            from recallbench.builddir.queryrows import lazy_rows_envelope

            lazy = lazy_rows_envelope(path)
            if lazy is not None:
                try:
                    return check_envelope(lazy, kind, str(path), command)
                except orjson.JSONDecodeError:
                    pass  # a damaged row: read whole below, which names the fault
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing; run `{command}` first") from None
    except IsADirectoryError:
        raise ArtifactError(f"{path}: is a directory, not an artifact; run `{command}`") from None
    try:
        env = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc}); run `{command}` again") from None
    return check_envelope(env, kind, str(path), command)


def read_artifact(build_dir: Path, kind: str) -> dict[str, Any]:
    """Read artifact `kind` from `build_dir` (see `load_envelope`)."""
    return load_envelope(artifact_path(build_dir, kind), kind, ARTIFACTS[kind][1])


def read_timing(build_dir: Path, env: Mapping[str, Any]) -> dict[str, Any] | None:
    """The timing sidecar of envelope `env`, or None when absent, unreadable or stale."""
    try:
        timing = orjson.loads(timing_path(build_dir, env["artifact"]).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(timing, dict) or timing.get("artifact_fingerprint") != env["fingerprint"]:
        return None
    return timing


def require_made_from(env: Mapping[str, Any], *upstreams: Mapping[str, Any]) -> None:
    """Refuse `env` unless it was made from each `upstream` artifact as it is now (stale)."""
    kind = env["artifact"]
    for upstream in upstreams:
        up_kind = upstream["artifact"]
        if env.get("inputs", {}).get(up_kind) != upstream["fingerprint"]:
            raise stale(kind, up_kind)


def stale(kind: str, up_kind: str) -> ArtifactError:
    """The refusal of artifact `kind` made from another `up_kind` than the current one."""
    return ArtifactError(
        f"{ARTIFACTS[kind][0]} is stale (made from another {ARTIFACTS[up_kind][0]}); "
        f"run `{ARTIFACTS[kind][1]}` again"
    )


def load_inputs(build_dir: Path, kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The artifacts `kinds` (a stage's `Stage.inputs`) from `build_dir`, in that order:
    each read and checked (`read_artifact`: missing, foreign or damaged is refused) and
    current: each was made from the others, and everything it was made from is still the
    one in `build_dir` (a rerun upstream stage makes it stale). Every refusal is one line
    naming the command to run (again)."""
    loaded = {kind: read_artifact(build_dir, kind) for kind in kinds}
    _require_consistent(build_dir, loaded)
    return loaded


def _require_consistent(build_dir: Path, known: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse the first envelope whose inputs name another fingerprint than the artifact of
    that kind (the one in `known`, else the one in `build_dir`): the envelopes of `known` in
    order first, then what they were made from, each artifact's inputs checked once."""
    known = dict(known)
    pending = list(known.values())
    checked = {env["artifact"] for env in pending}
    while pending:
        current = pending.pop(0)
        for kind, fp in current.get("inputs", {}).items():
            if kind not in ARTIFACTS:
                continue  # validate's inputs are the dataset's files
            if kind not in known:
                known[kind] = read_artifact(build_dir, kind)
            if known[kind]["fingerprint"] != fp:
                raise stale(current["artifact"], kind)
            if kind not in checked:
                checked.add(kind)
                pending.append(known[kind])
