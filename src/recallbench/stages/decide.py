"""decide: the decision rules written for the system measured, applied to the scores and
the round trip, or a plain one-line statement that no rule applies (`datasets.base.decision`).
The rules belong to the systems they were written for: the fixture suite carries the HotMem
rules, which fire for the HotMem family only (the spec's `policy_systems`); a plugin may
declare rules for its own systems (`datasets.base.DecisionRules`). Applying them is
deterministic: the same scores and round trip give the same decision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recallbench.artifacts import envelope, inputs_of, require_made_from
from recallbench.datasets.base import decision
from recallbench.errors import ArtifactError


def run_decide(
    suite_env: Mapping[str, Any], scores_env: Mapping[str, Any], roundtrip_env: Mapping[str, Any]
) -> dict[str, Any]:
    """The `decision` envelope for a `scores` and a `roundtrip` envelope of one suite's run."""
    require_made_from(scores_env, suite_env)
    require_made_from(roundtrip_env, suite_env)
    if scores_env["inputs"].get("runs") != roundtrip_env["inputs"].get("runs"):
        raise ArtifactError(
            "roundtrip.json and scores.json were made from different runs; run "
            "`recallbench snapshot-roundtrip` and `recallbench score` again"
        )
    data = decision(suite_env["data"], scores_env["data"], roundtrip_env["data"])
    return envelope("decision", data, inputs_of(suite_env, scores_env, roundtrip_env))


def headline(decision: Mapping[str, Any]) -> str:
    """The one line `decide` prints."""
    if decision["rule"] is None:
        return f"no rule: {decision['recommendation']}"
    return f"rule {decision['rule']}: {decision['recommendation']}"
