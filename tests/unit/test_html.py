"""report.html and compare.html without a browser: nothing from the network, deterministic,
escaped, their texts from the validated spool (the first queries' in the page, the others'
in the data files beside it), their size in the report's timing sidecar."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CORPUS, QUERIES, cli, load_json, run_fixtures
from hostile import HOSTILE_ID, HOSTILE_MEMORY, HOSTILE_TEXT, hostile_suite, run_pipeline_on

from recallbench.commands.pipeline import Run, write_run
from recallbench.report.html import (
    ALL_TEXTS_BYTES,
    collect_texts,
    json_for_script,
    no_texts,
    render_compare_html,
    render_report_html,
    render_report_page,
)

DATA = re.compile(r'<script type="application/json" id="rb-data">(.*?)</script>', re.S)
CHUNK = re.compile(r'recallbenchPageData\("(\w+)",("[0-9a-f]*"),(\d+),(\[.*\])\);\n', re.S)


def page_data(html: bytes) -> dict[str, Any]:
    match = DATA.search(html.decode("utf-8"))
    assert match, "no data element"
    return orjson.loads(match.group(1))


def chunk_records(payload: bytes) -> list[dict[str, Any]]:
    """The records of one data file (``recallbenchPageData(kind, token, n, [...]);``)."""
    match = CHUNK.fullmatch(payload.decode("utf-8"))
    assert match, payload[:80]
    return orjson.loads(match.group(4))


def records(html: bytes, read: Any) -> dict[str, dict[str, Any]]:
    """query id -> its record (its texts), from the page's inline slice and every data file
    it names (`read(name)` -> the file's bytes)."""
    data = page_data(html)
    out = {r["id"]: r for r in data["inline"]}
    for name in data["chunks"]["files"]:
        out.update((r["id"], r) for r in chunk_records(read(name)))
    assert list(out) == [q["id"] for q in data["queries"]] or len(out) == len(data["queries"])
    return out


def records_beside(page: Path) -> dict[str, dict[str, Any]]:
    """The records of a page written to disk, its data files read from beside it."""
    directory = page.parent / page_data(page.read_bytes())["chunks"]["dir"]
    return records(page.read_bytes(), lambda name: (directory / name).read_bytes())


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("hostile")
    corpus, queries = hostile_suite(work / "data")
    return run_pipeline_on(work / "build", corpus, queries, system="bm25")


# --- the page ----------------------------------------------------------------------------


def test_report_html_fetches_nothing_from_the_network(fixture_run: Run) -> None:
    html = fixture_run.html.decode("utf-8")
    assert html.startswith('<!DOCTYPE html>\n<html lang="en">')
    # nothing is fetched: no external script, style, font or image, and a policy that
    # forbids any but the page's own data files beside it
    assert "default-src 'none'; img-src data:" in html
    assert "script-src 'unsafe-inline' 'self'" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", html, re.I)
    assert not re.search(r"<link\b", html, re.I)
    assert "@import" not in html and "url(" not in html
    # the two plots, inline as data: URIs
    images = re.findall(r'<img src="data:image/svg\+xml;base64,[A-Za-z0-9+/=]+"', html)
    assert len(images) == len(fixture_run.plots) == 2
    # the headline table, configuration and dataset facts are in the static page
    assert '<th scope="row">system</th><td>hotmem</td>' in html
    assert "semantic_paraphrase" in html and "0.702" in html
    data = page_data(fixture_run.html)
    assert data["kind"] == "report"
    assert data["measures"] == ["recall@1", "recall@5", "mrr@5", "ndcg@5"]
    assert len(data["queries"]) == 57


def unit_texts(recs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """unit id -> text of every unit the records carry (expected, returned, the others)."""
    out: dict[str, str] = {}
    for r in recs.values():
        pool = r["texts"]
        out.update((e[0], pool[e[-1]]) for e in r["expected"] if e[-1] is not None)
        tops = [r.get("returned", [])] + [s["returned"] for s in r.get("systems", []) if s]
        out.update((h[0], pool[h[3]]) for top in tops for h in top if h[3] is not None)
        out.update((u[0], pool[u[1]]) for u in r.get("units", []))
    return out


def test_report_html_holds_every_text_of_the_small_suite(fixture_run: Run) -> None:
    data = page_data(fixture_run.html)
    recs = records(fixture_run.html, fixture_run.html_data.read)
    corpus = {
        r["memory_id"]: r["fact"] for r in map(orjson.loads, CORPUS.read_bytes().splitlines())
    }
    queries = {
        r["query_id"]: r["query"] for r in map(orjson.loads, QUERIES.read_bytes().splitlines())
    }
    assert unit_texts(recs) == corpus  # every memory, complete, in the page or its files
    by_id = {q["id"]: q for q in data["queries"]}
    for qid, text in queries.items():
        assert recs[qid]["texts"][recs[qid]["text"]] == text
        assert by_id[qid]["text"] == text[:480]  # what the table's search reads
    q, rec = by_id["q-semantic-001"], recs["q-semantic-001"]
    texts = rec["texts"]
    expected = {e[0]: (e[1], e[2], texts[e[3]]) for e in rec["expected"]}
    assert expected["mem-fin-001"] == (3, 57, corpus["mem-fin-001"])  # rank in the whole store
    assert q["first"] == 47 and q["missed"] == ["mem-fin-001", "mem-fin-002"]
    assert [r[0] for r in rec["returned"]] == [
        h["id"]
        for h in next(
            x for x in fixture_run.result["queries"] if x["query_id"] == "q-semantic-001"
        )["returned"]
    ]
    assert rec["lexical"] == {"matcher": "FTS5", "count": 0}
    assert rec["why"][0].startswith("mem-fin-001 (grade 3) ranked 57 of 80")
    assert "every scored query (57) and every memory (80)" in fixture_run.html.decode()


def test_a_large_spool_contributes_only_the_texts_the_page_uses(fixture_run: Run) -> None:
    suite = fixture_run.envelopes["suite"]
    assert suite["data"]["spool"]["bytes"] <= ALL_TEXTS_BYTES
    texts = collect_texts(suite, [fixture_run.result], everything=False)
    used = {(q["scope_id"], u) for q in fixture_run.result["queries"] for u in q["expected"]}
    used |= {(q["scope_id"], h["id"]) for q in fixture_run.result["queries"] for h in q["returned"]}
    assert set(texts.units) == used and len(used) < 80
    assert not texts.complete and texts.totals == {"queries": 57, "units": 80}
    page = render_report_page(fixture_run.result, texts)
    html = page.html.decode("utf-8")
    assert f"only the texts of its 57 scored queries and of the {len(used)} memory units" in html
    assert len(unit_texts(records(page.html, page.data.read))) == len(used)
    page.data.close()


def test_without_a_spool_the_page_shows_ids_and_says_why(fixture_run: Run) -> None:
    page = render_report_page(fixture_run.result, no_texts("memory"))
    assert "Texts are not shown: the validated scope spool" in page.html.decode("utf-8")
    recs = records(page.html, page.data.read)
    assert all(r["texts"] == [] and r["text"] is None for r in recs.values())
    assert all(q["text"] is None for q in page_data(page.html)["queries"])
    page.data.close()


def test_the_html_size_is_in_the_report_timing_sidecar(tmp_path: Path) -> None:
    build = tmp_path / "build"
    run = run_fixtures(build)
    write_run(run, build)
    sidecar = load_json(build / "timings" / "results.json")
    size = (build / "report.html").stat().st_size
    assert sidecar["html"]["bytes"] == size == len(run.html)
    assert sidecar["artifact_fingerprint"] == run.envelopes["results"]["fingerprint"]
    assert sidecar["html"]["texts_complete"] is True
    # the CLI's report stage writes the same page and the same sidecar figure
    assert cli(build, "report").exit_code == 0
    assert (build / "report.html").read_bytes() == run.html
    assert load_json(build / "timings" / "results.json")["html"]["bytes"] == size


def test_two_runs_give_byte_identical_html(tmp_path: Path) -> None:
    pages = []
    for name in ("first", "second"):
        build = tmp_path / name
        result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
        assert result.exit_code == 0, result.output
        pages.append((build / "report.html").read_bytes())
    assert pages[0] == pages[1]
    # the page holds no path, clock or timing
    text = pages[0].decode("utf-8")
    assert str(tmp_path) not in text and "Generated " not in text


def test_compare_writes_a_deterministic_compare_html(tmp_path: Path) -> None:
    pages = []
    for name in ("a", "b"):
        build = tmp_path / name
        result = cli(
            build, "compare", "--system", "hotmem", "--system", "bm25", "--resamples", "200"
        )
        assert result.exit_code == 0, result.output
        assert f"{build / 'compare.html'}" in result.stderr
        pages.append((build / "compare.html").read_bytes())
    # identical but for the cost table (local diagnostics, measured anew by each run)
    cost = re.compile(rb'<section id="cost">.*?</section>', re.S)
    assert all(len(cost.findall(page)) == 1 for page in pages)
    assert cost.sub(b"", pages[0]) == cost.sub(b"", pages[1])
    data = page_data(pages[0])
    assert data["kind"] == "compare" and data["systems"] == ["hotmem", "bm25"]
    assert data["metric"] == "ndcg@5"
    rec = records_beside(tmp_path / "a" / "compare.html")["q-lexical-001"]
    assert [len(s["returned"]) for s in rec["systems"]] == [5, 5]
    assert all(r[3] is not None for s in rec["systems"] for r in s["returned"])  # texts
    # the per-query wins agree with compare.json's count
    doc = load_json(tmp_path / "a" / "compare.json")
    i = data["metrics"].index("ndcg@5")
    wins = sum(
        1
        for q in data["queries"]
        if None not in (q["systems"][0]["m"][i], q["systems"][1]["m"][i])
        and q["systems"][1]["m"][i] > q["systems"][0]["m"][i]
    )
    assert wins == doc["comparisons"][0]["metrics"]["ndcg@5"]["overall"]["wins"]


def test_compare_of_saved_results_reads_the_texts_beside_them(tmp_path: Path) -> None:
    for name, system in (("old", "hotmem"), ("new", "bm25")):
        build = tmp_path / name
        result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES, "--system", system)
        assert result.exit_code == 0, result.output
    out = tmp_path / "cmp"
    result = cli(
        out, "compare", "--result", tmp_path / "old" / "results.json",
        "--result", tmp_path / "new" / "results.json", "--resamples", "200",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = page_data((out / "compare.html").read_bytes())
    # saved results are labelled by system name (hotmem in old/, bm25 in new/)
    recs = records_beside(out / "compare.html")
    assert data["systems"] == ["hotmem", "bm25"]
    used = set()  # every expected and returned memory of both systems, with its text
    for name in ("old", "new"):
        for q in load_json(tmp_path / name / "results.json")["data"]["queries"]:
            used.update(q["expected"])
            used.update(h["id"] for h in q["returned"])
    assert set(unit_texts(recs)) == used and len(used) > 57
    # a result whose suite.json is gone: ids only, and the page says so
    (tmp_path / "new" / "suite.json").unlink()
    (tmp_path / "old" / "suite.json").unlink()
    result = cli(
        out, "compare", "--result", tmp_path / "old" / "results.json",
        "--result", tmp_path / "new" / "results.json", "--resamples", "200",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html = (out / "compare.html").read_text(encoding="utf-8")
    recs = records_beside(out / "compare.html")
    assert "Texts are not shown" in html and all(r["texts"] == [] for r in recs.values())


# --- escaping ------------------------------------------------------------------------------


def test_page_text_rule_and_json_for_script() -> None:
    from markupsafe import escape as autoescape

    from recallbench.core import escape
    from recallbench.report.html import _environment

    # the templates write every string by escape's rule (not one of their own), then escape it
    render = _environment().from_string("{{ t }}").render
    for t in ("a\u202eb\u200bc\x00d\ne\tf", "plain <b> & 'quotes'"):
        assert render(t=t) == str(autoescape(escape.html_text(t)))
    assert render(t="a\u202eb\u200bc\x00d\ne\tf") == "aU+202EbU+200BcU+0000d\ne\tf"
    assert render(t="plain <b> & 'quotes'") == "plain &lt;b&gt; &amp; &#39;quotes&#39;"
    text = json_for_script({"t": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert orjson.loads(text) == {"t": "</script><!-- & \u2028"}


def test_hostile_ids_and_texts_stay_text(hostile: Run) -> None:
    html = hostile.html.decode("utf-8")
    # the data element cannot be closed early: the only closing tags are the page's own
    assert html.count("</script>") == 2
    assert "<!--" not in html and "alert(" not in html.split('id="rb-data">')[0]
    rec = records(hostile.html, hostile.html_data.read)[HOSTILE_ID]
    assert rec["texts"][rec["text"]].endswith("\u2066isolate\u2069 & \u200bzero-width")
    expected = {e[0]: rec["texts"][e[3]] for e in rec["expected"]}
    assert expected[HOSTILE_MEMORY].endswith(HOSTILE_TEXT)  # the text itself, unchanged


def test_static_parts_are_escaped_and_bidi_made_visible(fixture_run: Run) -> None:
    result = copy.deepcopy(fixture_run.result)
    result["dataset"]["notes"] = ["<script>alert(1)</script> \u202eevil"]
    result["system"]["name"] = '<b class="x">sys</b>'
    result["dataset"]["category_labels"]["exact_lexical"] = "lex<i>&'\"</i>"
    html = render_report_html(result, no_texts("memory")).decode("utf-8")
    head = html.split('id="rb-data">')[0]
    assert "<script>alert" not in head and "&lt;script&gt;alert(1)&lt;/script&gt;" in head
    assert "\u202e" not in head and "U+202Eevil" in head
    assert "&lt;b class=&#34;x&#34;&gt;sys&lt;/b&gt;" in head
    assert "lex&lt;i&gt;&amp;&#39;&#34;&lt;/i&gt;" in head


def test_compare_html_renders_hostile_labels_as_text(fixture_run: Run) -> None:
    from recallbench.commands.compare import compare_results

    results = [fixture_run.result, copy.deepcopy(fixture_run.result)]
    doc = compare_results(results, ["<a>", "b\u202e"], resamples=200)
    html = render_compare_html(doc, results, no_texts("memory")).decode("utf-8")
    head = html.split('id="rb-data">')[0]
    assert "<a>" not in head and "&lt;a&gt;" in head and "\u202e" not in head


def test_report_without_its_spool_shows_ids_and_a_damaged_spool_is_refused(
    tmp_path: Path,
) -> None:
    build = tmp_path / "build"
    write_run(run_fixtures(build), build)
    spool = build / "scopes.jsonl"
    good = spool.read_bytes()
    spool.write_bytes(good.replace(b"Acme", b"Acne", 1))  # same size, other bytes
    result = cli(build, "report")
    assert result.exit_code == 1 and "not the scope spool suite.json describes" in result.stderr
    spool.unlink()  # artifacts copied without the spool: a page of ids, saying why
    result = cli(build, "report")
    assert result.exit_code == 0, result.output
    assert "no texts: no scopes.jsonl" in result.stderr
    assert "Texts are not shown" in (build / "report.html").read_text(encoding="utf-8")
    assert load_json(build / "timings" / "results.json")["html"]["texts_available"] is False


def test_compare_html_puts_the_results_before_the_configuration(fixture_run: Run) -> None:
    """compare.html opens on the decision table (each system's means with intervals), then
    each challenger's results table; the configuration follows the results (issue 26,
    item 7)."""
    from recallbench.commands.compare import compare_results

    results = [fixture_run.result, copy.deepcopy(fixture_run.result)]
    doc = compare_results(results, ["a", "b"], resamples=200)
    html = render_compare_html(doc, results, no_texts("memory")).decode("utf-8")
    main = html.split("<main>", 1)[1]
    assert main.lstrip().startswith('<section id="decision">\n<h2>Which system: retrieval</h2>')
    assert main.index('<section id="decision">') < main.index(
        '<section id="pair-1">\n<h2>b against'
    )
    assert main.index('<section id="pair-1">') < main.index('<section id="systems">')
