"""decide: the decision rules written for the system measured, applied to the scores and
the round trip, or a plain one-line statement that no rule applies
(`systems.rules.decide_run`). The rules belong to the systems they were written for: the
fixture suite carries the HotMem rules, which fire for the HotMem family only (the spec's
`policy_systems`); a plugin may declare rules for its own systems, and only for those
(`datasets.base.DecisionRules`; a package's rules for another's system are refused). A
plugin's rules run at the boundary, within `--call-timeout`. Applying them is deterministic:
the same scores and round trip give the same decision. Where the rules came from is
recorded beside the decision (`provenance.rules`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recallbench.builddir.artifacts import envelope, inputs_of, require_made_from
from recallbench.core.errors import ArtifactError
from recallbench.systems.rules import Decided, decide_envelopes


def run_decide(
    suite_env: Mapping[str, Any],
    scores_env: Mapping[str, Any],
    roundtrip_env: Mapping[str, Any],
    *,
    call_timeout: float | None = None,
    decided: Decided | None = None,
) -> dict[str, Any]:
    """The `decision` envelope for a `scores` and a `roundtrip` envelope of one suite's run:
    the decision as its data, where its rules came from in its `provenance` (beside the
    data, not fingerprinted). `decided`: the decision already made from these artifacts (a
    run makes it once for the report and this artifact); else the rules run here, a
    plugin's within `call_timeout` seconds."""
    require_made_from(scores_env, suite_env)
    require_made_from(roundtrip_env, suite_env)
    if scores_env["inputs"].get("runs") != roundtrip_env["inputs"].get("runs"):
        raise ArtifactError(
            "roundtrip.json and scores.json were made from different runs; run "
            "`recallbench snapshot-roundtrip` and `recallbench score` again"
        )
    if decided is None:
        decided = decide_envelopes(suite_env, scores_env, roundtrip_env, call_timeout=call_timeout)
    data, source = decided
    env = envelope("decision", data, inputs_of(suite_env, scores_env, roundtrip_env))
    env["provenance"] = {"rules": None if source is None else source.record()}
    return env


def headline(decision: Mapping[str, Any]) -> str:
    """The one line `decide` prints."""
    if decision["rule"] is None:
        return f"no rule: {decision['recommendation']}"
    return f"rule {decision['rule']}: {decision['recommendation']}"
