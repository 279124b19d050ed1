"""Named option sets: one flag for a published protocol.

``--preset longmemeval-paper`` is the protocol of the LongMemEval paper's retrieval table
(src/retrieval/run_retrieval.py): session text = the user turns joined by one space, gold
by the official rule (`--gold official`), cutoffs k = 1, 3, 5, 10, 30, 50 (`--k`), results
per question 50 (`--top-k`; at `--unit turn` the whole store, up to 10,000, since the
session level's widened cutoff can reach past the 50th turn), and a summary that prints
recall_all and ndcg_any first. The
unit (`--unit session` or `turn`, the paper's two granularities) and the system stay the
user's choice; `--system bm25-okapi` is the paper's BM25. An option given beside the preset
must agree with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class Preset:
    name: str
    dataset: str
    #: reader options (validate's): name -> value
    reader: Mapping[str, str]
    ks: tuple[int, ...]
    top_k: int
    #: top-k at --unit turn
    turn_top_k: int


PRESETS: dict[str, Preset] = {
    "longmemeval-paper": Preset(
        name="longmemeval-paper",
        dataset="longmemeval",
        reader={"session_text": "user", "gold": "official"},
        ks=(1, 3, 5, 10, 30, 50),
        top_k=50,
        turn_top_k=10_000,
    ),
}


def _get(name: str) -> Preset:
    if name not in PRESETS:  # pragma: no cover - click.Choice checks it first
        raise click.UsageError(f"unknown preset {name!r}")
    return PRESETS[name]


def reader_options(name: str | None, dataset: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset options `values` (param -> value) with the preset's reader options
    applied; a usage error on a contradiction."""
    if name is None:
        return dict(values)
    preset = _get(name)
    if dataset != preset.dataset:
        raise click.UsageError(f"--preset {name} is for --dataset {preset.dataset}")
    for key, wanted in preset.reader.items():
        value = values.get(key)
        if value is not None and value != wanted:
            flag = "--" + key.replace("_", "-")
            raise click.UsageError(f"--preset {name} uses {flag} {wanted}, not {value}")
    return {**values, **preset.reader}


def run_options(
    name: str | None,
    dataset: str,
    top_k: int | None,
    ks: tuple[int, ...] | None,
    unit: str | None = None,
) -> tuple[int | None, tuple[int, ...] | None]:
    """(top_k, ks) with the preset applied; a usage error on a contradiction."""
    if name is None:
        return top_k, ks
    preset = _get(name)
    if dataset != preset.dataset:
        raise click.UsageError(f"--preset {name} is for --dataset {preset.dataset}")
    if ks is not None and tuple(ks) != preset.ks:
        wanted = ",".join(map(str, preset.ks))
        raise click.UsageError(f"--preset {name} uses --k {wanted}")
    if top_k is not None and top_k < max(preset.ks):
        raise click.UsageError(f"--preset {name} needs --top-k {max(preset.ks)} or more")
    return top_k or (preset.turn_top_k if unit == "turn" else preset.top_k), preset.ks


def default_top_k(top_k: int | None, ks: tuple[int, ...] | None) -> int | None:
    """Without --top-k, a run with --k searches deep enough for its largest k."""
    if top_k is None and ks:
        return max(ks)
    return top_k


def paper_summary(result: Mapping[str, Any]) -> str:
    """The official summary's figures: per level, recall_all@k and ndcg_any@k (then
    recall_any@k) for each k, with each level's denominator and its vacuous-gold count."""
    from recallbench.measures import BY_STEM, RELEVANT_GRADE, select

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
