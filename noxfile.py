"""nox sessions mirroring the Makefile targets. Each installs the project once, then runs.

The datasets' sessions (`nox -s longmemeval -- FILE`, ...) come from the dataset specs,
read from this checkout (the spec modules import nothing outside the standard library).
"""

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
from recallbench.datasets.base import DATASETS, DatasetSpec  # noqa: E402

nox.options.sessions = ["lint", "tests", "docs"]
nox.options.reuse_existing_virtualenvs = True


def _stages(session: nox.Session) -> list[str]:
    """The stage order, from its one definition (`recallbench stages`)."""
    out = session.run("recallbench", "stages", silent=True)
    return out.split() if isinstance(out, str) else []


def _install(session: nox.Session) -> None:
    """Everything `make` installs: torch (a CPU build, first), the project with its dev,
    docs, semantic and ray extras, the memory stores' extras, and the example plugin, so no
    test is skipped (but vipune's contract, whose binary no package installs)."""
    session.install("torch==2.13.0")
    session.install(
        "-e",
        ".[dev,docs,semantic,ray,okapi,chroma,txtai,llamaindex,langgraph,mem0]",
        "-e",
        "examples/plugin-system",
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    _install(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite."""
    _install(session)
    session.run("pytest", "-q", "-n", "2", "--dist", "loadfile", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation, built strictly."""
    _install(session)
    session.run("mkdocs", "build", "--strict")


@nox.session
def retrieval(session: nox.Session) -> None:
    """Every stage of the fixture lane as a separate command; posargs go to `query`.

    e.g. `nox -s retrieval -- --top-k 3 --repeat 20`. The baseline gate runs only with
    the default options, which are what the committed baseline was made with.
    """
    _install(session)
    for stage in _stages(session):
        session.run("recallbench", stage, *(session.posargs if stage == "query" else []))
    session.run("recallbench", "export-trec")
    if not session.posargs:
        session.run("recallbench", "check-baseline")


@nox.session
def baseline(session: nox.Session) -> None:
    """Regenerate benchmarks/retrieval/baseline.json on purpose, and the docs' plots of it."""
    _install(session)
    session.run(
        "python",
        "scripts/retrieval_eval.py",
        "--write-baseline",
        "benchmarks/retrieval/baseline.json",
    )
    session.run(
        "python",
        "scripts/docs_plots.py",
        "--baseline",
        "benchmarks/retrieval/baseline.json",
        "--out",
        "docs/img",
        "--compare",
    )


def _dataset_session(spec: DatasetSpec) -> None:
    """`nox -s NAME -- FILE [options]`: the dataset in process on a data file, one session per
    dataset spec with a data file of the user's (`example`)."""
    flag = next(o.flag for o in spec.options if o.type == "file" and o.required)

    def run(session: nox.Session) -> None:
        if not session.posargs:
            session.error(f"usage: nox -s {spec.name} -- PATH/TO/{spec.example} [options]")
        _install(session)
        data, *rest = session.posargs
        session.run(
            "python", "scripts/retrieval_eval.py", "--dataset", spec.name, flag, data, *rest
        )

    run.__doc__ = f"{spec.title} in process on a data file: nox -s {spec.name} -- FILE [options]."
    nox.session(name=spec.name)(run)


for _spec in DATASETS.values():
    if _spec.example:
        _dataset_session(_spec)
