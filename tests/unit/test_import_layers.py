"""The package's import graph: no cycle, and no module imports a higher layer.

A layer is a package of `recallbench` (docs/architecture.md, "Layers", lowest first); only
two modules sit at the top: the package itself (its version) and `recallbench.plugin`, the
plugin surface. Every import counts, including the lazy ones inside functions (they are
cycles all the same, only deferred). There is no exception list: a new package must be
given a layer here, so the graph stays a reviewed decision.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "recallbench"

#: lowest first: (layer, the packages and top-level modules in it)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("recallbench", "recallbench.core")),
    ("build directory", ("recallbench.builddir",)),
    ("metrics", ("recallbench.metrics",)),
    ("datasets", ("recallbench.datasets",)),
    ("systems", ("recallbench.systems", "recallbench.plugin")),
    ("engine", ("recallbench.engine",)),
    ("report", ("recallbench.report",)),
    ("stages", ("recallbench.stages",)),
    ("commands", ("recallbench.commands",)),
    ("cli", ("recallbench.cli",)),
)

#: the only modules directly under src/recallbench; everything else lives in a layer's package
TOP_LEVEL_MODULES = ("__init__.py", "plugin.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every recallbench module `name` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                child = f"{source}.{alias.name}"
                found.add(child if child in known else source)
    return {imported for imported in found if imported in known and imported != name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def layer_of(name: str) -> int:
    """The index of the layer whose package holds `name` (the top package and the plugin
    surface are named exactly)."""
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if name == member or (member != "recallbench" and name.startswith(member + ".")):
                return index
    raise AssertionError(
        f"{name} has no layer: add its package to LAYERS and to docs/architecture.md"
    )


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def upward_edges(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (importer, imported)
        for importer, targets in edges.items()
        for imported in targets
        if layer_of(imported) > layer_of(importer)
    }


def test_every_module_has_a_layer():
    for name in modules():
        layer_of(name)


def test_the_top_level_holds_only_packages_and_the_plugin_surface():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in TOP_LEVEL_MODULES)
    assert loose == [], "move these into their layer's package: " + ", ".join(loose)
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    layered = {m.split(".")[1] for _, members in LAYERS for m in members if m.count(".") == 1}
    assert packages == layered - {"plugin"}


def test_no_module_imports_a_higher_layer():
    upward = sorted(upward_edges(graph()))
    assert not upward, "imports of a higher layer: " + "; ".join(f"{a} -> {b}" for a, b in upward)


def test_no_import_cycle():
    assert cycles(graph()) == []


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_cycles_finds_circles(edges, expected):
    assert cycles(edges) == expected


def test_a_lazy_import_inside_a_function_counts(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from recallbench.cli.main import main\n", encoding="utf-8")
    found = imports_of("recallbench.mod", source, {"recallbench.cli.main", "recallbench.mod"})
    assert found == {"recallbench.cli.main"}
