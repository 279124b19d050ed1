"""`recallbench check-plugin NAME` (issue 43): the contract, shipped as a command, run against
installed systems. It passes a core built-in; it fails, one line per failed check and exit 1,
a plugin whose results change with PYTHONHASHSEED, one that keeps a connection per path
and one that cuts its texts without saying so; a declared cut passes with a note.

The plugins here are a real installed distribution: a module and its ``.dist-info`` (entry
points) in a directory on ``sys.path`` and on ``PYTHONPATH``, so that the second process the
`other-process` check starts finds them as the first one does.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from plugintools import WORD_STORE, dist_plugin

from recallbench.cli.main import main
from recallbench.systems import registry

BAD_PLUGINS = WORD_STORE + textwrap.dedent(
    """
    #: what the per-path system keeps between stores: rows by directory, as a connection
    #: cache per database path would
    CONNECTIONS = {}


    class HashOrdered(WordStore):
        def tie(self, row):
            return hash(row[2])  # ties by the text's hash: another order in another process


    class Cut(WordStore):
        def kept(self, text):
            return text[:1000]


    class CutReadBack(Cut):
        def texts(self):
            return [(row[0], row[2]) for row in self.rows]


    class PerPath(WordSystem):
        # rows per path, kept after close (as a connection cache per database path would)
        def new_rows(self, directory):
            return CONNECTIONS.setdefault(str(Path(directory).resolve()), [])

        def stored_rows(self, directory, rows):
            return CONNECTIONS.setdefault(str(Path(directory).resolve()), rows)


    def hash_ordered():
        return WordSystem("bad-hash-order", HashOrdered)


    def per_path():
        return PerPath("bad-per-path")


    def cut():
        return WordSystem("bad-cut", Cut)


    def cut_read_back():
        return WordSystem("bad-cut-read-back", CutReadBack)


    def cut_declared():
        system = WordSystem("cut-declared", CutReadBack)
        system.input_limit = InputLimit(chars=1000)
        return system


    class TopKNamed(WordStore):
        def search(self, query, top_k):  # the seam's name before it said `limit`
            return WordStore.search(self, query, top_k)


    def top_k_named():
        return WordSystem("top-k-named", TopKNamed)
    """
)
POINTS = {
    "bad-hash-order": "hash_ordered",
    "bad-per-path": "per_path",
    "bad-cut": "cut",
    "bad-cut-read-back": "cut_read_back",
    "cut-declared": "cut_declared",
    "top-k-named": "top_k_named",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bad plugins as an installed distribution in a directory of their own."""
    return dist_plugin(tmp_path_factory.mktemp("site"), "rb_bad_plugins", BAD_PLUGINS, POINTS)


@pytest.fixture
def bad_plugins(installed: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.setenv("PYTHONPATH", f"{installed}:{Path(__file__).parents[2] / 'src'}")
    registry.clear_cache()
    yield
    registry.clear_cache()
    sys.modules.pop("rb_bad_plugins", None)


def check_plugin(*args: str) -> tuple[int, list[str], str]:
    """Exit code, stdout lines and stderr of `recallbench check-plugin ARGS`."""
    result = CliRunner().invoke(main, ["check-plugin", *args])
    return result.exit_code, result.stdout.splitlines(), result.stderr


def failed(lines: list[str]) -> dict[str, str]:
    return {
        line.split(":", 1)[0].split()[1]: line.split(": ", 1)[1]
        for line in lines
        if line.startswith("FAIL")
    }


def test_a_core_built_in_passes_every_check() -> None:
    code, lines, err = check_plugin("bm25")
    assert code == 0, (lines, err)
    statuses = {line.split()[0] for line in lines[1:]}
    assert statuses == {"ok", "n/a"}, lines
    checked = {line.split()[1].rstrip(":") for line in lines[1:]}
    assert {"path-reuse", "other-process", "content", "clone", "lexical"} <= checked
    assert "bm25: all 13 checks passed" in err


def test_a_store_whose_results_depend_on_the_hash_seed_fails(bad_plugins) -> None:
    code, lines, err = check_plugin("bad-hash-order")
    assert code == 1
    assert list(failed(lines)) == ["other-process"], lines
    assert (
        "results differ in a fresh process with PYTHONHASHSEED=" in failed(lines)["other-process"]
    )
    assert err.strip() == "recallbench check-plugin: error: bad-hash-order: 1 of 11 checks failed"


def test_a_store_that_keeps_state_per_path_fails(bad_plugins) -> None:
    code, lines, _ = check_plugin("bad-per-path")
    assert code == 1
    assert list(failed(lines)) == ["path-reuse"], lines
    assert failed(lines)["path-reuse"].startswith(
        "a new store where a deleted one was holds 80 records; keep nothing per path after close()"
    )


def test_a_store_that_cuts_its_texts_fails(bad_plugins) -> None:
    code, lines, _ = check_plugin("bad-cut")
    assert code == 1
    assert list(failed(lines)) == ["content"], lines
    assert "digest is not records_digest of the 83 texts ingested" in failed(lines)["content"]
    code, lines, _ = check_plugin("bad-cut-read-back", "--check", "content")
    assert code == 1
    assert failed(lines)["content"] == (
        "store altered 3 of 83 texts (first: 'check-long-1', 1,500 characters ingested, 1,000 "
        "read back); declare what it keeps (System.input_limit) or keep texts whole"
    )


def test_a_declared_cut_passes_with_a_note(bad_plugins) -> None:
    code, lines, _ = check_plugin("cut-declared", "--check", "content")
    assert code == 0, lines
    assert lines[1:] == [
        "ok    content: the texts read back are the texts ingested (cut 3 of 83 texts to its "
        "declared 1,000 characters)"
    ]


def test_a_store_naming_the_search_limit_top_k_passes_every_check(bad_plugins) -> None:
    """The seam names search's second parameter `limit`; the harness passes it by position,
    so a plugin written when it was documented as `top_k` keeps working."""
    code, lines, err = check_plugin("top-k-named")
    assert code == 0, (lines, err)
    assert {line.split()[0] for line in lines[1:]} <= {"ok", "n/a"}, lines


def test_the_seam_and_the_built_in_stores_name_the_search_limit_limit() -> None:
    """`Store.search(query, limit)`: it receives the widened limit, not --top-k, and every
    built-in store and example plugin says so."""
    import inspect
    import re

    from recallbench.systems.base import Store

    assert list(inspect.signature(Store.search).parameters)[:3] == ["self", "query", "limit"]
    root = Path(__file__).parents[2]
    sources = [*(root / "src/recallbench/systems").glob("*.py")]
    sources += (root / "examples").glob("plugin-*/src/*/__init__.py")
    named = re.compile(r"def search\(self, query(: str)?, (\w+)")
    found = [
        (str(p.relative_to(root)), m.group(2))
        for p in sources
        for m in named.finditer(p.read_text())
    ]
    assert len(found) >= 19 and {name for _, name in found} == {"limit"}, found


def test_usage_and_unknown_systems_are_one_line() -> None:
    code, lines, err = check_plugin("no-such-system")
    assert code == 1 and err.startswith("recallbench check-plugin: error: unknown system")
    assert len(err.strip().splitlines()) == 1
    code, _, err = check_plugin("bm25", "--check", "nonsense")
    assert code == 2 and "no check 'nonsense'" in err


@pytest.mark.parametrize("name", ["dory", "turn-pairs", "lancedb"])
def test_the_example_plugins_pass_every_check(name: str) -> None:
    """examples/plugin-dory, examples/plugin-structured and examples/plugin-system, as
    installed by `make setup` (their contract runs in test_systems_contract.py too)."""
    code, lines, err = check_plugin(name)
    assert code == 0, (lines, err)
    assert {line.split()[0] for line in lines[1:]} <= {"ok", "n/a"}, lines
    if name == "dory":  # its declared 1,000 characters
        assert "ok    content: the texts read back are the texts ingested (cut 3 of 83" in (
            "\n".join(lines)
        )
    if name == "turn-pairs":
        assert "ok    structured: structured records and query_date" in lines


def test_check_plugin_looks_its_system_up_once_beside_the_checks_fresh_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """check-plugin resolves the system once up front (an unknown name refused before
    anything is read; its capabilities choose the checks); every other lookup is a check's
    deliberate fresh instance."""
    from plugintools import count_lookups

    from recallbench.commands.checkplugin import Context

    looked_up = count_lookups(monkeypatch)
    real, fresh = Context.fresh_system, []

    def counted(self: Context) -> object:
        fresh.append(self.name)
        return real(self)

    monkeypatch.setattr(Context, "fresh_system", counted)
    code, lines, err = check_plugin("bm25", "--check", "listed", "--check", "same-order")
    assert code == 0, (lines, err)
    assert len(fresh) >= 2 and looked_up == ["bm25"] * (1 + len(fresh))
