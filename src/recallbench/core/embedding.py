"""What the one embedding path needs to know about a system's embedder.

An embedder capability may wrap another (`inner`): HotMem's over MiniLM, a fusion's over
its children's, a plugin's borrowed one. Each question below is answered by the first
object along that chain that knows:

* `batch_invariant` - True when a text's vector never depends on the texts embedded with
  it (the hash embedder: pure arithmetic on one text; or an embedder that embeds one text
  at a time). Such a system embeds inline, no cache needed. A learned model's vectors
  differ in the last bits with the batch's shape (CPU kernels are chosen by shape), so
  every embedder that does not say so takes its vectors from a cache (`recallbench.engine.vectorprep`).
* `build_info()` - which build computed the vectors: device, torch version, CPU capability
  (recorded in the cache manifest and the envelopes, outside what results must match).
* `set_device(name)` - where to compute (`auto`, `cpu`, `cuda`).
* `text_transform` - what the store does to a text before embedding it (`text_transforms`):
  prep embeds the text as the store will ask for it, and a store's check looks up that form.
* `preload()` - load the model now rather than on the first text (a worker that is about
  to embed calls it when it starts, so the load is paid once per process, up front).
* `thread_safe` - True when several threads of one process may embed batches at once, each
  batch's vectors the same as when it is embedded alone (MiniLM: each forward pass on one
  torch thread). prep then embeds locally in one process with a thread per worker; an
  embedder that does not say so gets a process per worker (`vectorprep.embedding_plan`).

`torch_cache_in_scratch()` keeps torch's compile cache directory out of TMPDIR's lasting
contents: importing sentence-transformers (which imports `torch._dynamo`) makes
`$TMPDIR/torchinductor_<user>/`, left behind by every process that loaded MiniLM.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: how deep an embedder chain may nest (a guard against a cycle of `inner`s)
_MAX_DEPTH = 8


def _chain(embedder: Any) -> Iterator[Any]:
    current, depth = embedder, 0
    while current is not None and depth < _MAX_DEPTH:
        yield current
        current = getattr(current, "inner", None)
        depth += 1


def _first(embedder: Any, attribute: str) -> Any:
    for obj in _chain(embedder):
        if hasattr(obj, attribute):
            return getattr(obj, attribute)
    return None


def batch_invariant(embedder: Any) -> bool:
    """Whether the embedder's vector of a text is independent of its batch (default: no)."""
    value = _first(embedder, "batch_invariant")
    return bool(value) if value is not None else False


def thread_safe(embedder: Any) -> bool:
    """Whether threads of one process may embed batches at once (default: no)."""
    value = _first(embedder, "thread_safe")
    return bool(value) if value is not None else False


def embedder_build(embedder: Any) -> dict[str, Any] | None:
    """The build that computes the embedder's vectors, or None when it does not say."""
    info = _first(embedder, "build_info")
    return dict(info()) if callable(info) else None


def use_device(embedder: Any, device: str) -> None:
    """Tell the embedder where to compute; embedders with no device (the hash) ignore it."""
    setter = _first(embedder, "set_device")
    if callable(setter):
        setter(device)


def preload(embedder: Any) -> None:
    """Load the embedder's model now; embedders with nothing to load ignore it."""
    loader = _first(embedder, "preload")
    if callable(loader):
        loader()


def cache_dir_name(identity: str) -> str:
    """A directory name for the cache of embedder `identity`: readable and collision-free."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", identity).strip("-.")[:60] or "embedder"
    return f"{slug}-{hashlib.sha256(identity.encode('utf-8')).hexdigest()[:12]}"


def needs_cache(system: Any) -> bool:
    """Whether the system's vectors must come from a cache (it has a batch-dependent
    embedder), so every path gives the same bytes."""
    embedder = getattr(system, "embedder", None)
    return embedder is not None and not batch_invariant(embedder)


# --------------------------------------------------------------------------- text transforms

#: The transforms a store may apply to a text before it embeds it, by the name an embedder
#: capability declares (`text_transform`): mem0's `search` strips its query, for one.
TEXT_TRANSFORMS: dict[str, Callable[[str], str]] = {"strip": str.strip}
#: The roles a transform is declared for: stored texts and query texts.
TEXT_ROLES = ("memory", "query")


def text_transforms(embedder: Any) -> dict[str, str]:
    """What the store does to a text before embedding it, by role (`memory`, `query`): the
    embedder capability's optional `text_transform` (first along its `inner` chain), a name
    of `TEXT_TRANSFORMS` for both roles or a mapping role -> name. Default (absent or None):
    the store embeds every text exactly as given, `{}`."""
    declared = _first(embedder, "text_transform")
    if declared is None:
        return {}
    if isinstance(declared, str):
        declared = dict.fromkeys(TEXT_ROLES, declared)
    from recallbench.core.errors import RecallbenchError

    if not isinstance(declared, Mapping):
        raise RecallbenchError(
            f"text_transform: a name or a mapping role -> name, not {type(declared).__name__}"
        )
    out = {}
    for role, name in declared.items():
        if role not in TEXT_ROLES:
            raise RecallbenchError(f"text_transform: unknown role {role!r} (one of {TEXT_ROLES})")
        if name is None:
            continue
        if name not in TEXT_TRANSFORMS:
            raise RecallbenchError(
                f"text_transform: unknown transform {name!r} (one of {sorted(TEXT_TRANSFORMS)})"
            )
        out[role] = name
    return dict(sorted(out.items()))


def transformed(transforms: Mapping[str, str], role: str, text: str) -> str:
    """`text` as the store embeds it in `role` (`text_transforms`' result)."""
    name = transforms.get(role)
    return text if name is None else TEXT_TRANSFORMS[name](text)


def covers(recorded: Mapping[str, str] | None, needed: Mapping[str, str]) -> bool:
    """Whether a cache made with the `recorded` transforms holds every form `needed`."""
    recorded = recorded or {}
    return all(recorded.get(role) == name for role, name in needed.items())


#: the variable torch reads for its compile cache directory (it makes the directory when
#: `torch._dynamo` is imported, default `$TMPDIR/torchinductor_<user>/`)
TORCH_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


#: the name of the process's torch compile cache directory in TMPDIR starts so
TORCH_SCRATCH_PREFIX = "recallbench-torch-"


def torch_cache_in_scratch() -> str | None:
    """Point torch's compile cache (`TORCH_CACHE_VARIABLE`) at a directory of this process's
    own in the temporary directory, removed when the process ends (its exit, a finalizer
    of a pool worker); the workers it starts inherit it, so the one it owns holds theirs
    too and a worker killed mid-task leaves nothing. Call it before torch is imported here
    and before workers start. A directory already set (by the user, or by the process that
    started this one, which removes it) is left as it is. Returns the path it set, or None.
    recallbench never compiles: the directory stays empty."""
    import os

    if os.environ.get(TORCH_CACHE_VARIABLE):
        return None
    import shutil
    import tempfile
    from multiprocessing import util

    path = os.path.join(
        tempfile.gettempdir(), f"{TORCH_SCRATCH_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
    )
    os.environ[TORCH_CACHE_VARIABLE] = path
    # run by the process's exit (multiprocessing runs its finalizers at exit, and in a pool
    # worker as it ends); a process forked from this one does not run it
    util.Finalize(None, shutil.rmtree, args=(path,), kwargs={"ignore_errors": True}, exitpriority=0)
    return path
