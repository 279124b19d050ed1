"""A worker that died under a task, as the engines report it: `WorkerDied`, one line naming
the worker and the task it was running (`task_label`). Shared by the local process engine
(`recallbench.engine.processes`) and the Ray engine (`recallbench.engine.ray_engine`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallbench.core.errors import RecallbenchError


def task_label(fn: Callable[..., Any], item: Any) -> str:
    """The task `fn(item)` in a few words, for a message: the function and, when the item
    says, its scope (a stage task's items) and query slice."""
    name = getattr(fn, "__name__", repr(fn))
    if isinstance(item, dict) and "fn" in item and "items" in item:  # workerstate.run_batch
        inner = [task_label(item["fn"], i) for i in item["items"]]
        if len(inner) == 1:
            return inner[0]
        return f"{inner[0]} ... {inner[-1]} ({len(inner)} tasks in one batch)"
    if not isinstance(item, dict):
        return name
    scope = None
    for key in ("ref", "scope"):
        if isinstance(item.get(key), dict) and "scope_id" in item[key]:
            scope = item[key]["scope_id"]
    parts = []
    if scope is not None:
        parts.append(f"scope {scope!r}")
    elif "index" in item:
        parts.append(f"scope #{item['index']}")
    span = item.get("queries")
    if isinstance(span, list | tuple) and len(span) == 2:
        parts.append(f"queries {span[0] + 1}-{span[1]}")
    return name + (f" of {', '.join(parts)}" if parts else "")


class WorkerDied(RecallbenchError):
    """A worker process or Ray actor died under a task (killed, out of memory, a crash)."""
