#!/usr/bin/env python3
"""Evaluate retrieval quality in one process: every stage chained, for any dataset.

    python scripts/retrieval_eval.py [--corpus PATH] [--queries PATH] [--output r.json]
                                     [--report r.md] [--top-k 5] [--repeat 1] [--json]
    python scripts/retrieval_eval.py --dataset longmemeval --data FILE [--unit session|turn]
    python scripts/retrieval_eval.py --longmemeval FILE        # short form of the above
    python scripts/retrieval_eval.py --dataset locomo --data locomo10.json --unit turn
    python scripts/retrieval_eval.py --longmemeval FILE --preset longmemeval-paper

Its options are `recallbench run`'s (one declaration: `options.run_command_options`; --k,
--measure, --preset and --json included), plus --longmemeval, --build-dir, -q and the
baseline's --write-baseline and --check-baseline.

Stores and artifacts live in a temporary directory that is removed at the end, unless
--build-dir is given; only the paths given with --output, --report and --write-baseline (and
--build-dir) are written, never over an input or over each other. Exit codes: 0 ok, 1 bad
input or evaluator error (one line on stderr), 2 usage error, 3 result differs from
--check-baseline, 130 interrupted, 143 terminated (SIGTERM), 129 hung up (SIGHUP); the
temporary directory is removed in every case but SIGKILL.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # runs from a checkout without an activated venv

from recallbench.cli.options import DatasetCommand, absolute_path, run_command_options  # noqa: E402
from recallbench.cli.shared import (  # noqa: E402
    OneLineErrors,
    build_written,
    echo_closing,
    run_arguments,
    run_copies,
    run_guarded,
)
from recallbench.metrics.measures import RELEVANT_GRADE, select  # noqa: E402

if TYPE_CHECKING:
    from recallbench.engine.tasks import Execution

FIXTURES = ROOT / "benchmarks" / "retrieval"


def fixture_summary(result: Mapping[str, Any]) -> str:
    """The fixture suite's headline: Recall@1, Recall@k, MRR@k, nDCG@k and the round trip."""
    k = result["run"]["top_k"]
    o = result["metrics"]["overall"]

    def v(stem: str, at: int) -> str:
        names = select(result["run"]["measures"], stem=stem, k=at, prefix="", rel=RELEVANT_GRADE)
        x = o[names[0]]["value"] if names else None
        return "n/a" if x is None else f"{x:.3f}"

    recall = f"Recall@1 {v('recall', 1)}  " + (f"Recall@{k} {v('recall', k)}  " if k != 1 else "")
    rt = result["roundtrip"]
    trip = (
        f"round-trip {rt['equivalence']['numerator']}/{rt['equivalence']['denominator']} identical"
        if rt["available"]
        else rt["reason"]
    )
    return f"{recall}MRR@{k} {v('mrr', k)}  nDCG@{k} {v('ndcg', k)}  {trip}"


def conversational_summary(result: Mapping[str, Any]) -> str:
    """One line per level and k: recall, recall_any, recall_all and ndcg_any, named as in the
    report (turn-level names carry the `turn_` prefix), with the denominator."""
    overall = result["metrics"]["overall"]
    lines, counts = [], []
    for level in result["dataset"]["levels"]:
        measures = [m for m in result["run"]["measures"] if m["level"] == level["name"]]
        n = overall[measures[0]["name"]]["denominator"]  # every measure of a level shares it
        counts.append(f"{n} at {level['name']} level" if counts else f"{n} scored queries")
        for k in sorted({m["k"] for m in measures}):
            cells = []
            for stem in ("recall", "recall_any", "recall_all", "ndcg_any"):
                for name in select(measures, stem=stem, k=k, rel=RELEVANT_GRADE):
                    value = overall[name]["value"]
                    cells.append(f"{name} {'n/a' if value is None else f'{value:.3f}'}")
            lines.append("  ".join(cells))
    vacuous = result.get("summary", {}).get("questions_with_vacuous_gold")
    if vacuous:  # --gold official: fractional recall is n/a there, the others average them in
        counts[0] += f", {vacuous} of them with vacuous gold (no recall@k; recall_all 1, ndcg 0)"
    means = counts[0] + (f" ({', '.join(counts[1:])} with evidence)" if counts[1:] else "")
    return "\n".join(lines) + f"\n(means over {means}; recall = fractional)"


def summary(result: Mapping[str, Any]) -> str:
    """The script's summary lines (before the decision line): the fixture suite's headline
    with the round trip, or a conversational dataset's lines per level and k."""
    levels = [lv["name"] for lv in result["dataset"]["levels"]]
    return fixture_summary(result) if "memory" in levels else conversational_summary(result)


class ScriptCommand(OneLineErrors, DatasetCommand):
    """The script's command: usage errors in one line, like every other error."""


#: the options the script has and `recallbench run` has not (tests/e2e/test_script.py
#: checks that every other option is run's, declared once in `run_command_options`):
#: --build-dir and -q are the `recallbench` group's options in the CLI
SCRIPT_ONLY_OPTIONS = ("--longmemeval", "--build-dir", "--write-baseline", "--check-baseline", "-q")


@click.command(cls=ScriptCommand, context_settings={"help_option_names": ["-h", "--help"]})
@run_command_options(FIXTURES, "<repo>/benchmarks/retrieval", ("not written", "not written"))
@click.option(
    "--longmemeval",
    "longmemeval_file",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=absolute_path,
    help="Short form of --dataset longmemeval --data FILE.",
)
@click.option(
    "--build-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    callback=absolute_path,
    help="Keep every artifact here [default: a temporary directory, removed afterwards].",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=absolute_path,
    help="Write the result document (a baseline's form) here.",
)
@click.option(
    "--check-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=absolute_path,
    help="Exit 3 when the result differs from this baseline.",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress, no table, no files line: only the summary lines and the decision.",
)
def main(
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
    longmemeval_file: Path | None,
    build_dir: Path | None,
    write_baseline: Path | None,
    check_baseline: Path | None,
    quiet: bool,
) -> None:
    """Run every retrieval-evaluation stage in-process and print the headline figures: the
    table, the summary lines, the decision, the files written and "N queries scored in X s"
    (--json: one JSON object instead). The options are `recallbench run`'s, plus the
    baseline's and --longmemeval."""
    started = time.perf_counter()
    if longmemeval_file is not None:
        if dataset_args.get("data") is not None or dataset not in ("fixtures", "longmemeval"):
            raise click.UsageError(
                "--longmemeval FILE is short for --dataset longmemeval --data FILE"
            )
        dataset, dataset_args = "longmemeval", {**dataset_args, "data": longmemeval_file}
    paths, options, k, ks, measures = run_arguments(
        dataset, dataset_args, preset, top_k, ks, measures, FIXTURES
    )

    def body() -> None:
        from recallbench.commands.outputpaths import check_run_outputs

        check_run_outputs(
            build_dir,
            paths,
            execution.cache,
            output,
            report_path,
            ("--write-baseline", write_baseline),
            inputs=(("the --check-baseline file", check_baseline),),
        )
        from recallbench.builddir.artifacts import dumps, publish
        from recallbench.commands.baseline import gate
        from recallbench.commands.pipeline import run_pipeline, write_run
        from recallbench.core import progress

        progress.configure(quiet)

        def evaluate(work: Path) -> Any:
            return run_pipeline(
                dataset,
                paths,
                work,
                options=options,
                system=system,
                top_k=k,
                repeat=repeat,
                execution=execution,
                ks=ks,
                measures=measures,
            )

        written: list[Path | str] = []
        # a run without --build-dir works in a temporary directory, kept until the files
        # (report.html's data files staged in it among them) are published
        with contextlib.ExitStack() as stack:
            if build_dir is not None:
                from recallbench.commands.claim import claimed_build_dir

                with claimed_build_dir(build_dir, "scripts/retrieval_eval.py"):
                    run = evaluate(build_dir)
                    write_run(run, build_dir)
                written += build_written(build_dir)
            else:
                work = stack.enter_context(tempfile.TemporaryDirectory(prefix="recallbench-"))
                run = evaluate(Path(work))
            stack.callback(run.close)
            files, copied = run_copies(run, output, report_path)
            written += copied
            if write_baseline:
                files[write_baseline] = dumps(run.result)
                written.append(write_baseline)
            publish(files)
        if write_baseline and not as_json:
            click.echo(f"wrote baseline {write_baseline}", err=True)
        echo_closing(
            run,
            written,
            started,
            quiet=quiet,
            as_json=as_json,
            preset=preset,
            before_decision=summary(run.result),
            note=None if build_dir is None else f"the stage artifacts in {build_dir}",
        )
        if check_baseline:
            gate(check_baseline, run.result)

    run_guarded("retrieval_eval", body)


if __name__ == "__main__":
    from recallbench.core.exiting import run_then_exit

    run_then_exit(main)  # the process ends without the interpreter's teardown
