"""Click options shared by the `recallbench` CLI and `scripts/retrieval_eval.py`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from recallbench.longmemeval import SESSION_TEXT_MODES
from recallbench.systems import DEFAULT_SYSTEM, SYSTEM_NAMES

FIXTURE_DIR = Path("benchmarks/retrieval")
DEFAULT_BASELINE = FIXTURE_DIR / "baseline.json"


def _compose(*decorators: Callable) -> Callable:
    def apply(fn: Callable) -> Callable:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def fixture_options(base: Path = FIXTURE_DIR, shown: str | None = None) -> Callable:
    """--corpus and --queries, defaulting to the committed suite under `base`.

    `shown` replaces `base` in --help (e.g. to avoid printing a machine-specific path).
    """
    file = click.Path(dir_okay=False, path_type=Path)

    def option(name: str, filename: str, text: str) -> Callable:
        default_text = f"{shown}/{filename}" if shown else True
        return click.option(
            name, type=file, default=base / filename, show_default=default_text, help=text
        )

    return _compose(
        option("--corpus", "corpus.jsonl", "Memories, one JSON object per line."),
        option("--queries", "queries.jsonl", "Graded queries, one JSON object per line."),
    )


def output_options(json_default: str, markdown_default: str) -> Callable:
    """--output (result JSON) and --report (Markdown); None means the given default."""
    file = click.Path(dir_okay=False, path_type=Path)
    return _compose(
        click.option(
            "--output", type=file, default=None, help=f"Result JSON path [default: {json_default}]."
        ),
        click.option(
            "--report",
            "report_path",
            type=file,
            default=None,
            help=f"Markdown report path [default: {markdown_default}].",
        ),
    )


system_option = click.option(
    "--system",
    type=click.Choice(SYSTEM_NAMES),
    default=DEFAULT_SYSTEM,
    show_default=True,
    help="System under test.",
)
top_k_option = click.option(
    "--top-k", type=click.IntRange(min=1), default=5, show_default=True, help="Results per query."
)
repeat_option = click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Latency samples per query (>1 only for latency; results must not change).",
)

# --- the LongMemEval lane (its CLI group and the script's --longmemeval) ---

session_text_option = click.option(
    "--session-text",
    type=click.Choice(SESSION_TEXT_MODES),
    default="user",
    show_default=True,
    help="LongMemEval: user turns joined by spaces (official); all: every turn as 'role: content'.",
)
workers_option = click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="LongMemEval: worker processes (results are identical for any number).",
)
