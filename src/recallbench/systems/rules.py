"""Which decision rules decide a run, where they come from, and running them safely.

A run's decision comes from one of (`chosen_rules`):

* a plugin's `DecisionRules` (entry point group `recallbench.rules`) naming the dataset and
  the system, accepted only from the distribution that provides the system: a package may
  declare rules for its own systems, never for another's nor for a built-in (`run --system
  bm25` would print another package's advice as recallbench's). Rules from any other
  distribution are refused in one line naming both; so are two rule sets for one system;
* else the dataset's own policy, for the systems it was written for (`policy_systems`);
* else none: a one-line statement that no rule applies (`datasets.base.no_rule_decision`).

A plugin's rules are code recallbench does not control, so they run at the boundary
(`recallbench.systems.boundary`), as a system's calls do: under `--call-timeout`, whatever they
raise, exit with or hang on is one line naming the rules and their distribution, and what
they return is checked (`checked_decision`: an object with the decision's fields, of their
types, holding JSON with finite numbers only: no NaN reaches decision.json, `run --json`
or the report). They get a copy of the evidence, so they cannot change the scores the
result reports.

Where the rules came from (`RulesSource.record()`: name, kind, distribution, version, and
the entry point or dataset) is recorded beside the result, in the `provenance.rules` of
results.json and decision.json (so the baseline, which compares the result document, is
unchanged), and the report's Conclusion names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from recallbench.core.errors import RecallbenchError
from recallbench.datasets import base
from recallbench.systems.boundary import Boundary, SystemCallFailed, kind_of, system_boundary

#: the fields of a decision and the types of their values (None allowed where listed)
DECISION_FIELDS: dict[str, tuple[type, ...]] = {
    "policy": (str, type(None)),
    "rule": (int, str, type(None)),
    "action": (str, type(None)),
    "recommendation": (str,),
    "evidence": (dict,),
    "top_k": (int,),
    "rules": (list,),
    "guardrails": (list,),
}
#: the fields of each entry of a decision's `rules` (the report lists them)
RULE_FIELDS: dict[str, tuple[type, ...]] = {
    "rule": (int, str),
    "condition": (str,),
    "measured": (dict,),
    "met": (bool,),
    "fired": (bool,),
}
#: how deeply a decision may nest (a cycle would recurse forever)
MAX_DEPTH = 64


@dataclass(frozen=True)
class RulesSource:
    """Where a run's decision rules come from: a plugin's (`distribution`, `version`,
    `entry_point`) or a dataset's (`dataset`; recallbench's own code)."""

    name: str
    kind: str  # "plugin" or "dataset"
    distribution: str | None
    version: str | None
    entry_point: str | None = None
    dataset: str | None = None

    def record(self) -> dict[str, Any]:
        """What results.json and decision.json record (`provenance.rules`)."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "distribution": self.distribution,
            "version": self.version,
        }
        if self.entry_point is not None:
            out["entry_point"] = self.entry_point
        if self.dataset is not None:
            out["dataset"] = self.dataset
        return out

    def describe(self, code: Callable[[str], str] = str, text: Callable[[str], str] = str) -> str:
        """Where the rules came from, as the report says it: `code` formats the names (the
        rules' and the entry point), `text` the rest's data (escaping for an output)."""
        if self.kind == "plugin":
            return (
                f"{code(self.name)}, from the plugin {text(str(self.distribution))} "
                f"{text(str(self.version))} (entry point {code(str(self.entry_point))})"
            )
        return (
            f"{code(self.name)}, the {text(str(self.dataset))} dataset's, from "
            f"{text(str(self.distribution))} {text(str(self.version))}"
        )

    def subject(self) -> str:
        """How messages name the rules: `decision rules 'NAME' (DIST VERSION)`."""
        return f"decision rules '{self.name}' ({self.distribution} {self.version})"


@dataclass(frozen=True)
class ChosenRules:
    """The rules that decide one run: `decide(evidence)` and where they come from."""

    source: RulesSource
    decide: Callable[[Mapping[str, Any]], Any]


#: a decision and where its rules came from (None: no rule applies), as `decide_run` gives
Decided = tuple[dict[str, Any], RulesSource | None]


def _canonical(name: str | None) -> str | None:
    """A distribution name as packaging compares them (`source.canonical_name`), or None."""
    from recallbench.core.source import canonical_name

    return None if name is None else canonical_name(name)


def system_provider(system: str) -> dict[str, Any]:
    """The distribution installed now that provides `system` (`registry.provider`)."""
    from recallbench.systems.registry import provider

    return provider(system)


def chosen_rules(dataset: str, system: str) -> ChosenRules | None:
    """The rules that decide a run of `system` on `dataset` (see the module docstring), or
    None when none applies. A plugin's rule set for `system` from a distribution other than
    the one that provides it, and two rule sets for it, are refused in one line."""
    mine = [
        r for r in base.plugin_rules() if r.rules.dataset == dataset and system in r.rules.systems
    ]
    owner = system_provider(system) if mine else {}
    for installed in mine:
        if installed.distribution is None or _canonical(installed.distribution) != _canonical(
            owner["distribution"]
        ):
            provided = (
                f"which {owner['distribution']} {owner['version']} provides"
                if owner["distribution"]
                else "which no installed distribution provides"
            )
            origin = (
                f"{installed.distribution} {installed.version}"
                if installed.distribution
                else "no distribution"
            )
            raise RecallbenchError(
                f"decision rules '{installed.rules.name}' ({origin}, entry point "
                f"{installed.entry_point}) are for the system '{system}', {provided}: only "
                "the package that provides a system may declare its rules; uninstall "
                f"{installed.distribution or 'the package of that entry point'}"
            )
    if len(mine) > 1:
        raise RecallbenchError(
            f"{len(mine)} installed rule sets apply to {system} on {dataset} "
            f"({', '.join(r.rules.name for r in mine)}); uninstall all but one"
        )
    if mine:
        installed = mine[0]
        source = RulesSource(
            installed.rules.name,
            "plugin",
            installed.distribution,
            installed.version,
            entry_point=installed.entry_point,
        )
        return ChosenRules(source, installed.rules.decide)
    spec = base.dataset_spec(dataset)
    policy = base.dataset_policy(dataset)
    if policy is None or (spec.policy_systems and system not in spec.policy_systems):
        return None
    from recallbench import __version__

    name = spec.policy_name or f"{dataset} rules"  # as base.dataset_policy_name says it
    return ChosenRules(
        RulesSource(name, "dataset", "recallbench", __version__, dataset=dataset), policy
    )


def decide_run(
    suite: Mapping[str, Any],
    scores: Mapping[str, Any],
    roundtrip: Mapping[str, Any],
    *,
    call_timeout: float | None = None,
) -> Decided:
    """The decision of a run (a suite's, scores' and round trip's data) and where its
    rules came from (None: no rule applies). The rules read the scores with the round
    trip's summary under ``"roundtrip"``; the system is the round trip's (every roundtrip
    artifact names it). Deterministic: the same data give the same decision. A plugin's
    rules run at the boundary, within `call_timeout` seconds (None: no limit)."""
    dataset = suite["dataset"]
    system = roundtrip.get("system")
    chosen = chosen_rules(dataset, str(system))
    if chosen is None:
        return base.no_rule_decision(suite, scores, system), None
    evidence = {**scores, "roundtrip": base.roundtrip_summary(roundtrip)}
    if chosen.source.kind == "dataset":  # recallbench's own code: no boundary to cross
        return chosen.decide(evidence), chosen.source
    guard = system_boundary(str(system), call_timeout, subject=chosen.source.subject())
    where = f"{system} on {dataset}"
    copied = orjson.loads(orjson.dumps(evidence))  # theirs to change, not the scores
    made = guard.call("decide", where, chosen.decide, copied)
    return checked_decision(made, guard, where), chosen.source


def decide_envelopes(
    suite_env: Mapping[str, Any],
    scores_env: Mapping[str, Any],
    roundtrip_env: Mapping[str, Any],
    *,
    call_timeout: float | None = None,
) -> Decided:
    """`decide_run` on the data of a suite's, a scores' and a roundtrip's envelope."""
    return decide_run(
        suite_env["data"], scores_env["data"], roundtrip_env["data"], call_timeout=call_timeout
    )


def decision(
    suite: Mapping[str, Any], scores: Mapping[str, Any], roundtrip: Mapping[str, Any]
) -> dict[str, Any]:
    """The decision of `decide_run`, without its source."""
    return decide_run(suite, scores, roundtrip)[0]


def checked_decision(value: Any, guard: Boundary, where: str) -> dict[str, Any]:
    """`value`, a decision a plugin's rules returned, checked and copied: an object with
    every field of `DECISION_FIELDS` of its type, each entry of `rules` with the fields of
    `RULE_FIELDS`, `guardrails` strings, and JSON throughout: string keys, finite numbers
    (no NaN or infinity), integers within 64 bits, valid text. Anything else is one line."""

    def refuse(problem: str) -> SystemCallFailed:
        return guard.failure("decide", where, problem)

    if not isinstance(value, dict):
        raise refuse(
            f"returned {kind_of(value)}, not a decision (an object with {', '.join(DECISION_FIELDS)})"
        )
    _check_fields(value, DECISION_FIELDS, "", refuse)
    for i, entry in enumerate(value["rules"]):
        if not isinstance(entry, dict):
            raise refuse(f"returned {kind_of(entry)} at rules[{i}], not a rule (an object)")
        _check_fields(entry, RULE_FIELDS, f"rules[{i}].", refuse)
    for i, line in enumerate(value["guardrails"]):
        if not isinstance(line, str):
            raise refuse(f"returned {kind_of(line)} at guardrails[{i}], not a string")
    _check_json(value, "", 0, refuse)
    return orjson.loads(orjson.dumps(value))


def _check_fields(
    value: Mapping[str, Any],
    fields: Mapping[str, tuple[type, ...]],
    prefix: str,
    refuse: Callable[[str], SystemCallFailed],
) -> None:
    for name, types in fields.items():
        if name not in value:
            raise refuse(f"returned a decision without '{prefix}{name}'")
        given = value[name]
        if not isinstance(given, types) or (isinstance(given, bool) and bool not in types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise refuse(f"returned {kind_of(given)} as '{prefix}{name}', not {wanted}")


def _check_json(
    value: Any, path: str, depth: int, refuse: Callable[[str], SystemCallFailed]
) -> None:
    """Refuse anything in `value` that is not strict JSON (see `checked_decision`)."""
    where = path or "the decision"
    if depth > MAX_DEPTH:
        raise refuse(f"returned a decision nested deeper than {MAX_DEPTH} levels at {where}")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise refuse(f"returned {value!r} at {where}; a decision holds finite numbers only")
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise refuse(f"returned an int of {value.bit_length()} bits at {where}")
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise refuse(f"returned text that is not valid UTF-8 at {where}") from None
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1, refuse)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise refuse(f"returned the key {key!r} at {where}; keys must be strings")
            _check_json(item, f"{path}.{key}" if path else key, depth + 1, refuse)
        return
    raise refuse(f"returned {kind_of(value)} at {where}, which is not JSON")
