"""Systems under test, behind one seam (`base.System`). Stages look them up by name here."""

from __future__ import annotations

from recallbench.errors import RecallbenchError
from recallbench.systems.base import System

#: Systems of the core install.
CORE_SYSTEMS: tuple[str, ...] = ("hotmem", "hotmem-mmr", "bm25")
#: Every system; `hotmem-minilm` needs the optional `semantic` extra (a learned embedder).
SYSTEM_NAMES: tuple[str, ...] = (*CORE_SYSTEMS, "hotmem-minilm")
DEFAULT_SYSTEM = "hotmem"


def get_system(name: str = DEFAULT_SYSTEM) -> System:
    """Build a fresh system instance by name; unknown names are a user error."""
    if name not in SYSTEM_NAMES:
        raise RecallbenchError(f"unknown system '{name}' (known: {', '.join(SYSTEM_NAMES)})")
    if name == "bm25":
        from recallbench.systems.bm25 import BM25System

        return BM25System()
    from recallbench.systems.hotmem import build_system

    return build_system(name)
