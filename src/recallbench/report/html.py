"""The HTML views: `report.html` beside report.md and `compare.html` beside compare.md.

Each page holds its styles, its script and its plots (SVG, as data: URIs), fetches nothing
from the network and works opened from `file://`. It carries the summary and the per-query
table of every query, and the texts (the query's text, the expected and returned items'
texts, the diagnostics) of a bounded first slice; the other queries' texts are in data files
beside it (``report-data/``, ``compare-data/``: `report.pagedata`), loaded as script
elements when such a query is opened. The bytes of the page and of its data files are a
function of the documents, the validated texts and the plots only (no clock, no timings, no
paths), so the same inputs give byte-identical files.

The static parts of report.html (configuration, dataset facts, the metric tables, the
worst queries, the round trip, the decision) are the report's sections
(`report.run_sections`, the same as report.md's, without their local parts: the clock and
the timings), drawn by the template ``_sections.html`` (`report.sections.html_sections`);
compare.html's are the comparison's (`report.comparison.compare_sections`). The Jinja2
templates (`templates/`) autoescape, after every control and format character of a string
(bidi overrides, zero-width characters) is replaced by its visible ``U+XXXX`` form
(`escape.html_text`). The per-query part is data: JSON inside a
``<script type="application/json">`` element and in each data file, written by
`escape.script_json` (so no text can close the element), drawn by plain JavaScript that
inserts every string as text (``textContent``), never as markup.

Texts come from the validated scope spool: report.html's are read one scope at a time
(`stream_report_records`); compare.html's from each run's spool kept on disk, one scope at a
time as the page needs them (`SpooledTexts`), or, for a saved result, from the spool beside
it (`texts_beside`, `collect_texts`): the text of every scored query and of every unit
(memory, session) at the primary level. A dataset
whose spool is larger than `ALL_TEXTS_BYTES` (LongMemEval S: hundreds of thousands of turns)
contributes only the texts of its scored queries and of the units they expected or returned;
the page says which.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from recallbench.core.escape import html_text
from recallbench.metrics.measures import RELEVANT_GRADE, preferred_measures, select, value_of
from recallbench.report.pagedata import DataFiles, PageChunks

#: a spool up to this size contributes every text; a larger one only the texts the page uses
ALL_TEXTS_BYTES = 8 * 2**20
#: characters of a text shown before its "show all" button
SHORT_TEXT = 480


def json_for_script(obj: Any) -> str:
    """JSON that can stand inside a <script> element (`escape.script_json`)."""
    from recallbench.core.escape import script_json

    return script_json(obj)


# --- texts from the spool ------------------------------------------------------------------


@dataclass
class Texts:
    """Query texts (query id -> text, notes) and unit texts ((scope id, unit id) -> text) at
    the primary level, as read from a validated spool."""

    level: str
    queries: dict[str, tuple[str, str]] = field(default_factory=dict)
    units: dict[tuple[str, str], str] = field(default_factory=dict)
    #: every unit text of the dataset is here (False: only those the results use)
    complete: bool = True
    #: the dataset's counts: queries, units at the primary level
    totals: dict[str, int] = field(default_factory=dict)
    #: False when no spool could be read (the page then shows ids only)
    available: bool = True
    #: the units by scope (`scope_texts`), made when first asked for
    _by_scope: dict[str, dict[str, str]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def merge(self, other: Texts) -> Texts:
        """These texts and `other`'s (another system's run on the same dataset)."""
        if not other.available:
            return self
        if not self.available:
            return other
        self.queries.update(other.queries)
        self.units.update(other.units)
        self.complete = self.complete and other.complete
        self.totals = {k: max(self.totals.get(k, 0), v) for k, v in other.totals.items()}
        self._by_scope = None
        return self

    def scope_texts(self, scope_id: str) -> tuple[Mapping[str, tuple[str, str]], Mapping[str, str]]:
        """The texts a page shows of scope `scope_id`: query id -> (text, notes) (at least
        the scope's queries), unit id -> text."""
        if self._by_scope is None:
            self._by_scope = {}
            for (scope, unit), text in self.units.items():
                self._by_scope.setdefault(scope, {})[unit] = text
        return self.queries, self._by_scope.get(scope_id, {})

    @property
    def units_shown(self) -> int:
        """How many unit texts the page may show."""
        return len(self.units)


class SpooledTexts(Texts):
    """The texts of validated spools kept on disk (`keep`), read one scope at a time as a
    page asks for them (`scope_texts`), never all at once: what compare holds of the texts
    whatever the number of systems. The same texts as `collect_texts` of the same spool and
    results gives, and the same counts (`complete`, `totals`, `units_shown`)."""

    def __init__(self, level: str) -> None:
        super().__init__(level, complete=True, available=False)
        self._spools: list[tuple[str, dict[str, dict[str, Any]]]] = []  # path, scope refs
        self._digests: set[str] = set()
        self._wanted: set[tuple[str, str]] = set()
        self._last: tuple[str, tuple[dict[str, tuple[str, str]], dict[str, str]]] | None = None
        self._holders: list[Any] = []  # what keeps the kept spools' directories

    def keep(
        self,
        suite_env: Mapping[str, Any],
        result: Mapping[str, Any],
        place: Path,
        holder: Any = None,
    ) -> None:
        """Keep the texts of one run: its spool (`suite_env`'s, moved to `place` unless a
        spool of the same sha256 is kept already) and the units its result uses. `holder`:
        what keeps `place`'s directory (`spooled.Scratch`), held as long as these texts."""
        import os
        import shutil

        from recallbench.builddir.scopespool import checked_spool, stream_scopes

        if holder is not None:
            self._holders.append(holder)
        data = suite_env["data"]
        self._wanted |= _wanted([result])
        if data["spool"]["sha256"] in self._digests:
            return
        source = checked_spool(suite_env)
        try:
            os.replace(source, place)
        except OSError:  # another filesystem
            shutil.copyfile(source, place)
        kept = {**suite_env, "spool_path": str(place)}
        units = 0
        for _, scope in stream_scopes(kept):  # its sha256 checked; the dataset's counts
            units += len(_scope_texts(scope, self.level)[1])
        refs = {
            entry["scope_id"]: {"path": str(place), "scope_id": entry["scope_id"], **entry["spool"]}
            for entry in data["scopes"]
        }
        self._spools.append((str(place), refs))
        self._digests.add(data["spool"]["sha256"])
        self.available = True
        self.complete = self.complete and data["spool"]["bytes"] <= ALL_TEXTS_BYTES
        totals = {"queries": data["counts"]["queries"], "units": units}
        self.totals = {k: max(self.totals.get(k, 0), v) for k, v in totals.items()}

    def scope_texts(self, scope_id: str) -> tuple[Mapping[str, tuple[str, str]], Mapping[str, str]]:
        from recallbench.builddir.scopespool import read_scope

        if self._last is not None and self._last[0] == scope_id:
            return self._last[1]
        queries: dict[str, tuple[str, str]] = {}
        units: dict[str, str] = {}
        for _, refs in self._spools:
            if scope_id in refs:
                more_queries, more_units = _scope_texts(read_scope(refs[scope_id]), self.level)
                queries.update(more_queries)
                units.update(more_units)
        self._last = (scope_id, (queries, units))
        return queries, units

    @property
    def units_shown(self) -> int:
        if self.complete:
            return self.totals.get("units", 0)
        return len(self._wanted)

    def merge(self, other: Texts) -> Texts:
        raise TypeError("spooled texts are kept with `keep`, not merged")


def no_texts(level: str) -> Texts:
    """No texts at all (no spool to read): the pages show ids only, and say so."""
    return Texts(level, complete=False, available=False)


def _wanted(results: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    wanted: set[tuple[str, str]] = set()
    for result in results:
        for q in result["queries"]:
            scope = q["scope_id"]
            wanted.update((scope, unit) for unit in q["expected"])
            wanted.update((scope, h["id"]) for h in q["returned"])
    return wanted


def collect_texts(
    suite_env: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    *,
    everything: bool | None = None,
) -> Texts:
    """The texts the pages of `results` show, read from `suite_env`'s validated spool (its
    sha256 checked as it is read). `everything`: include every unit's text (default: when
    the spool is at most `ALL_TEXTS_BYTES`)."""
    from recallbench.builddir.scopespool import stream_scopes

    data = suite_env["data"]
    level = data["levels"][0]["name"]
    if everything is None:
        everything = data["spool"]["bytes"] <= ALL_TEXTS_BYTES
    wanted = None if everything else _wanted(results)
    texts = Texts(level, complete=everything)
    units_total = 0
    for _, scope in stream_scopes(suite_env):
        scope_id = scope["scope_id"]
        queries, units = _scope_texts(scope, level)
        units_total += len(units)
        for unit, text in units.items():
            if wanted is None or (scope_id, unit) in wanted:
                texts.units[(scope_id, unit)] = text
        texts.queries.update(queries)
    texts.totals = {"queries": len(texts.queries), "units": units_total}
    return texts


def _scope_texts(
    scope: Mapping[str, Any], level: str
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """A scope's texts: query id -> (text, notes), and each unit at `level` -> the texts of
    its memories, joined by a blank line (`_scope_unit_texts`)."""
    queries = {q["query_id"]: (q["text"], q.get("notes") or "") for q in scope["queries"]}
    return queries, _scope_unit_texts(scope, level)


def texts_beside(results_path: Any, results_env: Mapping[str, Any]) -> Texts:
    """The texts of a saved results.json, from the suite.json and scopes.jsonl beside it when
    they are the ones the result was made from; else none (the page says so)."""
    from pathlib import Path

    from recallbench.builddir.artifacts import load_envelope
    from recallbench.core.errors import ArtifactError

    level = results_env["data"]["dataset"]["levels"][0]["name"]
    suite_path = Path(results_path).parent / "suite.json"
    try:
        suite = load_envelope(suite_path, "suite", "recallbench validate")
        if results_env["inputs"].get("suite") != suite["fingerprint"]:
            return no_texts(level)
        suite["spool_path"] = str(suite_path.parent / suite["data"]["spool"]["file"])
        return collect_texts(suite, [results_env["data"]])
    except ArtifactError:
        return no_texts(level)


def merged(level: str, texts: Iterable[Texts]) -> Texts:
    """One `Texts` of several (each system's run of the same dataset)."""
    out = no_texts(level)
    for t in texts:
        out = out.merge(t)
    return out


class _Pool:
    """Distinct texts, each stored once in the page; `add` gives its index."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str | None) -> int | None:
        if text is None:
            return None
        if text not in self._index:
            self._index[text] = len(self.items)
            self.items.append(text)
        return self._index[text]


# --- shared pieces ---------------------------------------------------------------------------


def _environment() -> Any:
    import jinja2
    from markupsafe import Markup

    def finalize(value: Any) -> Any:
        if isinstance(value, Markup) or value is None:
            return "" if value is None else value
        return html_text(value)

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("recallbench.report", "templates"),
        autoescape=True,
        finalize=finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return env


def _asset(name: str) -> Any:
    """A file of `templates/` as markup to stand inside a <style> or <script> element."""
    from markupsafe import Markup

    text = resources.files("recallbench.report").joinpath("templates", name).read_text("utf-8")
    if re.search(r"</(script|style)", text, re.IGNORECASE):
        raise ValueError(f"{name} would end its own element")
    return Markup(text)


def _data_markup(obj: Mapping[str, Any], inline: Sequence[str] = ()) -> Any:
    """The page's data document with the inline records (JSON texts, already escaped for a
    script element) as its `inline` list."""
    from markupsafe import Markup

    text = json_for_script(obj)
    assert text.endswith("}") and '"inline"' not in obj
    return Markup(text[:-1] + ',"inline":[' + ",".join(inline) + "]}")


@dataclass(frozen=True)
class TextStats:
    """What a page says of its texts: whether there are any, whether every unit's text of
    the dataset is there, the dataset's counts and how many unit texts the page and its
    data files hold."""

    level: str
    available: bool
    complete: bool
    totals: Mapping[str, int]
    units_shown: int


def text_stats(texts: Texts) -> TextStats:
    return TextStats(texts.level, texts.available, texts.complete, texts.totals, texts.units_shown)


def _text_note(stats: TextStats, data_dir: str) -> str:
    if not stats.available:
        return (
            "Texts are not shown: the validated scope spool (scopes.jsonl beside suite.json) "
            "was not found."
        )
    totals = stats.totals
    where = (
        f" The texts of the first queries are in this page, the others in the data files "
        f"of {data_dir}/ beside it, read when a query is opened (keep {data_dir}/ with the page)."
    )
    if stats.complete:
        return (
            f"Texts: every scored query ({totals.get('queries', 0):,}) and every {stats.level} "
            f"({totals.get('units', 0):,}) of the dataset, from the validated spool." + where
        )
    return (
        f"Texts: this dataset is large, so the page holds only the texts of its "
        f"{totals.get('queries', 0):,} scored queries and of the {stats.units_shown:,} "
        f"{stats.level} units they expected or returned (of {totals.get('units', 0):,}); "
        "every text is in the spool (scopes.jsonl)." + where
    )


def table_measures(result: Mapping[str, Any]) -> list[str]:
    """The headline measures of the per-query table: recall@1 and the primary level's mean
    measures at the run's cutoff (at most five), as the summary table on stdout shows."""
    k = result["run"]["top_k"]
    primary = result["dataset"]["levels"][0]["name"]
    means = [m for m in result["run"]["measures"] if m["level"] == primary and not m["pooled"]]
    names = select(means, stem="recall", k=1, prefix="", rel=RELEVANT_GRADE)
    names += [m["name"] for m in means if m["k"] == k and m["name"] not in names]
    if len(names) <= 1:  # a result scored below its top-k: the largest k it has
        from recallbench.report.plots import headline_measures

        names += [m["name"] for m in headline_measures(result) if m["name"] not in names]
    return names[:5]


def _relevant(expected: Mapping[str, int]) -> int:
    from recallbench.core.model import RELEVANT_GRADE

    return sum(1 for g in expected.values() if g >= RELEVANT_GRADE)


def _first_rank(q: Mapping[str, Any], deep: Mapping[str, int | None] | None) -> int | None:
    from recallbench.core.model import RELEVANT_GRADE

    first = next((i + 1 for i, h in enumerate(q["returned"]) if h["grade"] >= RELEVANT_GRADE), None)
    if first is None and deep:
        ranks = [r for r in deep.values() if r is not None]
        first = min(ranks) if ranks else None
    return first


def _short(text: str | None) -> str | None:
    """The first SHORT_TEXT characters of a query's text: what the table's search reads."""
    return None if text is None else text[:SHORT_TEXT]


def _query_row(
    q: Mapping[str, Any],
    text: str | None,
    measures: Sequence[str],
    deep: Mapping[str, int | None] | None,
    chunk: int,
) -> dict[str, Any]:
    """One query of the page's table: what the table shows and searches, and the chunk
    that holds its texts (0: this page)."""
    return {
        "id": q["query_id"],
        "cat": q["category"],
        "scope": q["scope_id"],
        "text": _short(text),
        "m": [value_of(q["metrics"].get(name)) for name in measures],
        "rel": _relevant(q["expected"]),
        "missed": list(q["missed"]),
        "first": _first_rank(q, deep),
        "c": chunk,
    }


def _query_record(
    q: Mapping[str, Any],
    text: tuple[str, str] | None,
    units: Mapping[str, str],
    deep: Mapping[str, int | None] | None,
    others: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """What an opened query shows: its text and notes, every expected item with its grade,
    rank and text, the returned top-k with their texts, the diagnostics; `others`: the
    scope's other units (unit, text) for the page's Texts table. Texts are pooled within
    the record."""
    pool = _Pool()
    top = {h["id"]: i + 1 for i, h in enumerate(q["returned"])}
    expected = []
    for unit, grade in q["expected"].items():
        rank = top.get(unit)
        if rank is None and deep:
            rank = deep.get(unit)
        expected.append([unit, grade, rank, pool.add(units.get(unit))])
    record = {
        "id": q["query_id"],
        "scope": q["scope_id"],
        "text": pool.add(text[0]) if text else None,
        "notes": (text[1] or None) if text else None,
        "expected": expected,
        "returned": [
            [h["id"], h["grade"], h["score"], pool.add(units.get(h["id"]))] for h in q["returned"]
        ],
        "why": list(q["why_missed"]),
        "lexical": q.get("lexical_matches"),
    }
    if others:
        record["units"] = [[unit, pool.add(t)] for unit, t in others]
    record["texts"] = pool.items
    return record


def _scope_unit_texts(scope: Mapping[str, Any], level: str) -> dict[str, str]:
    """unit id -> its text (its memories' texts joined) for one scope of the spool."""
    parts: dict[str, list[str]] = {}
    for memory in scope["memories"]:
        for unit in memory["units"].get(level, ()):
            parts.setdefault(unit, []).append(memory["text"])
    return {unit: "\n\n".join(pieces) for unit, pieces in parts.items()}


def _records_from_texts(
    result: Mapping[str, Any], texts: Texts, deep: Mapping[str, Mapping[str, int | None]]
) -> Iterator[tuple[int, str, str | None]]:
    """(position, record JSON, query text) of every query of `result`, in order, from
    texts in memory; with complete texts, a scope's units no query of it expected or
    returned go with the scope's first query."""
    by_scope: dict[str, dict[str, str]] = {}
    for (scope_id, unit), text in texts.units.items():
        by_scope.setdefault(scope_id, {})[unit] = text
    seen: set[str] = set()
    for i, q in enumerate(result["queries"]):
        scope = q["scope_id"]
        units = by_scope.get(scope, {})
        text = texts.queries.get(q["query_id"])
        others: list[tuple[str, str]] = []
        if texts.complete and texts.available and scope not in seen:
            used = _used_units(result, scope)
            others = sorted((u, units[u]) for u in units if u not in used)
        seen.add(scope)
        record = _query_record(q, text, units, deep.get(q["query_id"]), others)
        yield i, json_for_script(record), text[0] if text else None


def _used_units(result: Mapping[str, Any], scope: str) -> set[str]:
    used: set[str] = set()
    for q in result["queries"]:
        if q["scope_id"] == scope:
            used.update(q["expected"])
            used.update(h["id"] for h in q["returned"])
    return used


def stream_report_records(
    suite_env: Mapping[str, Any],
    result: Mapping[str, Any],
    deep: Mapping[str, Mapping[str, int | None]],
    stats: dict[str, Any],
) -> Iterator[tuple[int, str, str | None]]:
    """(position, record JSON, query text) of every query of `result`, read scope by scope
    from `suite_env`'s validated spool (one scope's texts in memory at a time), in spool
    order. A spool larger than `ALL_TEXTS_BYTES` contributes only the units a query
    expected or returned; a smaller one also each scope's other units (with the scope's
    first query). `stats` gets the counts the page states (queries, units, units shown)."""
    from recallbench.builddir.scopespool import stream_scopes

    level = suite_env["data"]["levels"][0]["name"]
    everything = suite_env["data"]["spool"]["bytes"] <= ALL_TEXTS_BYTES
    by_scope: dict[str, list[int]] = {}
    for i, q in enumerate(result["queries"]):
        by_scope.setdefault(q["scope_id"], []).append(i)
    queries = result["queries"]
    stats.update(queries=0, units=0, units_shown=0, complete=everything)
    for _, scope in stream_scopes(suite_env):
        texts, units = _scope_texts(scope, level)
        stats["units"] += len(units)
        stats["queries"] += len(scope["queries"])
        positions = by_scope.get(scope["scope_id"], [])
        used: set[str] = set()
        for i in positions:
            used.update(queries[i]["expected"])
            used.update(h["id"] for h in queries[i]["returned"])
        # a scope without a scored query has no record to carry its units
        shown = len(units) if everything and positions else len(used & units.keys())
        stats["units_shown"] += shown
        for n, i in enumerate(positions):
            q = queries[i]
            others = (
                sorted((u, t) for u, t in units.items() if u not in used)
                if everything and n == 0
                else []
            )
            text = texts.get(q["query_id"])
            record = _query_record(q, text, units, deep.get(q["query_id"]), others)
            yield i, json_for_script(record), text[0] if text else None
        del units, texts


def _place_in_order(
    records: Iterable[tuple[int, str, str | None]], chunks: PageChunks, total: int
) -> tuple[list[int], list[str | None]]:
    """Add the records to `chunks` in position order (holding back only those that come
    early); each position's chunk and query text."""
    where: list[int] = [0] * total
    texts: list[str | None] = [None] * total
    pending: dict[int, tuple[str, str | None]] = {}
    nxt = 0
    for i, record, text in records:
        pending[i] = (record, text)
        while nxt in pending:
            rec, t = pending.pop(nxt)
            where[nxt] = chunks.add(rec)
            texts[nxt] = _short(t)
            nxt += 1
    if nxt != total:
        raise ValueError(f"page records: {total - nxt} queries have no record")
    return where, texts


def deep_ranks(runs_env: Mapping[str, Any] | None, level: str) -> dict[str, dict[str, Any]]:
    """query id -> {missed id: where it ranked in a search of the whole store (None: not
    returned)}, from the query stage's diagnostics."""
    if runs_env is None:
        return {}
    return {
        row["query_id"]: {e["id"]: e["rank"] for e in row["missed"].get(level, [])}
        for row in runs_env["data"]["queries"]
        if row["missed"].get(level)
    }


# --- report.html -----------------------------------------------------------------------------


@dataclass
class Page:
    """An HTML page (report.html or compare.html), the data files beside it (`data_dir`,
    see `report.pagedata`) and what it says of its texts."""

    html: bytes
    data: DataFiles
    data_dir: str
    stats: TextStats

    def files(self, page_path: Path) -> dict[Path, Any]:
        """The page at `page_path` and its data directory beside it, as `publish` takes
        them."""
        page_path = Path(page_path)
        return {page_path: self.html, page_path.parent / self.data_dir: self.data.tree()}


def report_page_data(
    result: Mapping[str, Any],
    rows: list[dict[str, Any]],
    inline: list[str],
    chunks: DataFiles,
    token: str,
    level: str,
) -> dict[str, Any]:
    """The JSON document the report page's script draws the per-query table from (the
    inline records are spliced in as JSON text, `_data_markup`)."""
    from recallbench.report import REPORT_DATA_DIR

    labels = result["dataset"]["category_labels"]
    return {
        "kind": "report",
        "k": result["run"]["top_k"],
        "level": level,
        "measures": table_measures(result),
        "categories": [[c, labels.get(c, c)] for c in result["dataset"]["categories"]],
        "queries": rows,
        "chunks": {"dir": REPORT_DATA_DIR, "files": list(chunks.names), "token": token},
        "short": SHORT_TEXT,
    }


def render_report_page(
    result: Mapping[str, Any],
    texts: Texts | Mapping[str, Any],
    *,
    plots: Mapping[str, bytes] | None = None,
    deep: Mapping[str, Mapping[str, int | None]] | None = None,
    fingerprint: str = "",
    version: str = "",
    scratch: Path | None = None,
    sections: Sequence[Any] | None = None,
) -> Page:
    """report.html and its data files: the result document, its plots inline, the per-query
    table, the texts of the first queries inline and the others in data files
    (`report.pagedata`). `texts`: a `Texts` in memory, or the suite envelope whose spool
    is read scope by scope (`stream_report_records`; a missing spool: ids only).
    `scratch`: where the data files are staged (the build directory). `sections`: the
    report's sections as report.md has them (`report.run_sections`; default: made here
    from the result alone, without the decision rules' origin or the system's source)."""
    from recallbench.report import REPORT_DATA_DIR

    deep = deep or {}
    level = result["dataset"]["levels"][0]["name"]
    measures = table_measures(result)
    chunks = PageChunks("report", fingerprint, scratch)
    queries = result["queries"]
    if isinstance(texts, Texts):
        stats = text_stats(texts)
        records: Iterable[tuple[int, str, str | None]] = _records_from_texts(result, texts, deep)
    else:
        from recallbench.builddir.scopespool import spool_path

        if not spool_path(texts).is_file():
            stats = text_stats(no_texts(level))
            records = _records_from_texts(result, no_texts(level), deep)
        else:
            counts: dict[str, Any] = {}
            records = stream_report_records(texts, result, deep, counts)
            stats = None  # known once the spool is read
    where, short = _place_in_order(records, chunks, len(queries))
    if stats is None:
        stats = TextStats(
            level,
            True,
            counts["complete"] and counts["units_shown"] == counts["units"],
            {"queries": counts["queries"], "units": counts["units"]},
            counts["units_shown"],
        )
    inline, data = chunks.finish()
    rows = [
        _query_row(q, short[i], measures, deep.get(q["query_id"]), where[i])
        for i, q in enumerate(queries)
    ]
    page_data = report_page_data(result, rows, inline, data, fingerprint, level)
    html = _render_report(result, page_data, inline, stats, plots, fingerprint, version, sections)
    return Page(html, data, REPORT_DATA_DIR, stats)


def render_report_html(
    result: Mapping[str, Any],
    texts: Texts,
    *,
    plots: Mapping[str, bytes] | None = None,
    deep: Mapping[str, Mapping[str, int | None]] | None = None,
    fingerprint: str = "",
    version: str = "",
) -> bytes:
    """report.html's bytes alone (`render_report_page`; its data files are dropped)."""
    page = render_report_page(
        result, texts, plots=plots, deep=deep, fingerprint=fingerprint, version=version
    )
    page.data.close()
    return page.html


def _render_report(
    result: Mapping[str, Any],
    data: Mapping[str, Any],
    inline: list[str],
    stats: TextStats,
    plots: Mapping[str, bytes] | None,
    fingerprint: str,
    version: str,
    sections: Sequence[Any] | None = None,
) -> bytes:
    """report.html: the report's sections (`sections`, else `run_sections` of the result;
    the local ones, timings and the clock, left out) with the plots inline, then the
    per-query table and the texts."""
    from recallbench.report import REPORT_DATA_DIR
    from recallbench.report.plots import caption
    from recallbench.report.sections import html_sections

    if sections is None:
        from recallbench.report.run_sections import run_sections

        links = [(name, caption(name)) for name in plots or {}]
        sections = run_sections(result, {}, "", version, links)
    ds = result["dataset"]
    labels = ds["category_labels"]
    page = (
        _environment()
        .get_template("report.html")
        .render(
            title=f"Retrieval quality report: {result['system']['name']} on {ds['dataset']}",
            system=result["system"]["name"],
            dataset=ds["dataset"],
            version=version,
            fingerprint=fingerprint,
            sections=html_sections(sections, plots),
            categories=[(c, labels.get(c, c)) for c in ds["categories"]],
            text_note=_text_note(stats, REPORT_DATA_DIR),
            level=stats.level,
            top_k=result["run"]["top_k"],
            data=_data_markup(data, inline),
            data_dir=REPORT_DATA_DIR,
            css=_asset("page.css"),
            script=_asset("page.js"),
        )
    )
    return page.encode("utf-8")


# --- compare.html ----------------------------------------------------------------------------


def _compare_query(
    q: Mapping[str, Any],
    lookups: Sequence[Any],
    metrics: Sequence[str],
    texts: Texts,
    chunks: PageChunks,
) -> dict[str, Any]:
    """One query of compare.html: its table row (every system's per-query values and first
    relevant rank), its record (texts, every system's top-k) placed in `chunks`. `q` is the
    reference's record; `lookups`: each challenger's records by query id (`.get`)."""
    from recallbench.core.model import RELEVANT_GRADE

    qid = q["query_id"]
    queries, units = texts.scope_texts(q["scope_id"])
    text = queries.get(qid)
    pool = _Pool()
    cells, tops = [], []
    for mine in (q, *(lookup.get(qid) for lookup in lookups)):
        if mine is None:
            cells.append(None)
            tops.append(None)
            continue
        first = next(
            (i + 1 for i, h in enumerate(mine["returned"]) if h["grade"] >= RELEVANT_GRADE),
            None,
        )
        cells.append(
            {"m": [value_of(mine["metrics"].get(name)) for name in metrics], "first": first}
        )
        tops.append(
            {
                "returned": [
                    [h["id"], h["grade"], h["score"], pool.add(units.get(h["id"]))]
                    for h in mine["returned"]
                ],
                "why": list(mine["why_missed"]),
            }
        )
    record = {
        "id": qid,
        "scope": q["scope_id"],
        "text": pool.add(text[0]) if text else None,
        "notes": (text[1] or None) if text else None,
        "expected": [
            [unit, grade, pool.add(units.get(unit))] for unit, grade in q["expected"].items()
        ],
        "systems": tops,
    }
    record["texts"] = pool.items
    return {
        "id": qid,
        "cat": q["category"],
        "scope": q["scope_id"],
        "text": _short(text[0]) if text else None,
        "rel": _relevant(q["expected"]),
        "systems": cells,
        "c": chunks.add(json_for_script(record)),
    }


def compare_page_data(
    doc: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    texts: Texts,
    chunks: PageChunks,
) -> dict[str, Any]:
    """The JSON document the comparison page's script draws from: per query, every system's
    per-query values of the compared measures (the records with the texts and each
    system's top-k go to `chunks`). The per-query records are read in step, one query at a
    time, and the texts scope by scope (`SpooledResults`, `SpooledTexts`: nothing of every
    system is held at once)."""
    from recallbench.report import COMPARE_DATA_DIR
    from recallbench.report.spooled import QueryLookup, query_records, result_head

    metrics = list(doc["comparisons"][0]["metrics"]) if doc["comparisons"] else []
    labels = [s["label"] for s in doc["systems"]]
    ref = result_head(results, 0)
    # the challengers' records in step with the reference's, which the loop reads itself
    lookups = [QueryLookup(query_records(results, i)) for i in range(1, len(results))]
    queries = [
        _compare_query(q, lookups, metrics, texts, chunks) for q in query_records(results, 0)
    ]
    cat_labels = doc["dataset"].get("category_labels", {})
    categories = list(ref["dataset"]["categories"])
    k = doc["top_k"]
    preferred = preferred_measures(metrics, k)
    return {
        "kind": "compare",
        "k": k,
        "level": texts.level,
        "systems": labels,
        "metrics": metrics,
        "metric": (preferred or metrics or [""])[0],
        "categories": [[c, cat_labels.get(c, c)] for c in categories],
        "queries": queries,
        "chunks": {"dir": COMPARE_DATA_DIR, "files": [], "token": chunks.token},
        "short": SHORT_TEXT,
    }


def render_compare_page(
    doc: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    texts: Texts | Sequence[Texts] = (),
    *,
    plots: Mapping[str, bytes] | None = None,
    version: str | None = None,
    scratch: Path | None = None,
) -> Page:
    """compare.html and its data files (compare-data/): the comparison document, every
    system's per-query figures, the texts and top-k of the first queries inline and the
    others in data files (`report.pagedata`), the comparison's plots."""
    from recallbench import __version__
    from recallbench.report import COMPARE_DATA_DIR
    from recallbench.report.comparison import compare_sections
    from recallbench.report.plots import caption
    from recallbench.report.sections import html_sections, image_entry

    if not isinstance(texts, Texts):
        texts = merged(results[0]["dataset"]["levels"][0]["name"], texts)
    version = __version__ if version is None else version
    # the page's fingerprint leaves the cost out (local diagnostics, new in every run), so
    # the data files of two runs of one comparison have the same names
    digest = hashlib.sha256(
        orjson.dumps({k: v for k, v in doc.items() if k != "cost"}, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
    chunks = PageChunks("compare", digest, scratch)
    data = compare_page_data(doc, results, texts, chunks)
    inline, files = chunks.finish()
    data["chunks"]["files"] = list(files.names)
    stats = text_stats(texts)
    doc_files = ", ".join(f["name"] for f in doc["dataset"]["files"])
    page = (
        _environment()
        .get_template("compare.html")
        .render(
            title=f"Systems side by side: {', '.join(data['systems'])} on {doc['dataset']['name']}",
            version=version,
            fingerprint=digest,
            dataset=(
                f"{doc['dataset']['name']} ({doc_files}; {doc['dataset']['label']}), "
                f"{doc['dataset']['queries']:,} scored queries, top-{doc['top_k']}; seed "
                f"{doc['seed']}, {doc['resamples']:,} resamples"
            ),
            sections=html_sections(compare_sections(doc)),
            images=[image_entry(n, svg, caption(n)) for n, svg in (plots or {}).items()],
            categories=[tuple(c) for c in data["categories"]],
            text_note=_text_note(stats, COMPARE_DATA_DIR),
            data=_data_markup(data, inline),
            data_dir=COMPARE_DATA_DIR,
            css=_asset("page.css"),
            script=_asset("page.js"),
        )
    )
    return Page(page.encode("utf-8"), files, COMPARE_DATA_DIR, stats)


def render_compare_html(
    doc: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    texts: Texts | Sequence[Texts] = (),
    *,
    plots: Mapping[str, bytes] | None = None,
    version: str | None = None,
) -> bytes:
    """compare.html's bytes alone (`render_compare_page`; its data files are dropped)."""
    page = render_compare_page(doc, results, texts, plots=plots, version=version)
    page.data.close()
    return page.html
