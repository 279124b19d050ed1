#!/usr/bin/env python3
"""Redraw the docs' plots: the committed baseline's report plots and the comparison of the
reference systems on the fixture suite (`make baseline` runs it; tests/unit/test_plots.py fails
when docs/img is stale).

    python scripts/docs_plots.py --baseline FILE --out DIR [--compare]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallbench.builddir.artifacts import publish
from recallbench.cli.options import fixture_dir
from recallbench.commands.baseline import load_result
from recallbench.commands.compare import compare_results, run_compared
from recallbench.report.plots import compare_plots, report_plots

#: the systems of the docs' comparison plot (the field's references beside HotMem)
DOCS_COMPARE_SYSTEMS = ("hotmem", "bm25", "minilm", "hybrid-rrf")


def baseline_plots(result: Mapping[str, Any]) -> dict[str, bytes]:
    """The docs' plots of a baseline: `baseline-<plot>.svg` -> SVG bytes."""
    return {f"baseline-{Path(f).name}": svg for f, svg in report_plots(result).items()}


def write_baseline_plots(baseline: Path, out_dir: Path) -> list[Path]:
    """Render the baseline's plots into `out_dir` (published together)."""
    files = {
        Path(out_dir) / name: svg for name, svg in baseline_plots(load_result(baseline)).items()
    }
    publish(files)
    return list(files)


def docs_compare_plots(systems: Sequence[str] = DOCS_COMPARE_SYSTEMS) -> dict[str, bytes]:
    """The docs' comparison plots: `systems` on the committed fixture suite, compared as
    `recallbench compare` does by default (seed 0, 10,000 resamples)."""
    base = fixture_dir()
    paths = {"corpus": base / "corpus.jsonl", "queries": base / "queries.jsonl"}
    doc = compare_results(run_compared("fixtures", paths, systems).results, list(systems))
    return {f"compare-{Path(f).name}": svg for f, svg in compare_plots(doc).items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/docs_plots.py",
        description="Regenerate the docs' plots of a baseline result.",
    )
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--compare",
        action="store_true",
        help=f"also draw the comparison of {', '.join(DOCS_COMPARE_SYSTEMS)} on the fixtures",
    )
    args = parser.parse_args(argv)
    for path in write_baseline_plots(args.baseline, args.out):
        print(f"wrote {path}", file=sys.stderr)
    if args.compare:
        files = {args.out / name: svg for name, svg in docs_compare_plots().items()}
        publish(files)
        for path in files:
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
