"""The package's import graph: no cycle, and no module imports a higher layer.

The layers are the ones docs/architecture.md ("Layers") states, lowest first. Every import
counts, including the lazy ones inside functions (they are cycles all the same, only
deferred). A new module must be given a layer here, so the graph stays a reviewed decision.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "recallbench"

#: lowest first; a module belongs to the first layer with a pattern that matches its name
#: (a pattern ending in ".*" matches the package and everything under it)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        (
            "recallbench",
            "recallbench.errors",
            "recallbench.ids",
            "recallbench.escape",
            "recallbench.jsonstrict",
            "recallbench.inputs",
            "recallbench.buildpaths",
            "recallbench.progress",
            "recallbench.signals",
            "recallbench.exiting",
            "recallbench.threads",
            "recallbench.model",
            "recallbench.metrics.*",
            "recallbench.artifacts",
            "recallbench.rows",
            "recallbench.spool",
            "recallbench.lock",
            "recallbench.embedding",
            "recallbench.executor",
            "recallbench.trec",
            "recallbench.stats",
            "recallbench.peakrss",
            "recallbench.source",
        ),
    ),
    ("measures", ("recallbench.measures",)),
    ("system seam", ("recallbench.systems.base", "recallbench.boundary", "recallbench.cache")),
    ("datasets", ("recallbench.datasets.*",)),
    ("systems", ("recallbench.systems.*", "recallbench.plugin")),
    ("stage support", ("recallbench.worker", "recallbench.vectorprep", "recallbench.stagework")),
    ("report rendering", ("recallbench.report.*",)),
    ("stages", ("recallbench.stages.*",)),
    (
        "commands",
        (
            "recallbench.pipeline",
            "recallbench.compare",
            "recallbench.baseline",
            "recallbench.workspace",
            "recallbench.outputs",
            "recallbench.presets",
            "recallbench.protocols",
            "recallbench.checkplugin",
        ),
    ),
    ("interface", ("recallbench.options", "recallbench.commandline", "recallbench.cli")),
)

#: (importer, imported) edges that import a higher layer today, each to be cut; an entry that
#: no longer does fails the test, so the list only shrinks
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: same-layer edges that close a cycle today, each to be cut (an entry that no longer closes
#: one fails the test)
KNOWN_CIRCULAR: frozenset[tuple[str, str]] = frozenset()


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
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if pattern.endswith(".*"):
                if name == pattern[:-2] or name.startswith(pattern[:-1]):
                    return index
            elif name == pattern:
                return index
    raise AssertionError(f"{name} has no layer: add it to LAYERS and to docs/architecture.md")


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


def test_no_module_imports_a_higher_layer():
    upward = upward_edges(graph())
    new = sorted(upward - KNOWN_UPWARD)
    assert not new, "imports of a higher layer: " + "; ".join(f"{a} -> {b}" for a, b in new)
    mended = sorted(KNOWN_UPWARD - upward)
    assert not mended, "no longer upward, remove from KNOWN_UPWARD: " + "; ".join(
        f"{a} -> {b}" for a, b in mended
    )


def without(edges: dict[str, set[str]], cut: frozenset[tuple[str, str]]) -> dict[str, set[str]]:
    return {name: {t for t in targets if (name, t) not in cut} for name, targets in edges.items()}


def test_no_import_cycle_but_the_known_edges():
    edges = graph()
    assert cycles(without(edges, KNOWN_UPWARD | KNOWN_CIRCULAR)) == []
    for edge in sorted(KNOWN_CIRCULAR):
        assert cycles(without(edges, KNOWN_UPWARD | (KNOWN_CIRCULAR - {edge}))), (
            f"{edge[0]} -> {edge[1]} no longer closes a cycle: remove it from KNOWN_CIRCULAR"
        )


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
    source.write_text("def f():\n    from recallbench.cli import main\n", encoding="utf-8")
    found = imports_of("recallbench.mod", source, {"recallbench.cli", "recallbench.mod"})
    assert found == {"recallbench.cli"}
