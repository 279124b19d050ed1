"""Named protocols: one flag for a published definition of the figures.

Figures published on one dataset differ by definition as much as by ranker: the unit (one
memory per session or per turn), how k counts (k sessions, or the sessions of k turns), the
questions kept (LoCoMo's category 5, LongMemEval's abstention questions), the text rule and
the measure. A `Preset` names all of them, and the label that protocol gives each figure,
so `--preset NAME` reproduces its definition from this project's rankings (see
docs/protocols.md for the table and who uses which):

* ``longmemeval-paper``: the LongMemEval paper's retrieval table (run_retrieval.py): session
  text = the user turns joined by one space, gold by the official rule (`--gold official`),
  cutoffs k = 1, 3, 5, 10, 30, 50 (`--k`), results per question 50 (`--top-k`; at `--unit
  turn` the whole store, up to 10,000, since the session level's widened cutoff can reach
  past the 50th turn), and a summary that prints recall_all and ndcg_any first. The unit
  (the paper's two granularities) and the system stay the user's choice; `--system
  bm25-okapi` is the paper's BM25.
* ``longmemeval-all-questions``: any gold session in the top k sessions over all 500
  questions, abstention kept (`--abstention keep`), session text = the user turns.
* ``vipune-scope``: the vipune scope document's recall@k = |gold ∩ top-k| / |gold| at
  k = 1, 5, 10, one memory per session (its turns as ``role: content``), abstention
  dropped (470 pairs).
* ``locomo-sessions-of-top-turns``: one memory per turn, category 5 kept (`--categories
  all`), "any gold session among the sessions of the top k turns" (k counts turns).
* ``locomo-session-expanded``: one memory per turn, category 5 kept, "session-expanded
  strict@k" (every gold session among the sessions of the top k turns) and the raw
  turn-id any@k.

An option given beside a preset must agree with it (a one-line usage error otherwise); a
preset with measures of its own scores those instead of the dataset's (`--measure` beside
it is refused unless it names the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import click


@dataclass(frozen=True)
class Preset:
    name: str
    dataset: str
    #: what the figures count, in one line (--help, the protocols table, docs)
    computes: str
    #: who publishes figures this way (docs/protocols.md)
    used_by: str
    #: reader options (validate's): name -> value; `unit` when the protocol fixes it
    reader: Mapping[str, str]
    ks: tuple[int, ...] = (1, 5, 10)
    top_k: int = 10
    #: top-k at --unit turn
    turn_top_k: int = 10
    #: the measures the protocol reports, each (name with ``{k}``, the protocol's label with
    #: ``{k}``), at every k of `ks`; empty: the dataset's own measures
    measures: tuple[tuple[str, str], ...] = field(default=())

    def measure_names(self) -> tuple[str, ...]:
        """The preset's measures at each of its cutoffs (empty: the dataset's own)."""
        return tuple(name.format(k=k) for name, _ in self.measures for k in self.ks)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="longmemeval-paper",
            dataset="longmemeval",
            computes="LongMemEval's official recall_all@k, ndcg_any@k and recall_any@k, gold by "
            "its official rule (questions without gold scored vacuously); session text = the "
            "user turns",
            used_by="the LongMemEval paper's retrieval table (src/retrieval/run_retrieval.py)",
            reader={"session_text": "user", "gold": "official"},
            ks=(1, 3, 5, 10, 30, 50),
            top_k=50,
            turn_top_k=10_000,
        ),
        Preset(
            name="longmemeval-all-questions",
            dataset="longmemeval",
            computes="any gold session in the top k sessions (any-hit R@k) over every "
            "question, abstention kept; one memory per session, its user turns",
            used_by="store claims over all 500 questions (taosmd's any-hit R@5 on cleaned S; "
            "one such claim also cuts sessions to their user turns' first 512 characters)",
            reader={"unit": "session", "session_text": "user", "abstention": "keep"},
            measures=(("recall_any@{k}", "any-hit R@{k}"),),
        ),
        Preset(
            name="vipune-scope",
            dataset="longmemeval",
            computes="|gold ∩ top-k| / |gold| (fractional recall@k) over the questions "
            "without abstention; one memory per session, its turns as 'role: content'",
            used_by="the vipune scope document (vipune-longmemeval-scope.md, Decision 3)",
            reader={
                "unit": "session",
                "session_text": "all",
                "gold": "answer_session_ids",
                "abstention": "drop",
            },
            measures=(("recall@{k}", "recall@{k}"),),
        ),
        Preset(
            name="locomo-sessions-of-top-turns",
            dataset="locomo",
            computes="any gold session among the sessions of the top k turns (k counts "
            "turns); one memory per turn; category 5 kept",
            used_by="two popular turn-index harnesses (their own scoring code, category 5 "
            "kept: 1,978 questions of the real file)",
            reader={"unit": "turn", "categories": "all"},
            measures=(("turn_sessions_any@{k}", "any@{k}"),),
        ),
        Preset(
            name="locomo-session-expanded",
            dataset="locomo",
            computes="session-expanded strict@k (every gold session among the sessions of "
            "the top k turns) and turn-id any@k (an evidence turn in the top k turns); one "
            "memory per turn; category 5 kept",
            used_by="a third turn-index harness (its own scoring code)",
            reader={"unit": "turn", "categories": "all"},
            measures=(
                ("turn_sessions_all@{k}", "session-expanded strict@{k}"),
                ("turn_recall_any@{k}", "turn-id any@{k}"),
            ),
        ),
    )
}


#: the preset whose summary is LongMemEval's official one (`paper_summary`)
def _get(name: str) -> Preset:
    if name not in PRESETS:  # pragma: no cover - click.Choice checks it first
        raise click.UsageError(f"unknown preset {name!r}")
    return PRESETS[name]


def _for(name: str, dataset: str) -> Preset:
    preset = _get(name)
    if dataset != preset.dataset:
        raise click.UsageError(f"--preset {name} is for --dataset {preset.dataset}")
    return preset


def reader_options(name: str | None, dataset: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset options `values` (param -> value) with the preset's reader options
    applied; a usage error on a contradiction."""
    if name is None:
        return dict(values)
    preset = _for(name, dataset)
    for key, wanted in preset.reader.items():
        value = values.get(key)
        if value is not None and value != wanted:
            flag = "--" + key.replace("_", "-")
            raise click.UsageError(f"--preset {name} uses {flag} {wanted}, not {value}")
    return {**values, **preset.reader}


def check_suite(name: str | None, dataset: str, options: Mapping[str, Any]) -> None:
    """A usage error when a validated suite (its dataset and recorded reader `options`,
    where an option left out means the reader's default) was not read the preset's way."""
    if name is None:
        return
    from recallbench.datasets.base import dataset_spec

    preset = _for(name, dataset)
    defaults = {o.param: o.default for o in dataset_spec(dataset).options}
    for key, wanted in preset.reader.items():
        value = options.get(key, defaults.get(key))
        if value != wanted:
            flag = "--" + key.replace("_", "-")
            raise click.UsageError(
                f"--preset {name} uses {flag} {wanted}; the suite was validated with "
                f"{flag} {value}: run `recallbench validate --preset {name}` first"
            )


def resolve_top_k(
    name: str | None,
    dataset: str,
    top_k: int | None,
    ks: Sequence[int] | None,
    unit: str | None = None,
) -> tuple[int, tuple[int, ...] | None]:
    """The one resolution of a run's (top_k, cutoffs), for query, run, compare, protocols,
    `pipeline.run_pipeline` and scripts/retrieval_eval.py. With preset `name`: its cutoffs
    and its depth (its turn depth when `unit` is turn), a usage error when `ks` (--k)
    differs or `top_k` (--top-k) is below its largest cutoff. Otherwise `top_k` when
    given, else the largest of `ks`, else the dataset's default (its spec's `top_k`);
    `ks` as given (None: the dataset's own cutoffs)."""
    ks = None if ks is None else tuple(ks)
    if name is not None:
        preset = _for(name, dataset)
        if ks is not None and ks != preset.ks:
            wanted = ",".join(map(str, preset.ks))
            raise click.UsageError(f"--preset {name} uses --k {wanted}")
        if top_k is not None and top_k < max(preset.ks):
            raise click.UsageError(f"--preset {name} needs --top-k {max(preset.ks)} or more")
        ks = preset.ks
        top_k = top_k or (preset.turn_top_k if unit == "turn" else preset.top_k)
    if top_k is not None:
        return top_k, ks
    if ks:
        return max(ks), ks
    from recallbench.datasets.base import dataset_spec

    return dataset_spec(dataset).top_k, ks


def measure_names(name: str | None, measures: Sequence[str] | None) -> tuple[str, ...] | None:
    """The measures a run scores: the preset's own when it has them (a usage error when
    `--measure` names others), else `measures` (None: the dataset's)."""
    preset = None if name is None else _get(name)
    if preset is None or not preset.measures:
        return None if measures is None else tuple(measures)
    own = preset.measure_names()
    if measures is not None and sorted(measures) != sorted(own):
        raise click.UsageError(f"--preset {name} scores {', '.join(own)}; drop --measure")
    return own


def preset_help() -> str:
    """--preset's help: each preset and what it counts."""
    return "A published protocol: " + "; ".join(
        f"{p.name} ({p.dataset}): {p.computes}" for p in PRESETS.values()
    )


def presets_table() -> str:
    """docs/protocols.md's table of the presets (a test checks the committed one): name,
    dataset, unit, the questions kept, the text rule, the measures with their labels."""
    lines = [
        "| preset | dataset | unit | questions | text | measures (the protocol's label) |",
        "|---|---|---|---|---|---|",
    ]
    for p in PRESETS.values():
        unit = p.reader.get("unit", "yours (`--unit`)")
        if p.dataset == "locomo":
            kept = "categories 1-5" if p.reader.get("categories") == "all" else "categories 1-4"
        else:
            kept = "all" if p.reader.get("abstention") == "keep" else "abstention dropped"
        text = {"user": "user turns", "all": "every turn, `role: content`"}.get(
            p.reader.get("session_text", ""), "speaker: text (the default)"
        )
        ks = ", ".join(map(str, p.ks))
        if p.measures:
            shown = "; ".join(
                f"`{name.replace('{k}', 'k')}` ({label.replace('{k}', 'k')})"
                for name, label in p.measures
            )
        else:
            shown = "the dataset's, gold by the official rule"
        lines.append(f"| `{p.name}` | {p.dataset} | {unit} | {kept} | {text} | {shown}; k = {ks} |")
    return "\n".join(lines) + "\n"


def preset_summary(result: Mapping[str, Any], name: str) -> str:
    """The preset's figures under the protocol's own labels (LongMemEval's official summary
    for `longmemeval-paper`): the preset, what it counts, the questions behind each figure
    and, per measure, its label and value at each k."""
    preset = _get(name)
    if not preset.measures:
        return paper_summary(result)
    overall = result["metrics"]["overall"]
    lines = [f"{name}: {preset.computes}"]
    for template, label in preset.measures:
        names = [template.format(k=k) for k in preset.ks]
        cells = []
        for k, measure in zip(preset.ks, names, strict=True):
            value = (overall.get(measure) or {}).get("value")
            cells.append(f"{label.format(k=k)} {'n/a' if value is None else f'{value:.4f}'}")
        n = (overall.get(names[0]) or {}).get("denominator")
        lines.append(f"  {'  '.join(cells)}  ({n} questions)")
    return "\n".join(lines)


def paper_summary(result: Mapping[str, Any]) -> str:
    """The official summary's figures: per level, recall_all@k and ndcg_any@k (then
    recall_any@k) for each k, with each level's denominator and its vacuous-gold count."""
    from recallbench.metrics.measures import BY_STEM, RELEVANT_GRADE, select

    overall = result["metrics"]["overall"]
    summary = result.get("summary", {})
    vacuous = {
        "session": summary.get("questions_with_vacuous_gold"),
        "turn": summary.get("questions_with_vacuous_turn_gold"),
    }
    lines = []
    for level in result["dataset"]["levels"]:
        measures = [m for m in result["run"]["measures"] if m["level"] == level["name"]]
        if not measures:
            continue
        n = overall[measures[0]["name"]]["denominator"]
        count = f"{n} questions"
        if vacuous.get(level["name"]):
            count += f", {vacuous[level['name']]} of them with vacuous gold (recall_all 1, ndcg 0)"
        if measures[0].get("empty_gold") is None and "gold" in result["dataset"]["options"]:
            count += ", default rule: answer_session_ids"
        lines.append(f"{level['name']} level ({count}):")
        for k in sorted({m["k"] for m in measures}):
            cells = []
            for stem in ("recall_all", "ndcg_any", "recall_any"):
                # selected by fields; the measure's own name when the run did not score it
                absent = BY_STEM[stem](level["name"], k, level["prefix"]).name
                name = next(iter(select(measures, stem=stem, k=k, rel=RELEVANT_GRADE)), absent)
                value = overall.get(name, {}).get("value")
                # the official summary's label; the header line names the gold rule
                label = f"{level['prefix']}{stem}@{k}"
                cells.append(f"{label} {'n/a' if value is None else f'{value:.4f}'}")
            lines.append("  " + "  ".join(cells))
    return "\n".join(lines)
