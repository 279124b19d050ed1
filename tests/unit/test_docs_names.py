"""Every code name the prose cites exists (issue 39's "docstrings checked against the code").

The docs (docs/*.md, README.md) and the docstrings of src/recallbench name modules,
functions and tests in backticks. After a module is moved or renamed, or a function or a
test is, such a name keeps reading well and points at nothing. These tests resolve them
statically (the modules are parsed, never imported, so no optional dependency loads):

* a dotted name that starts with a module's name from before the layer packages
  (`spool.read_scope`, `markdown.MAX_COLUMNS`) is stale;
* a dotted name that starts with a recallbench module (`recallbench.builddir.paths`, or its
  last parts: `paths.claim_root`, `builddir.artifacts.STAGES`): the module exists and
  defines the next name at its top level (a class's attribute after it is not checked);
* a test name (`test_x`, `test_file.py::test_x`): some test file defines it (that file);
* a path `src/recallbench/...py`: the file exists.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src"
PACKAGE = SOURCE / "recallbench"
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

#: dotted strings in backticks that name no module: a schema name and an entry-point group
NOT_CODE = {"recallbench.result", "recallbench.rules", "recallbench.systems"}
#: the modules' names before the layer packages (issue 39): `spool.read_scope` is stale even
#: though no module of that name is left to resolve it against
RETIRED = {
    "buildpaths", "spool", "rows", "jsonstrict", "inputs", "stagework", "worker", "cache",
    "kit", "storekit", "markdown", "outputs", "workspace", "commandline",
}  # fmt: skip
#: a backticked file name (``compare.json``, ``bm25.py``) is not a dotted code name
FILE_SUFFIXES = {"py", "md", "json", "jsonl", "html", "js", "db", "sqlite", "bin", "toml"}
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")


def _module_names() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _module_names()


@functools.cache
def _top_level(module: str) -> frozenset[str]:
    """The names `module` binds at its top level (also inside a top-level if/try)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(inner.name)
            elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in inner.names)
            elif isinstance(inner, (ast.Assign, ast.AnnAssign)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(names)


def _defines(module: str, rest: list[str]) -> bool:
    if not rest:
        return True
    if f"{module}.{rest[0]}" in MODULES:
        return _defines(f"{module}.{rest[0]}", rest[1:])
    return rest[0] in _top_level(module)


@functools.cache
def _installed(top: str) -> bool:
    return importlib.util.find_spec(top) is not None


def unresolved(name: str) -> bool:
    """True when `name` starts with a recallbench module (in full, or its last parts) and
    no such module defines what follows; False for a name that resolves or names no
    recallbench module (a third-party one: `hotmem.search.search_memories`)."""
    parts = name.split(".")
    if name in NOT_CODE or parts[-1] in FILE_SUFFIXES:
        return False
    if parts[0] in RETIRED:
        return True
    if parts[0] != "recallbench" and _installed(parts[0]):
        return False  # an installed package of its own (hotmem, numpy, ...)
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        modules = [m for m in MODULES if m == head or m.endswith("." + head)]
        if modules:
            return not any(_defines(m, parts[cut:]) for m in modules)
    return parts[0] == "recallbench"


@functools.cache
def _docstrings() -> tuple[tuple[str, str], ...]:
    """(module:owner, docstring) of every module, class and function of the package."""
    found = []
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                text = ast.get_docstring(node, clean=False)
                if text:
                    found.append((f"{module}:{getattr(node, 'name', '<module>')}", text))
    return tuple(found)


def test_every_dotted_name_in_the_docs_and_the_readme_resolves() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{number}: `{name}`"
        for path in DOCS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in DOTTED.findall(line)
        if unresolved(name)
    ]
    assert not missing, "names no module defines:\n" + "\n".join(missing)


def test_every_dotted_name_in_a_docstring_resolves() -> None:
    missing = sorted(
        {
            f"{where}: `{name}`"
            for where, text in _docstrings()
            for name in DOTTED.findall(text)
            if unresolved(name)
        }
    )
    assert not missing, "names no module defines:\n" + "\n".join(missing)


def test_the_name_check_catches_a_moved_or_missing_name() -> None:
    assert not unresolved("recallbench.builddir.paths.claim_root")
    assert not unresolved("paths.claim_root")
    assert not unresolved("builddir.artifacts.STAGES")
    assert not unresolved("hotmem.search.search_memories")  # hotmem's own module
    assert not unresolved("compare.json")
    assert unresolved("recallbench.buildpaths")  # moved to builddir.paths
    assert unresolved("recallbench.builddir.paths.no_such_function")
    assert unresolved("metrics.turn_session")  # metrics/__init__ became metrics.arithmetic
    assert unresolved("datasets.base.no_rule")
    assert unresolved("markdown.MAX_COLUMNS")  # report/markdown.py became report/figures.py


def _texts() -> Iterator[tuple[str, str]]:
    """(where, text) of every line of the docs and of every docstring."""
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{path.relative_to(ROOT)}:{number}", line
    yield from _docstrings()


def test_every_test_the_docs_and_docstrings_cite_exists() -> None:
    tests = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py")}
    defined = {f: set(re.findall(r"def (test_\w+)", text)) for f, text in tests.items()}
    every = set().union(*defined.values())
    missing = []
    for where, text in _texts():
        for file, name in re.findall(r"`(?:tests/[\w/]+/)?(test_\w+\.py)::(test_\w+)", text):
            if name not in defined.get(file, ()):
                missing.append(f"{where}: {file}::{name}")
        for name in re.findall(r"`(test_\w+)(?:\[[^`\]]*\])?`", text):
            if name not in every:
                missing.append(f"{where}: {name}")
        missing += [f"{where}: {f}" for f in re.findall(r"(test_\w+\.py)", text) if f not in tests]
    assert not missing, "tests named that do not exist:\n" + "\n".join(missing)


def test_every_source_path_the_docs_cite_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {cited}"
        for path in DOCS
        for cited in re.findall(r"src/recallbench/[\w/]+\.py", path.read_text(encoding="utf-8"))
        if not (ROOT / cited).is_file()
    ]
    assert not missing, "\n".join(missing)
