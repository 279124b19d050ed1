"""Compare a run's result with a committed baseline, for any dataset.

A baseline (benchmarks/retrieval/baseline.json for the fixture suite) is the result document
(the `data` of results.json) of a run of the unchanged system. The result holds no
timestamps, timings, paths, host or version data (those live in the timing sidecars and the
envelope), so it is compared as it is: any difference in ordered ids, grades, scores,
measures, round-trip equivalence or decision is a mismatch (`differences`: every one of
them, never capped).

`check` tells what a difference means (`BaselineDiff`): what changed in the recorded
configuration, the headline measures before -> after per category with the paired test of
`recallbench.commands.compare` against the baseline's per-query values (the baseline is the
reference), the queries that won and lost, the decision before -> after and the count of
differing values; `recallbench.report.baseline_diff` writes it for the terminal and as the
block for a pull request.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallbench.core.errors import GateFailed, RecallbenchError
from recallbench.report.result import load_result_envelope

#: the labels of the two sides in the paired comparison
BASELINE_LABEL = "baseline"
RUN_LABEL = "this run"


def normalize(result: dict[str, Any]) -> dict[str, Any]:
    """The comparable form of a result: the result document itself (an envelope's data)."""
    return result["data"] if result.get("artifact") == "results" else result


def load_result(path: Path) -> dict[str, Any]:
    """Read a baseline (a result document) or a results.json envelope; return the document."""
    return load_result_envelope(path)["data"]


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                out.append(f"{path}.{key}: added")
            elif key not in b:
                out.append(f"{path}.{key}: removed")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}")


def comparable(baseline: dict[str, Any], result: dict[str, Any]) -> str | None:
    """Why the two cannot be compared query by query (another dataset or reader options,
    another top-k), as the one difference to report; None when they can."""
    source = lambda r: (r["dataset"]["dataset"], r["dataset"]["options"])  # noqa: E731
    if source(baseline) != source(result):
        (b_name, b_opts), (r_name, r_opts) = source(baseline), source(result)
        return (
            f"$.dataset: the baseline was made from dataset {b_name} {b_opts or ''}, "
            f"this result from {r_name} {r_opts or ''}".replace("  ", " ").strip()
        )
    base_k, k = baseline["run"]["top_k"], result["run"]["top_k"]
    if base_k != k:  # every metric name differs; one line says why
        return f"$.run.top_k: the baseline was made with top-k {base_k}, this run used {k}"
    return None


def differences(baseline: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Every path that differs between the normalized baseline and the normalized result
    (one line each, never capped); one line when they cannot be compared (`comparable`)."""
    baseline, result = normalize(baseline), normalize(result)  # normalize is idempotent
    reason = comparable(baseline, result)
    if reason is not None:
        return [reason]
    out: list[str] = []
    _diff(baseline, result, "$", out)
    return out


def _setting(value: Any) -> str:
    if isinstance(value, dict):
        from recallbench.report.figures import format_setting

        return format_setting(value)
    if isinstance(value, list):
        return ", ".join(_setting(v) for v in value)
    return str(value)


def _label(key: str) -> str:
    return key.replace("_", " ")


def _changed(label: str, before: Any, after: Any) -> str | None:
    """One line for a setting that differs: nested mappings name each changed key
    (`scoring weights: cosine 0.6 -> 0.4, fts bm25 0.2 -> 0.4`)."""
    if before == after:
        return None
    if isinstance(before, dict) and isinstance(after, dict):
        parts = []
        for key in sorted(set(before) | set(after)):
            if key not in before:
                parts.append(f"{_label(key)} added ({_setting(after[key])})")
            elif key not in after:
                parts.append(f"{_label(key)} removed (was {_setting(before[key])})")
            elif before[key] != after[key]:
                parts.append(f"{_label(key)} {_setting(before[key])} -> {_setting(after[key])}")
        return f"{label}: {', '.join(parts)}"
    if before is None:
        return f"{label}: added ({_setting(after)})"
    if after is None:
        return f"{label}: removed (was {_setting(before)})"
    return f"{label}: {_setting(before)} -> {_setting(after)}"


def configuration_changes(baseline: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """What the result records differently from the baseline about how it was made: the
    system's name and settings (one line per setting), the dataset (name, files, reader
    options) and the run (top-k, store mode, measures)."""
    out: list[str] = []
    b_sys, r_sys = baseline.get("system", {}), result.get("system", {})
    out.append(_changed("system", b_sys.get("name"), r_sys.get("name")))
    for key in sorted((set(b_sys) | set(r_sys)) - {"name"}):
        out.append(_changed(_label(key), b_sys.get(key), r_sys.get(key)))
    b_ds, r_ds = baseline["dataset"], result["dataset"]
    out.append(_changed("dataset", b_ds.get("dataset"), r_ds.get("dataset")))
    b_files = {f["name"]: f["sha256"] for f in b_ds.get("identity", {}).get("files", [])}
    r_files = {f["name"]: f["sha256"] for f in r_ds.get("identity", {}).get("files", [])}
    for name in sorted(set(b_files) | set(r_files)):
        before, after = b_files.get(name), r_files.get(name)
        out.append(
            _changed(
                f"dataset file {name} (sha256)",
                before and before[:12] + "...",
                after and after[:12] + "...",
            )
        )
    out.append(_changed("reader options", b_ds.get("options") or {}, r_ds.get("options") or {}))
    b_run, r_run = baseline["run"], result["run"]
    out.append(_changed("top-k", b_run.get("top_k"), r_run.get("top_k")))
    out.append(_changed("stores", b_run.get("store_mode"), r_run.get("store_mode")))
    names = lambda run: [m["name"] for m in run.get("measures", [])]  # noqa: E731
    out.append(_changed("measures", names(b_run), names(r_run)))
    return [line for line in out if line]


@dataclass
class BaselineDiff:
    """What `check` found: both documents, the baseline's path as given, the result's
    envelope fields beside `data` (`provenance`, `recallbench_version`), every differing
    path, the configuration changes, the paired comparison (a `compare_results` document
    with the baseline as reference; None when the two cannot be paired, `not_compared`
    says why), the headline measures and the `--fail-if-worse` findings."""

    baseline: dict[str, Any]
    result: dict[str, Any]
    where: str
    envelope: Mapping[str, Any] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    comparison: dict[str, Any] | None = None
    not_compared: str | None = None
    headline: list[str] = field(default_factory=list)
    worse: list[str] = field(default_factory=list)
    #: the decision of the baseline and of the result, each as `decide` prints it
    decisions: tuple[str, str] = ("", "")
    #: how to write the baseline again (`run \`make baseline\``), when the caller knows
    update: str | None = None

    @property
    def matches(self) -> bool:
        return not self.differences


def check(
    baseline_path: Path,
    result: Mapping[str, Any],
    *,
    gates: Sequence[tuple[str, float]] = (),
    seed: int = 0,
    resamples: int = 10_000,
    update: str | None = None,
) -> BaselineDiff:
    """Compare `result` (a result document or a results envelope, whose `provenance` is
    then used) with the baseline at `baseline_path`: see `BaselineDiff`. `gates` are
    `--fail-if-worse` (measure, margin) pairs (`compare.gate_failures`); a gated measure
    the result does not have is a one-line error. `update`: how to write this baseline
    again, for the next step (default: "write PATH again from this run")."""
    from recallbench.metrics.measures import preferred_measures
    from recallbench.report.result import mean_measures

    envelope = {k: v for k, v in result.items() if k != "data"} if "data" in result else {}
    # an envelope (a results.json), or a bare document as `load_result_envelope` wraps one
    doc = result["data"] if "data" in result else dict(result)
    base = load_result(baseline_path)
    names = list(mean_measures(doc))
    for measure, _ in gates:
        if measure not in names:
            raise RecallbenchError(
                f"--fail-if-worse {measure}: not a measure of this result; one of "
                f"{', '.join(names)}"
            )
    out = BaselineDiff(base, doc, str(baseline_path), envelope, differences(base, doc))
    out.headline = (preferred_measures(names, doc["run"]["top_k"]) or names)[:2]
    out.decisions = (_decision_line(base), _decision_line(doc))
    out.update = update
    if out.matches:
        return out
    out.changes = configuration_changes(base, doc)
    out.not_compared = comparable(base, doc)
    if out.not_compared is None:
        from recallbench.commands.compare import compare_results, gate_failures

        try:
            out.comparison = compare_results(
                [base, doc], [BASELINE_LABEL, RUN_LABEL], seed=seed, resamples=resamples
            )
        except RecallbenchError as exc:
            out.not_compared = str(exc)
        else:
            out.worse = gate_failures(out.comparison, gates)
    return out


def _decision_line(doc: Mapping[str, Any]) -> str:
    from recallbench.stages.decide import headline

    decision = doc.get("decision")
    try:
        return headline(decision)  # type: ignore[arg-type]
    except (KeyError, TypeError):
        return f"no decision recorded ({decision!r})"


def fail(found: BaselineDiff, markdown: Path | None = None) -> None:
    """Nothing when the result matches; else the story on stderr
    (`report.baseline_diff.terminal_sections`; `markdown`: the PR block written, named in
    the next step), then `WorseThanReference` (exit 4) when a `--fail-if-worse` gate fired,
    else `GateFailed` (exit 3) with the true count of differing values."""
    if found.matches:
        return
    from recallbench.report.baseline_diff import terminal_sections
    from recallbench.report.sections import to_terminal

    print(to_terminal(terminal_sections(found, markdown)), file=sys.stderr)
    from recallbench.commands.compare import fail_if_worse

    fail_if_worse(
        found.worse,
        f"--fail-if-worse: this run is significantly worse than {found.where} on "
        f"{len(found.worse)} gated measure(s) (above); it also differs in "
        f"{len(found.differences):,} place(s)",
    )
    raise GateFailed(
        f"result differs from {found.where} in {len(found.differences):,} place(s) (above)"
    )


def gate(baseline_path: Path, result: dict[str, Any]) -> None:
    """Raise GateFailed (exit 3) when `result` differs from the baseline at `baseline_path`,
    after printing what changed to stderr (`check`, `fail`)."""
    fail(check(baseline_path, result))
