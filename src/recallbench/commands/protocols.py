"""`recallbench protocols`: every published definition of LoCoMo's figures from one ranking
per unit, and what separates each from the default.

A figure's definition is four choices (`Definition`): the **unit** (one memory per session
or per turn), how **k counts** (k distinct sessions, or the sessions of k turns), the
**questions kept** (categories 1-4, or all five) and the **measure** (any gold session,
every gold session, any evidence turn). The default, recallbench's headline, is
``recall_any@k`` at the session unit over categories 1-4. Each protocol is the default,
one of recallbench's own options (``--unit turn``, ``--categories all``) or a preset
(`recallbench.commands.presets`) of another tool's definition.

The command runs the system once per unit, with every category scored (the two runs
share one work root; each unit's vector cache, when the system needs one, is made once and
kept under BUILD/vectors/protocols-<unit>/ for the next run), and reads every protocol's
figures from those two rankings: the questions a protocol keeps are selected from the
per-query values, so a figure over categories 1-4 is the default run's figure.

The difference of a protocol's figure from the default's is split into parts by changing
one choice at a time, in the order unit, k counting, questions kept, measure:

    figure - default = (unit) + (k counting) + (questions kept) + (measure)

each part the change in the figure when that one choice changes (the earlier ones already
changed). The parts are exact differences of the means (as fractions), so they sum to the
total difference exactly; the JSON records each rounded to a float.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.core.escape import html as escape_html
from recallbench.core.escape import markdown_cell, terminal
from recallbench.engine.tasks import Execution
from recallbench.metrics.measures import value_of

SCHEMA = "recallbench.protocols"
SCHEMA_VERSION = 1
#: the dataset `protocols` covers (the LongMemEval protocols are presets of `run`)
DATASET = "locomo"
DEFAULT_KS = (1, 5, 10)
#: the choices of a definition, in the order the difference is split
PARTS = ("unit", "k_counting", "questions", "measure")
PART_LABELS = {
    "unit": "unit",
    "k_counting": "k counting",
    "questions": "questions kept",
    "measure": "measure",
}
#: what a definition's measure counts, by (k counting, measure)
COUNTS = {
    ("sessions", "any"): "any gold session in the top k sessions",
    ("sessions", "all"): "every gold session in the top k sessions",
    ("turns", "any"): "any gold session among the sessions of the top k turns",
    ("turns", "all"): "every gold session among the sessions of the top k turns",
    ("turns", "turn-id any"): "any evidence turn in the top k turns",
}
#: the measure (prefix, stem) that computes each (k counting, measure)
_MEASURES = {
    ("sessions", "any"): ("", "recall_any"),
    ("sessions", "all"): ("", "recall_all"),
    ("turns", "any"): ("turn_", "sessions_any"),
    ("turns", "all"): ("turn_", "sessions_all"),
    ("turns", "turn-id any"): ("turn_", "recall_any"),
}


@dataclass(frozen=True)
class Definition:
    """One way to count a figure: unit ("session" or "turn"), k counting ("sessions": k
    distinct sessions, "turns": the sessions of k turns), questions ("1-4" or "all") and
    measure ("any", "all", "turn-id any")."""

    unit: str
    k_counting: str
    questions: str
    measure: str

    def __post_init__(self) -> None:
        if (self.k_counting, self.measure) not in _MEASURES or (
            self.unit == "session" and self.k_counting != "sessions"
        ):
            raise RecallbenchError(f"no measure computes {self}")

    def measure_name(self, k: int) -> str:
        """The measure that computes this definition at k, in its unit's run."""
        prefix, stem = _MEASURES[(self.k_counting, self.measure)]
        return f"{prefix}{stem}@{k}"

    @property
    def counts(self) -> str:
        return COUNTS[(self.k_counting, self.measure)]

    def path_from(self, start: Definition) -> list[tuple[str, Definition]]:
        """The definitions from `start` to this one, one choice changed at a time in the
        order of `PARTS`: (the part, the definition after it)."""
        steps, here = [], start
        for part in PARTS:
            here = replace(here, **{part: getattr(self, part)})
            steps.append((part, here))
        return steps


DEFAULT = Definition("session", "sessions", "1-4", "any")


@dataclass(frozen=True)
class Protocol:
    """A row group of the table: a name, how to get it, who uses it, its definitions (each
    with the protocol's label, ``{k}`` for the cutoff)."""

    name: str
    how: str
    used_by: str
    definitions: tuple[tuple[Definition, str], ...]


def locomo_protocols() -> list[Protocol]:
    """The default, recallbench's own two other definitions, and every LoCoMo preset with
    measures of its own (their definitions read from the preset's options and measures)."""
    from recallbench.commands.presets import PRESETS
    from recallbench.core.model import Level
    from recallbench.metrics.measures import parse

    out = [
        Protocol(
            "default",
            "recallbench run --dataset locomo",
            "recallbench's headline (categories 1-4, as most published retrieval figures)",
            ((DEFAULT, "recall_any@{k}"),),
        ),
        Protocol(
            "turn unit",
            "--unit turn",
            "recallbench at the turn unit (sessions ranked by their first retrieved turn, "
            "widened to k distinct sessions, as LongMemEval's turn2session)",
            ((Definition("turn", "sessions", "1-4", "any"), "recall_any@{k}"),),
        ),
        Protocol(
            "category 5 kept",
            "--categories all",
            "figures that keep the adversarial questions (memory-core-eval, store claims)",
            ((Definition("session", "sessions", "all", "any"), "recall_any@{k}"),),
        ),
    ]
    by_measure = {v: key for key, v in _MEASURES.items()}
    levels = [Level("session"), Level("turn", "turn_")]
    for preset in PRESETS.values():
        if preset.dataset != DATASET or not preset.measures:
            continue
        unit = preset.reader.get("unit", "session")
        questions = "all" if preset.reader.get("categories") == "all" else "1-4"
        definitions = []
        for template, label in preset.measures:
            measure = parse(template.format(k=1), levels)
            k_counting, what = by_measure[(measure.prefix, measure.stem)]
            definitions.append((Definition(unit, k_counting, questions, what), label))
        out.append(
            Protocol(preset.name, f"--preset {preset.name}", preset.used_by, tuple(definitions))
        )
    return out


# -- running ----------------------------------------------------------------------------


def runs_needed(protocols: Sequence[Protocol], ks: Sequence[int]) -> dict[str, list[str]]:
    """unit -> the measure names its run scores: every definition of every protocol and
    every step of its path from the default, at each k."""
    needed: dict[str, dict[str, None]] = {}
    for protocol in protocols:
        for definition, _ in protocol.definitions:
            for point in [DEFAULT, *(d for _, d in definition.path_from(DEFAULT))]:
                for k in ks:
                    needed.setdefault(point.unit, {})[point.measure_name(k)] = None
    return {unit: list(names) for unit, names in sorted(needed.items())}


def run_units(
    paths: Mapping[str, Path],
    system: str,
    needed: Mapping[str, Sequence[str]],
    *,
    top_k: int,
    parent: Path,
    execution: Execution | None = None,
    say: Callable[[str], Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """unit -> the result document of the system's run at that unit, every category scored,
    with the measures `needed` names. Each run works in a temporary directory under
    `parent` (removed after); each unit's vector cache, when the system needs one, lies
    under parent/vectors/protocols-<unit>/ (made once, reused by a later run)."""
    import tempfile

    from recallbench.commands.pipeline import run_pipeline
    from recallbench.systems.registry import resolve_system

    execution = execution or Execution()
    resolved = resolve_system(system)  # once for every unit's run
    results = {}
    for n, (unit, measures) in enumerate(needed.items(), start=1):
        if say is not None:
            say(f"running {system} at the {unit} unit ({n} of {len(needed)}) ...")
        chosen = replace(
            execution, cache=None, cache_root=Path(parent) / "vectors" / f"protocols-{unit}"
        )
        with tempfile.TemporaryDirectory(prefix="compare-", dir=parent) as work:
            run = run_pipeline(
                DATASET,
                paths,
                Path(work),
                options={"unit": unit, "categories": "all"},
                system=resolved,
                top_k=top_k,
                sample=1,  # the figures need no round trip; one scope still checks it
                execution=chosen,
                measures=measures,
            )
            results[unit] = run.result
            run.close()
    return results


# -- the figures ---------------------------------------------------------------------------


def figure(result: Mapping[str, Any], definition: Definition, k: int) -> tuple[Fraction, int]:
    """(the mean as an exact fraction, the questions behind it): the definition's measure
    over the questions it keeps (category 5 left out for "1-4")."""
    name = definition.measure_name(k)
    values = [
        value_of(q["metrics"][name])
        for q in result["queries"]
        if definition.questions == "all" or q["category"] != "5"
    ]
    values = [v for v in values if v is not None]
    if not values:
        raise RecallbenchError(f"no question is scored by {name} ({definition.questions})")
    return sum((Fraction(v) for v in values), Fraction(0)) / len(values), len(values)


def protocols_document(
    results: Mapping[str, Mapping[str, Any]],
    protocols: Sequence[Protocol],
    ks: Sequence[int],
    top_k: int,
) -> dict[str, Any]:
    """The protocols document (protocols.json): the data and system, each protocol's
    figures at each k with its difference from the default and the difference's parts."""
    first = next(iter(results.values()))
    rows = []
    for protocol in protocols:
        definitions = []
        for definition, label in protocol.definitions:
            figures = []
            for k in ks:
                base, _ = figure(results[DEFAULT.unit], DEFAULT, k)
                value, n = figure(results[definition.unit], definition, k)
                parts, here = {}, base
                for part, point in definition.path_from(DEFAULT):
                    after, _ = figure(results[point.unit], point, k)
                    parts[part] = after - here
                    here = after
                if sum(parts.values()) != value - base:  # pragma: no cover - telescoping
                    raise AssertionError("the parts do not sum to the difference")
                figures.append(
                    {
                        "k": k,
                        "label": label.format(k=k),
                        "measure": definition.measure_name(k),
                        "value": float(value),
                        "questions": n,
                        "difference": float(value - base),
                        "parts": {part: float(d) for part, d in parts.items()},
                    }
                )
            definitions.append(
                {
                    "unit": definition.unit,
                    "k_counting": definition.k_counting,
                    "questions": definition.questions,
                    "measure": definition.measure,
                    "counts": definition.counts,
                    "figures": figures,
                }
            )
        rows.append(
            {
                "name": protocol.name,
                "how": protocol.how,
                "used_by": protocol.used_by,
                "definitions": definitions,
            }
        )
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "dataset": {
            "dataset": first["dataset"]["dataset"],
            "identity": first["dataset"]["identity"],
        },
        "system": first["system"]["name"],
        "top_k": top_k,
        "ks": list(ks),
        "default": "default",
        "parts": list(PARTS),
        "runs": [
            {"unit": unit, "options": r["dataset"]["options"], "queries": r["counts"]["queries"]}
            for unit, r in results.items()
        ],
        "protocols": rows,
        "notes": [
            "difference = figure - default (recall_any@k, session unit, categories 1-4), split "
            "as unit + k counting + questions kept + measure: each part the change when that "
            "one choice changes, in that order; the parts sum to the difference.",
            "The rankings are the system's, one run per unit; every figure is read from them, "
            "so two protocols differ only by definition, never by ranker.",
        ],
    }


# -- rendering -------------------------------------------------------------------------------

_HEADER = (
    "protocol",
    "what it counts",
    "unit",
    "questions",
    "figure",
    "value",
    "difference",
    "= unit",
    "+ k counting",
    "+ questions kept",
    "+ measure",
)


def table_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """The table's rows (raw text): one per protocol, definition and k."""
    rows = []
    for protocol in doc["protocols"]:
        for definition in protocol["definitions"]:
            kept = "1-5" if definition["questions"] == "all" else "1-4"
            for f in definition["figures"]:
                rows.append(
                    [
                        protocol["name"],
                        definition["counts"],
                        definition["unit"],
                        f"{kept} ({f['questions']:,})",
                        f["label"],
                        f"{f['value']:.3f}",
                        _signed(f["difference"]),
                        *(_signed(f["parts"][part]) for part in PARTS),
                    ]
                )
    return rows


def _signed(x: float) -> str:
    return "0" if x == 0 else f"{x:+.3f}"


def render_text(doc: Mapping[str, Any]) -> str:
    """The terminal's table (every cell escaped for the terminal)."""
    rows = [list(_HEADER)] + [[terminal(c) for c in row] for row in table_rows(doc)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    numeric = {5, 6, 7, 8, 9, 10}
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in numeric and n else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.insert(0, _caption(doc, terminal))
    return "\n".join(lines)


def _caption(doc: Mapping[str, Any], esc: Callable[[Any], str]) -> str:
    label = doc["dataset"]["identity"].get("label", "")
    return (
        f"{esc(doc['system'])} on {esc(label)}: difference = unit + k counting + "
        "questions kept + measure (from the default)"
    )


def render_markdown(doc: Mapping[str, Any]) -> str:
    """protocols.md: the table, how to get each protocol and who uses it (every string
    from data escaped as a Markdown cell)."""
    lines = [
        "# Protocols",
        "",
        markdown_cell(_caption(doc, str)),
        "",
        "| " + " | ".join(markdown_cell(h) for h in _HEADER) + " |",
        "|" + "---|" * len(_HEADER),
    ]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in table_rows(doc)]
    lines += ["", "| protocol | how | used by |", "|---|---|---|"]
    for protocol in doc["protocols"]:
        cells = (protocol["name"], protocol["how"], protocol["used_by"])
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    lines += [""] + [f"- {markdown_cell(note)}" for note in doc["notes"]]
    return "\n".join(lines) + "\n"


def render_html(doc: Mapping[str, Any]) -> str:
    """protocols.html: the same tables as one page, self-contained (every string from data
    escaped as HTML text)."""
    head = "".join(f"<th>{escape_html(h)}</th>" for h in _HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape_html(c)}</td>" for c in row) + "</tr>"
        for row in table_rows(doc)
    )
    how = "".join(
        "<tr>"
        + "".join(f"<td>{escape_html(c)}</td>" for c in (p["name"], p["how"], p["used_by"]))
        + "</tr>"
        for p in doc["protocols"]
    )
    notes = "".join(f"<li>{escape_html(n)}</li>" for n in doc["notes"])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>recallbench protocols</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}"
        "</style></head><body>"
        f"<h1>Protocols</h1><p>{escape_html(_caption(doc, str))}</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "<h2>How to get each, who uses it</h2>"
        "<table><thead><tr><th>protocol</th><th>how</th><th>used by</th></tr></thead>"
        f"<tbody>{how}</tbody></table><ul>{notes}</ul></body></html>\n"
    )


def run_protocols(
    paths: Mapping[str, Path],
    system: str,
    *,
    ks: Sequence[int],
    top_k: int,
    parent: Path,
    execution: Execution | None = None,
    say: Callable[[str], Any] | None = None,
) -> tuple[dict[str, Any], float]:
    """Run what every LoCoMo protocol needs and return (the protocols document, the
    seconds it took)."""
    started = time.perf_counter()
    if any(k > top_k for k in ks):
        raise RecallbenchError(f"--k: every k must be at most --top-k {top_k}")
    protocols = locomo_protocols()
    needed = runs_needed(protocols, ks)
    results = run_units(
        paths, system, needed, top_k=top_k, parent=parent, execution=execution, say=say
    )
    doc = protocols_document(results, protocols, ks, top_k)
    return doc, time.perf_counter() - started
