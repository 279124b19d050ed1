"""A suite made to break a page (ids and texts holding markup, quotes, an entity, a comment
opener and bidi controls), shared by tests/unit/test_html.py and tests/e2e/test_browser.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from conftest import CORPUS, QUERIES

from recallbench.pipeline import Run

HOSTILE_ID = "q-<img/src=x/onerror=alert(1)>\"'&amp;"
HOSTILE_MEMORY = "mem-<b>\"fin'</b>-001"
HOSTILE_TEXT = "</script><script>alert(1)</script><!-- \u202egnp.exe <img src=x onerror=alert(2)>"


def hostile_suite(directory: Path) -> tuple[Path, Path]:
    """The committed suite with a query id, a memory id and texts made to break a page:
    markup, quotes, an entity, a comment opener and a bidi override."""
    directory.mkdir(parents=True, exist_ok=True)
    corpus = [orjson.loads(x) for x in CORPUS.read_bytes().splitlines()]
    queries = [orjson.loads(x) for x in QUERIES.read_bytes().splitlines()]
    for m in corpus:
        if m["memory_id"] == "mem-fin-001":
            m["memory_id"] = HOSTILE_MEMORY
            m["fact"] += " " + HOSTILE_TEXT
    for q in queries:
        q["relevance"] = {
            (HOSTILE_MEMORY if k == "mem-fin-001" else k): v for k, v in q["relevance"].items()
        }
        if q["query_id"] == "q-lexical-001":
            q["query_id"] = HOSTILE_ID
            q["query"] += " <b>bold</b> \u2066isolate\u2069 & \u200bzero-width"
    paths = directory / "corpus.jsonl", directory / "queries.jsonl"
    for path, records in zip(paths, (corpus, queries), strict=True):
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return paths


def run_pipeline_on(build: Path, corpus: Path, queries: Path, **kwargs: Any) -> Run:
    from recallbench.pipeline import run_pipeline

    return run_pipeline("fixtures", {"corpus": corpus, "queries": queries}, build, **kwargs)
