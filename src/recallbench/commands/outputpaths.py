"""Where a command may write: never over one of its inputs, an artifact of the build that
it does not make, or another of its own outputs.

`check_outputs` is the one check; `run`, `report`, `compare`, `protocols`, `check-baseline
--markdown` and `scripts/retrieval_eval.py` call it (through `check_run_outputs`,
`check_compare_outputs`, `check_protocols_outputs` where they share one) with their outputs
(`Place`: what the option or the file is, its path) before any work, and a clash is one line
naming both::

    --output build/scores.json would overwrite the build's scores.json (made by
    `recallbench score`); give another path

Two paths are the same file when they resolve to the same path (symlinks followed) or,
both existing, have the same (st_dev, st_ino) (a hard link, a bind mount). A `Place` that
is a directory (`tree`) clashes with everything under it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recallbench.builddir.artifacts import ARTIFACTS, TIMINGS_DIR
from recallbench.builddir.lock import LOCK_NAME
from recallbench.builddir.scopespool import SPOOL, STRUCTURE_SPOOL
from recallbench.core.errors import RecallbenchError

#: the directories of a build the stages rewrite (stores, work, packages, caches, timings)
BUILD_TREES = ("stores", "work", "roundtrip", "vectors", ".cache", TIMINGS_DIR)


@dataclass(frozen=True)
class Place:
    """A file (or, with `tree`, a directory) a command reads or writes; `label` names it in
    messages ("--output", "the --corpus input"). Two outputs with the same `role` are one
    file written twice with the same bytes (`run --output BUILD/results.json`): no clash."""

    label: str
    path: Path
    tree: bool = False
    role: str | None = None


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    real = os.path.realpath(path)
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return real, None
    return real, (st.st_dev, st.st_ino)


def _clash(a: Place, b: Place) -> bool:
    real_a, ino_a = _identity(a.path)
    real_b, ino_b = _identity(b.path)
    if real_a == real_b or (ino_a is not None and ino_a == ino_b):
        return True
    if a.tree and real_b.startswith(real_a.rstrip(os.sep) + os.sep):
        return True
    return b.tree and real_a.startswith(real_b.rstrip(os.sep) + os.sep)


def check_outputs(
    outputs: Sequence[Place], inputs: Iterable[Place] = (), protected: Iterable[Place] = ()
) -> None:
    """Refuse, in one line, an output that is another output of the same command, one of
    its `inputs`, or a `protected` file (a build's artifacts the command does not make,
    `build_places`)."""
    others = [*inputs, *protected]
    for n, output in enumerate(outputs):
        for earlier in outputs[:n]:
            if (output.role is None or output.role != earlier.role) and _clash(output, earlier):
                raise RecallbenchError(
                    f"{output.label} {output.path} would overwrite {earlier.label} "
                    f"({earlier.path}), another output of this command; give another path"
                )
        for other in others:
            if _clash(output, other):
                raise RecallbenchError(
                    f"{output.label} {output.path} would overwrite {other.label}; give another path"
                )


def build_places(build_dir: Path, makes: Iterable[str] = ()) -> tuple[list[Place], list[Place]]:
    """(the build's files a command writes, the build's files it must not write) for a
    command that makes the artifact kinds `makes` in `build_dir`: each artifact, with the
    scope spool and the structure spool beside suite.json and
    report.md/report.html/report-plots beside results.json; the lock file and the stages'
    directories are always protected."""
    from recallbench.report import REPORT_DATA_DIR, REPORT_PLOTS_DIR

    build_dir = Path(build_dir)
    makes = set(makes)
    own: list[Place] = []
    protected = [Place("the build's lock file", build_dir / LOCK_NAME)]
    protected += [
        Place(f"the build's {name}/ directory", build_dir / name, tree=True) for name in BUILD_TREES
    ]
    for kind, (file, command) in ARTIFACTS.items():
        group = [Place(f"the build's {file} (made by `{command}`)", build_dir / file, role=kind)]
        if kind == "suite":
            group += [
                Place(f"the build's {name} (made by `{command}`)", build_dir / name)
                for name in (SPOOL, STRUCTURE_SPOOL)
            ]
        if kind == "results":
            group[0] = Place(group[0].label, group[0].path, role="results")
            group += [
                Place(
                    f"the build's report.md (made by `{command}`)",
                    build_dir / "report.md",
                    role="report",
                ),
                Place(
                    f"the build's report.html (made by `{command}`)",
                    build_dir / "report.html",
                    role="report-html",
                ),
                Place(
                    f"the build's {REPORT_PLOTS_DIR}/ (made by `{command}`)",
                    build_dir / REPORT_PLOTS_DIR,
                    tree=True,
                    role="report-plots",
                ),
                Place(
                    f"the build's {REPORT_DATA_DIR}/ (made by `{command}`)",
                    build_dir / REPORT_DATA_DIR,
                    tree=True,
                    role="report-data",
                ),
            ]
        (own if kind in makes else protected).extend(group)
    return own, protected


def input_places(
    paths: Mapping[str, Path], cache: Path | None = None, *extra: tuple[str, Path | None]
) -> list[Place]:
    """The files a command reads: its dataset files (role -> path, as `options.dataset_inputs`
    gives them; a directory, LoCoMo's per-conversation layout, with everything in it), the
    vector cache given with --cache (a directory), and `extra` (label, path)
    pairs such as ("the --check-baseline file", path); None paths are skipped."""
    places = [
        Place(f"the {role} file this command reads", Path(p), tree=Path(p).is_dir())
        for role, p in paths.items()
    ]
    if cache is not None:
        places.append(Place("the vector cache given with --cache", Path(cache), tree=True))
    places += [Place(label, Path(p)) for label, p in extra if p is not None]
    return places


def report_places(
    report_path: Path,
    label: str = "--report",
    plots_dir: str | None = None,
    data_dir: str | None = None,
) -> list[Place]:
    """The Markdown report at `report_path` and what lies beside it: the HTML page, the
    plots' directory (`plots_dir`, default report-plots) and the page's data files
    (`data_dir`, default report-data)."""
    from recallbench.report import REPORT_DATA_DIR, REPORT_PLOTS_DIR
    from recallbench.stages.report import html_path

    report_path = Path(report_path)
    plots = plots_dir or REPORT_PLOTS_DIR
    data = data_dir or REPORT_DATA_DIR
    return [
        Place(label, report_path, role="report"),
        Place(f"the HTML report beside {label}", html_path(report_path), role="report-html"),
        Place(
            f"the plots beside {label}", report_path.parent / plots, tree=True, role="report-plots"
        ),
        Place(
            f"the HTML report's data files beside {label}",
            report_path.parent / data,
            tree=True,
            role="report-data",
        ),
    ]


def check_run_outputs(
    build_dir: Path | None,
    paths: Mapping[str, Path],
    cache: Path | None,
    output: Path | None,
    report_path: Path | None,
    *extra: tuple[str, Path | None],
    inputs: Sequence[tuple[str, Path | None]] = (),
) -> None:
    """Refuse, before any work, an output of a whole run (`run`, the script) that is one of
    its inputs (the dataset files `paths`, --cache, `inputs`: (label, path) pairs), another
    of its outputs (--output, --report and what lies beside it, `extra`: (option, path)
    pairs) or, with `build_dir` (which a run writes whole), a file of the build it does not
    write (`check_outputs`)."""
    from recallbench.builddir.artifacts import ARTIFACTS

    places: list[Place] = []
    protected: list[Place] = []
    if build_dir is not None:
        places, protected = build_places(build_dir, makes=set(ARTIFACTS))
    if output is not None:
        places.append(Place("--output", Path(output), role="results"))
    if report_path is not None:
        places += report_places(report_path)
    places += [Place(option, Path(path)) for option, path in extra if path is not None]
    check_outputs(places, input_places(paths, cache, *inputs), protected)


def check_compare_outputs(
    build_dir: Path,
    output: Path | None,
    report_path: Path | None,
    result_files: Sequence[Path],
    paths: Mapping[str, Path],
    cache: Path | None,
) -> None:
    """Refuse, before any work, a compare output (--output, default BUILD/compare.json;
    --report, default BUILD/compare.md, with its HTML page and compare-plots/ beside it)
    that is one of its --result files or dataset files (`paths`), another of its outputs,
    or a file of the build (`check_outputs`)."""
    from recallbench.report import COMPARE_DATA_DIR, COMPARE_PLOTS_DIR

    inputs = input_places(paths, cache, *((f"the --result file {p}", p) for p in result_files))
    outputs = [
        Place("--output", Path(output or Path(build_dir) / "compare.json")),
        *report_places(
            report_path or Path(build_dir) / "compare.md",
            plots_dir=COMPARE_PLOTS_DIR,
            data_dir=COMPARE_DATA_DIR,
        ),
    ]
    check_outputs(outputs, inputs, build_places(build_dir)[1])


def check_protocols_outputs(
    build_dir: Path, output: Path, report_path: Path, page: Path, paths: Mapping[str, Path]
) -> None:
    """Refuse, before any work, a protocols output (--output, default BUILD/protocols.json;
    --report, default BUILD/protocols.md, with protocols.html beside it) that is one of its
    dataset files, another of its outputs, or a file of the build (`check_outputs`)."""
    outputs = [
        Place("--output", Path(output)),
        Place("--report", Path(report_path)),
        Place("the HTML page beside --report", Path(page)),
    ]
    check_outputs(outputs, input_places(paths), build_places(build_dir)[1])
