"""The report layer: the result document (`result`), a report section as data and its
renderers (`sections`), the sections of run's report (`run_sections`), of compare's
(`comparison`) and of the baseline check (`baseline_diff`), the figures they share
(`figures`), the HTML pages (`html`, `pagedata`), the plots (`plots`), the terminal's lines
(`summary`) and the TREC export (`trec`). Here: the outputs' directory names and where
matplotlib keeps its font list."""

from __future__ import annotations

from pathlib import Path

#: where matplotlib keeps its font list, under the build directory (see `cache_matplotlib_in`)
MATPLOTLIB_CACHE = Path(".cache") / "matplotlib"

#: the plots' directories beside report.md and compare.md (`recallbench.report.plots`)
REPORT_PLOTS_DIR = "report-plots"
COMPARE_PLOTS_DIR = "compare-plots"
#: the directories of the pages' data files beside report.html and compare.html
#: (`recallbench.report.pagedata`)
REPORT_DATA_DIR = "report-data"
COMPARE_DATA_DIR = "compare-data"

_matplotlib_cache: Path | None = None


def cache_matplotlib_in(directory: Path) -> None:
    """Let `recallbench.report.plots`, when it first imports matplotlib, keep matplotlib's
    font list in `directory` (a place under the build directory; `claim.claimed_build_dir`
    sets it) instead of building it again in a temporary directory in every process that
    draws (what that costs: docs/performance.md)."""
    global _matplotlib_cache
    _matplotlib_cache = Path(directory)


def matplotlib_cache() -> Path | None:
    """The directory set by `cache_matplotlib_in`, if any."""
    return _matplotlib_cache
