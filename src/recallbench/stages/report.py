"""report: the result envelope (results.json), the Markdown report and its plots beside it.

The result document is `report.result.build_result` of the upstream artifacts; the Markdown
(`report.markdown`) adds the local timings from the sidecars; the plots (`report.plots`) are
SVG files under `report-plots/` beside report.md, linked from it and listed (file, sha256) in
the envelope's top-level `plots`, outside its fingerprinted `data` (their bytes depend on the
matplotlib version). All of them are published together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.artifacts import dumps, envelope, inputs_of, read_timing, require_made_from
from recallbench.report.markdown import render_markdown
from recallbench.report.result import build_result


@dataclass(frozen=True)
class Report:
    """The report stage's output: the envelope, the Markdown and its plots (file relative to
    the report's directory -> SVG bytes)."""

    envelope: dict[str, Any]
    markdown: str
    plots: dict[str, bytes]

    def files(self, results_path: Path, report_path: Path) -> dict[Path, bytes]:
        """results.json, report.md and the plots beside report.md, as `publish` takes them."""
        return {
            Path(results_path): dumps(self.envelope),
            **report_files(report_path, self.markdown, self.plots),
        }


def report_files(report_path: Path, markdown: str, plots: Mapping[str, bytes]) -> dict[Path, bytes]:
    """report.md at `report_path` and its plots beside it, where its relative links point."""
    report_path = Path(report_path)
    files = {report_path: markdown.encode("utf-8")}
    files.update({report_path.parent / name: svg for name, svg in plots.items()})
    return files


def build_report(
    suite_env: Mapping[str, Any],
    hydrate_env: Mapping[str, Any],
    runs_env: Mapping[str, Any],
    roundtrip_env: Mapping[str, Any],
    scores_env: Mapping[str, Any],
    *,
    timings: Mapping[str, Any] | None = None,
    generated_at: str | None = None,
    plots: bool = True,
) -> Report:
    """The `results` envelope, the Markdown report (timings: kind -> sidecar) and, with
    `plots`, the plots it links to."""
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    require_made_from(roundtrip_env, runs_env)
    require_made_from(scores_env, suite_env, runs_env, roundtrip_env)
    result = build_result(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    env = envelope(
        "results", result, inputs_of(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    )
    # beside `data`, not fingerprinted, never in a baseline: which distribution provided
    # the system, and the per-call time limit each stage ran with (None: off)
    env["provenance"] = {
        "system": {
            "name": hydrate_env["data"]["system"],
            **hydrate_env["data"].get("provider", {}),
        },
        "call_timeout": {
            "hydrate": hydrate_env["data"].get("call_timeout"),
            "query": runs_env["data"].get("call_timeout"),
        },
    }
    svgs: dict[str, bytes] = {}
    if plots:
        from recallbench.report.plots import caption, plot_list, report_plots

        svgs = report_plots(result)
        env["plots"] = plot_list(svgs)  # beside `data`, not fingerprinted
    when = generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    links = [(name, caption(name)) for name in svgs]
    return Report(env, render_markdown(result, timings or {}, when, __version__, links), svgs)


def timings_for(build_dir: Path, *envs: Mapping[str, Any]) -> dict[str, Any]:
    """kind -> timing sidecar of each envelope (only sidecars that match it)."""
    out = {}
    for env in envs:
        timing = read_timing(build_dir, env)
        if timing is not None:
            out[env["artifact"]] = timing
    return out
