"""decide: the dataset's decision rules applied to the scores, or a plain statement that the
dataset has none. The rules belong to the dataset (the fixture suite carries the HotMem
rules); applying them is deterministic: the same scores give the same decision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recallbench.artifacts import envelope, inputs_of, require_made_from
from recallbench.datasets.base import dataset_policy


def decide(suite: Mapping[str, Any], scores: Mapping[str, Any]) -> dict[str, Any]:
    """The decision for a suite's and a scores artifact's data."""
    policy = dataset_policy(suite["dataset"])
    if policy is None:
        return {
            "policy": None,
            "rule": None,
            "action": None,
            "recommendation": f"no decision rules: the {suite['dataset']} dataset defines none; "
            "read the metrics",
            "evidence": {},
            "top_k": scores["top_k"],
            "rules": [],
            "guardrails": [],
        }
    return policy(scores)


def run_decide(suite_env: Mapping[str, Any], scores_env: Mapping[str, Any]) -> dict[str, Any]:
    """The `decision` envelope for a `scores` envelope."""
    require_made_from(scores_env, suite_env)
    return envelope(
        "decision", decide(suite_env["data"], scores_env["data"]), inputs_of(suite_env, scores_env)
    )


def headline(decision: Mapping[str, Any]) -> str:
    """The one line `decide` prints."""
    if decision["rule"] is None:
        return f"no rule: {decision['recommendation']}"
    return f"rule {decision['rule']}: {decision['recommendation']}"
