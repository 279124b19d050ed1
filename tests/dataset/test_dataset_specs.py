"""The dataset declarations (`recallbench.datasets.base.DatasetSpec`): the CLI options, the
generator groups and the docs tables are generated from them, so a dataset is added
without editing cli.py, options.py or a table by hand."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.cli.options import dataset_inputs
from recallbench.core.errors import RecallbenchError
from recallbench.datasets import base
from recallbench.datasets.base import DATASETS, DatasetOption, DatasetSpec, dataset_spec
from recallbench.datasets.tables import END, START, index_table, options_table, readme_table

ROOT = Path(__file__).resolve().parents[2]
DATASET_COMMANDS = ("validate", "run", "compare")
TABLE = re.compile(re.escape(START) + r"\n(.*?)" + re.escape(END), re.S)


def _flags(command: str) -> set[str]:
    cmd = main.commands[command]
    with click.Context(cmd) as ctx:
        return {name for p in cmd.get_params(ctx) for name in p.opts}


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_every_spec_option_is_on_the_dataset_commands(command: str) -> None:
    flags = _flags(command)
    assert "--dataset" in flags
    for spec in DATASETS.values():
        for option in spec.options:
            assert option.flag in flags, (command, spec.name, option.flag)
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    for spec in DATASETS.values():
        for option in spec.options:
            assert re.search(rf"^\s+{re.escape(option.flag)}\s", help_text, re.M), option.flag


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_dataset_options_arrive_as_one_mapping(command: str) -> None:
    """No command names a dataset's option in its signature: they come in `dataset_args`."""
    callback = inspect.unwrap(main.commands[command].callback)
    parameters = set(inspect.signature(callback).parameters)
    assert {"dataset", "dataset_args"} <= parameters
    for spec in DATASETS.values():
        for option in spec.options:
            assert option.param not in parameters, (command, option.param)


def test_specs_declare_what_the_cli_used_to_hard_code() -> None:
    assert list(DATASETS) == ["fixtures", "longmemeval", "locomo"]
    assert {n: s.top_k for n, s in DATASETS.items()} == {
        "fixtures": 5,
        "longmemeval": 10,
        "locomo": 10,
    }
    assert dataset_spec("fixtures").policy_name == "hotmem-fixture-rules"
    assert {s.name for s in DATASETS.values() if s.generator} == {"longmemeval", "locomo"}
    for spec in DATASETS.values():
        assert (ROOT / "docs" / spec.docs).is_file(), spec.docs
    with pytest.raises(RecallbenchError, match="unknown dataset 'nope'"):
        dataset_spec("nope")


def test_generator_groups_come_from_the_specs() -> None:
    listed = CliRunner().invoke(main, ["--help"]).output
    for spec in DATASETS.values():
        if spec.generator:
            assert re.search(rf"^\s+{spec.name}\s", listed, re.M), spec.name
            result = CliRunner().invoke(main, [spec.name, "generate", "--help"])
            assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("page", "render"),
    [
        ("README.md", readme_table),
        ("docs/index.md", index_table),
        ("docs/stages.md", options_table),
    ],
)
def test_the_committed_dataset_tables_match_the_specs(page: str, render: Any) -> None:
    block = TABLE.search((ROOT / page).read_text(encoding="utf-8"))
    assert block, f"{page} has no datasets-table block"
    expected = render()
    assert block.group(1) == expected, (
        f"{page} disagrees with the dataset specs; the table should read "
        f"(`python -m recallbench.datasets.tables write` rewrites it):\n{expected}"
    )


def test_write_rewrites_a_stale_table_and_only_its_block(tmp_path: Path) -> None:
    """`python -m recallbench.datasets.tables write` puts the specs' tables into the three
    pages (what a new dataset's author runs instead of pasting), and nothing else."""
    from recallbench.datasets.tables import PAGES, write_tables

    for page in PAGES.values():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        text = (ROOT / page).read_text(encoding="utf-8")
        (tmp_path / page).write_text(text, encoding="utf-8")
    readme = tmp_path / "README.md"
    fresh = readme.read_text(encoding="utf-8")
    readme.write_text(TABLE.sub(f"{START}\n| stale |\n{END}", fresh), encoding="utf-8")
    assert write_tables(tmp_path) == ["README.md"]
    assert readme.read_text(encoding="utf-8") == fresh
    assert write_tables(tmp_path) == []
    (tmp_path / "docs" / "index.md").write_text("no block here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs/index.md: needs exactly one"):
        write_tables(tmp_path)


# -- a toy dataset, registered by this test only ---------------------------------------------

TOY = DatasetSpec(
    name="toy",
    title="Toy",
    reader=__name__,
    measures=f"{__name__}:family",
    top_k=3,
    options=(
        DatasetOption("--toy-file", "file", "The toy file", role="data", required=True),
        DatasetOption("--toy-size", "choice", "How big", choices=("small", "big")),
    ),
    docs="toy.md",
    reads="a toy file",
    what="a toy",
    scope="the toy",
)


def open_source(paths: Mapping[str, Path], options: Mapping[str, Any]) -> Any:
    """The toy reader: says what it was given (the CLI turns it into one line, exit 1)."""
    raise RecallbenchError(f"toy reader: paths {sorted(paths)}, options {dict(options)}")


def family(levels: Any, top_k: int, ks: Any, options: Mapping[str, Any]) -> list[Any]:
    """The toy's measure family: none."""
    return []


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> DatasetSpec:
    monkeypatch.setitem(base.DATASETS, TOY.name, TOY)
    return TOY


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_a_registered_spec_shows_up_on_the_cli(toy: DatasetSpec, command: str) -> None:
    assert {"--toy-file", "--toy-size"} <= _flags(command)
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    assert "toy" in re.search(r"--dataset \[([^\]]*)\]", help_text).group(1).split("|")
    assert "How big (toy)." in " ".join(help_text.split())


def test_a_registered_spec_reaches_its_reader_through_validate(
    toy: DatasetSpec, tmp_path: Path
) -> None:
    data = tmp_path / "toy.txt"
    data.write_text("toy\n")
    args = ["--build-dir", str(tmp_path / "b"), "validate", "--dataset", "toy"]
    result = CliRunner().invoke(main, [*args, "--toy-file", str(data), "--toy-size", "big"])
    assert result.exit_code == 1, result.output
    assert "toy reader: paths ['data'], options {'toy_size': 'big'}" in result.output
    missing = CliRunner().invoke(main, args)
    assert missing.exit_code == 2
    assert "--dataset toy needs --toy-file FILE" in missing.output
    other = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path / "b"), "validate"] + ["--toy-file", str(data)]
    )
    assert other.exit_code == 2
    assert "--toy-file is for --dataset toy; --dataset fixtures reads --corpus/--queries" in (
        other.output
    )


def test_dataset_inputs_follow_the_specs(toy: DatasetSpec, tmp_path: Path) -> None:
    paths, options = dataset_inputs("toy", {"toy_file": tmp_path / "t", "toy_size": None})
    assert paths == {"data": tmp_path / "t"} and options == {}
    paths, options = dataset_inputs("fixtures", {}, ROOT / "benchmarks" / "retrieval")
    assert set(paths) == {"corpus", "queries"} and options == {}
    with pytest.raises(click.UsageError, match="--gold is for --dataset longmemeval"):
        dataset_inputs("locomo", {"data": tmp_path / "x", "gold": "official"})
    # an option another dataset declares passes to the reader, which refuses it itself
    _, options = dataset_inputs("locomo", {"data": tmp_path / "x", "session_text": "all"})
    assert options == {"session_text": "all"}


def test_two_datasets_cannot_declare_one_flag_differently(
    toy: DatasetSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = DatasetOption("--toy-size", "choice", "How tiny", choices=("tiny",))
    clash = DatasetSpec(**{**TOY.__dict__, "name": "toy2", "options": (other,)})
    monkeypatch.setitem(base.DATASETS, "toy2", clash)
    with pytest.raises(RecallbenchError, match="toy and toy2 declare --toy-size differently"):
        base.shared_options()


def test_nox_has_a_session_per_dataset_with_a_data_file() -> None:
    """noxfile.py generates `nox -s NAME -- FILE` from the specs (those with an `example`)."""
    listed = subprocess.run(
        [sys.executable, "-m", "nox", "--list", "--no-color"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sessions = set(re.findall(r"^[*-] (\S+)", listed, re.M))
    wanted = {spec.name for spec in DATASETS.values() if spec.example}
    assert wanted == {"longmemeval", "locomo"}
    assert wanted <= sessions, listed
    assert "fixtures" not in sessions


def datasets_modules_loaded_by(code: str) -> list[str]:
    """The `recallbench.datasets.*` modules a fresh interpreter has loaded after `code`."""
    code += "\nprint(' '.join(m for m in sys.modules if m.startswith('recallbench.datasets.')))\n"
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}"], capture_output=True, text=True, check=True
    ).stdout.split()


def test_listing_the_datasets_imports_no_reader() -> None:
    """`recallbench validate --help` reads the specs only: no reader, generator or system."""
    out = datasets_modules_loaded_by(
        "from click.testing import CliRunner\n"
        "from recallbench.cli.main import main\n"
        "for command in ('validate', 'run', 'compare'):\n"
        "    assert CliRunner().invoke(main, [command, '--help']).exit_code == 0\n"
    )
    specs = {f"recallbench.datasets.{name}.spec" for name in DATASETS}
    assert specs <= set(out), out
    allowed = {"recallbench.datasets.base", *specs, *(m.rsplit(".", 1)[0] for m in specs)}
    assert [m for m in out if m not in allowed] == []


def test_scoring_a_suite_imports_no_reader() -> None:
    """`score` rebuilds every dataset's measures from suite.json through its spec's family
    module alone: no reader (nor generator) is imported."""
    out = datasets_modules_loaded_by(
        "from recallbench.datasets.base import DATASETS\n"
        "from recallbench.stages.score import suite_measures\n"
        "levels = [{'name': 'session', 'prefix': ''}, {'name': 'turn', 'prefix': 'turn_'},\n"
        "          {'name': 'answer_ids', 'prefix': 'answer_ids_'}]\n"
        "options = {'unit': 'turn', 'gold': 'official'}\n"
        "for name in DATASETS:\n"
        "    suite = {'dataset': name, 'levels': levels, 'options': options}\n"
        "    assert suite_measures(suite, 10)\n"
    )
    families = {f"recallbench.datasets.{name}.measures" for name in DATASETS}
    assert families <= set(out), out
    assert [m for m in out if m.endswith((".reader", ".generator"))] == []
