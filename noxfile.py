"""nox sessions mirroring the Makefile targets. Each installs the project once, then runs."""

import nox

nox.options.sessions = ["lint", "tests", "docs"]
nox.options.reuse_existing_virtualenvs = True

STAGES = ["validate", "hydrate", "query", "snapshot-roundtrip", "score", "report", "decide"]


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev,docs]")


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
    session.run("pytest", "-q", *session.posargs)


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
    for stage in STAGES:
        session.run("recallbench", stage, *(session.posargs if stage == "query" else []))
    session.run("recallbench", "export-trec")
    if not session.posargs:
        session.run("recallbench", "check-baseline")


@nox.session
def baseline(session: nox.Session) -> None:
    """Regenerate benchmarks/retrieval/baseline.json on purpose."""
    _install(session)
    session.run(
        "python",
        "scripts/retrieval_eval.py",
        "--write-baseline",
        "benchmarks/retrieval/baseline.json",
    )


@nox.session
def longmemeval(session: nox.Session) -> None:
    """The LongMemEval lane on a data file: nox -s longmemeval -- FILE [options]."""
    if not session.posargs:
        session.error("usage: nox -s longmemeval -- PATH/TO/longmemeval_s.json [options]")
    _install(session)
    session.run("python", "scripts/retrieval_eval.py", "--longmemeval", *session.posargs)
