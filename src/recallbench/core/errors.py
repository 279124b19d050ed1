"""Errors a user can cause and fix. The CLI prints them as one line, never a traceback."""

from __future__ import annotations


class RecallbenchError(Exception):
    """A user-facing failure: bad input, missing or stale artifact. Exit code 1 (or `exit_code`)."""

    exit_code = 1


class ValidationFailed(RecallbenchError):
    """Input files have problems; `problems` holds one `FILE:LINE: reason` string each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        head = self.problems[0] if self.problems else "validation failed"
        more = f" (and {len(self.problems) - 1} more problems)" if len(self.problems) > 1 else ""
        super().__init__(head + more)


class ArtifactError(RecallbenchError):
    """An upstream artifact is missing, unreadable, from another schema, or stale."""


class GateFailed(RecallbenchError):
    """A regression gate (e.g. the committed baseline) does not match. Distinct exit code."""

    exit_code = 3


class WorseThanReference(RecallbenchError):
    """compare's `--fail-if-worse` gate: a challenger is significantly and materially worse
    than the reference. Distinct exit code."""

    exit_code = 4
