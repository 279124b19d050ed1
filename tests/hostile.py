"""A suite made to break a page (ids and texts holding markup, quotes, an entity, a comment
opener and bidi controls), shared by tests/unit/test_html.py and tests/e2e/test_browser.py."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
from conftest import CORPUS, QUERIES

from recallbench.commands.pipeline import Run

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
    from recallbench.commands.pipeline import run_pipeline

    return run_pipeline("fixtures", {"corpus": corpus, "queries": queries}, build, **kwargs)


# --- Markdown: a document whose every string is made to rewrite a page ---------------------

#: appended to every string of a document: a line break starting a heading the report has,
#: a forged rule line, a table cell boundary, raw HTML, a script link, emphasis, a code span
#: opener, an entity, a reference definition and mathtext
MARKDOWN_PAYLOAD = (
    "\n\n## Conclusion\n\n**Rule 9 fired**\r\n| x | y |\n|---|---|\n"
    "<script>alert(1)</script><img src=x onerror=alert(2)>"
    "[link](javascript:alert(3)) ![i](x.png) *em* _u_ `code ~~s~~ &lt;b&gt; \\"
    "\n[ref]: javascript:alert(4)\n- item\n1. one\n> quote\u2028$5 or $10 $x$"
)
#: the dictionaries whose keys are data (a plugin's configuration keys, category ids, ids)
DATA_KEYED = {
    "system",
    "dataset.category_labels",
    "dataset.options",
    "dataset.drop_rules",
    "metrics.per_category",
    "counts.per_category",
    "counts.dropped",
    "summary",
    "queries[].expected",
    "roundtrip.drift",
}
#: strings a result holds that are not data but the tool's own grammar (measure names are
#: parsed back; the schema names the document)
#: strings a grammar checks before they reach an output (a measure's name, spec and level, a
#: level's name and prefix: measures.parse refuses them unless they are plain identifiers, and
#: levels come from the dataset's declaration), so a payload cannot be in them
NOT_DATA = {
    "schema",
    "run.measures[].name",
    "run.measures[].spec",
    "run.measures[].level",
    "dataset.levels[].name",
    "dataset.levels[].prefix",
}


def hostile_document(doc: Any, payload: str = MARKDOWN_PAYLOAD, path: str = "") -> Any:
    """`doc` with `payload` appended to every string that is data (values, and the keys of
    `DATA_KEYED` dictionaries but a system's "name"), the same way everywhere so that every
    id still matches."""
    if isinstance(doc, dict):
        keyed = path in DATA_KEYED
        return {
            (k + payload if keyed and k != "name" else k): hostile_document(
                v, payload, f"{path}.*" if keyed else (f"{path}.{k}" if path else str(k))
            )
            for k, v in doc.items()
        }
    if isinstance(doc, list):
        return [hostile_document(v, payload, f"{path}[]") for v in doc]
    if isinstance(doc, str) and path not in NOT_DATA:
        return doc + payload
    return doc


def markdown_renderers() -> dict[str, Any]:
    """name -> function(Markdown) -> HTML: Python-Markdown as mkdocs configures it (tables,
    toc, attribute lists, admonitions, footnotes) and markdown-it-py in CommonMark mode with
    raw HTML allowed, GFM tables and strikethrough (as GitHub-like renderers do)."""
    import markdown
    from markdown_it import MarkdownIt

    extensions = ["tables", "toc", "attr_list", "admonition", "footnotes", "abbr", "def_list"]
    mdit = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return {
        "python-markdown": lambda text: markdown.markdown(text, extensions=extensions),
        "markdown-it": mdit.render,
    }


def html_structure(html: str) -> dict[str, Any]:
    """What a rendered page is made of: every element's tag (counted), the h1/h2 texts, the
    number of cells of each row of each table, every attribute that could run, fetch or
    restyle (on*, href, src, style) with its value."""
    from collections import Counter
    from html.parser import HTMLParser

    class Reader(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.tags: Counter[str] = Counter()
            self.headings: list[str] = []
            self.tables: list[list[int]] = []
            self.attributes: list[tuple[str, str, str]] = []
            self._heading: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags[tag] += 1
            if tag in ("h1", "h2"):
                self._heading = []
            if tag == "table":
                self.tables.append([])
            if tag == "tr":
                self.tables[-1].append(0)
            if tag in ("td", "th"):
                self.tables[-1][-1] += 1
            for name, value in attrs:
                if name.startswith("on") or name in ("href", "src", "style"):
                    self.attributes.append((tag, name, value or ""))

        def handle_endtag(self, tag: str) -> None:
            if tag in ("h1", "h2") and self._heading is not None:
                self.headings.append(f"{tag} {''.join(self._heading).strip()}")
                self._heading = None

        def handle_data(self, data: str) -> None:
            if self._heading is not None:
                self._heading.append(data)

    reader = Reader()
    reader.feed(html)
    return {
        "tags": dict(reader.tags),
        "headings": reader.headings,
        "tables": reader.tables,
        "attributes": reader.attributes,
    }


# --- a plugin made to rewrite a report ----------------------------------------------------

#: what the hostile plugin puts in its configuration keys and values, its corruption names
#: and descriptions and its lexical matcher's name: forged headings and rule lines
PLUGIN_TEXT = (
    "\n\n## Conclusion\n\n**Rule 9 fired: <script>alert(9)</script>**\n\n"
    "| forged | row |\n[click](javascript:alert(10)) <img src=x onerror=alert(11)>"
)
HOSTILE_PLUGIN = "hostile-plugin"
#: the headings report.md has, each once, whatever its data holds
REPORT_H2 = [
    "h1 Retrieval quality report",
    "h2 Configuration",
    "h2 Dataset",
    "h2 Metrics",
    "h2 Five worst queries",
    "h2 Why relevant items were missed",
    "h2 Category observations",
    "h2 Snapshot -> verify -> clean hydrate",
    "h2 Cost (local diagnostic data, not a cross-machine guarantee)",
    "h2 Conclusion",
]
#: `--result` labels (directory names) made to add a heading, break a table, run a script
LABELS = [
    "old\n\n## Conclusion\n<script>alert(1)</script>",
    "new|x | y |<img src=x onerror=alert(2)>[l](javascript:alert(3))*e*",
]


def make_hostile_system() -> Any:
    """BM25 whose every string the harness reports is made to rewrite a page: its
    configuration's keys and values, its corruption names and descriptions, and the name of
    its lexical matcher (the entry point object of `install_hostile_plugin`)."""
    from dataclasses import replace

    from recallbench.systems.bm25 import BM25Store, BM25System

    class HostileStore(BM25Store):
        def lexical_matches(self, query: str) -> tuple[str, list[str]]:
            _, ids = super().lexical_matches(query)
            return "FTS" + PLUGIN_TEXT, ids

    class HostileSystem(BM25System):
        def configuration(self) -> dict[str, Any]:
            return {
                **super().configuration(),
                "key" + PLUGIN_TEXT: "value" + PLUGIN_TEXT,
                "nested": {"inner" + PLUGIN_TEXT: "[x](javascript:alert(12))"},
            }

        def open_store(self, directory: Path, *, vectors: Any = None) -> Any:
            store = super().open_store(directory, vectors=vectors)
            store.__class__ = HostileStore
            return store

        def attach(self, directory: Path, *, vectors: Any = None) -> Any:
            store = super().attach(directory, vectors=vectors)
            store.__class__ = HostileStore
            return store

    system = HostileSystem(HOSTILE_PLUGIN)
    corruptions = system.clone.corruptions

    def hostile_corruptions(package_dir: Path, work_dir: Path) -> list[Any]:
        return [
            replace(c, name=f"{c.name}:{PLUGIN_TEXT}", description=c.description + PLUGIN_TEXT)
            for c in corruptions(package_dir, work_dir)
        ]

    system.clone.corruptions = hostile_corruptions
    return system


def install_hostile_plugin(monkeypatch: Any) -> None:
    """Register `make_hostile_system` as the plugin `HOSTILE_PLUGIN`, as an installed
    distribution's entry point would (the registry reads importlib.metadata)."""
    import importlib.metadata

    from recallbench.systems import registry

    point = importlib.metadata.EntryPoint(
        HOSTILE_PLUGIN, "hostile:make_hostile_system", registry.GROUP
    )
    installed = importlib.metadata.entry_points

    def entry_points(**params: Any) -> Any:
        return [point] if params.get("group") == registry.GROUP else installed(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    # the registry's cache of entry points: emptied now, and a copy of its own while the
    # plugin is installed, so that when the patch is undone the registry reads the real
    # entry points again (not a cache that holds only the hostile plugin)
    registry.clear_cache()
    cached = registry._all_entry_points
    monkeypatch.setattr(
        registry, "_all_entry_points", functools.lru_cache(maxsize=None)(cached.__wrapped__)
    )
