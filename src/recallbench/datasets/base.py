"""What a dataset reader is: the contract between a data source and the seven stages.

Each dataset is declared once, by a `DatasetSpec` (``SPEC`` in its package's ``spec``
module: name, reader, measure family, decision policy, default top-k, command-line options,
generator command, docs page); `DATASETS` is the registry of those specs, found without
importing any reader. The package's ``measures`` module holds its measure family,
``family(levels, top_k, ks, options) -> list[Measure]`` (the measures a run is scored with,
found by `family_measures` without the reader). The reader module exposes
``open_source(paths, options) -> Source`` and, when the dataset has decision rules,
``decide(evidence) -> decision`` (evidence: the scores artifact's data with the round
trip's summary under ``"roundtrip"``, see `systems.rules.decide_run`). A `Source`:

* identifies its data (`identity()`, complete once `stream()` has been exhausted, since
  file digests are computed on the same pass that parses the bytes);
* streams `Scope`s and `Drop`s in a fixed order (`stream()`), never loading a whole file;
* declares its scoring `levels` (primary first), its `categories` (report order) with
  human `category_labels`, its `drop_rules` (reason code -> sentence) and `notes`
  (sentences the report prints under the dataset's name); its measures and decision policy
  are the spec's (`DatasetSpec.measures`, `DatasetSpec.policy`), not the source's;
* may add dataset-specific counts (`summary()`, after streaming) that the report lists.

Stages never branch on the dataset's name: everything they need comes through here.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from recallbench.core.errors import RecallbenchError

if TYPE_CHECKING:  # the CLI imports this module for its names: keep start-up light
    from recallbench.core.model import Drop, Level, Scope
    from recallbench.metrics.measures import Measure

DEFAULT_DATASET = "fixtures"
#: what one memory of a conversational dataset is (`--unit`)
UNITS: tuple[str, ...] = ("session", "turn")


@dataclass(frozen=True)
class DatasetOption:
    """One command-line option of a dataset, as data (the CLI, `dataset_inputs` and the docs
    tables are generated from it).

    `type` is ``"file"`` (a path, passed to the reader as ``paths[role]``) or ``"choice"``
    (one of `choices`, passed as ``options[param]``). `default` is the reader's default, for
    the docs (the option itself defaults to None: unset means the reader's default);
    `default_file` is a file option's default, a file name in the fixture directory.
    `refused_elsewhere`: given with a dataset that does not declare it, the CLI refuses it (a
    usage error) instead of passing it to that reader, which names it in its own error.
    `doc` is the docs' longer sentence (docs/stages.md's table; `help` when empty).
    `dir_okay`: a file option that may name a directory (LoCoMo's per-conversation layout);
    the reader checks what it holds. Two datasets declaring the same flag must declare the
    same option."""

    flag: str
    type: str
    help: str
    choices: tuple[str, ...] = ()
    default: str | None = None
    role: str | None = None
    default_file: str | None = None
    required: bool = False
    refused_elsewhere: bool = False
    doc: str = ""
    dir_okay: bool = False

    @property
    def param(self) -> str:
        """The click parameter name (``--session-text`` -> ``session_text``)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def metavar(self) -> str:
        return "FILE" if self.type == "file" else "|".join(self.choices)


#: the options two or more datasets share (declared once, so their declarations agree)
DATA_OPTION = DatasetOption(
    "--data",
    "file",
    "The data file (LoCoMo: also its per-conversation directory or zip)",
    role="data",
    required=True,
    doc="the data file (required; refused for the datasets that do not read one); for "
    "`locomo` also the per-conversation layout, as a directory of `<n>.json` files or the "
    "zip ([LoCoMo](locomo.md#layouts-the-array-file-or-one-file-per-conversation))",
    dir_okay=True,
)
UNIT_OPTION = DatasetOption(
    "--unit",
    "choice",
    "One memory per session (default) or per turn",
    choices=UNITS,
    default="session",
    doc="one memory per session or per turn; with `turn` the session figures are kept and "
    "turn figures (`turn_...`) are added",
)


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset, declared: everything the CLI, the stages and the docs need to know about
    it without importing its reader (which `open` imports on first use).

    References to code are ``"module"`` or ``"module:attribute"`` strings, resolved only
    when used. `measures` is the measure family, a function of (levels, top_k, ks, options)
    in a module that imports no reader (resolved in `family_measures` only). `policy` is the
    decision rules (a function of the scores), `policy_name` the name suite.json records,
    `policy_systems` the systems the rules were written for (they fire for those only; empty:
    every system) and `policy_roadmap` whose plan they are (the line a system outside
    `policy_systems` gets: "the committed rules are HotMem's roadmap; no rule applies to
    bm25").
    `generator` is the module whose ``_cli()`` gives the ``recallbench <name>`` click group.
    `title`, `reads`, `what` and `scope` are the docs tables' cells; `docs` is its page.
    `order` places it in listings (`--dataset` choices, the tables): the lowest first.
    `example` is the usual name of a user's data file (nox's usage line), None for a dataset
    whose files are committed (no nox session of its own)."""

    name: str
    title: str
    reader: str
    measures: str
    top_k: int
    options: tuple[DatasetOption, ...]
    docs: str
    reads: str
    what: str
    scope: str
    policy: str | None = None
    policy_name: str | None = None
    policy_systems: tuple[str, ...] = ()
    policy_roadmap: str | None = None
    generator: str | None = None
    order: int = 100
    example: str | None = None

    def open_source(self, paths: Mapping[str, Path], options: Mapping[str, Any]) -> Source:
        """Open this dataset on `paths` (role -> path) with reader `options`."""
        return resolve(self.reader + ":open_source")(dict(paths), dict(options))


def resolve(ref: str) -> Any:
    """The object a ``"module:attribute"`` (or ``"module"``) reference names."""
    module, _, attr = ref.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


def _discover() -> dict[str, DatasetSpec]:
    """Every ``SPEC`` of a ``recallbench.datasets.<package>.spec`` module, by `order` then
    name. Only the small spec modules are imported, never a reader."""
    import recallbench.datasets as package

    found: dict[str, DatasetSpec] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg:
            continue
        name = f"{package.__name__}.{info.name}.spec"
        if importlib.util.find_spec(name) is None:
            continue
        spec = importlib.import_module(name).SPEC
        found[spec.name] = spec
    order = sorted(found, key=lambda n: (found[n].order, n))
    return {n: found[n] for n in order}


#: dataset name -> its declaration (found by `_discover`; a test may register its own)
DATASETS: dict[str, DatasetSpec] = _discover()


def dataset_spec(name: str) -> DatasetSpec:
    """The declaration of dataset `name`: the one place a dataset's name is looked up."""
    if name not in DATASETS:
        raise RecallbenchError(f"unknown dataset '{name}' (known: {', '.join(DATASETS)})")
    return DATASETS[name]


def shared_options() -> dict[str, tuple[DatasetOption, tuple[str, ...]]]:
    """flag -> (its declaration, the datasets declaring it), in first-declared order; a
    RecallbenchError when two datasets declare one flag differently."""
    out: dict[str, tuple[DatasetOption, tuple[str, ...]]] = {}
    for spec in DATASETS.values():
        for option in spec.options:
            if option.flag in out:
                first, owners = out[option.flag]
                if first != option:
                    raise RecallbenchError(
                        f"datasets {owners[0]} and {spec.name} declare {option.flag} differently"
                    )
                out[option.flag] = (first, (*owners, spec.name))
            else:
                out[option.flag] = (option, (spec.name,))
    return out


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


def open_source(
    name: str, paths: Mapping[str, Path], options: Mapping[str, Any] | None = None
) -> Source:
    """Open dataset `name` on `paths` (role -> path) with reader `options`."""
    return dataset_spec(name).open_source(paths, dict(options or {}))


def suite_family(suite: Mapping[str, Any]) -> str:
    """The measure family a suite (suite.json's data) is scored with: its ``measure_family``,
    else its dataset's name."""
    return suite.get("measure_family") or suite["dataset"]


def family_measures(
    name: str,
    levels: Sequence[Level | Mapping[str, Any]],
    top_k: int,
    ks: Sequence[int] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Measure]:
    """The measures of dataset `name`'s measure family (its spec's `measures`) for these
    levels (Level values or suite.json's level records, the primary level first), the run's
    top-k, its own cutoffs `ks` (`--k`; None: the family's defaults) and reader options.
    Imports the family's module only, never the reader."""
    from recallbench.metrics.measures import as_level, distinct

    if name not in DATASETS:
        raise RecallbenchError(f"no measure family {name!r} (known: {', '.join(DATASETS)})")
    family = resolve(DATASETS[name].measures)
    return distinct(family([as_level(lv) for lv in levels], top_k, ks or None, dict(options or {})))


def dataset_policy(name: str) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
    """The dataset's decision rules, or None when it has none."""
    policy = dataset_spec(name).policy
    return None if policy is None else resolve(policy)


def roundtrip_summary(roundtrip: Mapping[str, Any]) -> dict[str, Any]:
    """What a decision policy reads of a roundtrip artifact's data: whether the round trip
    ran, its equivalence cell, whether every corruption was rejected, the queries whose
    ranking drifted and how many scopes were sampled."""
    if not roundtrip.get("available"):
        return {"available": False, "reason": roundtrip.get("reason"), "equivalence": None}
    return {
        "available": True,
        "equivalence": roundtrip["equivalence"],
        "corruption_rejected": all(c["all_rejected"] for c in roundtrip["corruption_checks"]),
        "drifted_queries": sorted(
            q for q, d in roundtrip["per_query"].items() if not d["identical"]
        ),
        "scopes_sampled": roundtrip["sample"]["scopes_sampled"],
    }


#: the entry-point group through which an installed package declares decision rules for its
#: own systems (each entry point's object is a `DecisionRules`)
RULES_GROUP = "recallbench.rules"


@dataclass(frozen=True)
class DecisionRules:
    """Decision rules a plugin declares for its own systems on one dataset (entry point
    group `RULES_GROUP`). `decide` is called like a dataset's policy (the scores artifact's
    data with the round trip's summary under ``"roundtrip"``) and returns the decision
    (`policy`, `rule`, `action`, `recommendation`, `evidence`, `top_k`, `rules`,
    `guardrails`; see docs/systems.md)."""

    name: str
    dataset: str
    systems: tuple[str, ...]
    decide: Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class InstalledRules:
    """A `DecisionRules` an installed package declares, with the distribution (name and
    version; None when the entry point has no distribution metadata) and the entry point
    (`name = module:object`) it comes from."""

    rules: DecisionRules
    distribution: str | None
    version: str | None
    entry_point: str


def plugin_rules() -> list[InstalledRules]:
    """Every installed package's `DecisionRules` (entry point group `RULES_GROUP`), by
    entry-point name, each with where it comes from; one that does not load or is not a
    `DecisionRules` is an error naming it, never silently skipped (a decision must not
    depend on what failed to import). Which of them may decide a run is
    `recallbench.systems.rules`' to say."""
    from importlib.metadata import entry_points

    found = []
    for point in sorted(entry_points(group=RULES_GROUP), key=lambda p: p.name):
        try:
            rules = point.load()
        except Exception as exc:  # a plugin's own failure: one line naming it
            raise RecallbenchError(
                f"decision rules {point.name} ({point.value}) do not load: {exc}"
            ) from None
        if not isinstance(rules, DecisionRules):
            raise RecallbenchError(
                f"decision rules {point.name} ({point.value}) are not a "
                "recallbench.datasets.base.DecisionRules"
            )
        dist = getattr(point, "dist", None)
        found.append(
            InstalledRules(
                rules,
                None if dist is None else dist.metadata["Name"],
                None if dist is None else dist.version,
                f"{point.name} = {point.value}",
            )
        )
    return found


def _no_rule(scores: Mapping[str, Any], recommendation: str) -> dict[str, Any]:
    return {
        "policy": None,
        "rule": None,
        "action": None,
        "recommendation": recommendation,
        "evidence": {},
        "top_k": scores["top_k"],
        "rules": [],
        "guardrails": [],
    }


def no_rule_decision(
    suite: Mapping[str, Any], scores: Mapping[str, Any], system: Any
) -> dict[str, Any]:
    """The decision when no rule applies to `system` on the suite's dataset: a plain
    one-line statement (the dataset defines no rules, or its rules were written for other
    systems), no advice. Which rules do apply is `recallbench.systems.rules`' to say."""
    dataset = suite["dataset"]
    spec = dataset_spec(dataset)
    if spec.policy is None:
        return _no_rule(
            scores, f"no decision rules: the {dataset} dataset defines none; read the metrics"
        )
    roadmap = spec.policy_roadmap or f"the {dataset} dataset's rules"
    return _no_rule(scores, f"the committed rules are {roadmap}; no rule applies to {system}")


def dataset_policy_name(name: str) -> str | None:
    """The name of the dataset's decision policy, or None without one."""
    spec = dataset_spec(name)
    return None if spec.policy is None else (spec.policy_name or f"{name} rules")
