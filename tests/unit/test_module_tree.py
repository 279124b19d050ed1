"""docs/architecture.md's module tree names every module of the package, and only those:
a module added without its line (or a line left for a module that is gone) fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "recallbench"
#: a tree line: its indentation, then a directory (`name/`) or a module (`name.py`)
LINE = re.compile(r"^( *)([A-Za-z_][A-Za-z0-9_]*(?:/|\.py))(?:\s|$)")


def documented_modules() -> set[str]:
    """The paths (relative to src/recallbench) the "Module tree" block lists."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Module tree", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[0] == "src/recallbench/"
    out: set[str] = set()
    parents: list[tuple[int, str]] = []  # (indentation, directory) of the open directories
    for line in lines[1:]:
        match = LINE.match(line)
        if match is None:
            continue  # a description's continuation
        indent, name = len(match.group(1)), match.group(2)
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = "".join(d for _, d in parents) + name
        if name.endswith("/"):
            parents.append((indent, name))
        else:
            out.add(path)
    return out


def package_modules() -> set[str]:
    """Every module of the package (a package's `__init__.py` only when it defines a
    function or a class: else it is the package's marker, constants and re-exports)."""
    out = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            if not any(isinstance(node, kinds) for node in tree.body):
                continue
        out.add(path.relative_to(PACKAGE).as_posix())
    return out


def test_the_module_tree_lists_every_module() -> None:
    documented, actual = documented_modules(), package_modules()
    assert sorted(actual - documented) == [], "add these to docs/architecture.md's module tree"
    assert sorted(documented - actual) == [], "docs/architecture.md names modules that are gone"
