"""nox sessions mirroring the Makefile targets, in one environment per weight.

nox makes an environment per session; these sessions instead share two, made and stamped
by the Makefile's own setup rules (one definition of what each weight installs):

* `.nox/core` (`make setup-core`: `pip install -e .`, no extras) for `retrieval` and the
  datasets' sessions;
* `.nox/full` (`make setup`: torch first, every extra, the example plugin) for `lint`,
  `tests`, `docs` and `baseline` (whose plots compare learned embedders too), and for a
  dataset session asked for a system or executor that needs an extra.

Each is installed once and then reused (again only when pyproject.toml changes); `make
clean` removes both. The datasets' sessions (`nox -s longmemeval -- FILE`, ...) come from
the dataset specs, read from this checkout (the spec modules and the registry's constants
import nothing outside the standard library).
"""

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
from recallbench.datasets.base import DATASETS, DatasetSpec  # noqa: E402
from recallbench.systems.registry import CORE_SYSTEMS  # noqa: E402

nox.options.sessions = ["lint", "tests", "docs"]

#: the Makefile target that installs each weight into its environment
WEIGHTS = {"core": "setup-core", "full": "setup"}


class _Env:
    """A weight's shared environment: its programs by name (`env("ruff")`)."""

    def __init__(self, venv: Path) -> None:
        self.bin = venv / "bin"

    def __call__(self, program: str) -> str:
        return str(self.bin / program)


def _env(session: nox.Session, weight: str) -> _Env:
    """The weight's one environment, `.nox/WEIGHT`, set up by the Makefile's rule for it
    (a no-op once its stamp is newer than pyproject.toml), with its bin/ first on PATH."""
    venv = ROOT / ".nox" / weight
    session.run("make", "--no-print-directory", f"VENV={venv}", WEIGHTS[weight], external=True)
    session.env["VIRTUAL_ENV"] = str(venv)
    session.env["PATH"] = os.pathsep.join([str(venv / "bin"), os.environ.get("PATH", "")])
    return _Env(venv)


def _weight(args: Sequence[str]) -> str:
    """`core`, unless the arguments name a system outside the core install's
    (`--system NAME` / `--system=NAME`) or the Ray executor: then `full`."""
    values: dict[str, list[str]] = {"--system": [], "--executor": []}
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in values:
            if eq:
                values[flag].append(value)
            elif i + 1 < len(args):
                values[flag].append(args[i + 1])
    extra = [s for s in values["--system"] if s not in CORE_SYSTEMS]
    return "full" if extra or "ray" in values["--executor"] else "core"


def _stages(session: nox.Session, env: _Env) -> list[str]:
    """The stage order, from its one definition (`recallbench stages`)."""
    out = session.run(env("recallbench"), "stages", silent=True)
    return out.split() if isinstance(out, str) else []


# Every session runs in a weight's shared environment (`_env`), not one of its own.
shared = nox.session(venv_backend="none")


@shared
def lint(session: nox.Session) -> None:
    """Ruff lint and format check (the full environment)."""
    env = _env(session, "full")
    session.run(env("ruff"), "check", ".")
    session.run(env("ruff"), "format", "--check", ".")


@shared
def tests(session: nox.Session) -> None:
    """The test suite (the full environment)."""
    env = _env(session, "full")
    session.run(env("pytest"), "-q", "-n", "2", "--dist", "loadfile", *session.posargs)


@shared
def docs(session: nox.Session) -> None:
    """The documentation, built strictly (the full environment)."""
    env = _env(session, "full")
    session.run(env("mkdocs"), "build", "--strict")


@shared
def retrieval(session: nox.Session) -> None:
    """Every stage on the fixture suite as a separate command (the core environment).

    posargs go to `query`, e.g. `nox -s retrieval -- --top-k 3 --repeat 20`. The baseline gate runs only with
    the default options, which are what the committed baseline was made with.
    """
    env = _env(session, "core")
    for stage in _stages(session, env):
        session.run(env("recallbench"), stage, *(session.posargs if stage == "query" else []))
    session.run(env("recallbench"), "export-trec")
    if not session.posargs:
        session.run(env("recallbench"), "check-baseline")


@shared
def baseline(session: nox.Session) -> None:
    """Regenerate the committed baseline and the docs' plots of it (the full environment).

    benchmarks/retrieval/baseline.json, then docs/img's plots drawn from it (their compare
    includes the learned embedders)."""
    env = _env(session, "full")
    session.run(
        env("python"),
        "scripts/retrieval_eval.py",
        "--write-baseline",
        "benchmarks/retrieval/baseline.json",
    )
    session.run(
        env("python"),
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
        data, *rest = session.posargs
        env = _env(session, _weight(rest))
        session.run(
            env("python"), "scripts/retrieval_eval.py", "--dataset", spec.name, flag, data, *rest
        )

    run.__doc__ = (
        f"{spec.title} in process on a data file: nox -s {spec.name} -- FILE [options].\n\n"
        "The core environment, or the full one for a system or executor that needs an extra."
    )
    nox.session(name=spec.name, venv_backend="none")(run)


for _spec in DATASETS.values():
    if _spec.example:
        _dataset_session(_spec)
