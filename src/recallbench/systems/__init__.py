"""Systems under test, behind one seam (`base.System`), looked up by name (`get_system`):
a stage resolves its system once per process (`registry.resolve_system`).

Names come from the registry (`registry.py`): the built-ins, each registered in its own
module, and third-party systems installed as entry points (group `recallbench.systems`).
Importing this package imports no system (no hotmem, bm25s or torch).
"""

from __future__ import annotations

from recallbench.systems.registry import (
    DEFAULT_SYSTEM,
    core_system_names,
    describe_systems,
    get_system,
    system_names,
)

__all__ = ["DEFAULT_SYSTEM", "core_system_names", "describe_systems", "get_system", "system_names"]
