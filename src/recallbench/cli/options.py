"""Click options shared by the `recallbench` CLI and `scripts/retrieval_eval.py`.

Nothing here imports a system or a dataset reader: listing choices must stay cheap, since
every stage command starts with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from recallbench.commands.presets import PRESETS, preset_help
from recallbench.core.threads import DEFAULT_THREADS
from recallbench.datasets.base import DATASETS, DEFAULT_DATASET, dataset_spec, shared_options

FIXTURE_DIR = Path("benchmarks/retrieval")
DEFAULT_BASELINE = FIXTURE_DIR / "baseline.json"
#: --executor's choices: `engine.executor.EXECUTORS` (a test ties them; importing the engines
#: would slow every command's start)
EXECUTORS = ("local", "ray")
#: where a learned embedder computes (`recallbench.engine.tasks.DEVICES`)
DEVICES = ("auto", "cpu", "cuda")
#: the parameter that collects a command's dataset options: option param -> value
DATASET_ARGS = "dataset_args"


def absolute_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A path option's value made absolute once, when the command line is parsed (before
    any system's code runs): a system that calls `os.chdir` cannot move where a command
    reads or writes (issue 38). Leaves None, and a value when the current directory is
    gone, as they are."""
    if value is None:
        return None
    try:
        return Path(value).absolute()
    except OSError:  # the current directory was removed: nothing to resolve against
        return value


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


def _dataset_params(base: Path, shown: str | None) -> list[click.Parameter]:
    """--dataset, then every dataset's options (generated from the specs, each flag once)."""
    params: list[click.Parameter] = [
        click.Option(
            ["--dataset"],
            type=click.Choice(list(DATASETS)),
            default=DEFAULT_DATASET,
            show_default=True,
            help="The dataset reader.",
        )
    ]
    for option, owners in shared_options().values():
        default = ""
        if option.default_file:
            where = f"{shown}/{option.default_file}" if shown else str(base / option.default_file)
            default = f" [default: {where}]"
        text = f"{option.help} ({', '.join(owners)}){default}."
        file = click.Path(dir_okay=option.dir_okay, path_type=Path)
        kind = file if option.type == "file" else click.Choice(option.choices)
        params.append(
            click.Option(
                [option.flag],
                type=kind,
                default=None,
                help=text,
                callback=absolute_path if option.type == "file" else None,
            )
        )
    return params


class DatasetCommand(click.Command):
    """A click command whose dataset options are generated from the dataset specs when the
    command is parsed or shown (see `dataset_options`), before its own options."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        where = getattr(self.callback, "__dataset_options__", None)
        return params if where is None else [*_dataset_params(*where), *params]


def dataset_options(base: Path = FIXTURE_DIR, shown: str | None = None) -> Callable:
    """--dataset and every dataset's own options, for a `DatasetCommand`.

    The options come from the dataset specs (`recallbench.datasets.base.DATASETS`); the
    command receives `dataset` and one mapping `dataset_args` (option param -> value, None
    when not given), so adding a dataset or an option changes no command's signature. File
    options with a default file (the fixtures' --corpus/--queries) default to that file
    under `base` (shown as `shown` in the help when given).
    """

    def apply(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            names = {option.param for option, _ in shared_options().values()}
            kwargs[DATASET_ARGS] = {n: kwargs.pop(n) for n in list(kwargs) if n in names}
            return fn(*args, **kwargs)

        inner.__dataset_options__ = (base, shown)  # type: ignore[attr-defined]
        return inner

    return apply


def fixture_dir(base: Path = FIXTURE_DIR) -> Path:
    """Where the committed fixture suite is: `base` (relative to the current directory) when
    it exists, else the checkout recallbench is installed from (an editable install), so
    the defaults work from any directory; a one-line hint when neither has it."""
    if base.is_dir() or base.is_absolute():
        return base
    checkout = Path(__file__).resolve().parents[3] / base
    if checkout.is_dir():
        return checkout
    raise click.UsageError(
        f"{base}: no fixture suite here; run from a recallbench checkout or give --corpus "
        "and --queries"
    )


def dataset_inputs(
    dataset: str, args: Mapping[str, Any], base: Path = FIXTURE_DIR
) -> tuple[dict[str, Path], dict[str, Any]]:
    """(paths, options) for `datasets.base.open_source` from the dataset options `args`
    (param -> value): the dataset's file options give `paths` (role -> path), every choice
    option given gives `options`. A file option, or one marked `refused_elsewhere`, given
    with a dataset that does not declare it is a usage error; other options pass to the
    reader, which refuses what it does not take."""
    spec = dataset_spec(dataset)
    own = {option.flag for option in spec.options}
    files = [option for option in spec.options if option.type == "file"]
    for flag, (option, owners) in shared_options().items():
        if flag in own or args.get(option.param) is None:
            continue
        if option.type == "file" or option.refused_elsewhere:
            reads = "/".join(f.flag for f in files)
            hint = f"; --dataset {dataset} reads {reads}" if reads and option.type == "file" else ""
            raise click.UsageError(f"{flag} is for --dataset {' or '.join(owners)}{hint}")
    paths: dict[str, Path] = {}
    defaults = None
    for option in files:
        value = args.get(option.param)
        if value is None and option.default_file:
            defaults = defaults or fixture_dir(base)
            value = defaults / option.default_file
        if value is None and option.required:
            raise click.UsageError(f"--dataset {dataset} needs {option.flag} FILE")
        if value is not None:
            paths[str(option.role)] = value
    chosen = [option for option, _ in shared_options().values() if option.type == "choice"]
    options = {o.param: args[o.param] for o in chosen if args.get(o.param) is not None}
    return paths, options


def output_options(json_default: str, markdown_default: str) -> Callable:
    """--output (result JSON) and --report (Markdown); None means the given default."""
    file = click.Path(dir_okay=False, path_type=Path)
    return _compose(
        click.option(
            "--output",
            type=file,
            default=None,
            callback=absolute_path,
            help=f"Result JSON path [default: {json_default}].",
        ),
        click.option(
            "--report",
            "report_path",
            type=file,
            default=None,
            callback=absolute_path,
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
    help="Results per query [default: "
    + ", ".join(f"{spec.top_k} for {name}" for name, spec in DATASETS.items())
    + "].",
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


def _parse_measures(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...] | None:
    """Each --measure checked with `measures.parse` (its level is resolved against the
    suite's levels when scoring); None when none was given (the dataset's measures)."""
    if not value:
        return None
    from recallbench.core.errors import RecallbenchError
    from recallbench.metrics.measures import parse

    for name in value:
        try:
            parse(name)
        except RecallbenchError as exc:
            raise click.BadParameter(str(exc)) from None
    return tuple(dict.fromkeys(value))


measure_option = click.option(
    "--measure",
    "measures",
    multiple=True,
    callback=_parse_measures,
    metavar="NAME",
    help="A measure to score instead of the dataset's, e.g. recall@10, recall(rel=3)@10, "
    "turn_ndcg_any@5 (repeat) [default: the dataset's measures].",
)
preset_option = click.option(
    "--preset",
    type=click.Choice(list(PRESETS)),
    default=None,
    help=preset_help() + " (docs/protocols.md; an option beside it must agree).",
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
workers_option = click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Parallel workers (results are identical for any number).",
)


def call_timeout_option(help: str) -> Callable:
    """--call-timeout SECONDS: the time limit of each call into code recallbench does not
    control (`recallbench.systems.boundary`); `help` says which calls."""
    return click.option(
        "--call-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help=f"{help} [default: no limit].",
    )


#: the execution options' parameters, each named as the `tasks.Execution` field it sets
EXECUTION_PARAMS = ("executor", "workers", "ray_address", "cache", "call_timeout", "threads")
cache_option = click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    callback=absolute_path,
    help="Vector cache made by `recallbench prep` (no embedding at query time).",
)
threads_option = click.option(
    "--threads",
    type=click.IntRange(min=0),
    default=DEFAULT_THREADS,
    show_default=True,
    callback=lambda ctx, param, value: value or None,  # 0: None, the libraries' own
    help="BLAS / OpenMP / torch threads of the system under test per worker (0: the "
    "libraries' own defaults).",
)


def delivering_execution(*decorators: Callable) -> Callable:
    """The execution option `decorators` (some of `EXECUTION_PARAMS`' options), delivered
    to the command as one parameter `execution`: the `tasks.Execution` built once from
    their values (an option left out keeps the field's default). The command declares
    `execution` instead of the options' own parameters."""

    def apply(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            from recallbench.engine.tasks import Execution

            given = {name: kwargs.pop(name) for name in EXECUTION_PARAMS if name in kwargs}
            return fn(*args, execution=Execution(**given), **kwargs)

        return _compose(*decorators)(inner)

    return apply


#: every execution option (--executor, --workers, --ray-address, --cache, --call-timeout,
#: --threads), delivered as one `execution: tasks.Execution`
execution_options = delivering_execution(
    executor_option,
    workers_option,
    ray_address_option,
    cache_option,
    call_timeout_option(
        "Fail the run when one call into the system, or its plugin's decision rules, takes longer."
    ),
    threads_option,
)
#: --executor, --workers and --ray-address only (a command that needs no cache, call
#: limit or thread count), delivered as one `execution: tasks.Execution` too
engine_options = delivering_execution(executor_option, workers_option, ray_address_option)
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the closing summary (figures, files written, decision) as one JSON object on "
    "stdout instead of the table and lines.",
)


def run_command_options(
    base: Path = FIXTURE_DIR,
    shown: str | None = None,
    output_defaults: tuple[str, str] = ("only BUILD/results.json", "only BUILD/report.md"),
) -> Callable:
    """The one option list of `recallbench run` and `scripts/retrieval_eval.py` (declared
    once, so the two cannot drift; tests/e2e/test_script.py compares their option sets):
    the dataset options, --preset, --system, --output/--report, --top-k, --k, --measure,
    --repeat, the execution options and --json. `base`/`shown`: where the fixture files'
    defaults are (and how the help shows it); `output_defaults`: the help's defaults of
    --output and --report. The command receives `dataset`, `dataset_args`, `preset`,
    `system`, `output`, `report_path`, `top_k`, `ks`, `measures`, `repeat`, `execution`
    (`tasks.Execution`) and `as_json`."""
    return _compose(
        dataset_options(base, shown),
        preset_option,
        system_option,
        output_options(*output_defaults),
        top_k_option,
        k_option,
        measure_option,
        repeat_option,
        execution_options,
        json_option,
    )


def parse_gates(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[tuple[str, float], ...]:
    """`--fail-if-worse MEASURE[:MARGIN]` values as (measure name, margin >= 0); a measure
    name that does not parse or a margin that is not a finite number >= 0 is a usage error."""
    import math

    from recallbench.core.errors import RecallbenchError
    from recallbench.metrics.measures import parse

    gates = []
    for value in values:
        name, sep, margin_text = value.rpartition(":") if ":" in value else (value, "", "0")
        try:
            parse(name)
        except RecallbenchError as exc:
            raise click.BadParameter(f"{value!r}: {exc}") from None
        try:
            margin = float(margin_text)
        except ValueError:
            margin = math.nan
        if not math.isfinite(margin) or margin < 0:
            raise click.BadParameter(
                f"{value!r}: the margin after ':' must be a number >= 0 (e.g. ndcg@5:0.01)"
            )
        gates.append((name, margin))
    return tuple(gates)


def fail_if_worse_option(help_text: str) -> Callable:
    """`--fail-if-worse MEASURE[:MARGIN]` (repeatable, parsed by `parse_gates` into
    `gates`): compare's gate and check-baseline's, one option with its own help."""
    return click.option(
        "--fail-if-worse",
        "gates",
        multiple=True,
        metavar="MEASURE[:MARGIN]",
        callback=parse_gates,
        help=help_text,
    )
