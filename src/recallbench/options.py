"""Click options shared by the `recallbench` CLI and `scripts/retrieval_eval.py`.

Nothing here imports a system or a dataset reader: listing choices must stay cheap, since
every stage command starts with it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from recallbench.datasets.base import DATASETS, DEFAULT_DATASET, UNITS

FIXTURE_DIR = Path("benchmarks/retrieval")
DEFAULT_BASELINE = FIXTURE_DIR / "baseline.json"
SESSION_TEXT_MODES = ("user", "all")
GOLD_RULES = ("answer_session_ids", "official")
EXECUTORS = ("local", "ray")
#: where a learned embedder computes (`recallbench.stagework.DEVICES`)
DEVICES = ("auto", "cpu", "cuda")
#: the default top-k of a dataset: the fixture suite's 5, the conversational datasets' 10
DEFAULT_TOP_K = {"fixtures": 5, "longmemeval": 10, "locomo": 10}


def _compose(*decorators: Callable) -> Callable:
    def apply(fn: Callable) -> Callable:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def _system_names() -> list[str]:
    from recallbench.systems.registry import system_names

    return list(system_names())


class SystemChoice(click.Choice):
    """click.Choice over the registered systems, looked up only when a value is checked."""

    def __init__(self) -> None:
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        return _system_names()

    @choices.setter
    def choices(self, value: Any) -> None:
        pass

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        return "SYSTEM"


def dataset_options(base: Path = FIXTURE_DIR, shown: str | None = None) -> Callable:
    """--dataset, --data, --corpus, --queries, --unit, --session-text.

    The fixture suite (the default) reads --corpus and --queries (defaulting to the
    committed suite under `base`); LongMemEval and LoCoMo read --data FILE.
    """
    file = click.Path(dir_okay=False, path_type=Path)
    default_text = (lambda name: f"{shown}/{name}") if shown else (lambda name: str(base / name))
    return _compose(
        click.option(
            "--dataset",
            type=click.Choice(list(DATASETS)),
            default=DEFAULT_DATASET,
            show_default=True,
            help="The dataset reader.",
        ),
        click.option(
            "--data", type=file, default=None, help="The data file (longmemeval, locomo)."
        ),
        click.option(
            "--corpus",
            type=file,
            default=None,
            help=f"Fixture memories, JSONL [default: {default_text('corpus.jsonl')}].",
        ),
        click.option(
            "--queries",
            type=file,
            default=None,
            help=f"Fixture graded queries, JSONL [default: {default_text('queries.jsonl')}].",
        ),
        click.option(
            "--unit",
            type=click.Choice(UNITS),
            default=None,
            help="Conversational datasets: one memory per session (default) or per turn.",
        ),
        click.option(
            "--session-text",
            type=click.Choice(SESSION_TEXT_MODES),
            default=None,
            help="LongMemEval: user turns joined by spaces (official, default) or every turn.",
        ),
        click.option(
            "--gold",
            type=click.Choice(GOLD_RULES),
            default=None,
            help="LongMemEval: gold = answer_session_ids (default), or the official "
            "run_retrieval.py rule (questions without gold scored vacuously).",
        ),
    )


def fixture_dir(base: Path = FIXTURE_DIR) -> Path:
    """Where the committed fixture suite is: `base` (relative to the current directory) when
    it exists, else the checkout recallbench is installed from (an editable install), so
    the defaults work from any directory; a one-line hint when neither has it."""
    if base.is_dir() or base.is_absolute():
        return base
    checkout = Path(__file__).resolve().parents[2] / base
    if checkout.is_dir():
        return checkout
    raise click.UsageError(
        f"{base}: no fixture suite here; run from a recallbench checkout or give --corpus "
        "and --queries"
    )


def dataset_inputs(
    dataset: str,
    data: Path | None,
    corpus: Path | None,
    queries: Path | None,
    unit: str | None,
    session_text: str | None,
    base: Path = FIXTURE_DIR,
    gold: str | None = None,
) -> tuple[dict[str, Path], dict[str, Any]]:
    """(paths, options) for `datasets.base.open_source` from the dataset options."""
    if gold is not None and dataset != "longmemeval":
        raise click.UsageError("--gold is for --dataset longmemeval")
    if dataset == "fixtures":
        if data is not None:
            raise click.UsageError(
                "--data is for --dataset longmemeval or locomo; use --corpus/--queries"
            )
        if corpus is None or queries is None:
            base = fixture_dir(base)
        paths = {
            "corpus": corpus or base / "corpus.jsonl",
            "queries": queries or base / "queries.jsonl",
        }
    else:
        if corpus is not None or queries is not None:
            raise click.UsageError(
                f"--corpus/--queries are for the fixtures; --dataset {dataset} reads --data FILE"
            )
        if data is None:
            raise click.UsageError(f"--dataset {dataset} needs --data FILE")
        paths = {"data": data}
    given = (("unit", unit), ("session_text", session_text), ("gold", gold))
    options = {k: v for k, v in given if v is not None}
    return paths, options


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
    type=SystemChoice(),
    default="hotmem",
    show_default=True,
    help="System under test (see `recallbench systems`).",
)
top_k_option = click.option(
    "--top-k",
    type=click.IntRange(min=1, max=10_000),
    default=None,
    help="Results per query [default: 5 for the fixtures, 10 for conversational datasets].",
)


def _parse_ks(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple | None:
    if value is None:
        return None
    try:
        ks = tuple(sorted({int(part) for part in value.split(",")}))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from None
    if not ks or ks[0] < 1:
        raise click.BadParameter(f"{value!r}: every k must be at least 1")
    return ks


k_option = click.option(
    "--k",
    "ks",
    callback=_parse_ks,
    default=None,
    metavar="K,K,...",
    help="Cutoffs to score (conversational datasets), e.g. 1,3,5,10,30,50; each at most "
    "--top-k [default: 1, 5, 10 up to --top-k, and --top-k].",
)
preset_option = click.option(
    "--preset",
    type=click.Choice(["longmemeval-paper"]),
    default=None,
    help="longmemeval-paper: the LongMemEval paper's protocol (--session-text user, "
    "--gold official, --k 1,3,5,10,30,50, --top-k 50).",
)
repeat_option = click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Latency samples per query (>1 only for latency; results must not change).",
)
executor_option = click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="local: this machine's processes; ray: a Ray cluster (extra `ray`).",
)
ray_address_option = click.option(
    "--ray-address",
    default=None,
    help="With --executor ray: the cluster's address [default: start a local Ray].",
)
execution_options = _compose(
    executor_option,
    click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Parallel workers (results are identical for any number).",
    ),
    ray_address_option,
    click.option(
        "--cache",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Vector cache made by `recallbench prep` (no embedding at query time).",
    ),
    click.option(
        "--call-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Fail the run when one call into the system takes longer [default: no limit].",
    ),
)
