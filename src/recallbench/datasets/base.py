"""What a dataset reader is: the contract between a data source and the seven stages.

A reader module exposes ``open_source(paths, options) -> Source``, ``measures(top_k,
options)`` (the measures a run is scored with) and, when the dataset has decision rules,
``decide(scores) -> decision``. A `Source`:

* identifies its data (`identity()`, complete once `stream()` has been exhausted, since
  file digests are computed on the same pass that parses the bytes);
* streams `Scope`s and `Drop`s in a fixed order (`stream()`), never loading a whole file;
* declares its scoring `levels` (primary first), its `categories` (report order) with
  human `category_labels`, its `drop_rules` (reason code -> sentence), its `measures` for a
  run's top-k, its decision policy (`decide`, or None when the dataset has no rules), and
  `notes` (sentences the report prints under the dataset's name);
* may add dataset-specific counts (`summary()`, after streaming) that the report lists.

Stages never branch on the dataset's name: everything they need comes through here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from recallbench.errors import RecallbenchError

if TYPE_CHECKING:  # the CLI imports this module for its names: keep start-up light
    from recallbench.model import Drop, Level, Scope

#: dataset name -> module that defines ``open_source`` (imported only when used)
DATASETS: dict[str, str] = {
    "fixtures": "recallbench.datasets.fixtures",
    "longmemeval": "recallbench.datasets.longmemeval.reader",
    "locomo": "recallbench.datasets.locomo.reader",
}
DEFAULT_DATASET = "fixtures"
UNITS: tuple[str, ...] = ("session", "turn")

Progress = Callable[[int], Any]


class Source(Protocol):
    """An opened dataset (see the module docstring)."""

    name: str
    levels: tuple[Level, ...]
    categories: tuple[str, ...]
    category_labels: Mapping[str, str]
    drop_rules: Mapping[str, str]
    notes: tuple[str, ...]
    #: the options that shaped the scopes (unit, text mode, ...), recorded in suite.json
    options: Mapping[str, Any]
    #: total bytes of the source files, for byte progress bars
    size_bytes: int

    def stream(self, progress: Progress | None = None) -> Iterator[Scope | Drop]: ...

    def identity(self) -> dict[str, Any]:
        """{"dataset", "files": [{"role", "name", "size_bytes", "sha256"}], "known": bool,
        "label": sentence}. Valid after `stream()` was exhausted."""

    def summary(self) -> dict[str, Any]:
        """Dataset-specific counts gathered while streaming (may be empty)."""

    def measures(self, top_k: int, ks: Sequence[int] | None = None) -> list[Any]:
        """The measures (recallbench.measures objects) to score a run with cutoff top_k (at
        the cutoffs `ks`, when the run has its own)."""

    decide: Callable[[Mapping[str, Any]], dict[str, Any]] | None


def dataset_module(name: str) -> Any:
    """The reader module of dataset `name` (imported on first use)."""
    if name not in DATASETS:
        raise RecallbenchError(f"unknown dataset '{name}' (known: {', '.join(DATASETS)})")
    return importlib.import_module(DATASETS[name])


def open_source(
    name: str, paths: Mapping[str, Path], options: Mapping[str, Any] | None = None
) -> Source:
    """Open dataset `name` on `paths` (role -> path) with reader `options`."""
    return dataset_module(name).open_source(dict(paths), dict(options or {}))


def dataset_measures(
    name: str, top_k: int, options: Mapping[str, Any], ks: Sequence[int] | None = None
) -> list[Any]:
    """The measures dataset `name` scores a run with (module-level ``measures``), at the
    run's own cutoffs `ks` when it has them (`--k`), else at the dataset's defaults."""
    module = dataset_module(name)
    if not ks:
        return module.measures(top_k, dict(options))
    return module.measures(top_k, dict(options), ks=list(ks))


def dataset_policy(name: str) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
    """The dataset's decision rules (module-level ``decide``), or None when it has none."""
    return getattr(dataset_module(name), "decide", None)


def dataset_policy_name(name: str) -> str | None:
    """The name of the dataset's decision policy (``POLICY_NAME``), or None without one."""
    module = dataset_module(name)
    if getattr(module, "decide", None) is None:
        return None
    return getattr(module, "POLICY_NAME", f"{name} rules")
