#!/usr/bin/env python3
"""Evaluate retrieval quality in one process: every stage chained, nothing left behind.

    python scripts/retrieval_eval.py [--corpus PATH] [--queries PATH] [--output r.json]
                                     [--report r.md] [--top-k 5] [--repeat 1]
    python scripts/retrieval_eval.py --longmemeval longmemeval_s.json [--cache DIR] ...

The store lives in a temporary directory that is removed at the end; only the paths given
with --output, --report and --write-baseline are written. Exit codes: 0 ok, 1 bad input or
evaluator error (one line on stderr), 2 usage error, 3 result differs from --check-baseline.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from recallbench.artifacts import atomic_write_bytes, dumps
from recallbench.errors import RecallbenchError, ValidationFailed
from recallbench.options import (
    fixture_options,
    output_options,
    repeat_option,
    session_text_option,
    system_option,
    top_k_option,
    workers_option,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "retrieval"


def _summary(result: dict) -> str:
    k = result["run"]["top_k"]
    o = result["metrics"]["overall"]
    d = result["decision"]
    eq = result["roundtrip"]["equivalence"]

    def v(name: str) -> str:
        x = o[name]["value"]
        return "n/a" if x is None else f"{x:.3f}"

    recall = f"Recall@1 {v('recall@1')}  " + (f"Recall@{k} {v(f'recall@{k}')}  " if k != 1 else "")
    return (
        f"{recall}MRR@{k} {v(f'mrr@{k}')}  "
        f"nDCG@{k} {v(f'ndcg@{k}')}  round-trip {eq['numerator']}/{eq['denominator']} identical\n"
        f"rule {d['rule']}: {d['recommendation']}"
    )


def _lane_summary(results: dict) -> str:
    """Overall LongMemEval figures per k, with the number of questions scored."""
    overall = results["metrics"]["overall"]["metrics"]
    scored = results["counts"]["scored"]
    lines = []
    for k in results["k"]:
        cells = [
            f"{name}@{k} {overall[f'{name}@{k}']['value']:.3f}"
            for name in ("recall", "recall_any", "recall_all", "ndcg_any")
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines) + f"\n(means over {scored} scored questions; recall = fractional)"


def _fixture_lane(
    corpus: Path,
    queries: Path,
    output: Path | None,
    report: Path | None,
    top_k: int,
    repeat: int,
    system: str,
    write_baseline: Path | None,
    check_baseline: Path | None,
) -> None:
    from recallbench.baseline import gate
    from recallbench.pipeline import run_fixture_lane
    from recallbench.stages.report import normalize

    with tempfile.TemporaryDirectory(prefix="recallbench-") as work:
        out = run_fixture_lane(
            corpus, queries, Path(work), top_k=top_k, repeat=repeat, system=system
        )
    if output:
        atomic_write_bytes(output, dumps(out.result))
    if report:
        atomic_write_bytes(report, out.markdown.encode("utf-8"))
    if write_baseline:
        atomic_write_bytes(write_baseline, dumps(normalize(out.result)))
        click.echo(f"wrote baseline {write_baseline}", err=True)
    click.echo(_summary(out.result))
    if check_baseline:
        gate(check_baseline, out.result)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@fixture_options(FIXTURES, shown="<repo>/benchmarks/retrieval")
@output_options("not written", "not written")
@top_k_option
@repeat_option
@system_option
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the normalized result (the committed baseline's form) here.",
)
@click.option(
    "--check-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Exit 3 when the normalized result differs from this baseline.",
)
@click.option(
    "--longmemeval",
    "longmemeval_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run the LongMemEval lane on this data file instead of the fixtures.",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="LongMemEval: embedding cache made by `recallbench longmemeval prep`.",
)
@workers_option
@session_text_option
@click.option(
    "--build-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=ROOT / "build",
    show_default=True,
    help="LongMemEval: where its artifacts go.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def main(
    corpus,
    queries,
    output,
    report_path,
    top_k,
    repeat,
    system,
    write_baseline,
    check_baseline,
    longmemeval_file,
    cache,
    workers,
    session_text,
    build_dir,
    quiet,
) -> None:
    """Run every retrieval-evaluation stage in-process and print the headline figures."""
    try:
        if longmemeval_file:
            from click.core import ParameterSource

            from recallbench.longmemeval import DEFAULT_TOP_K
            from recallbench.longmemeval.pipeline import run_lane

            source = click.get_current_context().get_parameter_source("top_k")
            lane_top_k = DEFAULT_TOP_K if source == ParameterSource.DEFAULT else top_k

            results = run_lane(
                longmemeval_file,
                build_dir=build_dir,
                cache_dir=cache,
                workers=workers,
                session_text=session_text,
                output=output,
                report=report_path,
                quiet=quiet,
                top_k=lane_top_k,
                system=system,
            )
            click.echo(_lane_summary(results))
        else:
            _fixture_lane(
                corpus,
                queries,
                output,
                report_path,
                top_k,
                repeat,
                system,
                write_baseline,
                check_baseline,
            )
    except ValidationFailed as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        click.echo(
            f"retrieval_eval: error: {len(exc.problems)} problem(s) in the fixtures", err=True
        )
        sys.exit(exc.exit_code)
    except RecallbenchError as exc:
        click.echo(f"retrieval_eval: error: {exc}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
