"""Headless Chromium for the browser tests, and the docs' screenshot of report.html.

The system's Chromium and chromedriver (Debian's `chromium` and `chromium-driver`, at
/usr/bin/chromium and /usr/bin/chromedriver) are driven through Selenium with the driver's path
given and SE_OFFLINE set, so Selenium Manager never looks for or downloads a browser or a
driver. Every session gets a fresh profile in a temporary directory.

`python tests/browser.py` regenerates docs/img/report-screenshot.png (`make screenshot`):
the committed fixture suite through every stage, report.html opened from file://, filtered to
one category, one query opened, and the browser's screenshot scaled down, by the same
functions the tests call.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("RECALLBENCH_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("RECALLBENCH_CHROMEDRIVER", "/usr/bin/chromedriver"))
WIDTH, HEIGHT = 1280, 900
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
#: the category and query the docs' screenshot (and the report test) open
SHOT_CATEGORY = "semantic_paraphrase"
SHOT_QUERY = "q-semantic-001"
DOCS_SHOT = Path(__file__).resolve().parents[1] / "docs" / "img" / "report-screenshot.png"


def missing() -> str | None:
    """Why no browser can be driven here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"{path} is missing: apt-get install -y {package}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[dev]'"
    return None


@contextlib.contextmanager
def chromium(width: int = WIDTH, height: int = HEIGHT) -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile, its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download anything
    with tempfile.TemporaryDirectory(prefix="recallbench-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--window-size={width},{height}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=str(CHROMEDRIVER), log_output=os.devnull)
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.set_window_size(width, height)
            yield driver
        finally:
            driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The console messages of level SEVERE since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def open_page(driver: Any, url: str) -> None:
    """Load `url` and wait for its script to have drawn the query table (or for load)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def select(driver: Any, element_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, element_id)).select_by_value(value)


def query_rows(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#q-table tbody tr.qrow")


def open_query(driver: Any, query_id: str) -> Any:
    """Click the row of `query_id`; the detail row it opens."""
    from selenium.webdriver.common.by import By

    row = next(r for r in query_rows(driver) if r.get_attribute("data-qid") == query_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", row)
    row.click()
    return driver.find_element(By.CSS_SELECTOR, "#q-table tbody tr.detail")


def show_query(driver: Any, report: Path, category: str, query_id: str) -> Any:
    """Open `report` from file://, filter to `category`, open `query_id`: its detail row."""
    open_page(driver, Path(report).resolve().as_uri())
    select(driver, "f-cat", category)
    return open_query(driver, query_id)


def screenshot(driver: Any, out: Path, scale: float = 1.0) -> Path:
    """The viewport as a PNG at `out` (scaled down by `scale` and quantized when < 1)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    png = driver.get_screenshot_as_png()
    if scale < 1.0:
        import io

        from PIL import Image

        image = Image.open(io.BytesIO(png)).convert("RGB")
        size = (round(image.width * scale), round(image.height * scale))
        image = image.resize(size, Image.LANCZOS).quantize(colors=64, method=Image.MEDIANCUT)
        buf = io.BytesIO()
        image.save(buf, format="PNG", optimize=True)
        png = buf.getvalue()
    out.write_bytes(png)
    return out


def docs_screenshot(out: Path = DOCS_SHOT) -> Path:
    """Regenerate the docs' screenshot of report.html from the committed fixture suite."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import run_fixtures

    from recallbench.commands.pipeline import write_run

    with tempfile.TemporaryDirectory(prefix="recallbench-shot-") as work:
        build = Path(work) / "build"
        write_run(run_fixtures(build), build)
        with chromium(WIDTH, 1000) as driver:
            detail = show_query(driver, build / "report.html", SHOT_CATEGORY, SHOT_QUERY)
            driver.execute_script(
                "arguments[0].previousElementSibling.scrollIntoView({block: 'start'});"
                "window.scrollBy(0, -150);",
                detail,
            )
            errors = console_errors(driver)
            if errors:
                raise RuntimeError(f"console errors: {errors}")
            return screenshot(driver, out, scale=0.75)


if __name__ == "__main__":
    why = missing()
    if why:
        sys.exit(f"browser.py: {why}")
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS_SHOT
    print(f"wrote {docs_screenshot(target)}", file=sys.stderr)
