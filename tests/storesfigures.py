"""What test_stores_figures.py and test_stores_figures_servers.py share: `recallbench compare`
on the fixtures over the reference (the first built-in system) and a share of the built-in
systems, and the rows of docs/stores.md's figures table that compare gives.

The table is one compare over every built-in system; its figures are means per system,
independent of which other systems ran beside it, so two compares over two shares (the
systems that start a server of their own, and the rest) check every row of it, on the two
workers of `make test` at once."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from click.testing import CliRunner

from recallbench.cli.main import main
from recallbench.report.systems_figures import figures_table
from recallbench.systems.registry import describe_systems

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "stores.md"
BLOCK = re.compile(r"<!-- stores-figures:start -->\n(.*?)<!-- stores-figures:end -->", re.S)
#: the extras whose systems start a server of their own (PostgreSQL, Milvus Lite)
SERVER_EXTRAS = frozenset({"postgres", "milvus"})


def built_in_systems() -> list[dict]:
    """The built-in systems available here, in the registry's order (the table's)."""
    rows = [r for r in describe_systems() if r["source"] == "built-in"]
    # everything but vipune (whose binary cannot be built here) is installed by `make setup`
    assert {r["name"] for r in rows if not r["available"]} <= {"vipune", "vipune-semantic"}
    return [r for r in rows if r["available"]]


def docs_table() -> str:
    block = BLOCK.search(DOCS.read_text(encoding="utf-8"))
    assert block, f"{DOCS} has no stores-figures block"
    return block.group(1)


def assert_rows_match_the_docs(names: list[str], tmp_path: Path) -> None:
    """Compare the reference and `names` on the fixtures; the header and each system's row
    must be the docs table's."""
    reference = built_in_systems()[0]["name"]
    systems = [reference, *(n for n in names if n != reference)]
    args = ["--build-dir", str(tmp_path / "build"), "-q", "compare", "--resamples", "200"]
    for name in systems:
        args += ["--system", name]
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(
        main, [*args, "--output", str(out), "--report", str(tmp_path / "c.md")]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    doc = orjson.loads(out.read_bytes())
    assert [s["label"] for s in doc["systems"]] == systems
    ours = figures_table(doc).splitlines()
    documented = docs_table().splitlines()
    rows = {line.split(" | ", 1)[0]: line for line in documented[2:]}
    expected = documented[:2] + [rows.get(line.split(" | ", 1)[0], "(no row)") for line in ours[2:]]
    assert ours == expected, (
        "docs/stores.md's figures disagree with this compare run; its rows should read:\n"
        + "\n".join(ours)
    )
