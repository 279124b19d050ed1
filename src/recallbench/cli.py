"""Command line: one subcommand per stage over JSON artifacts in the build directory.

    recallbench validate && recallbench hydrate && recallbench query \\
      && recallbench snapshot-roundtrip && recallbench score && recallbench report \\
      && recallbench decide

Errors a user can fix print one line (`recallbench <stage>: error: ...`) and exit non-zero:
1 for bad input or missing/stale artifacts, 2 for usage errors, 3 for a failed baseline gate.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from recallbench import __version__
from recallbench.artifacts import (
    artifact_path,
    atomic_write_bytes,
    dumps,
    read_artifact,
    require_made_from,
    write_envelope,
)
from recallbench.errors import RecallbenchError, ValidationFailed
from recallbench.options import (
    DEFAULT_BASELINE,
    fixture_options,
    output_options,
    repeat_option,
    system_option,
    top_k_option,
)
from recallbench.systems import CORE_SYSTEMS, SYSTEM_NAMES


class StageError(click.ClickException):
    """A RecallbenchError shown as one line with its own exit code."""

    def __init__(self, stage: str, exc: RecallbenchError) -> None:
        super().__init__(str(exc))
        self.stage = stage
        self.exit_code = exc.exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"recallbench {self.stage}: error: {self.message}", err=True)


def stage_command(name: str, **kwargs: Any) -> Callable:
    """Register a subcommand whose RecallbenchErrors become one-line messages."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except ValidationFailed as exc:
                for problem in exc.problems:
                    click.echo(problem, err=True)
                raise StageError(
                    name, RecallbenchError(f"{len(exc.problems)} problem(s); nothing written")
                ) from None
            except RecallbenchError as exc:
                raise StageError(name, exc) from None

        return main.command(name, **kwargs)(inner)

    return wrap


class Context:
    def __init__(self, build_dir: Path, quiet: bool) -> None:
        self.build_dir = build_dir
        self.quiet = quiet

    def say(self, message: str) -> None:
        if not self.quiet:
            click.echo(message, err=True)

    def read(self, kind: str) -> dict[str, Any]:
        return read_artifact(self.build_dir, kind)

    def write(self, env: dict[str, Any]) -> Path:
        return write_envelope(self.build_dir, env)

    @property
    def store_dir(self) -> Path:
        return self.build_dir / "store"


pass_ctx = click.make_pass_decorator(Context)


class _MainGroup(click.Group):
    """The stage commands, plus the LongMemEval group imported only when it is used (its
    imports would otherwise slow every stage command's start-up)."""

    LAZY = {"longmemeval": ("recallbench.longmemeval.cli", "longmemeval")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            import importlib

            module, attr = self.LAZY[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=_MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="recallbench")
@click.option(
    "--build-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build"),
    show_default=True,
    envvar="RECALLBENCH_BUILD_DIR",
    help="Where artifacts, stores and reports are written.",
)
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.pass_context
def main(ctx: click.Context, build_dir: Path, quiet: bool) -> None:
    """recallbench: retrieval-quality evidence for agent memory stores.

    Run the stages in order (each reads the previous stage's artifact in the build dir):
    validate, hydrate, query, snapshot-roundtrip, score, report, decide. `run` does all of
    them in one process.
    """
    ctx.obj = Context(build_dir, quiet)


@stage_command("validate")
@fixture_options()
@pass_ctx
def validate_cmd(ctx: Context, corpus: Path, queries: Path) -> None:
    """Check the JSONL fixtures; write the normalized suite (suite.json).

    Every problem is printed as FILE:LINE: reason; nothing is written when any is found.
    """
    from recallbench.stages.validate import run_validate

    env = run_validate(corpus, queries)
    path = ctx.write(env)
    c = env["data"]["counts"]
    ctx.say(
        f"wrote {path}: {c['memories']} memories, {c['queries']} queries in {len(c['per_category'])} categories"
    )


@stage_command("hydrate")
@system_option
@pass_ctx
def hydrate_cmd(ctx: Context, system: str) -> None:
    """Ingest every corpus memory into a fresh store under BUILD/store (hydrate.json)."""
    from recallbench.stages.hydrate import run_hydrate

    env = run_hydrate(ctx.read("suite"), ctx.store_dir, system)
    path = ctx.write(env)
    t = env["data"]["timing"]
    ctx.say(
        f"wrote {path}: {env['data']['records']} records into {ctx.store_dir} ({t['records_per_second']:.0f} records/s)"
    )


@stage_command("query")
@top_k_option
@repeat_option
@pass_ctx
def query_cmd(ctx: Context, top_k: int, repeat: int) -> None:
    """Run every query through the system's production search (runs.json)."""
    from recallbench.stages.query import run_query

    env = run_query(
        ctx.read("suite"), ctx.read("hydrate"), ctx.store_dir, top_k=top_k, repeat=repeat
    )
    path = ctx.write(env)
    ctx.say(f"wrote {path}: {len(env['data']['queries'])} queries, top-{top_k}, {repeat} repeat(s)")


@stage_command("snapshot-roundtrip")
@pass_ctx
def roundtrip_cmd(ctx: Context) -> None:
    """Snapshot -> verify -> clean hydrate -> query again; check a corrupted copy fails (roundtrip.json)."""
    from recallbench.stages.roundtrip import run_roundtrip

    env = run_roundtrip(
        ctx.read("suite"),
        ctx.read("hydrate"),
        ctx.read("runs"),
        ctx.store_dir,
        ctx.build_dir / "roundtrip",
    )
    path = ctx.write(env)
    eq = env["data"]["equivalence"]
    cc = env["data"]["corruption_check"]
    ctx.say(
        f"wrote {path}: {eq['numerator']}/{eq['denominator']} queries identical after the round trip; "
        f"corrupted package {'rejected (' + cc['reason'] + ')' if cc['rejected'] else 'ACCEPTED'}"
    )


@stage_command("score")
@pass_ctx
def score_cmd(ctx: Context) -> None:
    """Compute every metric per query, per category and overall (scores.json)."""
    from recallbench.stages.score import run_score

    env = run_score(ctx.read("suite"), ctx.read("runs"), ctx.read("roundtrip"))
    path = ctx.write(env)
    k = env["data"]["top_k"]
    o = env["data"]["overall"]
    ctx.say(
        f"wrote {path}: Recall@{k} {o[f'recall@{k}']['value']:.3f}, nDCG@{k} {o[f'ndcg@{k}']['value']:.3f}"
    )


@stage_command("report")
@output_options("BUILD/results.json", "BUILD/report.md")
@pass_ctx
def report_cmd(ctx: Context, output: Path | None, report_path: Path | None) -> None:
    """Write the result JSON and the Markdown report."""
    from recallbench.stages.report import run_report

    result, markdown = run_report(
        *(ctx.read(k) for k in ("suite", "hydrate", "runs", "roundtrip", "scores"))
    )
    output = output or artifact_path(ctx.build_dir, "results")
    report_path = report_path or ctx.build_dir / "report.md"
    atomic_write_bytes(output, dumps(result))
    atomic_write_bytes(report_path, markdown.encode("utf-8"))
    ctx.say(f"wrote {output} and {report_path}")


@stage_command("decide")
@pass_ctx
def decide_cmd(ctx: Context) -> None:
    """Apply the decision rules to the scores; print the recommendation (decision.json)."""
    from recallbench.stages.decide import run_decide

    env = run_decide(ctx.read("scores"))
    path = ctx.write(env)
    d = env["data"]
    ctx.say(f"wrote {path}")
    click.echo(f"rule {d['rule']}: {d['recommendation']}")


@stage_command("check-baseline")
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_BASELINE,
    show_default=True,
)
@click.option(
    "--result",
    "result_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="[default: BUILD/results.json]",
)
@pass_ctx
def check_baseline_cmd(ctx: Context, baseline: Path, result_path: Path | None) -> None:
    """Compare the normalized result with the committed baseline (exit 3 on any difference)."""
    from recallbench.baseline import gate, load_result

    result_path = result_path or artifact_path(ctx.build_dir, "results")
    if not result_path.exists():
        raise RecallbenchError(f"{result_path}: missing; run `recallbench report` first")
    gate(baseline, load_result(result_path))
    ctx.say(f"result matches {baseline}")


@stage_command("export-trec")
@click.option("--tag", default=None, help="Run tag [default: the system name].")
@pass_ctx
def export_trec_cmd(ctx: Context, tag: str | None) -> None:
    """Write BUILD/run.trec and BUILD/qrels.trec for trec_eval-compatible tools."""
    from recallbench.stages.validate import suite_of
    from recallbench.trec import write_trec

    suite_env, runs_env = ctx.read("suite"), ctx.read("runs")
    require_made_from(runs_env, suite_env)
    suite = suite_of(suite_env)
    runs = runs_env["data"]
    run = [
        (r["query_id"], [(h["memory_id"], h["score"]) for h in r["hits"]]) for r in runs["queries"]
    ]
    qrels = {q.query_id: q.relevance for q in suite.queries}
    write_trec(
        ctx.build_dir / "run.trec", ctx.build_dir / "qrels.trec", run, qrels, tag or runs["system"]
    )
    ctx.say(f"wrote {ctx.build_dir / 'run.trec'} and {ctx.build_dir / 'qrels.trec'}")


@stage_command("run")
@fixture_options()
@system_option
@top_k_option
@repeat_option
@pass_ctx
def run_cmd(
    ctx: Context, corpus: Path, queries: Path, system: str, top_k: int, repeat: int
) -> None:
    """Every stage in one process, writing the same artifacts as the separate commands."""
    from recallbench.pipeline import run_fixture_lane

    out = run_fixture_lane(
        corpus, queries, ctx.build_dir, top_k=top_k, repeat=repeat, system=system
    )
    for env in out.envelopes.values():
        ctx.write(env)
    atomic_write_bytes(artifact_path(ctx.build_dir, "results"), dumps(out.result))
    atomic_write_bytes(ctx.build_dir / "report.md", out.markdown.encode("utf-8"))
    d = out.result["decision"]
    ctx.say(f"wrote {ctx.build_dir}/results.json and {ctx.build_dir}/report.md")
    click.echo(f"rule {d['rule']}: {d['recommendation']}")


@stage_command("compare")
@fixture_options()
@top_k_option
@click.option(
    "--system",
    "systems",
    type=click.Choice(SYSTEM_NAMES),
    multiple=True,
    help="A system to run (repeat; the first is the reference) [default: hotmem, hotmem-mmr, bm25].",
)
@click.option(
    "--result",
    "result_files",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    multiple=True,
    help="Compare saved result JSONs instead of running systems (repeat; first is the reference).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the resampling.")
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True)
@output_options("BUILD/compare.json", "BUILD/compare.md")
@pass_ctx
def compare_cmd(
    ctx: Context,
    corpus: Path,
    queries: Path,
    top_k: int,
    systems: tuple[str, ...],
    result_files: tuple[Path, ...],
    seed: int,
    resamples: int,
    output: Path | None,
    report_path: Path | None,
) -> None:
    """Run the suite against several systems (or read saved results) and compare them with
    paired statistics: mean differences, bootstrap CIs, sign-flip p-values, wins/ties/losses."""
    import tempfile

    from recallbench.baseline import load_result
    from recallbench.compare import compare_results, render_markdown
    from recallbench.pipeline import run_fixture_lane

    if systems and result_files:
        raise click.UsageError("give either --system or --result, not both")
    if result_files:
        results = [load_result(p) for p in result_files]
        labels = [p.stem for p in result_files]
    else:
        labels = list(dict.fromkeys(systems or CORE_SYSTEMS))
        results = []
        for name in labels:
            ctx.say(f"running {name} ...")
            with tempfile.TemporaryDirectory(
                prefix="recallbench-compare-", dir=_mkdir(ctx.build_dir)
            ) as work:
                results.append(
                    run_fixture_lane(corpus, queries, Path(work), top_k=top_k, system=name).result
                )
    doc = compare_results(results, labels, seed=seed, resamples=resamples)
    output = output or ctx.build_dir / "compare.json"
    report_path = report_path or ctx.build_dir / "compare.md"
    atomic_write_bytes(output, dumps(doc))
    atomic_write_bytes(report_path, render_markdown(doc).encode("utf-8"))
    ctx.say(f"wrote {output} and {report_path}")


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
