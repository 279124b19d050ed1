"""The system under test as `make` installs it: a working copy given with STORE=, kept.

    python scripts/system_under_test.py --stamp VENV/.recallbench-store --distribution hotmem ACTION

ACTION is one of:

- ``use [STORE]`` (`make eval`, before the stages): with a directory, install it editable
  (`pip install -e STORE`, unless it already is) and record it in the stamp; with
  ``index``, reinstall the version the project pins (pyproject.toml) from the package index
  and forget the record; with nothing, put the recorded working copy back if something
  replaced it (and record an editable install made by hand, so it is kept too). Then one
  line: ``system under test: hotmem 0.2.7.dev0, editable ../hotmem-wc @ 1a2b3c4 + local
  changes``.
- ``remember`` (before `pip install -e .`, which reinstalls the pinned version over a
  working copy of another version): record an editable or directory install, if any.
- ``restore`` (after it): put the recorded working copy back when pip replaced it, saying
  so in one line.

The stamp is JSON: {"distribution": ..., "path": the working copy's absolute path}. Errors
are one line on stderr, exit 2. It runs before the project is installed, so it imports
only the standard library and `recallbench.core.source` (stdlib only) from src/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recallbench.core.escape import terminal  # noqa: E402
from recallbench.core.source import (  # noqa: E402
    canonical_name,
    describe_source,
    installed_directory,
    installed_source,
    relative_path,
)

#: `make eval STORE=index`: back to the version pyproject.toml pins
INDEX = "index"


def say(line: str, err: bool = False) -> None:
    """One line on stdout (stderr), every control character of a path shown as U+XXXX."""
    print(terminal(line), file=sys.stderr if err else sys.stdout, flush=True)


class Refused(Exception):
    """A STORE that cannot be used: one line, exit 2."""


def read_stamp(stamp: Path) -> dict | None:
    try:
        record = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("path"), str) else None


def write_stamp(stamp: Path, distribution: str, path: Path) -> None:
    stamp.write_text(
        json.dumps({"distribution": distribution, "path": str(path)}) + "\n", encoding="utf-8"
    )


def installed_from(distribution: str, path: Path) -> bool:
    """Whether `distribution` is installed editable from `path` now."""
    importlib.invalidate_caches()
    found = installed_directory(distribution)
    return found is not None and found[1] and found[0].resolve() == path.resolve()


def pip_install(*args: str) -> None:
    """pip in this interpreter's environment, its output shown (as make shows its own)."""
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args]
    say(" ".join(command))
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise Refused(f"`{' '.join(command)}` failed (exit {done.returncode})")


def project_name(path: Path) -> str | None:
    """The [project] name of the checkout's pyproject.toml, None when it names none."""
    try:
        data = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = data.get("project", {}).get("name")
    return name if isinstance(name, str) else None


def pinned(distribution: str) -> str:
    """The project's requirement on `distribution` (`hotmem==0.2.6`) from pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in data["project"]["dependencies"]:
        name = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]
        if canonical_name(name) == canonical_name(distribution):
            return requirement
    return distribution


def install_editable(distribution: str, path: Path) -> None:
    """`pip install -e PATH`; when its version is not the one the project pins, one line
    says that pip's complaint about it is expected."""
    pip_install("-e", str(path))
    importlib.invalidate_caches()
    try:  # the version alone (installed_source would ask git for the revision too)
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = None
    requirement = pinned(distribution)
    if "==" in requirement and version != requirement.split("==", 1)[1].strip():
        say(
            f"note: the project pins {requirement}; pip's line about that conflict is expected: "
            f"the working copy ({version}) replaces the pinned release on purpose"
        )


def describe(distribution: str) -> str:
    importlib.invalidate_caches()
    return describe_source(installed_source(distribution)) or f"{distribution}: not installed"


def use(stamp: Path, distribution: str, store: str) -> None:
    """`make eval STORE=...`: see the module's doc."""
    if store == INDEX:
        pip_install("--force-reinstall", "--no-deps", pinned(distribution))
        stamp.unlink(missing_ok=True)
    elif store:
        path = Path(store).expanduser().resolve()
        if not path.is_dir():
            raise Refused(f"STORE={store}: not a directory (a checkout of {distribution})")
        if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
            raise Refused(f"STORE={store}: no pyproject.toml or setup.py there; not a project")
        name = project_name(path)
        if name is not None and canonical_name(name) != canonical_name(distribution):
            raise Refused(
                f"STORE={store}: that is the project {name!r}, not {distribution}; make eval "
                f"measures {distribution} (for your own store see docs/did-my-change-help.md)"
            )
        if not installed_from(distribution, path):
            install_editable(distribution, path)
            if not installed_from(distribution, path):
                raise Refused(
                    f"STORE={store}: installing it did not give an editable {distribution}"
                )
        write_stamp(stamp, distribution, path)
    else:
        restore(stamp, distribution)
        remember(stamp, distribution)
    kept = f" (kept: recorded in {relative_path(stamp)})" if read_stamp(stamp) else ""
    say(f"system under test: {describe(distribution)}{kept}")


def remember(stamp: Path, distribution: str) -> None:
    """Record an editable install of `distribution` made by hand, unless one is recorded."""
    if read_stamp(stamp) is not None:
        return
    importlib.invalidate_caches()
    found = installed_directory(distribution)
    if found is not None and found[1]:
        write_stamp(stamp, distribution, found[0].resolve())


def restore(stamp: Path, distribution: str) -> None:
    """Put the recorded working copy back when something replaced it (one line says so);
    forget it, in one line, when its directory is gone."""
    record = read_stamp(stamp)
    if record is None:
        return
    path = Path(record["path"])
    if installed_from(distribution, path):
        return
    if not path.is_dir():
        stamp.unlink(missing_ok=True)
        say(
            f"note: the recorded working copy {relative_path(path)} is gone; the system under "
            f"test is now {describe(distribution)}"
        )
        return
    replaced = describe(distribution)
    install_editable(distribution, path)
    say(
        f"note: put the working copy back: {distribution} editable from "
        f"{relative_path(path)} replaces {replaced}, which an install had put in its place "
        "(`make eval STORE=index` returns to the pinned release)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stamp", type=Path, required=True)
    parser.add_argument("--distribution", required=True)
    parser.add_argument("action", choices=("use", "remember", "restore"))
    parser.add_argument("store", nargs="?", default="")
    args = parser.parse_args(argv)
    try:
        if args.action == "use":
            use(args.stamp, args.distribution, args.store.strip())
        elif args.action == "remember":
            remember(args.stamp, args.distribution)
        else:
            restore(args.stamp, args.distribution)
    except Refused as exc:
        say(f"make: error: {exc}", err=True)
        return 2
    except OSError as exc:
        say(f"make: error: {exc.filename or ''}: {exc.strerror or exc}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
