"""No stage imports another stage: what two stages share lives outside `recallbench.stages`
(`recallbench.engine.workerstate`, `recallbench.engine.tasks`, `recallbench.engine.vectorprep`, the model).

Every module of src/recallbench/stages is parsed (ast), and every import in it is checked,
lazy ones inside functions included, in each form: `import recallbench.stages.x`,
`from recallbench.stages import x`, `from recallbench.stages.x import y` and relative
imports (`from . import x`, `from .x import y`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STAGES = Path(__file__).resolve().parents[2] / "src" / "recallbench" / "stages"
PACKAGE = "recallbench.stages"


def stage_modules() -> list[Path]:
    return sorted(p for p in STAGES.glob("*.py") if p.name != "__init__.py")


def stage_names() -> set[str]:
    return {p.stem for p in stage_modules()}


def imported_stages(source: str, own: str) -> list[tuple[int, str]]:
    """(line, stage module) for every import in `source` (the module `own`) that names a
    stage module other than `own`."""
    names = stage_names()
    found: list[tuple[int, str]] = []

    def add(line: int, dotted: str) -> None:
        """`dotted` is a module name or a name imported from a module."""
        if dotted == PACKAGE or not dotted.startswith(PACKAGE + "."):
            return
        stage = dotted[len(PACKAGE) + 1 :].split(".")[0]
        if stage in names and stage != own:
            found.append((line, stage))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative to recallbench.stages (a stage module's package)
                parts = PACKAGE.split(".")[: len(PACKAGE.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            add(node.lineno, base)
            if base == PACKAGE:  # from recallbench.stages import x
                for alias in node.names:
                    add(node.lineno, f"{base}.{alias.name}")
    return found


def test_the_stages_are_there() -> None:
    """The check below looks at something: the stage modules the docs name."""
    assert {"validate", "prep", "hydrate", "query", "roundtrip", "score", "report", "decide"} <= (
        stage_names()
    )
    assert not (STAGES / "tasks.py").exists()


@pytest.mark.parametrize("path", stage_modules(), ids=lambda p: p.name)
def test_no_stage_imports_another_stage(path: Path) -> None:
    bad = imported_stages(path.read_text(encoding="utf-8"), path.stem)
    assert not bad, "; ".join(
        f"{path.name}:{line} imports recallbench.stages.{stage}" for line, stage in bad
    )


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("from recallbench.stages.hydrate import stores_root", 1),
        ("from recallbench.stages import hydrate", 1),
        ("from recallbench.stages import decide, hydrate", 1),
        ("import recallbench.stages.hydrate", 1),
        ("import recallbench.stages.hydrate as h", 1),
        ("def f():\n    from recallbench.stages.hydrate import run_hydrate\n", 2),
        ("class C:\n    def m(self):\n        import recallbench.stages.hydrate\n", 3),
        ("from . import hydrate", 1),
        ("from .hydrate import Truncation", 1),
        ("from ..stages import hydrate", 1),
    ],
)
def test_the_check_finds_every_form_of_import(source: str, line: int) -> None:
    found = imported_stages(source, "query")
    assert (line, "hydrate") in found
    assert {stage for _, stage in found} <= {"hydrate", "decide"}


@pytest.mark.parametrize(
    "source",
    [
        "from recallbench.stages.query import run_query",  # its own module
        "from recallbench import worker",
        "from recallbench.engine.tasks import Execution",
        "import recallbench.stages",
        "from . import query",
        "from recallbench.stages_extra import hydrate",
    ],
)
def test_the_check_allows_what_is_not_another_stage(source: str) -> None:
    assert imported_stages(source, "query") == []
