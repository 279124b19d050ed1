"""Command line: one subcommand per stage over JSON artifacts in the build directory.

    recallbench validate && recallbench hydrate && recallbench query \\
      && recallbench snapshot-roundtrip && recallbench score && recallbench report \\
      && recallbench decide

Every dataset runs through the same commands: `validate --dataset NAME --data FILE` picks
the reader, and the later stages read the dataset from validate's artifact. Beside the
stages: prep, the in-process chain (run), compare, power, protocols, export-trec,
check-baseline, stages, systems, check-plugin and each dataset's `generate`; the work of
the larger ones lives in `recallbench.commands`.

Errors a user can fix, and operating-system errors, print one line
(`recallbench <command>: error: ...`) and exit non-zero: 1 for bad input, missing or stale
artifacts and OS errors, 2 for usage errors, 3 for a failed baseline gate, 4 when a
`--fail-if-worse` gate fires (compare, check-baseline), 130 when interrupted (Ctrl-C), 143
when terminated (SIGTERM) and 129 when hung up (SIGHUP: a closed terminal), both cleaned
up like a Ctrl-C (see `recallbench.core.signals`). Commands that write
into the build directory hold its lock.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from recallbench import __version__
from recallbench.cli.options import (
    DEFAULT_BASELINE,
    DEVICES,
    DatasetCommand,
    SystemChoice,
    absolute_path,
    call_timeout_option,
    dataset_inputs,
    dataset_options,
    engine_options,
    execution_options,
    executor_option,
    fail_if_worse_option,
    k_option,
    measure_option,
    output_options,
    preset_option,
    ray_address_option,
    repeat_option,
    run_command_options,
    system_option,
    top_k_option,
)
from recallbench.cli.shared import (
    OneLineErrors,
    echo_closing,
    echo_line,
    run_arguments,
    run_guarded,
)
from recallbench.core.errors import RecallbenchError

if TYPE_CHECKING:
    from recallbench.engine.tasks import Execution

#: compare's --correction choices: `recallbench.metrics.stats.CORRECTIONS` (a test ties them; stats
#: imports numpy, which a command's start does not need)
CORRECTION_CHOICES = ("holm", "bh", "none")


class Context:
    def __init__(self, build_dir: Path, quiet: bool) -> None:
        self.build_dir = build_dir
        self.quiet = quiet

    def say(self, message: str) -> None:
        """A one-line message on stderr (escaped for the terminal), unless quiet."""
        if not self.quiet:
            echo_line(message, err=True)

    def read(self, kind: str) -> dict[str, Any]:
        from recallbench.builddir.artifacts import read_artifact

        return self._placed(read_artifact(self.build_dir, kind))

    def inputs(self, command: str) -> dict[str, dict[str, Any]]:
        """The artifacts stage `command` reads (its `Stage.inputs`, in that order), each
        checked and current (`artifacts.load_inputs`)."""
        from recallbench.builddir.artifacts import stage

        return self.load(stage(command).inputs)

    def load(self, kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The artifacts `kinds`, each checked and current (`artifacts.load_inputs`)."""
        from recallbench.builddir.artifacts import load_inputs

        return {kind: self._placed(env) for kind, env in load_inputs(self.build_dir, kinds).items()}

    def _placed(self, env: dict[str, Any]) -> dict[str, Any]:
        if env["artifact"] == "suite":  # the spool lies beside suite.json, wherever the build is
            env["spool_path"] = str(self.build_dir / env["data"]["spool"]["file"])
        return env

    def publish(self, files: Mapping[Path, bytes]) -> None:
        from recallbench.builddir.artifacts import publish

        publish(files)

    def write(self, env: Mapping[str, Any], timing: Mapping[str, Any] | None = None) -> Path:
        from recallbench.builddir.artifacts import artifact_path, stage_files

        self.publish(stage_files(self.build_dir, env, timing))
        return artifact_path(self.build_dir, env["artifact"])


pass_ctx = click.make_pass_decorator(Context)


def command(name: str, *, writes: bool = True, **kwargs: Any) -> Callable:
    """Register a subcommand: one-line errors; the build-dir lock when it `writes`."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any, **kw: Any) -> Any:
            ctx = click.get_current_context().find_object(Context)

            def body() -> Any:
                if not writes or ctx is None:
                    return fn(*args, **kw)
                from recallbench.commands.claim import claimed_build_dir

                with claimed_build_dir(ctx.build_dir, f"recallbench {name}"):
                    return fn(*args, **kw)

            return run_guarded(name, body)

        return main.command(name, **kwargs)(inner)

    return wrap


class _MainGroup(OneLineErrors, click.Group):
    """The stage commands, plus each dataset's helper group (`recallbench <dataset>
    generate`: its spec's `generator`), imported only when used so stage commands start
    fast. Commands with dataset options generate them from the specs (`DatasetCommand`)."""

    command_class = DatasetCommand

    @staticmethod
    def lazy() -> dict[str, str]:
        from recallbench.datasets.base import DATASETS

        return {name: spec.generator for name, spec in DATASETS.items() if spec.generator}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy()])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        lazy = self.lazy()
        if name in lazy:
            from recallbench.datasets.base import resolve

            return resolve(lazy[name] + ":_cli")()
        return super().get_command(ctx, name)


@click.group(cls=_MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="recallbench")
@click.option(
    "--build-dir",
    type=click.Path(path_type=Path),
    default=Path("build"),
    show_default=True,
    envvar="RECALLBENCH_BUILD_DIR",
    callback=absolute_path,
    help="Where artifacts, stores and reports are written.",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="Only errors (and the decision) on stderr/stdout."
)
@click.pass_context
def main(ctx: click.Context, build_dir: Path, quiet: bool) -> None:
    """recallbench: retrieval-quality evidence for agent memory stores.

    Run the stages in order (each reads the previous stages' artifacts in the build dir):
    validate, hydrate, query, snapshot-roundtrip, score, report, decide. `run` does all of
    them in one process. `recallbench stages` prints that order.
    """
    from recallbench.core import progress

    progress.configure(quiet)
    ctx.obj = Context(build_dir, quiet)


def input_bytes(path: Path) -> int:
    """A dataset input's size for a byte progress bar: a file's, or the sum of a
    directory's visible .json files (LoCoMo's per-conversation layout); 0 for what is
    neither."""
    if path.is_dir():
        return sum(
            p.stat().st_size
            for p in path.iterdir()
            if p.suffix == ".json" and not p.name.startswith(".") and p.is_file()
        )
    return path.stat().st_size if path.is_file() else 0


@command("stages", writes=False)
@click.option(
    "--io",
    "show_io",
    is_flag=True,
    help="Under each stage, its inputs (the artifacts it is made from) and its outputs (the "
    "files it writes in the build directory).",
)
def stages_cmd(show_io: bool) -> None:
    """Print the seven stage commands in order, one per line (make and nox read this)."""
    from recallbench.builddir.artifacts import STAGE_NAMES, stage_io_lines

    click.echo("\n".join(stage_io_lines() if show_io else STAGE_NAMES))


@command("validate")
@dataset_options()
@preset_option
@pass_ctx
def validate_cmd(
    ctx: Context, dataset: str, dataset_args: dict[str, Any], preset: str | None
) -> None:
    """Check a dataset through its reader; write suite.json (identity, scopes, drops).

    Fixture problems are printed as FILE:LINE: reason; nothing is written when any is found.
    """
    from recallbench.builddir.artifacts import artifact_path
    from recallbench.builddir.scopespool import SPOOL
    from recallbench.commands.presets import reader_options
    from recallbench.core import progress
    from recallbench.stages.validate import publish_suite, run_validate

    paths, options = dataset_inputs(dataset, reader_options(preset, dataset, dataset_args))
    size = sum(input_bytes(p) for p in paths.values())
    with progress.bar(size, "validate", "B", unit_scale=True, unit_divisor=1024) as bar:
        env = run_validate(
            dataset, paths, options, progress=bar.update, spool=ctx.build_dir / SPOOL
        )
    path = artifact_path(ctx.build_dir, "suite")
    publish_suite(env, path)
    c = env["data"]["counts"]
    ctx.say(
        f"wrote {path}: {env['data']['identity']['label']}; {c['scopes']} scope(s), "
        f"{c['memories']} memories, {c['queries']} queries scored of {c['queries_raw']} "
        f"in {len(env['data']['categories'])} categories"
    )
    if not env["data"]["identity"]["known"]:
        echo_line(f"warning: {env['data']['identity']['label']}", err=True)


@command("hydrate")
@system_option
@click.option(
    "--keep-stores/--transient",
    default=None,
    help="Keep one store per scope under BUILD/stores [default: keep when there is one scope].",
)
@execution_options
@pass_ctx
def hydrate_cmd(
    ctx: Context,
    system: str,
    keep_stores: bool | None,
    execution: Execution,
) -> None:
    """Ingest every scope's memories into a fresh store of the system (hydrate.json)."""
    from recallbench.stages.hydrate import run_hydrate

    env, timing = run_hydrate(
        *ctx.inputs("hydrate").values(),
        ctx.build_dir,
        system,
        keep=keep_stores,
        execution=execution,
    )
    path = ctx.write(env, timing)
    if env["data"]["mode"] == "kept":
        records = sum(s["records"] for s in env["data"]["stores"])
        rate = timing.get("records_per_second")
        ctx.say(
            f"wrote {path}: {records} records in {len(env['data']['stores'])} store(s)"
            + (f" ({rate:.0f} records/s)" if rate else "")
        )
    else:
        ctx.say(f"wrote {path}: transient stores (query builds, searches and removes each)")
    content_loss_note(env["data"])


def content_loss_note(hydrate: Mapping[str, Any]) -> None:
    """On stderr, for a system that declares an input limit and cuts some stored texts: how
    many it cannot have seen whole (the report's "Store input limit" section)."""
    loss = hydrate.get("content_loss")
    if loss and loss["texts_cut"]:
        echo_line(
            f"note: {loss['texts_cut']:,} of {loss['texts']:,} stored texts exceed what "
            f"{hydrate['system']} declares its stores keep ({loss['input_limit']['described']}): "
            "it cannot have seen them whole",
            err=True,
        )


@command("query")
@top_k_option
@k_option
@preset_option
@repeat_option
@execution_options
@pass_ctx
def query_cmd(
    ctx: Context,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    preset: str | None,
    repeat: int,
    execution: Execution,
) -> None:
    """Run every query through the system's production search (runs.json)."""
    from recallbench.commands.presets import check_suite, resolve_top_k
    from recallbench.stages.query import run_query

    inputs = ctx.inputs("query")
    suite = inputs["suite"]
    check_suite(preset, suite["data"]["dataset"], suite["data"]["options"])
    unit = suite["data"]["options"].get("unit")
    k, ks = resolve_top_k(preset, suite["data"]["dataset"], top_k, ks, unit)
    env, timing = run_query(
        *inputs.values(),
        ctx.build_dir,
        top_k=k,
        repeat=repeat,
        execution=execution,
        ks=ks,
    )
    path = ctx.write(env, timing)
    ctx.say(f"wrote {path}: {len(env['data']['queries'])} queries, top-{k}, {repeat} repeat(s)")


@command("snapshot-roundtrip")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Scopes to round-trip when the dataset has more (a deterministic sample).",
)
@execution_options
@pass_ctx
def roundtrip_cmd(
    ctx: Context,
    sample: int,
    execution: Execution,
) -> None:
    """Snapshot -> verify -> clean hydrate -> query again; corrupted copies must fail."""
    from recallbench.stages.roundtrip import run_roundtrip

    env, timing = run_roundtrip(
        *ctx.inputs("snapshot-roundtrip").values(),
        ctx.build_dir,
        sample=sample,
        execution=execution,
    )
    path = ctx.write(env, timing)
    d = env["data"]
    if not d["available"]:
        ctx.say(f"wrote {path}: {d['reason']}")
        return
    eq = d["equivalence"]
    rejected = ", ".join(
        f"{c['name']} {'rejected' if c['all_rejected'] else 'ACCEPTED'}"
        for c in d["corruption_checks"]
    )
    ctx.say(
        f"wrote {path}: {eq['numerator']}/{eq['denominator']} queries identical after the round "
        f"trip ({d['sample']['scopes_sampled']} of {d['sample']['scopes_total']} scopes); "
        f"corrupted packages: {rejected}"
    )


@command("score")
@k_option
@measure_option
@preset_option
@pass_ctx
def score_cmd(
    ctx: Context,
    ks: tuple[int, ...] | None,
    measures: tuple[str, ...] | None,
    preset: str | None,
) -> None:
    """Compute every measure per query, per category and overall (scores.json)."""
    from recallbench.commands.presets import measure_names
    from recallbench.stages.score import run_score

    inputs = ctx.inputs("score")
    suite = inputs["suite"]
    if preset is not None:
        from recallbench.commands.presets import check_suite, resolve_top_k

        suite_dataset = suite["data"]["dataset"]
        check_suite(preset, suite_dataset, suite["data"]["options"])
        resolve_top_k(preset, suite_dataset, None, ks)  # a usage error when --k differs
    measures = measure_names(preset, measures)
    env = run_score(*inputs.values(), ks=ks, measure_names=measures)
    path = ctx.write(env)
    overall = env["data"]["overall"]
    shown = [m["name"] for m in env["data"]["measures"] if not m["pooled"]][:4]
    figures = ", ".join(
        f"{n} {overall[n]['value']:.3f}" if overall[n]["value"] is not None else f"{n} n/a"
        for n in shown
    )
    ctx.say(f"wrote {path}: {figures}")


@command("report")
@output_options("BUILD/results.json", "BUILD/report.md")
@call_timeout_option("Fail when a plugin's decision rules take longer.")
@pass_ctx
def report_cmd(
    ctx: Context, output: Path | None, report_path: Path | None, call_timeout: float | None
) -> None:
    """Write the result (results.json), the Markdown report and its plots (report-plots/
    beside the report) and the HTML report (report.html beside it, its data files in
    report-data/), together."""
    from recallbench.builddir.artifacts import artifact_path
    from recallbench.commands.outputpaths import Place, build_places, check_outputs, report_places
    from recallbench.stages.report import build_report, html_path, timings_for

    output = output or artifact_path(ctx.build_dir, "results")
    report_path = report_path or ctx.build_dir / "report.md"
    check_outputs(
        [Place("--output", output), *report_places(report_path)],
        protected=build_places(ctx.build_dir, makes={"results"})[1],
    )
    envs = list(ctx.inputs("report").values())
    report = build_report(
        *envs,
        timings=timings_for(ctx.build_dir, *envs),
        scratch=ctx.build_dir,
        call_timeout=call_timeout,
    )
    try:
        ctx.publish(report.files(output, report_path, ctx.build_dir))
    finally:
        report.close()
    html_timing = report.timing["html"]
    no_texts = "" if html_timing["texts_available"] else "; no texts: no scopes.jsonl"
    data = (
        f"; {html_timing['data_files']:,} data files beside it, {html_timing['data_bytes']:,} bytes"
        if html_timing["data_files"]
        else ""
    )
    ctx.say(
        f"wrote {output}, {report_path} ({len(report.plots)} plots beside it) and "
        f"{html_path(report_path)} ({len(report.html):,} bytes{no_texts}{data})"
    )
    if not ctx.quiet:
        from recallbench.report.summary import summary_table

        click.echo(summary_table(report.envelope["data"]))


@command("decide")
@call_timeout_option("Fail when a plugin's decision rules take longer.")
@pass_ctx
def decide_cmd(ctx: Context, call_timeout: float | None) -> None:
    """Apply the decision rules written for the system (a plugin's for its own systems, or
    the dataset's) to the scores and the round trip; print the recommendation
    (decision.json)."""
    from recallbench.stages.decide import headline, run_decide

    env = run_decide(*ctx.inputs("decide").values(), call_timeout=call_timeout)
    path = ctx.write(env)
    ctx.say(f"wrote {path}")
    echo_line(headline(env["data"]))


@command("prep")
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    callback=absolute_path,
    help="Directory of the vector cache to write (the previous cache there stays valid "
    "until the new one is complete).",
)
@system_option
@executor_option
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Batches embedded at once: locally one process with a thread each, on Ray an actor "
    "each; every batch on one torch thread, so the cache is byte-identical for any number "
    "[default: this machine's cores].",
)
@ray_address_option
@click.option(
    "--device",
    type=click.Choice(DEVICES),
    default="auto",
    show_default=True,
    help="Where a learned embedder computes: auto = an accelerator when torch sees one.",
)
@click.option(
    "--import",
    "import_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Fill the cache from a file of vectors made elsewhere (JSON lines: a header naming "
    "the embedder, its dimension and normalization, then each vector by text sha256, memory "
    "id or query id; docs/stages.md) instead of embedding: for a system whose embedder "
    "identity is that name.",
)
@click.option(
    "--no-length-sort",
    is_flag=True,
    hidden=True,  # for benchmarks/bench_embed.py: what sorting by length saves
    help="Batch texts in order of first appearance instead of by length.",
)
@pass_ctx
def prep_cmd(
    ctx: Context,
    cache: Path,
    system: str,
    executor: str,
    workers: int | None,
    ray_address: str | None,
    device: str,
    import_file: Path | None,
    no_length_sort: bool,
) -> None:
    """Embed every distinct memory and query text of the validated dataset once, in fixed
    batches, into a vector cache that hydrate, query and snapshot-roundtrip read (with
    --import: take the vectors from a file made elsewhere instead)."""
    from recallbench.engine.tasks import Execution
    from recallbench.stages.prep import run_prep

    if import_file is not None:
        from recallbench.engine.vectorprep import import_vector_cache

        made = import_vector_cache(ctx.read("suite"), cache, system, import_file)
        got = made["imported"]
        unused = got["vectors_in_file"] - got["vectors_used"]
        ctx.say(
            f"{cache}: {made['count']} vectors imported from {import_file} ({got['embedder']}, "
            f"{got['dimension']} dimensions, {'' if got['normalized'] else 'not '}normalized)"
            + (
                f"; {unused} of the file's {got['vectors_in_file']} vectors not used"
                if unused
                else ""
            )
        )
        return

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    execution = Execution(executor, workers, ray_address, device=device)
    manifest = run_prep(
        ctx.read("suite"), cache, system, execution=execution, sort_by_length=not no_length_sort
    )
    t = manifest["timing"]
    from recallbench.builddir.artifacts import TIMINGS_DIR, dumps

    ctx.publish(  # a local diagnostic beside the stages' own: the plan chosen, texts/s
        {
            ctx.build_dir / TIMINGS_DIR / "prep.json": dumps(
                {"label": "local diagnostic: wall time on this machine, not a result", **t}
            )
        }
    )
    build = manifest.get("embedder_build")
    where = f", {build['device']}" if isinstance(build, dict) and build.get("device") else ""
    ctx.say(
        f"{cache}: {manifest['count']} vectors ({manifest['embedder_identity']}{where}); "
        + (
            f"{t['texts_per_second']:.1f} texts/s, {t['tokens_per_second']:.0f} tokens/s "
            f"with {t['plan']['summary']} ({executor}; {t['plan']['reason']})"
            if t["texts_per_second"]
            else "nothing to embed"
        )
    )
    tr = manifest.get("truncation")
    if tr and tr["texts_over_limit"]:
        click.echo(
            f"note: {tr['texts_over_limit']} of {tr['texts']} stored texts exceed the embedder's "
            f"{tr['max_tokens']}-token window; the model never sees "
            f"{tr['share_unseen_of_long_texts']:.1%} of their tokens",
            err=True,
        )


@command("check-baseline", writes=False)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_BASELINE,
    show_default=True,
    help="The baseline: a result document saved earlier (`make baseline` writes the fixture "
    "suite's).",
)
@click.option(
    "--result",
    "result_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A saved results.json (or result document) [default: BUILD/results.json, checked "
    "fresh against BUILD/scores.json].",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the block for a pull request's description here: the configuration change, "
    "the category before/after tables with significance, the queries that changed, the "
    "decision before and after, and the run's provenance (written whether or not the result "
    "differs).",
)
@fail_if_worse_option(
    "Exit 4 (instead of 3) when this run is significantly worse than the baseline on "
    "MEASURE (adjusted p < 0.05) and the whole 95% interval of the difference lies below "
    "-MARGIN (default 0), as compare's option; repeat for several measures."
)
@pass_ctx
def check_baseline_cmd(
    ctx: Context,
    baseline: Path,
    result_path: Path | None,
    markdown_path: Path | None,
    gates: tuple[tuple[str, float], ...],
) -> None:
    """Compare the result with the committed baseline: exit 3 on any difference (4 when a
    --fail-if-worse gate finds this run significantly worse). When they differ, it prints,
    in order: what changed in the configuration, the headline measures per category before
    -> after with the paired test against the baseline's per-query values, the queries that
    won and lost, the decision before -> after, how many values differ, and one next step."""
    from recallbench.builddir.artifacts import publish
    from recallbench.commands.baseline import check, fail
    from recallbench.commands.outputpaths import Place, build_places, check_outputs
    from recallbench.report.result import load_result_envelope

    if markdown_path is not None:
        check_outputs(
            [Place("--markdown", markdown_path)],
            [
                Place("the --baseline file", baseline),
                Place("the --result file", result_path or ctx.build_dir / "results.json"),
            ],
            build_places(ctx.build_dir)[1],
        )
    if result_path is None:
        result = ctx.load(("results",))["results"]
    else:
        result = load_result_envelope(result_path)
    found = check(
        baseline,
        result,
        gates=gates,
        update="run `make baseline`" if baseline == DEFAULT_BASELINE else None,
    )
    if markdown_path is not None:
        from recallbench.report.baseline_diff import markdown_block

        publish({markdown_path: markdown_block(found).encode("utf-8")})
    build = result.get("embedder_build")
    try:
        fail(found, markdown_path)
    except BaseException:
        if build:  # the baseline records no build: say what this result's vectors came from
            from recallbench.commands.compare import describe_build

            echo_line(
                f"note: this result's learned vectors were computed with {describe_build(build)}; "
                "a baseline written with another embedder build (device, torch, CPU kernels) "
                "differs in the last bits of its scores (docs/performance.md)",
                err=True,
            )
        raise
    ctx.say(f"result matches {baseline}")
    if markdown_path is not None:
        ctx.say(f"wrote {markdown_path} (the block for the pull request)")


@command("export-trec")
@click.option("--tag", default=None, help="Run tag [default: the system name].")
@pass_ctx
def export_trec_cmd(ctx: Context, tag: str | None) -> None:
    """Write BUILD/run.trec and BUILD/qrels.trec (primary level) for trec_eval."""
    from recallbench.report.trec import trec_files

    suite_env, runs_env = ctx.load(("suite", "runs")).values()
    level = suite_env["data"]["levels"][0]["name"]
    run_path, qrels_path = ctx.build_dir / "run.trec", ctx.build_dir / "qrels.trec"
    ctx.publish(
        trec_files(runs_env["data"], level, tag or runs_env["data"]["system"], run_path, qrels_path)
    )
    ctx.say(f"wrote {run_path} and {qrels_path}")


@command("run")
@run_command_options()
@pass_ctx
def run_cmd(
    ctx: Context,
    dataset: str,
    dataset_args: dict[str, Any],
    preset: str | None,
    system: str,
    output: Path | None,
    report_path: Path | None,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    measures: tuple[str, ...] | None,
    repeat: int,
    execution: Execution,
    as_json: bool,
) -> None:
    """Every stage in one process, writing the same artifacts as the separate commands
    (and, with --output/--report, a copy of the result and of the reports there too); ends
    with the headline table, the files written and "N queries scored in X s" (--json: one
    JSON object instead)."""
    import time

    from recallbench.cli.shared import build_written, run_copies
    from recallbench.commands.pipeline import run_pipeline

    started = time.perf_counter()
    paths, options, k, ks, measures = run_arguments(
        dataset, dataset_args, preset, top_k, ks, measures
    )
    from recallbench.commands.outputpaths import check_run_outputs

    check_run_outputs(ctx.build_dir, paths, execution.cache, output, report_path)
    run = run_pipeline(
        dataset,
        paths,
        ctx.build_dir,
        options=options,
        system=system,
        top_k=k,
        repeat=repeat,
        execution=execution,
        ks=ks,
        measures=measures,
    )
    files = run.files(ctx.build_dir)
    copies, copied = run_copies(run, output, report_path)
    files.update(copies)
    try:
        ctx.publish(files)  # the build's artifacts and the copies, together
    finally:
        run.close()
    if not as_json:
        content_loss_note(run.envelopes["hydrate"]["data"])
    echo_closing(
        run,
        [*build_written(ctx.build_dir), *copied],
        started,
        quiet=ctx.quiet,
        as_json=as_json,
        preset=preset,
        note=f"the stage artifacts in {ctx.build_dir}",
    )


def check_compare_arguments(systems: tuple[str, ...], result_files: tuple[Path, ...]) -> None:
    """compare's arguments, checked before any work (a run of the first system would take
    seconds to minutes): two or more distinct systems (none: the core set), or two or more
    results. (--system's choices are the registered names.)"""
    from recallbench.systems.registry import core_system_names

    if systems and result_files:
        return  # compare_cmd refuses the pair ("give either --system or --result")
    if len(result_files) == 1:
        raise click.UsageError(
            "compare needs two or more results: add another `--result PATH` "
            "(or give `--system NAME` twice or more to run them here)"
        )
    distinct = list(dict.fromkeys(systems))
    if len(distinct) == 1:
        from recallbench.core.escape import terminal

        other = next(n for n in core_system_names() if n != distinct[0])
        raise click.UsageError(
            f"compare needs two or more systems, got only {terminal(distinct[0])!r}: add "
            f"another, e.g. `--system {terminal(distinct[0])} --system {other}` (without "
            f"--system it compares {', '.join(core_system_names())})"
        )


@command("compare")
@dataset_options()
@top_k_option
@k_option
@measure_option
@click.option(
    "--system",
    "systems",
    type=SystemChoice(),
    multiple=True,
    help="A system to run (repeat; the first is the reference, every other a challenger) "
    "[default: the core systems].",
)
@click.option(
    "--result",
    "result_files",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    multiple=True,
    help="Compare saved results.json files instead of running systems (repeat; the first is "
    "the reference). Each is labelled by its system's name (its directory only to break a tie).",
)
@click.option(
    "--reference",
    default=None,
    metavar="NAME",
    help="The reference every other system is compared against: a system (run too when not "
    "among --system) or a --result's label [default: the first --system or --result].",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the resampling; each figure draws from its own stream of it, named by the "
    "pair, measure and level.",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=100),
    default=10_000,
    show_default=True,
    help="Bootstrap resamples, and random sign patterns of a test with more than 20 "
    "non-zero differences (its p cannot go below 1/(resamples+1)).",
)
@click.option(
    "--correction",
    type=click.Choice(CORRECTION_CHOICES),
    default="holm",
    show_default=True,
    help="Adjust p for multiple comparisons over every challenger x measure (and, apart, "
    "x category): holm (family-wise), bh (Benjamini-Hochberg, false discovery rate), none.",
)
@fail_if_worse_option(
    "Exit 4 when a challenger is significantly worse than the reference on MEASURE "
    "(adjusted p < 0.05) and the whole 95% interval of the difference lies below -MARGIN "
    "(default 0); repeat for several measures."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="End with one JSON object on stdout instead of the tables: the reference, each "
    "system's headline figures, the challenger-vs-reference lines, the files, the seconds.",
)
@output_options("BUILD/compare.json", "BUILD/compare.md")
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Timed searches per query for the cost table's latencies (the results must not "
    "change; not with --result).",
)
@execution_options
@pass_ctx
def compare_cmd(
    ctx: Context,
    dataset: str,
    dataset_args: dict[str, Any],
    top_k: int | None,
    ks: tuple[int, ...] | None,
    measures: tuple[str, ...] | None,
    systems: tuple[str, ...],
    result_files: tuple[Path, ...],
    reference: str | None,
    seed: int,
    resamples: int,
    correction: str,
    gates: tuple[tuple[str, float], ...],
    as_json: bool,
    output: Path | None,
    report_path: Path | None,
    repeat: int,
    execution: Execution,
) -> None:
    """Run a dataset against several systems (or read saved results) and compare them with
    paired statistics per query: each system's means with 95% intervals, mean differences
    with bootstrap CIs, sign-flip p-values (exact up to 20 non-zero differences) adjusted
    for multiple comparisons, wins/ties/losses and the smallest difference the comparison
    could detect. Each comparison reads "challenger vs reference": differences are
    challenger - reference, wins are the challenger's. Exit 4 when a --fail-if-worse gate
    finds a challenger significantly worse. Systems that share an embedder share
    one vector cache (each distinct text is embedded once per embedder for the whole
    comparison). Prints the decision and cost tables, each system's headline table and one
    line per challenger; ends with the files written and the closing "N queries scored in
    X s"."""
    import time

    check_compare_arguments(systems + ((reference,) if reference and systems else ()), result_files)
    from recallbench.commands.compare import run_comparison
    from recallbench.report.comparison import render_markdown

    started = time.perf_counter()
    if systems and result_files:
        raise click.UsageError("give either --system or --result, not both")
    if result_files and (ks or measures or repeat > 1):
        raise click.UsageError(
            "--k, --measure and --repeat run systems: give them with --system, not --result"
        )
    if not result_files and reference is not None and reference not in SystemChoice().choices:
        raise click.BadParameter(
            f"{reference!r} is not a registered system (see `recallbench systems`)",
            param_hint="'--reference'",
        )
    paths, options = ({}, {}) if result_files else dataset_inputs(dataset, dataset_args)
    from recallbench.commands.presets import resolve_top_k

    compared = run_comparison(
        ctx.build_dir,
        saved=result_files,
        dataset=dataset,
        paths=paths,
        options=options,
        systems=systems,
        reference=reference,
        top_k=resolve_top_k(None, dataset, top_k, ks)[0],
        ks=ks,
        measures=measures,
        repeat=repeat,
        execution=execution,
        seed=seed,
        resamples=resamples,
        correction=correction,
        gates=gates,
        output=output,
        report_path=report_path,
        say=ctx.say,
    )
    doc, labels, results = compared.doc, compared.labels, compared.results
    if as_json:
        import json

        seconds = time.perf_counter() - started
        # strict JSON: a NaN is a bug to see, never a bare `NaN`
        click.echo(json.dumps(compared.closing_json(seconds), allow_nan=False))
        _fail_if_worse(compared.worse)
        return
    if not ctx.quiet:
        from recallbench.core.escape import terminal
        from recallbench.report.comparison import decision_sections
        from recallbench.report.sections import to_terminal
        from recallbench.report.summary import summary_table

        click.echo(to_terminal(decision_sections(doc), bullets=False) + "\n")
        for label, result in zip(labels, results, strict=True):
            role = "reference" if label == labels[0] else "challenger"
            click.echo(f"{terminal(label)} ({role}):\n{summary_table(result)}\n")
    click.echo(render_markdown(doc, headline_only=True))
    for note in doc["notes"]:
        echo_line(f"note: {note}", err=True)
    if not ctx.quiet:
        from recallbench.report.summary import closing_line, files_line

        echo_line(files_line(compared.written), err=True)
        echo_line(
            closing_line(results, time.perf_counter() - started, ran=not result_files), err=True
        )
    _fail_if_worse(compared.worse)


def _fail_if_worse(worse: list[str]) -> None:
    """compare's gate: each finding on stderr, then exit 4 (`compare.fail_if_worse`)."""
    from recallbench.commands.compare import fail_if_worse

    fail_if_worse(
        worse,
        f"--fail-if-worse: {len(worse)} challenger x measure significantly worse than the "
        "reference (above)",
    )


@command("power", writes=False)
@click.option(
    "--result",
    "result_files",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    multiple=True,
    required=True,
    help="Saved results.json files (two or more; the first is the reference), as for compare.",
)
@click.option(
    "--effect",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A mean difference to detect: prints how many questions it needs at the observed "
    "spread of the paired differences.",
)
@click.option(
    "--measure",
    "measures",
    multiple=True,
    metavar="NAME",
    help="Only these measures (repeat) [default: every mean measure].",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def power_cmd(
    result_files: tuple[Path, ...],
    effect: float | None,
    measures: tuple[str, ...],
    as_json: bool,
) -> None:
    """The power of a paired comparison of saved results: per challenger and measure, the
    paired queries n, the observed difference and its spread sd(d), the smallest difference
    this many queries detect (MDE: 80% power, alpha 0.05, two-sided; (t + t) sd(d) / sqrt(n))
    and, with --effect, how many questions that difference needs at the same spread."""
    if len(result_files) < 2:
        raise click.UsageError("power needs two or more results: add another `--result PATH`")
    from recallbench.commands.compare import power_table, result_labels
    from recallbench.report.result import load_result_envelope  # a baseline is a result too
    from recallbench.report.sections import table, terminal_table

    results = [load_result_envelope(p)["data"] for p in result_files]
    rows = power_table(
        results, result_labels(result_files, results), effect=effect, measures=measures
    )
    if as_json:
        import json

        click.echo(json.dumps({"alpha": 0.05, "power": 0.8, "rows": rows}))
        return

    def f(x: float | None, fmt: str = ".3f") -> str:
        return "n/a" if x is None else format(x, fmt)

    header = ["challenger vs reference", "measure", "n", "difference", "sd(d)", "MDE"]
    if effect is not None:
        header.append(f"questions for {effect:g}")
    body = [
        [
            f"{r['challenger']} vs {r['reference']}",
            r["measure"],
            str(r["queries"]),
            f(r["mean_difference"], "+.3f"),
            f(r["sd_difference"]),
            f(r["mde"]),
            *([] if effect is None else [f(r["queries_needed"], ",")]),
        ]
        for r in rows
    ]
    click.echo(terminal_table(table(header, body, numeric=range(2, len(header)))))
    click.echo(
        "MDE: the smallest mean difference detected with 80% power at alpha 0.05 (two-sided), "
        "from the observed sd of the paired differences; n/a where every pair is tied."
    )


@command("protocols")
@dataset_options()
@system_option
@top_k_option
@k_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the protocols document (protocols.json's) on stdout instead of the table.",
)
@output_options("BUILD/protocols.json", "BUILD/protocols.md")
@engine_options
@pass_ctx
def protocols_cmd(
    ctx: Context,
    dataset: str,
    dataset_args: dict[str, Any],
    system: str,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    as_json: bool,
    output: Path | None,
    report_path: Path | None,
    execution: Execution,
) -> None:
    """Every published definition of LoCoMo's figures from one ranking per unit: the
    default, --unit turn, --categories all and each LoCoMo preset, each with what it counts,
    its figures and its difference from the default split into unit + k counting +
    questions kept + measure. Runs the system once per unit (every category scored); writes
    protocols.json, protocols.md and protocols.html (docs/protocols.md)."""
    from recallbench.commands.protocols import DATASET, DEFAULT_KS, run_protocols

    if dataset != DATASET:
        raise click.UsageError(
            f"protocols covers --dataset {DATASET} only (give --dataset {DATASET}); "
            "LongMemEval's protocols are presets of `recallbench run --preset NAME` "
            "(docs/protocols.md)"
        )
    for flag in ("unit", "categories"):
        if dataset_args.get(flag) is not None:
            raise click.UsageError(f"protocols runs every unit and category itself; drop --{flag}")
    paths, _ = dataset_inputs(dataset, dataset_args)
    from recallbench.commands.presets import resolve_top_k

    top_k, ks = resolve_top_k(None, dataset, top_k, ks or DEFAULT_KS)
    output = output or ctx.build_dir / "protocols.json"
    report_path = report_path or ctx.build_dir / "protocols.md"
    from recallbench.commands.outputpaths import check_protocols_outputs
    from recallbench.stages.report import html_path

    page = html_path(report_path)
    check_protocols_outputs(ctx.build_dir, output, report_path, page, paths)
    ctx.build_dir.mkdir(parents=True, exist_ok=True)
    doc, seconds = run_protocols(
        paths,
        system,
        ks=ks,
        top_k=top_k,
        parent=ctx.build_dir,
        execution=execution,
        say=ctx.say,
    )
    from recallbench.builddir.artifacts import dumps
    from recallbench.commands.protocols import render_html, render_markdown, render_text

    ctx.publish(
        {
            output: dumps(doc),
            report_path: render_markdown(doc).encode("utf-8"),
            page: render_html(doc).encode("utf-8"),
        }
    )
    if as_json:
        import json

        click.echo(json.dumps(doc))
        return
    click.echo(render_text(doc))
    if not ctx.quiet:
        from recallbench.report.summary import files_line

        echo_line(files_line([output, report_path, page]), err=True)
        echo_line(
            f"{len(doc['protocols'])} protocols from {len(doc['runs'])} runs in {seconds:.1f} s",
            err=True,
        )


@command("systems", writes=False)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON document on stdout: every system's name, availability (and reason), "
    "capabilities, description, extra and providing distribution.",
)
def systems_cmd(as_json: bool) -> None:
    """List every registered system: name, availability, capabilities, description, for a
    plugin the distribution that provides it, and for an unavailable system why (what
    installs it, or the plugin's error)."""
    from recallbench.systems.registry import describe_systems, systems_document, systems_listing

    rows = describe_systems()
    if as_json:
        import json

        click.echo(json.dumps(systems_document(rows), indent=2, ensure_ascii=True))
        return
    for line in systems_listing(rows):
        click.echo(line)


@command("check-plugin", writes=False)
@click.argument("name", metavar="SYSTEM")
@click.option(
    "--corpus",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Memories of the check (fixture format) [default: benchmarks/retrieval/corpus.jsonl].",
)
@click.option(
    "--queries",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Queries of the check (fixture format) [default: benchmarks/retrieval/queries.jsonl].",
)
@click.option(
    "--check",
    "only",
    multiple=True,
    metavar="CHECK",
    help="Run only this check (repeatable; the names are those of its lines) [default: "
    "every check that applies].",
)
def check_plugin_cmd(
    name: str, corpus: Path | None, queries: Path | None, only: tuple[str, ...]
) -> None:
    """Run the system contract against an installed system (a plugin or a built-in): one
    line per check (ok, FAIL or n/a), exit 1 when any fails.

    The checks: listed with its capabilities, configuration, a fresh store, ingest counts,
    the same order twice, opaque ids, attach, the digest, a store at the path of a deleted
    one, the same results in a fresh process with another PYTHONHASHSEED, the texts read
    back against the texts ingested (long ones included), and the lexical matcher, embedder,
    clone path and structured search of a system that has them. Stores are built in a
    temporary directory, removed afterwards. See docs/own-store.md."""
    from recallbench.commands.checkplugin import (
        CHECK_NAMES,
        LONG_TEXTS,
        fixture_data,
        run_checks,
        scratch,
    )
    from recallbench.core.threads import limit_threads

    unknown = sorted(set(only) - set(CHECK_NAMES))
    if unknown:
        raise click.UsageError(f"no check {unknown[0]!r} (checks: {', '.join(CHECK_NAMES)})")
    from recallbench.systems import get_system

    # an unknown or broken system: one line, before anything is read (its capabilities
    # choose the checks; each check builds fresh instances of its own)
    listed = get_system(name)
    paths, _ = dataset_inputs("fixtures", {"corpus": corpus, "queries": queries})
    data = fixture_data(paths)
    echo_line(
        f"check-plugin {name}: {data.label}, and {len(LONG_TEXTS)} long texts for the content check"
    )
    failed = ran = 0
    with scratch() as work, limit_threads(1):
        for outcome in run_checks(name, listed, data, work, only):
            click.echo(outcome.line())
            ran += outcome.status != "n/a"
            failed += outcome.status == "FAIL"
    if failed:
        raise RecallbenchError(f"{name}: {failed} of {ran} checks failed")
    echo_line(f"{name}: all {ran} checks passed", err=True)


def console_main() -> None:
    """The `recallbench` console command: `main`, then the process ends without the
    interpreter's teardown (`recallbench.core.exiting`: 1.2-1.6 s after a command that embedded),
    once its threads, `atexit` handlers and output are done. A traceback (a bug) takes
    Python's own exit."""
    from recallbench.core.exiting import run_then_exit

    run_then_exit(main)


if __name__ == "__main__":  # pragma: no cover
    console_main()
