"""The seven stages chained in process: the same functions the CLI commands call, in the
order `artifacts.STAGES` defines, for any dataset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import publish, stage, stage_files
from recallbench.engine.tasks import Execution


@dataclass
class Run:
    """Every artifact envelope of one run, their timings, the Markdown report and the HTML
    report."""

    envelopes: dict[str, dict[str, Any]]
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)
    markdown: str = ""
    #: the report's plots: path relative to the report's directory -> SVG bytes
    plots: dict[str, bytes] = field(default_factory=dict)
    #: report.html's bytes
    html: bytes = b""
    #: report.html's data files (report-data/ beside it; `report.pagedata.DataFiles`)
    html_data: Any = None

    @property
    def result(self) -> dict[str, Any]:
        """The result document (the data of results.json)."""
        return self.envelopes["results"]["data"]

    def files(self, build_dir: Path) -> dict[Path, bytes]:
        """Every artifact, timing sidecar, report.md and report.html, as `publish` takes
        them (the scope spool already lies in the work directory the run used)."""
        out: dict[Path, bytes] = {}
        for kind, env in self.envelopes.items():
            out.update(stage_files(build_dir, env, self.timings.get(kind)))
        out.update(self.report_files(Path(build_dir) / "report.md"))
        return out

    def report_files(self, report_path: Path) -> dict[Path, bytes]:
        """The Markdown report at `report_path`, its plots beside it (where it links) and the
        HTML report beside it."""
        from recallbench.stages.report import report_files

        return report_files(report_path, self.markdown, self.plots, self.html, self.html_data)

    def close(self) -> None:
        """Remove the report's staged data files (after publishing)."""
        if self.html_data is not None:
            self.html_data.close()


def run_pipeline(
    dataset: str,
    paths: Mapping[str, Path],
    work_dir: Path,
    *,
    options: Mapping[str, Any] | None = None,
    system: Any = "hotmem",
    top_k: int | None = None,
    repeat: int = 1,
    keep_stores: bool | None = None,
    sample: int | None = None,
    execution: Execution | None = None,
    ks: Sequence[int] | None = None,
    measures: Sequence[str] | None = None,
) -> Run:
    """validate -> hydrate -> query -> snapshot-roundtrip -> score -> report -> decide.
    `top_k`, `ks`: results per query and cutoffs, as `recallbench run`'s --top-k and --k
    (None: resolved by `presets.resolve_top_k`, e.g. the dataset's default top-k);
    `measures`: measure names to score instead of the dataset's (`--measure`).
    `system`: a system name, resolved once here, or a system object already resolved in
    this process (compare's); hydrate, query and snapshot-roundtrip all use that one object.

    Stores and packages go under `work_dir` (`stores/`, `work/`, `roundtrip/`); nothing is
    written elsewhere. The artifacts are returned, not written (see `Run.files`).
    """
    from recallbench.builddir.scopespool import SPOOL
    from recallbench.commands.presets import resolve_top_k
    from recallbench.stages.decide import run_decide
    from recallbench.stages.hydrate import run_hydrate
    from recallbench.stages.query import run_query
    from recallbench.stages.report import build_report
    from recallbench.stages.roundtrip import DEFAULT_SAMPLE, run_roundtrip
    from recallbench.stages.score import run_score
    from recallbench.stages.validate import place_spool, run_validate
    from recallbench.systems.registry import resolve_system
    from recallbench.systems.rules import chosen_rules, decide_envelopes

    execution = execution or Execution()
    top_k, ks = resolve_top_k(None, dataset, top_k, ks)
    work_dir = Path(work_dir)
    name = system if isinstance(system, str) else system.name
    chosen_rules(dataset, name)  # rules the run may not use are refused before any work
    under_test = resolve_system(system)  # a name looked up once, an object used as it is
    timings: dict[str, dict[str, Any]] = {}
    envelopes: dict[str, dict[str, Any]] = {}

    def made_from(command: str) -> list[dict[str, Any]]:
        """The envelopes stage `command` is made from: its `Stage.inputs`, in that order."""
        return [envelopes[kind] for kind in stage(command).inputs]

    envelopes["suite"] = run_validate(dataset, paths, options, spool=work_dir / SPOOL)
    place_spool(envelopes["suite"])
    envelopes["hydrate"], timings["hydrate"] = run_hydrate(
        *made_from("hydrate"),
        work_dir,
        name,
        keep=keep_stores,
        execution=execution,
        system=under_test,
    )
    envelopes["runs"], timings["runs"] = run_query(
        *made_from("query"),
        work_dir,
        top_k=top_k,
        repeat=repeat,
        execution=execution,
        ks=ks,
        system=under_test,
    )
    envelopes["roundtrip"], timings["roundtrip"] = run_roundtrip(
        *made_from("snapshot-roundtrip"),
        work_dir,
        sample=DEFAULT_SAMPLE if sample is None else sample,
        execution=execution,
        system=under_test,
    )
    envelopes["scores"] = run_score(*made_from("score"), measure_names=measures)
    # the rules run once, for the report and decision.json alike (a plugin's within the
    # call timeout)
    decided = decide_envelopes(*made_from("decide"), call_timeout=execution.call_timeout)
    report = build_report(*made_from("report"), timings=timings, scratch=work_dir, decided=decided)
    envelopes["results"], timings["results"] = report.envelope, report.timing
    envelopes["decision"] = run_decide(*made_from("decide"), decided=decided)
    return Run(envelopes, timings, report.markdown, report.plots, report.html, report.html_data)


def write_run(run: Run, build_dir: Path) -> None:
    """Publish every file of `run` into `build_dir` together (the report's data files
    stay staged for another `write_run` until `run.close()` or the run is collected)."""
    publish(run.files(build_dir))
