"""compare answers "which store should I deploy?" on a generated LoCoMo conversation: the
decision table with each system's cost, the group of stores that rank identically (every
dense store here ranks the same MiniLM vectors by exact cosine), and what the embedder
never saw, in stdout and compare.json alike (issue 40)."""

from __future__ import annotations

from pathlib import Path

import orjson
from conftest import cli

from recallbench.commands.compare import COST_FIGURES

SYSTEMS = ("bm25", "minilm", "chroma", "mem0", "langgraph-postgres")
DENSE = ["minilm", "chroma", "mem0", "langgraph-postgres"]


def test_compare_prints_the_decision_table_the_identical_group_and_the_truncation(
    tmp_path: Path,
) -> None:
    data = tmp_path / "locomo.json"
    made = cli(tmp_path / "gen", "locomo", "generate", "--out", data, "--conversations", "1")
    assert made.exit_code == 0, made.output
    build = tmp_path / "b"
    args = ["compare", "--dataset", "locomo", "--data", data, "--resamples", "200"]
    result = cli(build, *args, *(a for s in SYSTEMS for a in ("--system", s)))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Which system: retrieval"
    header = lines[lines.index("Which system: cost") + 2]
    for head in ("ingest (records/s)", "query p50 (ms)", "cold start (ms)", "peak RSS (MiB)"):
        assert head in header
    doc = orjson.loads((build / "compare.json").read_bytes())
    n = doc["rankings"]["queries"]
    assert doc["rankings"]["groups"] == [DENSE]
    group = f"{', '.join(DENSE)}: identical rankings on {n:,} of {n:,} queries"
    assert group in result.stdout
    (truncation,) = doc["truncation"]
    assert truncation["systems"] == DENSE and truncation["max_tokens"] == 256
    assert truncation["texts_over_limit"] > 0
    assert f"{truncation['texts_over_limit']:,} of {truncation['texts']:,} stored texts" in (
        result.stdout
    )
    # the cost of each system, every figure of the table measured (a server store too)
    assert set(doc["cost"]["systems"]) == set(SYSTEMS)
    assert set(doc["cost"]["figures"]) == set(COST_FIGURES)
    for system, figures in doc["cost"]["systems"].items():
        for key in COST_FIGURES:
            assert figures[key] is not None and figures[key] > 0, (system, key)
    # a dense store identical to minilm is one line against bm25's table, not a pair table
    markdown = (build / "compare.md").read_text(encoding="utf-8")
    assert markdown.index("## Which system: retrieval") < markdown.index("## minilm against bm25")
    assert group in markdown.replace("\\", "")
