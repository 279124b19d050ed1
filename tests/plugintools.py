"""Install a test plugin: a module written from source and its entry points, for this
process (`install_plugin`) or as a distribution other processes find too (`dist_plugin`)."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from recallbench.systems import registry
from recallbench.systems.registry import GROUP


@contextmanager
def install_plugin(
    monkeypatch: pytest.MonkeyPatch,
    where: Path,
    module: str,
    source: str,
    points: Mapping[str, str],
) -> Iterator[object]:
    """`source` as module `module` in `where`, its entry points (system name -> factory
    name) the only ones of `recallbench.systems` in this process; yields the module."""
    (where / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(where))
    found = [
        importlib.metadata.EntryPoint(name, f"{module}:{factory}", GROUP)
        for name, factory in points.items()
    ]
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **params: found if params.get("group") == GROUP else [],
    )
    registry.clear_cache()
    try:
        yield __import__(module)
    finally:
        registry.clear_cache()
        sys.modules.pop(module, None)


def dist_plugin(where: Path, module: str, source: str, points: Mapping[str, str]) -> Path:
    """`source` as module `module` with a ``.dist-info`` holding its entry points, in
    `where`: an installed distribution for any process with `where` on its path."""
    (where / f"{module}.py").write_text(source)
    info = where / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{n} = {module}:{f}\n" for n, f in points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + lines)
    return where
