"""The click side shared by the `recallbench` command (`recallbench.cli.main`) and
scripts/retrieval_eval.py, so the script runs what `recallbench run` runs without importing
the CLI: one-line errors (`OneLineErrors`, `run_guarded`, `CommandError`, `echo_line`),
a run's arguments resolved from its options (`run_arguments`), the files it writes beside
the build (`run_copies`) and its closing lines (`echo_closing`).

Error lines are `recallbench <command>: error: ...` with the exit codes `recallbench.cli.main`
lists; every string from data is escaped for the terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from recallbench.cli.options import dataset_inputs
from recallbench.core.errors import RecallbenchError, ValidationFailed
from recallbench.core.signals import Terminated, handle_sigterm


class CommandError(click.ClickException):
    """A failure shown as one line `recallbench <command>: error: ...` with its exit code."""

    def __init__(self, command: str, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.command = command
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        echo_line(f"recallbench {self.command}: error: {self.message}", err=True)


def echo_line(message: str, err: bool = False) -> None:
    """Print one line whose text may carry data (ids, labels, system names, paths): every
    control or format character is shown as U+XXXX (`escape.terminal`), so no string from
    data can move the cursor, rewrite a line or set the terminal's title."""
    from recallbench.core.escape import terminal

    click.echo(terminal(message), err=err)


def os_error_text(exc: OSError) -> str:
    """An operating-system error as one line naming the path and the cause."""
    cause = exc.strerror or str(exc)
    path = exc.filename
    if path is None:
        return cause
    if exc.filename2 is not None:
        return f"{path} -> {exc.filename2}: {cause}"
    return f"{path}: {cause}"


def run_guarded(command: str, fn: Callable[[], Any]) -> Any:
    """Run `fn`, turning every user, OS and interrupt error into one line and an exit code."""
    try:
        return fn()
    except ValidationFailed as exc:
        if len(exc.problems) == 1:  # one problem: one line
            raise CommandError(command, exc.problems[0]) from None
        for problem in exc.problems:
            echo_line(problem, err=True)
        raise CommandError(command, f"{len(exc.problems)} problem(s); nothing written") from None
    except RecallbenchError as exc:
        raise CommandError(command, str(exc), exc.exit_code) from None
    except Terminated as exc:
        _say_last(f"recallbench {command}: {exc.word}; nothing half-written")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo(f"recallbench {command}: interrupted; nothing half-written", err=True)
        sys.exit(130)
    except OSError as exc:
        raise CommandError(command, os_error_text(exc)) from None
    except Exception as exc:  # sqlite3 and other libraries' own errors: one line, exit 1
        if exc.__class__.__module__ in ("sqlite3", "_sqlite3") or "disk" in str(exc).lower():
            raise CommandError(command, f"{exc.__class__.__name__}: {exc}") from None
        raise


def _say_last(line: str) -> None:
    """The closing line of a signalled run, on stderr; a terminal already gone (SIGHUP)
    cannot take it, and that must not change the exit code."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(line, err=True)


class OneLineErrors:
    """A click command whose usage errors are one line too (`recallbench <cmd>: error: ...`,
    exit 2), like every other error; `--help` and the exit codes are click's."""

    def main(self, args: Any = None, prog_name: str | None = None, *a: Any, **kw: Any) -> Any:
        handle_sigterm()
        if kw.get("standalone_mode", True) is False:
            return super().main(args, prog_name, *a, **kw)  # type: ignore[misc]
        kw["standalone_mode"] = False
        try:
            rv = super().main(args, prog_name, *a, **kw)  # type: ignore[misc]
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else (prog_name or "recallbench")
            argv = sys.argv[1:] if args is None else list(args)
            message = self.misplaced_option_message(exc, argv) or exc.format_message()
            echo_line(f"{where}: error: {message} (see `{where} --help`)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if isinstance(exc.__context__, Terminated):
                _say_last(f"{prog_name or 'recallbench'}: {exc.__context__.word}")
                sys.exit(exc.__context__.exit_code)
            click.echo(f"{prog_name or 'recallbench'}: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def misplaced_option_message(self, exc: click.UsageError, args: list[str]) -> str:
        """For an option of this group given after a subcommand (`compare --build-dir x`,
        `run -q`), which the subcommand rejects: the error with where the option belongs, as
        a command to copy (`No such option '--build-dir': put it before the command ...:
        recallbench --build-dir x compare ...`); "" for any other usage error."""
        if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or exc.ctx.command is self:
            return ""
        name = exc.option_name
        option = next(
            (
                p
                for p in getattr(self, "params", ())
                if isinstance(p, click.Option)
                and not p.is_eager  # --help and --version: every command has or needs none
                and name in (*p.opts, *p.secondary_opts)
            ),
            None,
        )
        if option is None:
            return ""
        import shlex

        from recallbench.core.escape import terminal

        given = name
        if not option.is_flag:
            value = "VALUE"
            for i, arg in enumerate(args):
                if arg == name and i + 1 < len(args):
                    value = shlex.quote(args[i + 1])
                    break
                if arg.startswith(name + "="):
                    value = shlex.quote(arg[len(name) + 1 :])
                    break
            given = f"{name} {value}"
        root = exc.ctx.find_root().command_path
        subcommand = exc.ctx.command_path[len(root) :].strip()
        return terminal(
            f"No such option '{name}': put it before the command (it is {root}'s own "
            f"option): {root} {given} {subcommand} ..."
        )


def run_arguments(
    dataset: str,
    dataset_args: Mapping[str, Any],
    preset: str | None,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    measures: tuple[str, ...] | None,
    base: Path | None = None,
) -> tuple[dict[str, Path], dict[str, Any], int, tuple[int, ...] | None, Any]:
    """(paths, reader options, top-k, cutoffs, measure names) of a run from `run`'s options
    (the preset applied, a usage error on a contradiction): `run` and
    scripts/retrieval_eval.py both call it. `base`: where the fixture files' defaults are."""
    from recallbench.commands.presets import measure_names, reader_options, resolve_top_k

    dataset_args = reader_options(preset, dataset, dataset_args)
    k, ks = resolve_top_k(preset, dataset, top_k, ks, dataset_args.get("unit"))
    if base is None:
        paths, options = dataset_inputs(dataset, dataset_args)
    else:
        paths, options = dataset_inputs(dataset, dataset_args, base)
    return paths, options, k, ks, measure_names(preset, measures)


def build_written(build_dir: Path) -> list[Path | str]:
    """What a run writes into its build directory, as its files line names it:
    results.json, the reports (`stages.report.report_paths`) and decision.json."""
    from recallbench.stages.report import report_paths

    return [
        build_dir / "results.json",
        *report_paths(build_dir / "report.md"),
        build_dir / "decision.json",
    ]


def run_copies(
    run: Any, output: Path | None, report_path: Path | None
) -> tuple[dict[Path, bytes], list[Path | str]]:
    """The copies a run writes beside its build: its result at `output` (--output) and its
    reports at `report_path` (--report), each when given, as (the files for
    `artifacts.publish`, what the files line names)."""
    from recallbench.builddir.artifacts import dumps
    from recallbench.stages.report import report_paths

    files: dict[Path, bytes] = {}
    written: list[Path | str] = []
    if output is not None:
        files[output] = dumps(run.envelopes["results"])
        written.append(output)
    if report_path is not None:  # report.md, report-plots/, report.html and report-data/
        files.update(run.report_files(report_path))
        written += report_paths(report_path)
    return files, written


def echo_closing(
    run: Any,
    files: list[Path | str],
    started: float,
    *,
    quiet: bool,
    as_json: bool,
    preset: str | None = None,
    before_decision: str | None = None,
    note: str | None = None,
) -> None:
    """How `run` and scripts/retrieval_eval.py end. On stdout: the headline table (not with
    `quiet`), the preset's summary, `before_decision` (the script's summary lines) and the
    decision line; on stderr (not with `quiet`): one line naming every file written and the
    closing "N queries scored in X s". `as_json`: instead, one JSON object on stdout (the
    figures, the files, the decision, the seconds). `note`: what the files line adds after
    the files (e.g. where the stage artifacts are)."""
    import json
    import time

    from recallbench.commands.presets import preset_summary
    from recallbench.report.summary import closing_json, closing_line, files_line, summary_table
    from recallbench.stages.decide import headline

    decision = run.envelopes["decision"]["data"]
    seconds = time.perf_counter() - started
    if as_json:
        doc = closing_json(run.result, decision, files, seconds, headline(decision))
        click.echo(json.dumps(doc, allow_nan=False))  # strict JSON, never a bare `NaN`
        return
    if not quiet:
        click.echo(summary_table(run.result))
    if preset is not None:
        click.echo(preset_summary(run.result, preset))
    if before_decision:
        click.echo(before_decision)
    echo_line(headline(decision))
    if not quiet:
        click.echo(files_line(files, note), err=True)
        click.echo(closing_line([run.result], seconds), err=True)
