"""report.html, compare.html and the docs site in a real browser: headless Chromium (Debian's
`chromium` and `chromium-driver`) driven by Selenium, no browser download (see browser.py).

Run locally with `.venv/bin/pytest tests/e2e/test_browser.py` after
`apt-get install -y chromium chromium-driver`. Without them the tests skip, except under
CI=true, where they fail: CI (.ci/run) installs both.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser
import orjson
import pytest
from conftest import CORPUS, ROOT, cli, load_json, run_fixtures, run_generated_longmemeval
from hostile import HOSTILE_ID, HOSTILE_TEXT, hostile_suite, run_pipeline_on

from recallbench.commands.pipeline import write_run


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    why = browser.missing()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests, but {why} (.ci/run installs it)")
        pytest.skip(why)
    with browser.chromium() as d:
        yield d


@pytest.fixture
def page(driver: Any) -> Any:
    """The browser with its console log emptied."""
    browser.console_errors(driver)
    return driver


def fact(memory_id: str) -> str:
    for line in CORPUS.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["memory_id"] == memory_id:
            return record["fact"]
    raise KeyError(memory_id)


def cell_texts(rows: list[Any], column: int) -> list[str]:
    return [r.find_elements("css selector", "td")[column].text for r in rows]


def test_report_opens_filters_and_shows_a_query(page: Any, tmp_path: Path) -> None:
    build = tmp_path / "build"
    write_run(run_fixtures(build), build)
    detail = browser.show_query(
        page, build / "report.html", "semantic_paraphrase", "q-semantic-001"
    )
    # the expected memory's text, with its grade and its rank in the whole store
    assert fact("mem-fin-001") in detail.text
    assert "57 (beyond top-5)" in detail.text
    assert "FTS5 matched 0 memories" in detail.text
    assert "mem-fin-001 (grade 3) ranked 57 of 80" in detail.text  # why missed
    rows = browser.query_rows(page)
    assert len(rows) == 7 and set(cell_texts(rows, 1)) == {"semantic_paraphrase"}
    assert page.find_element("id", "q-count").text == "showing 7 of 57 queries"
    # hit/miss filter, search by text, sort by a column
    browser.select(page, "f-cat", "")
    browser.select(page, "f-outcome", "miss")
    queries = load_json(build / "results.json")["data"]["queries"]
    assert len(browser.query_rows(page)) == sum(1 for q in queries if q["missed"])
    browser.select(page, "f-outcome", "")
    search = page.find_element("id", "f-search")
    search.send_keys("sign off before we pay")
    assert [r.get_attribute("data-qid") for r in browser.query_rows(page)] == ["q-semantic-001"]
    search.clear()
    search.send_keys("q-entity")
    assert len(browser.query_rows(page)) == 7
    search.clear()
    search.send_keys(" ")  # an input event: back to all rows
    page.find_element("css selector", '#q-table th[data-key="first"]').click()
    ranks = cell_texts(browser.query_rows(page), 8)
    numbers = [int(x) for x in ranks if x.isdigit()]
    assert numbers == sorted(numbers) and ranks[: len(numbers)] == [str(n) for n in numbers]
    shot = browser.screenshot(page, tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.console_errors(page) == []


def test_a_long_text_is_shortened_with_a_way_to_expand_it(page: Any, tmp_path: Path) -> None:
    corpus = [orjson.loads(x) for x in CORPUS.read_bytes().splitlines()]
    long_fact = " ".join(f"word{i}" for i in range(300))
    for record in corpus:
        if record["memory_id"] == "mem-fin-001":
            record["fact"] = "Acme invoices above EUR 5,000 need two approvers. " + long_fact
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in corpus))
    build = tmp_path / "build"
    from conftest import QUERIES

    write_run(run_pipeline_on(build, data / "corpus.jsonl", QUERIES, system="bm25"), build)
    detail = browser.show_query(
        page, build / "report.html", "semantic_paraphrase", "q-semantic-001"
    )
    assert "word299" not in detail.text
    button = next(
        b for b in detail.find_elements("css selector", "button.more") if "characters" in b.text
    )
    button.click()
    assert "word299" in detail.text and button.text == "show less"
    assert browser.console_errors(page) == []


def test_hostile_ids_and_texts_stay_text_in_the_browser(page: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    corpus, queries = hostile_suite(tmp_path / "data")
    build = tmp_path / "build"
    write_run(run_pipeline_on(build, corpus, queries, system="bm25"), build)
    browser.open_page(page, (build / "report.html").as_uri())
    page.find_element("id", "f-search").send_keys("q-<img")
    rows = browser.query_rows(page)
    assert [r.get_attribute("data-qid") for r in rows] == [HOSTILE_ID]
    detail = browser.open_query(page, HOSTILE_ID)
    assert HOSTILE_ID in detail.text
    assert "</script><script>alert(1)</script><!--" in detail.text  # shown, not run
    marks = [e.text for e in detail.find_elements("css selector", ".ctl")]
    assert "U+202E" in marks and "U+2066" in marks and "U+200B" in marks
    assert (
        page.find_elements("css selector", "main img:not([data-name]), main b, main script") == []
    )
    with pytest.raises(NoAlertPresentException):
        page.switch_to.alert.text  # noqa: B018
    assert browser.console_errors(page) == []
    assert HOSTILE_TEXT.startswith("</script>")


def test_compare_opens_filters_and_shows_each_systems_top_k(page: Any, tmp_path: Path) -> None:
    build = tmp_path / "build"
    result = cli(build, "compare", "--system", "hotmem", "--system", "bm25", "--resamples", "200")
    assert result.exit_code == 0, result.output
    doc = load_json(build / "compare.json")
    overall = doc["comparisons"][0]["metrics"]["ndcg@5"]["overall"]
    browser.open_page(page, (build / "compare.html").as_uri())
    assert browser.console_errors(page) == []
    for outcome, key in (("win", "wins"), ("tie", "ties"), ("loss", "losses")):
        browser.select(page, "f-outcome", outcome)
        rows = browser.query_rows(page)
        assert len(rows) == overall[key], outcome
        assert set(cell_texts(rows, 5)) <= {outcome}
    qid = browser.query_rows(page)[0].get_attribute("data-qid")
    detail = browser.open_query(page, qid)
    columns = detail.find_elements("css selector", ".side > div")
    assert [c.get_attribute("data-system") for c in columns] == ["hotmem", "bm25"]
    for column in columns:
        assert len(column.find_elements("css selector", "table > tbody > tr")) == 5
    suite_query = next(
        orjson.loads(x)
        for x in (ROOT / "benchmarks/retrieval/queries.jsonl").read_bytes().splitlines()
        if orjson.loads(x)["query_id"] == qid
    )
    assert suite_query["query"][:40] in detail.text
    best = max(suite_query["relevance"], key=lambda m: suite_query["relevance"][m])
    assert fact(best)[:40] in detail.text  # the expected memory's text
    # a query whose texts and top-k are in compare-data/0001.js, past the page's first slice
    browser.select(page, "f-outcome", "")
    late = next(r["id"] for r in page_rows(page) if r["c"] == 1)
    detail = opened(page, late)
    late_query = next(
        orjson.loads(x)
        for x in (ROOT / "benchmarks/retrieval/queries.jsonl").read_bytes().splitlines()
        if orjson.loads(x)["query_id"] == late
    )
    assert late_query["query"][:40] in detail.text
    assert len(detail.find_elements("css selector", ".side > div")) == 2
    browser.screenshot(page, tmp_path / "compare.png")
    assert browser.console_errors(page) == []


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build of 120 generated LongMemEval questions: report.html holds the texts of the
    first 50, report-data/0001.js and 0002.js the others'."""
    work = tmp_path_factory.mktemp("generated")
    run = run_generated_longmemeval(work)
    write_run(run, work / "build")
    run.close()
    assert sorted(p.name for p in (work / "build" / "report-data").iterdir()) == [
        "0001.js",
        "0002.js",
    ]
    return work


def page_rows(page: Any) -> list[dict[str, Any]]:
    """The table rows of the open page's data (id, chunk `c`, ...)."""
    return page.execute_script(
        "return JSON.parse(document.getElementById('rb-data').textContent).queries"
    )


def opened(page: Any, query_id: str) -> Any:
    """Open `query_id`'s row and wait until its detail is drawn (its data file read)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.open_query(page, query_id)
    detail = page.find_element("css selector", f'#q-table tr.detail[data-qid="{query_id}"]')
    WebDriverWait(page, 20).until(lambda d: "Reading the texts" not in detail.text)
    return detail


def session_text(data: Path, question_id: str, session_id: str) -> str:
    """A session's text as recallbench stores it (the user turns joined by spaces)."""
    q = next(x for x in orjson.loads(data.read_bytes()) if x["question_id"] == question_id)
    turns = q["haystack_sessions"][q["haystack_session_ids"].index(session_id)]
    return " ".join(t["content"] for t in turns if t["role"] == "user")


def test_a_query_past_the_first_slice_shows_its_texts_from_its_data_file(
    page: Any, generated: Path
) -> None:
    """report.html opened from file:// with more queries than its first slice: a query
    whose texts are in report-data/0002.js opens with its question, its expected session's
    text and its top-k (issue 29); the Texts section reads every data file on request."""
    browser.open_page(page, (generated / "build" / "report.html").as_uri())
    rows = page_rows(page)
    assert len(browser.query_rows(page)) == len(rows) > 100  # 113 scored of 120
    last = next(r for r in reversed(rows) if r["c"] == 2 and r["rel"])
    question = next(
        x
        for x in orjson.loads((generated / "lme.json").read_bytes())
        if x["question_id"] == last["id"]
    )
    detail = opened(page, last["id"])
    assert question["question"] in detail.text
    answer = question["answer_session_ids"][0]
    assert session_text(generated / "lme.json", last["id"], answer)[:60] in detail.text
    assert "Returned top-10 (" in detail.text
    count = page.find_element("id", "t-count")
    assert "1 of 2 data files" in count.text
    page.find_element("id", "t-load").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page, 20).until(lambda d: "2 of 2 data files" in count.text)
    assert browser.console_errors(page) == []


def test_a_missing_or_foreign_data_file_is_named_and_the_page_stays_usable(
    page: Any, generated: Path, tmp_path: Path
) -> None:
    """report-data/0002.js removed and 0001.js replaced by another page's file: opening a
    query of either names the file it could not use; the table, its filters and the
    queries whose texts are in the page still work."""
    import shutil

    build = tmp_path / "build"
    shutil.copytree(
        generated / "build", build, ignore=shutil.ignore_patterns("stores", "roundtrip")
    )
    (build / "report-data" / "0002.js").unlink()
    one = build / "report-data" / "0001.js"
    token = orjson.loads(
        (build / "report.html").read_text(encoding="utf-8").split('"token":', 1)[1].split("}", 1)[0]
    )
    one.write_text(one.read_text(encoding="utf-8").replace(token, "0" * 64), encoding="utf-8")
    browser.open_page(page, (build / "report.html").as_uri())
    rows = page_rows(page)
    gone = next(r["id"] for r in rows if r["c"] == 2)
    detail = opened(page, gone)
    assert "Could not read report-data/0002.js (beside this page)" in detail.text
    assert gone in detail.text  # the query's id and category are still shown
    detail = opened(page, next(r["id"] for r in rows if r["c"] == 1))
    assert "report-data/0001.js is not this page's data file" in detail.text
    first = next(r for r in rows if r["c"] == 0 and r["rel"])
    browser.open_query(page, gone)  # close it
    detail = opened(page, first["id"])
    assert "Expected (" in detail.text and "Returned top-10" in detail.text
    browser.select(page, "f-outcome", "miss")
    misses = sum(1 for r in rows if r["rel"] and r["missed"])
    assert len(browser.query_rows(page)) == misses
    errors = browser.console_errors(page)
    assert len(errors) == 1 and "report-data/0002.js" in errors[0], errors


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs, built strictly into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def site(site_dir: Path) -> Iterator[str]:
    """The built docs served on 127.0.0.1."""
    out = site_dir

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(out))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


OVERFLOW = """
const doc = document.documentElement;
const wide = [];
document.querySelectorAll('article table').forEach((t) => {
  const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
  if (box.scrollWidth > box.clientWidth + 1 || t.getBoundingClientRect().right > doc.clientWidth)
    wide.push(t.rows[0].textContent.trim().slice(0, 60));
});
return {page: doc.scrollWidth - doc.clientWidth, tables: document.querySelectorAll('article table').length, wide: wide};
"""


# the pages are NAME.html: the offline plugin turns directory URLs off, so links work from disk
@pytest.mark.parametrize(
    "path", ["", "fixtures.html", "longmemeval.html", "reading-the-report.html"]
)
def test_docs_pages_render_and_their_tables_fit(page: Any, site: str, path: str) -> None:
    browser.open_page(page, site + path)
    assert page.find_element("css selector", "article h1").text
    assert "md-header" in page.page_source  # Material for MkDocs
    found = page.execute_script(OVERFLOW)
    assert found["tables"] > 0
    assert found["page"] <= 0 and found["wide"] == [], found
    if path == "reading-the-report.html":
        shot = page.find_element("css selector", 'article img[src$="report-screenshot.png"]')
        assert page.execute_script("return arguments[0].naturalWidth", shot) > 0
    assert browser.console_errors(page) == []


PAGE_STRUCTURE = """
const cells = [...document.querySelectorAll('table')].map(
  (t) => [...t.rows].map((r) => r.cells.length));
return {
  headings: [...document.querySelectorAll('h1, h2')].map((h) => h.tagName + ' ' + h.textContent),
  tables: cells,
  injected: [...document.querySelectorAll(
    'script, iframe, object, embed, a, em, del, form, input, img:not([src^="report-plots/"])'
  )].map((e) => e.outerHTML.slice(0, 80)),
  handlers: [...document.querySelectorAll('*')].filter(
    (e) => [...e.attributes].some((a) => a.name.startsWith('on') || a.name === 'style')).length,
  images: [...document.images].map((i) => [i.getAttribute('src'), i.naturalWidth > 0]),
};
"""


def test_hostile_report_md_and_compare_md_stay_text_in_the_browser(
    page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """report.md of the hostile suite run through the hostile plugin (markup in ids, the
    file name, configuration keys, corruption names, the lexical matcher) and compare.md of
    results whose every string is hostile, labelled with headings and HTML: rendered by
    Python-Markdown and by markdown-it and opened in Chromium, no script runs (no alert), no
    element or handler is injected, and the headings and table cells are the report's own
    (issue 27, items 4 to 6)."""
    from hostile import (
        HOSTILE_PLUGIN,
        LABELS,
        REPORT_H2,
        hostile_document,
        install_hostile_plugin,
        markdown_renderers,
    )
    from selenium.common.exceptions import NoAlertPresentException

    from recallbench.commands.compare import compare_results
    from recallbench.core.escape import terminal
    from recallbench.report.comparison import render_markdown as render_compare

    install_hostile_plugin(monkeypatch)
    corpus, queries = hostile_suite(tmp_path / "data")
    named = corpus.with_name("corpus-<img src=x onerror=alert(5)>[l](javascript:x)|#.jsonl")
    corpus.rename(named)
    build = tmp_path / "build"
    run = run_pipeline_on(build, named, queries, system=HOSTILE_PLUGIN)
    write_run(run, build)
    report = (build / "report.md").read_text(encoding="utf-8")
    results = [hostile_document(run.result), hostile_document(run.result)]
    compared = render_compare(compare_results(results, LABELS, resamples=50))
    for renderer, render in markdown_renderers().items():
        for name, text in (("report", report), ("compare", compared)):
            out = build / f"{name}-{renderer}.html"
            out.write_text(
                f'<!DOCTYPE html><html lang="en"><meta charset="utf-8"><body>{render(text)}',
                encoding="utf-8",
            )
            browser.open_page(page, out.as_uri())
            with pytest.raises(NoAlertPresentException):
                page.switch_to.alert.text  # noqa: B018
            found = page.execute_script(PAGE_STRUCTURE)
            assert found["injected"] == [] and found["handlers"] == 0, (renderer, name, found)
            for table in found["tables"]:
                assert len(set(table)) == 1, (renderer, name, table)
            headings = [" ".join(h.split(" ", 1)).lower() for h in found["headings"]]
            if name == "report":
                assert headings == [h.lower() for h in REPORT_H2], renderer
                assert [ok for _, ok in found["images"]] == [True, True]  # the two plots
            else:
                # the decision table, the pair, the configurations, Reading this
                assert headings[2] == (
                    f"h2 {terminal(LABELS[1])} against {terminal(LABELS[0])}".lower()
                )
                assert len(headings) == 5 and headings[-1] == "h2 reading this"
            assert page.execute_script("return typeof window.alert") == "function"


FIT = """
const doc = document.documentElement;
const wide = [...document.querySelectorAll('main table.metrics')].filter(
  (t) => t.getBoundingClientRect().right > doc.clientWidth).map((t) => t.rows[0].textContent);
const first = document.querySelector('main h2, main .banner');
return {page: doc.scrollWidth - doc.clientWidth, wide: wide, tables:
  document.querySelectorAll('main table.metrics').length,
  means: document.querySelectorAll('main section[id^="metrics-"] table').length,
  first: first.className === 'banner' ? 'banner' : first.textContent,
  top: document.querySelector('main table.metrics').getBoundingClientRect().top};
"""


def test_a_longmemeval_report_fits_1280_px_and_flags_synthetic_data(
    page: Any, tmp_path: Path
) -> None:
    """Generated LongMemEval data at turn unit (24 measures on two levels): every metric
    table fits a 1280 px window without scrolling sideways, and the page opens on the
    synthetic-data banner (issue 26, item 7)."""
    from recallbench.datasets.longmemeval import generator

    data = tmp_path / "lme.json"
    generator.generate(
        data, shape="s", questions=12, seed=1, sessions_per_question=6, session_chars=300
    )
    build = tmp_path / "build"
    from recallbench.commands.pipeline import run_pipeline

    run = run_pipeline(
        "longmemeval", {"data": data}, build, options={"unit": "turn"}, system="bm25", top_k=10
    )
    write_run(run, build)
    assert len(run.result["run"]["measures"]) == 24
    browser.open_page(page, (build / "report.html").as_uri())
    found = page.execute_script(FIT)
    assert found["page"] <= 0 and found["wide"] == [], found
    assert found["means"] == 6  # a table per cutoff (1, 5, 10) on each level
    assert found["first"] == "banner"
    banner = page.find_element("css selector", "main .banner")
    assert banner.text.startswith("Synthetic data: synthetic data from the recallbench generator")
    browser.screenshot(page, tmp_path / "longmemeval-1280.png")
    assert browser.console_errors(page) == []


def test_compare_html_opens_on_the_decision_table(page: Any, tmp_path: Path) -> None:
    """The first screen of compare.html (1280 x 800) holds the decision table (each
    system's means with intervals) and the cost table; the paired results follow, the
    systems' configuration after them (issues 26 item 7, 40)."""
    build = tmp_path / "build"
    result = cli(build, "compare", "--system", "hotmem", "--system", "bm25", "--resamples", "200")
    assert result.exit_code == 0, result.output
    browser.open_page(page, (build / "compare.html").as_uri())
    found = page.execute_script(
        "const h = [...document.querySelectorAll('main h2')].map((e) => e.textContent);"
        "const box = (q) => document.querySelector(q).getBoundingClientRect();"
        "return {h: h, decision: box('#decision table').bottom, cost: box('#cost table').bottom,"
        " pair: box('#pair-1').top, systems: box('#systems').top};"
    )
    assert found["h"][:2] == ["Which system: retrieval", "bm25 against hotmem"], found
    assert found["decision"] < 800 and found["cost"] < 800, found  # above the fold at 1280x800
    assert found["systems"] > found["pair"] > found["cost"]


def test_docs_search_works_opened_from_disk(page: Any, site_dir: Path) -> None:
    """build/site/index.html opened as a file (no server): the search finds pages. Material's
    offline plugin inlines the index (search/search_index.js) and the committed
    iframe-worker shim runs the search worker, which a file:// page may not start; nothing
    is fetched from the network (no script from outside the site)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert (site_dir / "search" / "search_index.js").is_file()
    html = (site_dir / "index.html").read_text(encoding="utf-8")
    assert "unpkg.com" not in html and '<script src="javascripts/iframe-worker-shim.js"' in html
    browser.open_page(page, (site_dir / "index.html").as_uri())
    box = page.find_element(By.CSS_SELECTOR, "input.md-search__input")
    box.click()
    box.send_keys("snapshot")
    WebDriverWait(page, 60).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
    )
    meta = page.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
    assert meta.endswith("matching documents"), meta
    first = page.find_elements(By.CSS_SELECTOR, ".md-search-result__item")[0]
    assert "snapshot" in first.text.lower()
    assert browser.console_errors(page) == []
