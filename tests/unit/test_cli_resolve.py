"""Every setting of a run is resolved once, in one place, whichever command reads it: the
execution options become one `tasks.Execution` in their option decorator, and every
command (and scripts/retrieval_eval.py) receives that value."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import ROOT

from recallbench.cli.main import main
from recallbench.engine import tasks
from recallbench.engine.tasks import Execution

SCRIPT = ROOT / "scripts" / "retrieval_eval.py"
EXECUTION_FLAGS = (
    "--executor",
    "--workers",
    "--ray-address",
    "--cache",
    "--call-timeout",
    "--threads",
)
#: the commands that take every execution option
EXECUTING_COMMANDS = ("hydrate", "query", "snapshot-roundtrip", "run", "compare")


class Received(Exception):
    """Raised by the recording `Execution` to stop a command before it does any work."""


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> list[Execution]:
    """Every `Execution` built through `recallbench.engine.tasks.Execution` from now on; each
    build then stops the command (`Received`)."""
    built: list[Execution] = []

    def recording(*args: Any, **kwargs: Any) -> Execution:
        built.append(Execution(*args, **kwargs))
        raise Received

    monkeypatch.setattr(tasks, "Execution", recording)
    return built


def script_main() -> click.Command:
    """scripts/retrieval_eval.py's command, imported from its file."""
    spec = importlib.util.spec_from_file_location("retrieval_eval_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def invoke(command: click.Command, args: list[str]) -> Any:
    """Invoke `command` in-process; the exception it ended with."""
    return CliRunner().invoke(command, args).exception


def test_every_command_receives_one_execution_built_from_the_same_options(
    received: list[Execution], tmp_path: Path
) -> None:
    cache = tmp_path / "vectors"
    options = ["--workers", "3", "--cache", str(cache), "--call-timeout", "2.5", "--threads", "0"]
    build = ["--build-dir", str(tmp_path / "build")]
    for name in EXECUTING_COMMANDS:
        assert isinstance(invoke(main, [*build, name, *options]), Received), name
    assert isinstance(invoke(script_main(), options), Received)
    expected = Execution("local", 3, None, cache, call_timeout=2.5, threads=None)
    assert received == [expected] * (len(EXECUTING_COMMANDS) + 1)


def test_protocols_receives_an_execution_of_its_three_options(
    received: list[Execution], tmp_path: Path
) -> None:
    args = ["--build-dir", str(tmp_path), "protocols", "--workers", "2", "--ray-address", "x:1"]
    assert isinstance(invoke(main, args), Received)
    assert received == [Execution("local", 2, "x:1")]


def options_of(command: click.Command, parent: click.Context | None = None) -> list[str]:
    """The option lines of `command --help`, each the option's first flag."""
    ctx = click.Context(command, parent=parent, info_name="x")
    text = command.get_help(ctx)
    return re.findall(r"^  (-[-\w]+)", text, re.M)


@pytest.mark.parametrize("name", EXECUTING_COMMANDS)
def test_help_lists_each_execution_option_once(name: str) -> None:
    parent = click.Context(main, info_name="recallbench")
    listed = options_of(main.get_command(parent, name), parent)  # type: ignore[arg-type]
    assert [flag for flag in listed if flag in EXECUTION_FLAGS] == list(EXECUTION_FLAGS)


def test_the_scripts_help_lists_each_execution_option_once() -> None:
    listed = options_of(script_main())
    assert [flag for flag in listed if flag in EXECUTION_FLAGS] == list(EXECUTION_FLAGS)


def test_a_command_declares_execution_instead_of_the_options(tmp_path: Path) -> None:
    """The options decorator's contract on a command of its own: `execution` replaces the
    six parameters, each option's value in its field (--threads 0: the libraries' own)."""
    from recallbench.cli.options import execution_options

    got: list[Any] = []

    @click.command()
    @execution_options
    def command(**kwargs: Any) -> None:
        got.append(kwargs)

    result = CliRunner().invoke(
        command, ["--executor", "ray", "--ray-address", "h:1", "--cache", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert got == [{"execution": Execution("ray", 1, "h:1", tmp_path)}]
    assert CliRunner().invoke(command, ["--threads", "0"]).exit_code == 0
    assert got[-1]["execution"].threads is None
    assert CliRunner().invoke(command, ["--workers", "0"]).exit_code == 2  # click's range


# --- top-k and the cutoffs: one resolver --------------------------------------------------

PAPER_KS = (1, 3, 5, 10, 30, 50)


@pytest.mark.parametrize(
    ("preset", "dataset", "top_k", "ks", "unit", "expected"),
    [
        (None, "fixtures", None, None, None, (5, None)),  # the dataset's default
        (None, "longmemeval", None, None, None, (10, None)),
        (None, "locomo", None, None, "turn", (10, None)),
        (None, "fixtures", 7, None, None, (7, None)),  # --top-k
        (None, "locomo", None, (1, 3), None, (3, (1, 3))),  # deep enough for the largest --k
        (None, "locomo", 4, (1, 3), None, (4, (1, 3))),
        ("longmemeval-paper", "longmemeval", None, None, "session", (50, PAPER_KS)),
        ("longmemeval-paper", "longmemeval", None, None, "turn", (10_000, PAPER_KS)),
        ("longmemeval-paper", "longmemeval", 60, PAPER_KS, None, (60, PAPER_KS)),
        ("vipune-scope", "longmemeval", None, None, None, (10, (1, 5, 10))),
    ],
)
def test_one_resolver_of_top_k_and_the_cutoffs(
    preset: str | None,
    dataset: str,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    unit: str | None,
    expected: tuple[int, tuple[int, ...] | None],
) -> None:
    from recallbench.commands.presets import resolve_top_k

    assert resolve_top_k(preset, dataset, top_k, ks, unit) == expected


@pytest.mark.parametrize(
    ("preset", "dataset", "top_k", "ks", "message"),
    [
        ("longmemeval-paper", "longmemeval", 20, None, "needs --top-k 50 or more"),
        ("longmemeval-paper", "longmemeval", None, (1, 5), "uses --k 1,3,5,10,30,50"),
        ("longmemeval-paper", "locomo", None, None, "is for --dataset longmemeval"),
    ],
)
def test_the_resolver_refuses_what_contradicts_the_preset(
    preset: str, dataset: str, top_k: int | None, ks: tuple[int, ...] | None, message: str
) -> None:
    from recallbench.commands.presets import resolve_top_k

    with pytest.raises(click.UsageError, match=re.escape(message)):
        resolve_top_k(preset, dataset, top_k, ks)


@pytest.fixture(scope="module")
def hydrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build directory of the fixture suite, validated and hydrated (for `query`)."""
    from conftest import run_stages

    build = tmp_path_factory.mktemp("hydrated") / "build"
    run_stages(build, ["validate", "hydrate"])
    return build


def recorder(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, seen: list) -> None:
    """Replace `target.name` by a function that records its (top_k, ks) and stops."""

    def record(*args: Any, top_k: int | None = None, ks: Any = None, **kwargs: Any) -> Any:
        seen.append((top_k, None if ks is None else tuple(ks)))
        raise Received

    monkeypatch.setattr(target, name, record)


@pytest.mark.parametrize(
    "given", [[], ["--top-k", "7"], ["--k", "1,3"], ["--top-k", "8", "--k", "2,1"]]
)
def test_query_run_compare_and_the_script_resolve_the_same_top_k(
    hydrated: Path, monkeypatch: pytest.MonkeyPatch, given: list[str]
) -> None:
    import recallbench.commands.compare
    import recallbench.commands.pipeline
    import recallbench.stages.query
    from recallbench.commands.presets import resolve_top_k

    seen: list[tuple[int | None, tuple[int, ...] | None]] = []
    recorder(monkeypatch, recallbench.stages.query, "run_query", seen)
    recorder(monkeypatch, recallbench.commands.pipeline, "run_pipeline", seen)
    recorder(monkeypatch, recallbench.commands.compare, "run_compared", seen)
    build = ["--build-dir", str(hydrated)]
    for name in ("query", "run", "compare"):
        assert isinstance(invoke(main, [*build, name, *given]), Received), name
    assert isinstance(invoke(script_main(), given), Received)
    top_k = int(given[given.index("--top-k") + 1]) if "--top-k" in given else None
    ks = tuple(sorted(map(int, given[-1].split(",")))) if "--k" in given else None
    assert seen == [resolve_top_k(None, "fixtures", top_k, ks)] * 4


@pytest.mark.parametrize(("ks", "expected"), [(None, 5), ((1, 3), 3)])
def test_run_pipeline_resolves_top_k_as_the_commands_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ks: tuple[int, ...] | None, expected: int
) -> None:
    from conftest import CORPUS, QUERIES

    import recallbench.stages.query
    from recallbench.commands.pipeline import run_pipeline

    seen: list[tuple[int | None, tuple[int, ...] | None]] = []
    recorder(monkeypatch, recallbench.stages.query, "run_query", seen)
    with pytest.raises(Received):
        run_pipeline("fixtures", {"corpus": CORPUS, "queries": QUERIES}, tmp_path, ks=ks)
    assert seen == [(expected, ks)]


# --- the script without CLI internals -----------------------------------------------------


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports (wherever the import is), `from a import b` as a.b too."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_script_imports_nothing_from_the_cli() -> None:
    """The script shares the CLI's options and plumbing (`cli.options`, `cli.shared`), never
    the `recallbench` command's own module."""
    imported = imported_modules(SCRIPT)
    assert "recallbench.cli.shared" in imported  # what it shares with `recallbench run`
    assert not {name for name in imported if name.startswith("recallbench.cli.main")}, imported


@pytest.mark.parametrize(
    "line",
    [
        "import recallbench.cli.main",
        "from recallbench.cli import main",
        "def f():\n    from recallbench.cli.main import console_main",
    ],
)
def test_imported_modules_sees_every_form_of_import(tmp_path: Path, line: str) -> None:
    source = tmp_path / "x.py"
    source.write_text(line + "\n", encoding="utf-8")
    assert "recallbench.cli.main" in imported_modules(source)
