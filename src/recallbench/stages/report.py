"""report: the result envelope (results.json) and the Markdown report beside it.

The result document is `report.result.build_result` of the upstream artifacts; the Markdown
(`report.markdown`) adds the local timings from the sidecars. Both are published together.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.artifacts import envelope, inputs_of, read_timing, require_made_from
from recallbench.report.markdown import render_markdown
from recallbench.report.result import build_result


def run_report(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    runs_env: Mapping[str, Any],
    roundtrip_env: Mapping[str, Any],
    scores_env: Mapping[str, Any],
    *,
    timings: Mapping[str, Any] | None = None,
    generated_at: str | None = None,
) -> tuple[dict[str, Any], str]:
    """The `results` envelope and the Markdown report (timings: kind -> sidecar)."""
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    require_made_from(roundtrip_env, runs_env)
    require_made_from(scores_env, suite_env, runs_env, roundtrip_env)
    result = build_result(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    env = envelope(
        "results", result, inputs_of(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    )
    when = generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return env, render_markdown(result, timings or {}, when, __version__)


def timings_for(build_dir: Path, *envs: Mapping[str, Any]) -> dict[str, Any]:
    """kind -> timing sidecar of each envelope (only sidecars that match it)."""
    out = {}
    for env in envs:
        timing = read_timing(build_dir, env)
        if timing is not None:
            out[env["artifact"]] = timing
    return out
