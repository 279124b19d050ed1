"""report: the result envelope (results.json), the Markdown report and its plots beside it,
and the HTML report (report.html) beside report.md.

The result document is `report.result.build_result` of the upstream artifacts; the report's
sections (`report.run_sections`) are built once from it and the local timings of the
sidecars, and rendered as report.md (`report.sections.to_markdown`) and in report.html. The
plots (`report.plots`) are SVG files under `report-plots/` beside report.md, linked from it
and listed (file, sha256) in the envelope's top-level `plots`, outside its fingerprinted
`data` (their bytes depend on the matplotlib version). report.html (`report.html`) is the
sections without their local parts (the clock, the timings), the plots inline, the
per-query table and the texts of its first queries; the texts of the others, read scope by
scope from the validated spool, go to data files in report-data/ beside it
(`report.pagedata`), written as they fill (staged in the build directory), so the stage
holds one scope's texts and one data file at a time. The same inputs give the same bytes.
The page's and the data files' sizes go to the report's timing sidecar
(``timings/results.json``). All of them are published together (report-data/ replaced
whole).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recallbench import __version__
from recallbench.builddir.artifacts import (
    dumps,
    envelope,
    inputs_of,
    read_timing,
    require_made_from,
    timing_path,
)
from recallbench.core.source import describe_source
from recallbench.plugin import PLUGIN_API
from recallbench.report.pagedata import DataFiles
from recallbench.report.result import build_result
from recallbench.report.run_sections import run_sections
from recallbench.report.sections import to_markdown
from recallbench.systems.rules import Decided, decide_envelopes


@dataclass(frozen=True)
class Report:
    """The report stage's output: the envelope, the Markdown and its plots (file relative to
    the report's directory -> SVG bytes), the HTML page (empty when not made) and the
    stage's timing sidecar (local figures: the HTML's size, the wall time)."""

    envelope: dict[str, Any]
    markdown: str
    plots: dict[str, bytes]
    html: bytes = b""
    timing: dict[str, Any] = field(default_factory=dict)
    #: the page's data files (report-data/ beside report.html), None when no page is made
    html_data: DataFiles | None = None

    def close(self) -> None:
        """Remove the staged data files (after publishing)."""
        if self.html_data is not None:
            self.html_data.close()

    def files(
        self, results_path: Path, report_path: Path, build_dir: Path | None = None
    ) -> dict[Path, bytes]:
        """results.json, report.md with the plots and report.html beside it, and (with
        `build_dir`) the timing sidecar, as `publish` takes them."""
        from recallbench.builddir.artifacts import stage_files

        files = {Path(results_path): dumps(self.envelope)}
        if build_dir is not None:
            sidecar = stage_files(Path(build_dir), self.envelope, self.timing)
            files[timing_path(build_dir, "results")] = sidecar[timing_path(build_dir, "results")]
        files.update(
            report_files(report_path, self.markdown, self.plots, self.html, self.html_data)
        )
        return files


def report_files(
    report_path: Path,
    markdown: str,
    plots: Mapping[str, bytes],
    html: bytes = b"",
    html_data: DataFiles | None = None,
) -> dict[Path, Any]:
    """report.md at `report_path`, its plots beside it (where its relative links point) and,
    when made, the HTML report beside it (`report.html`, or `<stem>.html` for a report not
    called report.md) with its data files (report-data/, replaced whole: a directory with
    no files removes an old one)."""
    from recallbench.report import REPORT_DATA_DIR

    report_path = Path(report_path)
    files: dict[Path, Any] = {report_path: markdown.encode("utf-8")}
    files.update({report_path.parent / name: svg for name, svg in plots.items()})
    if html:
        files[html_path(report_path)] = html
        if html_data is not None:
            files[report_path.parent / REPORT_DATA_DIR] = html_data.tree()
    return files


def report_paths(report_path: Path) -> list[Path | str]:
    """What a report at `report_path` is, as the files line names it: the Markdown, the
    HTML page beside it and its data directory (``report-data/``, with a trailing slash)."""
    from recallbench.report import REPORT_DATA_DIR

    report_path = Path(report_path)
    return [report_path, html_path(report_path), f"{report_path.parent / REPORT_DATA_DIR}/"]


def html_path(report_path: Path) -> Path:
    """Where the HTML report goes for the Markdown report at `report_path`: the same name
    with `.html` (`report.md` -> `report.html`; a Markdown path that already ends in .html
    gets a second `.html`, so neither overwrites the other)."""
    report_path = Path(report_path)
    if report_path.suffix == ".html":
        return report_path.with_name(report_path.name + ".html")
    return report_path.with_suffix(".html")


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
    html: bool = True,
    scratch: Path | None = None,
    call_timeout: float | None = None,
    decided: Decided | None = None,
) -> Report:
    """The `results` envelope, the Markdown report (timings: kind -> sidecar), with `plots`
    the plots it links to and, with `html`, the HTML report and its data files (its texts
    read scope by scope from the suite's validated spool; the data files staged under
    `scratch`, the build directory, else in a temporary directory). `decided`: the decision
    already made from these artifacts, with where its rules came from; else the rules run
    here (a plugin's within `call_timeout` seconds)."""
    started = time.perf_counter()
    require_made_from(hydrate_env, suite_env)
    require_made_from(runs_env, suite_env, hydrate_env)
    require_made_from(roundtrip_env, runs_env)
    require_made_from(scores_env, suite_env, runs_env)
    if decided is None:
        decided = decide_envelopes(suite_env, scores_env, roundtrip_env, call_timeout=call_timeout)
    decision, rules = decided
    result = build_result(
        suite_env, hydrate_env, runs_env, roundtrip_env, scores_env, decision=decision
    )
    env = envelope(
        "results", result, inputs_of(suite_env, hydrate_env, runs_env, roundtrip_env, scores_env)
    )
    if runs_env.get("embedder_build") is not None:  # beside `data`, not fingerprinted
        env["embedder_build"] = runs_env["embedder_build"]
    # beside `data`, not fingerprinted, never in a baseline: which distribution provided
    # the system, and the per-call time limit each stage ran with (None: off)
    env["provenance"] = {
        "plugin_api": PLUGIN_API,  # the plugin surface's version (recallbench.plugin)
        "system": {
            "name": hydrate_env["data"]["system"],
            **hydrate_env["data"].get("provider", {}),
        },
        "call_timeout": {
            "hydrate": hydrate_env["data"].get("call_timeout"),
            "query": runs_env["data"].get("call_timeout"),
        },
        # the system's BLAS / OpenMP / torch threads per worker (`--threads`; None: the
        # libraries' defaults; absent: made before recallbench set them)
        "threads": {
            "hydrate": hydrate_env["data"].get("threads", "unset"),
            "query": runs_env["data"].get("threads", "unset"),
        },
        # where the decision rules came from (a plugin's distribution, or the dataset's)
        "rules": None if rules is None else rules.record(),
    }
    source = hydrate_env["data"].get("source")
    if source:  # where the code under test came from (recallbench.core.source): version, install
        env["provenance"]["system_source"] = source
    source_text = describe_source(source)
    svgs: dict[str, bytes] = {}
    if plots:
        from recallbench.report.plots import caption, plot_list, report_plots

        svgs = report_plots(result)
        env["plots"] = plot_list(svgs)  # beside `data`, not fingerprinted
    when = generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    links = [(name, caption(name)) for name in svgs]
    # the report's sections, built once: report.md and report.html both draw them
    sections = run_sections(
        result, timings or {}, when, __version__, links, rules=rules, source=source_text
    )
    markdown = to_markdown(sections)
    page = b""
    data = None
    timing: dict[str, Any] = {"markdown_bytes": len(markdown.encode("utf-8"))}
    if html:
        from recallbench.report.html import deep_ranks, render_report_page

        level = result["dataset"]["levels"][0]["name"]
        made = render_report_page(
            result,
            suite_env,
            plots=svgs,
            deep=deep_ranks(runs_env, level),
            fingerprint=env["fingerprint"],
            version=__version__,
            scratch=scratch,
            sections=sections,
        )
        page, data, stats = made.html, made.data, made.stats
        timing["html"] = {
            "bytes": len(page),
            "data_files": len(data.names),
            "data_bytes": data.bytes,
            "texts_available": stats.available,
            "texts_complete": stats.complete,
            "unit_texts": stats.units_shown,
            "units_total": stats.totals.get("units", 0),
        }
    timing["wall_seconds"] = round(time.perf_counter() - started, 6)
    return Report(env, markdown, svgs, page, timing, data)


def timings_for(build_dir: Path, *envs: Mapping[str, Any]) -> dict[str, Any]:
    """kind -> timing sidecar of each envelope (only sidecars that match it)."""
    out = {}
    for env in envs:
        timing = read_timing(build_dir, env)
        if timing is not None:
            out[env["artifact"]] = timing
    return out
