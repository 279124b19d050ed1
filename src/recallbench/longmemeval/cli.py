"""`recallbench longmemeval ...`: the lane's stage commands (a click group).

Artifacts live under ``<--build-dir>/longmemeval/``. Every user error is one line
(`click.ClickException`, exit code 1); progress bars go to stderr only when it is a
terminal and `--quiet` is not given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from recallbench.errors import RecallbenchError
from recallbench.longmemeval import DEFAULT_TOP_K, MAX_SEARCH_LIMIT, stages
from recallbench.longmemeval.generator import DEFAULT_SESSION_CHARS, SHAPES, generate
from recallbench.longmemeval.reader import stderr_log
from recallbench.options import session_text_option, system_option, workers_option

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except RecallbenchError as exc:
        raise click.ClickException(str(exc)) from None


def _opts(ctx: click.Context) -> dict[str, Any]:
    quiet = ctx.obj["quiet"]
    log: Callable[[str], None] = (lambda _m: None) if quiet else stderr_log
    return {"build_dir": ctx.obj["build_dir"], "quiet": quiet, "log": log, "warn": stderr_log}


@click.group()
@click.option(
    "--build-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Artifacts go to BUILD_DIR/longmemeval/ [default: the parent command's, else build].",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress bars and no notices (warnings still)."
)
@click.pass_context
def longmemeval(ctx: click.Context, build_dir: Path | None, quiet: bool) -> None:
    """LongMemEval lane: session-level recall on a LongMemEval file you provide."""
    root = ctx.find_root()
    inherited = root.params if root is not ctx else {}
    if build_dir is None:
        build_dir = Path(inherited.get("build_dir") or "build")
    ctx.obj = {"build_dir": Path(build_dir), "quiet": quiet or bool(inherited.get("quiet"))}


@longmemeval.command("generate")
@click.option(
    "--shape",
    type=click.Choice(SHAPES),
    required=True,
    help="s: ~50 sessions/question, m: ~500, oracle: evidence only.",
)
@click.option("--questions", type=click.IntRange(min=1), required=True)
@click.option("--seed", type=int, required=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option(
    "--sessions-per-question",
    type=click.IntRange(min=2),
    default=None,
    help="Default: 50 (s), 500 (m).",
)
@click.option(
    "--session-chars",
    type=click.IntRange(min=20),
    default=DEFAULT_SESSION_CHARS,
    show_default=True,
    help="Characters of user text per session (assistant turns add about half).",
)
@click.option(
    "--has-answer-keys",
    type=click.Choice(["evidence", "all"]),
    default="evidence",
    show_default=True,
    help="evidence: has_answer only on evidence sessions' turns (like cleaned S); all: on every turn.",
)
@click.option(
    "--turn-labels-only",
    is_flag=True,
    help="Omit answer_session_ids (exercises the turn-level gold fallback).",
)
@click.pass_context
def generate_cmd(
    ctx: click.Context,
    shape: str,
    questions: int,
    seed: int,
    out: Path,
    sessions_per_question: int | None,
    session_chars: int,
    has_answer_keys: str,
    turn_labels_only: bool,
) -> None:
    """Write format-faithful SYNTHETIC data (not LongMemEval) for tests and benchmarks."""
    with _user_errors():
        meta = generate(
            out,
            shape=shape,
            questions=questions,
            seed=seed,
            sessions_per_question=sessions_per_question,
            session_chars=session_chars,
            has_answer_keys=has_answer_keys,
            turn_labels_only=turn_labels_only,
        )
    click.echo(
        f"{out}: {questions} synthetic questions, shape {shape}, {meta['size_bytes']:,} bytes, sha256 {meta['sha256']}"
    )


@longmemeval.command("validate")
@click.argument("data_file", type=_FILE)
@click.pass_context
def validate_cmd(ctx: click.Context, data_file: Path) -> None:
    """Check every record of DATA_FILE; count drops (abstention, no gold) and scored pairs."""
    with _user_errors():
        env = stages.validate(data_file, **_opts(ctx))
    d = env["data"]
    click.echo(
        f"{data_file}: {d['records']} records, {d['dropped']['abstention']['count']} abstention "
        f"dropped, {d['dropped']['other']['count']} other dropped, {d['scored']} to score"
    )


@longmemeval.command("prep")
@click.argument("data_file", type=_FILE)
@click.option(
    "--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path), required=True
)
@session_text_option
@workers_option
@system_option
@click.pass_context
def prep_cmd(
    ctx: click.Context,
    data_file: Path,
    cache_dir: Path,
    session_text: str,
    workers: int,
    system: str,
) -> None:
    """Embed every distinct session text and question once into the vector cache CACHE."""
    with _user_errors():
        out = stages.prep(
            data_file,
            cache_dir=cache_dir,
            workers=workers,
            session_text=session_text,
            system=system,
            **_opts(ctx),
        )
    m = out["manifest"]
    click.echo(
        f"{cache_dir}: {m['count']} vectors for {m['embedder_identity']} (--session-text {session_text})"
    )


@longmemeval.command("run")
@click.argument("data_file", type=_FILE)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Vectors from `prep`; without it texts are embedded inline.",
)
@workers_option
@session_text_option
@click.option(
    "--top-k",
    type=click.IntRange(1, MAX_SEARCH_LIMIT),
    default=DEFAULT_TOP_K,
    show_default=True,
    help="Search limit per call.",
)
@system_option
@click.pass_context
def run_cmd(
    ctx: click.Context,
    data_file: Path,
    cache_dir: Path | None,
    workers: int,
    session_text: str,
    top_k: int,
    system: str,
) -> None:
    """Hydrate a fresh store per question and search it once (runs.json)."""
    with _user_errors():
        env = stages.run(
            data_file,
            cache_dir=cache_dir,
            workers=workers,
            session_text=session_text,
            top_k=top_k,
            system=system,
            **_opts(ctx),
        )
    click.echo(
        f"{stages.artifact_file(ctx.obj['build_dir'], 'longmemeval-runs')}: "
        f"{len(env['data']['questions'])} questions ranked"
    )


@longmemeval.command("score")
@click.pass_context
def score_cmd(ctx: click.Context) -> None:
    """recall@k, recall_any@k, recall_all@k, ndcg_any@k from runs.json (scores.json)."""
    with _user_errors():
        env = stages.score(build_dir=ctx.obj["build_dir"])
    overall = env["data"]["overall"]
    parts = [
        f"{name} {overall['metrics'][name]['value']:.4f}"
        for name in ("recall@5", "recall_any@5", "recall_all@5")
        if name in overall["metrics"]
    ]
    click.echo(f"scored {overall['questions']} questions: " + ", ".join(parts))


@longmemeval.command("report")
@click.pass_context
def report_cmd(ctx: click.Context) -> None:
    """results.json and report.md from the validate, runs and scores artifacts."""
    with _user_errors():
        stages.report(build_dir=ctx.obj["build_dir"])
    click.echo(str(stages.lane_dir(ctx.obj["build_dir"]) / stages.REPORT_MD))
