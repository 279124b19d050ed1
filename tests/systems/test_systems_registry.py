"""The system registry: built-in names, entry-point plugins (found, broken), the docs table."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.systems import DEFAULT_SYSTEM, get_system, registry
from recallbench.systems.registry import (
    BUILTIN,
    GROUP,
    core_system_names,
    describe_systems,
    system_names,
    systems_document,
    systems_listing,
    systems_table,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "systems.md"
TABLE = re.compile(r"<!-- systems-table:start -->\n(.*?)<!-- systems-table:end -->", re.S)
EXAMPLE_PLUGIN = ("lancedb", "lancedb-fts", "lancedb-vector")


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Replace the installed entry points with the given ones (name -> 'module:attr')."""
    plugin = tmp_path / "fake_rb_plugin.py"
    plugin.write_text(
        "from recallbench.systems.bm25 import BM25System\n"
        "def good():\n"
        "    '''A fake system for the registry test.\n\n    More text.'''\n"
        "    system = BM25System('fake')\n"
        "    system.description = 'BM25 under another name (test double)'\n"
        "    return system\n"
        "def misnamed():\n"
        "    return BM25System('not-the-entry-point-name')\n"
        "def raises():\n"
        "    raise RuntimeError('the plugin could not start')\n"
        "def exits():\n"
        "    import sys; sys.exit(0)\n"
        "def hostile():\n"
        "    system = BM25System('hostile')\n"
        "    system.description = 'retitles \\x1b]0;owned\\x07 the terminal'\n"
        "    return system\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(points: dict[str, str]) -> None:
        eps = [importlib.metadata.EntryPoint(n, v, GROUP) for n, v in points.items()]

        def fake(**params):
            assert params == {"group": GROUP}
            return eps

        monkeypatch.setattr(importlib.metadata, "entry_points", fake)
        registry.clear_cache()

    yield install
    registry.clear_cache()


def test_built_in_names_default_and_core() -> None:
    names = system_names()
    assert names[: len(BUILTIN)] == tuple(BUILTIN)
    assert len(set(names)) == len(names)
    assert DEFAULT_SYSTEM == "hotmem" and DEFAULT_SYSTEM in names
    assert core_system_names() == ("hotmem", "hotmem-mmr", "bm25")
    assert {"minilm", "hybrid-rrf", "hotmem-minilm"} <= set(names)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(RecallbenchError, match=r"unknown system 'nope' \(known: hotmem, "):
        get_system("nope")


def test_describe_systems_rows() -> None:
    rows = describe_systems()
    assert [r["name"] for r in rows] == list(system_names())
    for r in rows:
        assert set(r) == {
            "name",
            "description",
            "available",
            "install_hint",
            "capabilities",
            "extra",
            "source",
        }
        assert set(r["capabilities"]) <= {"clone", "embedder", "lexical", "structured"}
        assert (r["install_hint"] is None) == r["available"]
    builtin = {r["name"]: r for r in rows if r["source"] == "built-in"}
    assert list(builtin) == list(BUILTIN)
    assert builtin["bm25"]["capabilities"] == ["clone", "lexical"]
    assert builtin["minilm"]["extra"] == "semantic"
    assert builtin["hybrid-rrf"]["description"] == "RRF (k = 25) of bm25 + minilm"
    # vipune's own hybrid is the `vipune` system; without its binary it says how to get it
    assert builtin["vipune"]["extra"] == "vipune"
    if not builtin["vipune"]["available"]:
        assert "RECALLBENCH_VIPUNE" in builtin["vipune"]["install_hint"]


def test_a_missing_extra_names_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.EXTRAS, "semantic", (("no_such_module_for_test",), "make setup"))
    with pytest.raises(RecallbenchError, match=r"system 'minilm' needs .*make setup"):
        get_system("minilm")
    row = next(r for r in describe_systems() if r["name"] == "hybrid-rrf")
    assert row["available"] is False
    assert "`semantic` extra" in row["install_hint"] and "make setup" in row["install_hint"]
    assert get_system("bm25").name == "bm25"  # the core is unaffected


def test_a_plugin_entry_point_is_found(entry_points) -> None:
    entry_points({"fake": "fake_rb_plugin:good"})
    assert system_names() == (*BUILTIN, "fake")
    system = get_system("fake")
    assert system.name == "fake"
    row = describe_systems()[-1]
    assert row == {
        "name": "fake",
        "description": "BM25 under another name (test double)",
        "available": True,
        "install_hint": None,
        "capabilities": ["clone", "lexical"],
        "extra": None,
        "source": "entry point fake_rb_plugin:good",
    }


def test_a_broken_plugin_is_listed_unavailable_and_breaks_nothing(entry_points) -> None:
    entry_points(
        {
            "gone": "no_such_module_xyz:make",
            "crashes": "fake_rb_plugin:raises",
            "misnamed": "fake_rb_plugin:misnamed",
            "exits": "fake_rb_plugin:exits",
            "fake": "fake_rb_plugin:good",
        }
    )
    assert system_names() == (*BUILTIN, "crashes", "exits", "fake", "gone", "misnamed")
    rows = {r["name"]: r for r in describe_systems()}
    assert rows["fake"]["available"] is True
    assert rows["bm25"]["source"] == "built-in"
    for name, needle in [
        ("gone", "ModuleNotFoundError"),
        ("crashes", "RuntimeError: the plugin could not start"),
        ("misnamed", "returned a system named 'not-the-entry-point-name'"),
        ("exits", "failed to load: SystemExit: 0"),  # a factory's sys.exit ended the CLI
    ]:
        assert rows[name]["available"] is False
        assert needle in rows[name]["install_hint"]
        with pytest.raises(RecallbenchError, match=f"system '{name}'"):
            get_system(name)
    assert get_system("bm25").name == "bm25"


def _distribution(root: Path, name: str, version: str, points: dict[str, str]) -> None:
    """An installed distribution (its dist-info, as pip writes it) on `root`, registering
    `points` (system name -> 'module:attr') in the recallbench group."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{n} = {v}\n" for n, v in points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Two real distributions installed on sys.path (dist-info directories), found by
    importlib.metadata as pip-installed packages are."""
    (tmp_path / "clash_rb_plugin.py").write_text(
        "from recallbench.systems.bm25 import BM25System\n"
        "def one():\n    return BM25System('twin')\n"
        "def two():\n    return BM25System('twin')\n"
        "def builtin_name():\n    return BM25System('bm25')\n"
        "def solo():\n    return BM25System('solo')\n"
    )
    _distribution(
        tmp_path,
        "rb-plugin-one",
        "1.2.0",
        {"twin": "clash_rb_plugin:one", "solo": "clash_rb_plugin:solo"},
    )
    _distribution(
        tmp_path,
        "rb-plugin-two",
        "3.4.5",
        {"twin": "clash_rb_plugin:two", "bm25": "clash_rb_plugin:builtin_name"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.clear_cache()
    yield tmp_path
    registry.clear_cache()


def test_an_ambiguous_name_is_refused_naming_both_distributions(installed) -> None:
    """Two distributions registering one name: refused in one line naming both (before,
    the first on sys.path won silently)."""
    with pytest.raises(RecallbenchError) as caught:
        get_system("twin")
    message = str(caught.value)
    assert "\n" not in message
    assert "system 'twin' is ambiguous" in message
    assert "rb-plugin-one 1.2.0" in message and "rb-plugin-two 3.4.5" in message
    rows = {r["name"]: r for r in describe_systems()}
    assert rows["twin"]["available"] is False
    assert "ambiguous" in rows["twin"]["install_hint"]
    assert rows["solo"]["available"] is True


def test_a_plugin_named_like_a_built_in_is_refused(installed) -> None:
    """A plugin registering `bm25` was dropped without a word; now the name is refused,
    naming the built-in and the plugin's distribution."""
    with pytest.raises(RecallbenchError) as caught:
        get_system("bm25")
    message = str(caught.value)
    assert "\n" not in message
    assert "built into recallbench" in message and "rb-plugin-two 3.4.5" in message
    rows = {r["name"]: r for r in describe_systems()}
    assert rows["bm25"]["available"] is False


def test_the_provider_is_the_distribution_and_its_version(installed) -> None:
    from recallbench import __version__

    assert registry.provider("solo") == {"distribution": "rb-plugin-one", "version": "1.2.0"}
    assert registry.provider("hotmem") == {"distribution": "recallbench", "version": __version__}


def test_register_refuses_a_name_not_listed() -> None:
    with pytest.raises(RecallbenchError, match="not listed"):
        registry.register("unlisted", description="x")


def test_importing_the_registry_imports_no_system() -> None:
    code = (
        "import sys\n"
        "from recallbench.systems import system_names, core_system_names, DEFAULT_SYSTEM\n"
        "system_names(); core_system_names()\n"
        "heavy = [m for m in ('hotmem', 'bm25s', 'scipy', 'torch', 'lancedb', 'numpy')\n"
        "         if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""


def test_the_example_plugin_is_installed() -> None:
    """CI installs examples/plugin-system, so the contract test covers a real plugin."""
    missing = [n for n in EXAMPLE_PLUGIN if n not in system_names()]
    assert not missing, (
        f"{missing} not registered: install the example plugin first: "
        "`.venv/bin/pip install -e examples/plugin-system`"
    )
    rows = {r["name"]: r for r in describe_systems()}
    assert rows["lancedb"]["source"].startswith("recallbench-lancedb ")


def test_the_docs_table_matches_the_registry() -> None:
    block = TABLE.search(DOCS.read_text())
    assert block, f"{DOCS} has no systems-table block"
    expected = systems_table([r for r in describe_systems() if r["source"] == "built-in"])
    assert block.group(1) == expected, (
        "docs/systems.md disagrees with the registry; the table should read:\n" + expected
    )


def test_the_systems_command_lists_every_system_on_its_own_aligned_line() -> None:
    """`recallbench systems`: one line per registered system, names in one column wide
    enough for the longest, an unavailable one with how to install it, a plugin with the
    distribution that provides it."""
    from click.testing import CliRunner

    from recallbench.cli.main import main

    result = CliRunner().invoke(main, ["systems"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    rows = describe_systems()
    assert [line.split()[0] for line in lines] == [r["name"] for r in rows]
    column = max(len(r["name"]) for r in rows) + 2
    assert all(line[column] != " " and line[column - 1] == " " for line in lines), lines
    for line, row in zip(lines, rows, strict=True):
        if row["available"]:
            assert line[column:].startswith("available  ")
        else:
            assert line[column:].startswith("unavailable  ")
            assert line.endswith(f" -- {row['install_hint']}")
        assert (f"[plugin: {row['source']}]" in line) == (row["source"] != "built-in")
    assert "None" not in result.output


def test_the_listing_reads_cleanly(entry_points) -> None:
    """`recallbench systems`: columns name, state, capabilities, then the description, the
    plugin's distribution and (unavailable) why; no "core only" for "no capability", no
    empty field for a plugin that failed to load, and a plugin's text escaped."""
    entry_points(
        {
            "gone": "no_such_module_xyz:make",
            "fake": "fake_rb_plugin:good",
            "hostile": "fake_rb_plugin:hostile",
        }
    )
    rows = describe_systems()
    lines = dict(zip([r["name"] for r in rows], systems_listing(rows), strict=True))
    assert all("core only" not in line and ";  " not in line for line in lines.values())
    width = len(max(lines, key=len))
    caps = lines["hotmem"].index("clone")
    for name, line in lines.items():
        assert line.startswith(name.ljust(width) + "  "), line
        assert line[width + 2 :].split()[0] in ("available", "unavailable")
        assert line[caps - 2 : caps] == "  " and line[caps] != " "
        assert "  " not in line[caps:].split("  ", 1)[1].lstrip(), line  # one-spaced text
    caps_width = len("clone, embedder, lexical")  # the widest capabilities
    assert lines["bm25"][caps:].startswith("clone, lexical".ljust(caps_width) + "  Okapi BM25")
    assert lines["fake"].endswith(
        "BM25 under another name (test double) [plugin: entry point fake_rb_plugin:good]"
    )
    gone = lines["gone"]
    assert gone.split()[:3] == ["gone", "unavailable", "-"]
    assert gone[caps:].startswith(
        "-"
        + " " * (len("clone, embedder, lexical") + 1)
        + "[plugin: entry point no_such_module_xyz:make] -- system 'gone' "
    )
    assert "failed to load: ModuleNotFoundError" in gone
    assert "\x1b" not in lines["hostile"] and "\x07" not in lines["hostile"]
    assert "retitles U+001B]0;ownedU+0007 the terminal" in lines["hostile"]


def test_systems_json_is_the_listing_for_machines(entry_points) -> None:
    """`recallbench systems --json`: one document, every system with its availability and
    reason, capabilities and where it comes from."""
    import json

    from click.testing import CliRunner

    from recallbench.cli.main import main

    entry_points({"gone": "no_such_module_xyz:make", "fake": "fake_rb_plugin:good"})
    result = CliRunner().invoke(main, ["systems", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == systems_document(describe_systems())
    assert doc["schema_version"] == 1
    systems = {s["name"]: s for s in doc["systems"]}
    assert [s["name"] for s in doc["systems"]] == list(system_names())
    assert set(systems["bm25"]) == {
        "name",
        "available",
        "reason",
        "capabilities",
        "description",
        "extra",
        "plugin",
        "distribution",
        "version",
        "source",
    }
    assert systems["bm25"] | {"description": ""} == {
        "name": "bm25",
        "available": True,
        "reason": None,
        "capabilities": ["clone", "lexical"],
        "description": "",
        "extra": None,
        "plugin": False,
        "distribution": "recallbench",
        "version": registry._own_version(),
        "source": "built-in",
    }
    assert systems["fake"]["plugin"] is True and systems["fake"]["available"] is True
    assert systems["gone"]["available"] is False
    assert "ModuleNotFoundError" in systems["gone"]["reason"]
    assert systems["minilm"]["extra"] == "semantic"


def test_a_plugin_description_cannot_break_the_systems_table() -> None:
    """A plugin's description, name and extra are the plugin's text, escaped: a pipe, a
    link or a line-start marker in them renders as text inside one table row."""
    row = {
        "name": "evil",
        "description": "| x | [click](http://example.invalid) <b>",
        "extra": "a|b",
        "capabilities": [],
        "source": "evil-plugin 1.0",
    }
    table = systems_table([row]).splitlines()
    assert len(table) == 3
    cells = [c for c in re.split(r"(?<!\\)\|", table[2])]
    assert len(cells) == 6, table[2]  # the two empty edges and four cells
    assert "](" not in table[2].replace("\\](", "") and "<b>" not in table[2]


def test_index_options_for_a_system_that_takes_none_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38: `RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR` or `RECALLBENCH_INDEX_CHROMA` was
    silently ignored (the run looked configured, its index was the default). For every
    built-in that takes no index options the variable is one line naming those that do,
    before the system is built; each of those reads it (a bad value is its own error)."""
    from recallbench.systems.adapters import index_options_variable
    from recallbench.systems.registry import INDEX_OPTION_SYSTEMS

    assert set(INDEX_OPTION_SYSTEMS) < set(BUILTIN)
    for name in BUILTIN:
        variable = index_options_variable(name)
        monkeypatch.setenv(variable, "bogus")
        with pytest.raises(RecallbenchError) as refused:
            get_system(name)
        if name in INDEX_OPTION_SYSTEMS:
            assert str(refused.value).startswith(f"{variable}: 'bogus'"), str(refused.value)
            assert "not KEY=VALUE" in str(refused.value)
        else:
            assert str(refused.value) == (
                f"{variable} is set, but {name} takes no index options (only "
                "langgraph-postgres, llamaindex-pgvector-hnsw, mem0-pgvector, milvus and "
                "milvus-flat do); unset it"
            )
        monkeypatch.setenv(variable, " ")  # set but empty: nothing given, nothing refused
        if name not in INDEX_OPTION_SYSTEMS:
            registry._refuse_unread_index_options(name)
        monkeypatch.delenv(variable)
