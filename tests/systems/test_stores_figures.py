"""`recallbench compare` over every built-in system available here, on the fixtures (what CI
runs), and the figures table of `docs/stores.md` generated from its output."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from click.testing import CliRunner
from conftest import ROOT

from recallbench.cli import main
from recallbench.report.systems_figures import figures_table
from recallbench.systems.registry import describe_systems

DOCS = ROOT / "docs" / "stores.md"
BLOCK = re.compile(r"<!-- stores-figures:start -->\n(.*?)<!-- stores-figures:end -->", re.S)


def test_compare_over_every_built_in_system_matches_the_docs(tmp_path: Path) -> None:
    rows = [r for r in describe_systems() if r["source"] == "built-in"]
    names = [r["name"] for r in rows if r["available"]]
    # everything but vipune (whose binary cannot be built here) is installed by `make setup`
    assert {r["name"] for r in rows if not r["available"]} <= {"vipune", "vipune-semantic"}
    args = ["--build-dir", str(tmp_path / "build"), "-q", "compare", "--resamples", "200"]
    for name in names:
        args += ["--system", name]
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(
        main, [*args, "--output", str(out), "--report", str(tmp_path / "c.md")]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    doc = orjson.loads(out.read_bytes())
    assert [s["label"] for s in doc["systems"]] == names
    table = figures_table(doc)
    block = BLOCK.search(DOCS.read_text(encoding="utf-8"))
    assert block, f"{DOCS} has no stores-figures block"
    assert block.group(1) == table, (
        "docs/stores.md's figures disagree with this compare run; the table should read:\n" + table
    )
