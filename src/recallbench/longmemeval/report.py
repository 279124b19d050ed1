"""Render the lane's results as Markdown (the JSON is the source; this is a view of it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recallbench.longmemeval import type_sort_key

METRIC_COLUMNS = (
    ("recall@{k}", "recall@{k} (fractional)"),
    ("recall_any@{k}", "recall_any@{k}"),
    ("recall_all@{k}", "recall_all@{k}"),
    ("ndcg_any@{k}", "ndcg_any@{k}"),
)


def _fmt(cell: Mapping[str, Any], integer: bool) -> str:
    if cell["value"] is None:
        return "n/a (0 questions)"
    if integer:
        return f"{cell['value']:.4f} ({cell['numerator']}/{cell['denominator']})"
    return f"{cell['value']:.4f} ({cell['numerator']:.2f}/{cell['denominator']})"


def _metric_table(results: Mapping[str, Any], k: int) -> list[str]:
    header = ["scope", "questions", *(title.format(k=k) for _, title in METRIC_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    scopes = [("**overall**", results["metrics"]["overall"])]
    by_type = results["metrics"]["by_type"]
    scopes += [(t, by_type[t]) for t in sorted(by_type, key=type_sort_key)]
    for name, block in scopes:
        cells = [name, str(block["questions"])]
        for key, _ in METRIC_COLUMNS:
            metric = key.format(k=k)
            cells.append(_fmt(block["metrics"][metric], integer=metric.startswith("recall_a")))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(results: Mapping[str, Any], timing: Mapping[str, Any] | None) -> str:
    data = results["data_file"]
    counts = results["counts"]
    gold = results["gold"]
    system = results["system"]
    out: list[str] = ["# LongMemEval lane: session-level retrieval", ""]
    out += [
        "Session-level retrieval quality of the system under test on a LongMemEval file: each "
        "question gets a fresh store holding only its own haystack sessions (one session = one "
        "memory, opaque ids), one search with the question, and the ranked sessions are scored "
        "against the gold evidence sessions. This is retrieval, not question answering: no "
        "answer is generated or judged.",
        "",
        "## Data",
        "",
        f"- file: `{data['name']}`, {data['size_bytes']:,} bytes",
        f"- sha256: `{data['sha256']}`",
        f"- identified as: {data['release']}",
        f"- session text: `{results['session_text']}` "
        + (
            "(user turns joined by spaces, as LongMemEval's run_retrieval.py)"
            if results["session_text"] == "user"
            else "(every turn as `role: content`, one per line)"
        ),
        f"- search: top_k = {results['top_k']} per call (limit {results['search_limit']['max_per_call']:,}); "
        f"vectors: {results['vectors']}",
        "",
        "## Questions",
        "",
        f"- records in the file: {counts['records']}",
        f"- dropped, abstention: {counts['dropped_abstention']['count']} "
        f"({counts['dropped_abstention']['rule']})",
        f"- dropped, other: {len(counts['dropped_other'])}",
    ]
    for drop in counts["dropped_other"]:
        out.append(f"  - `{drop['question_id']}`: {drop['reason']}")
    out += [f"- **scored: {counts['scored']}** (the denominator of every overall figure)", ""]
    out += [
        "| question type | raw | dropped (abstention) | dropped (other) | scored |",
        "|---|---|---|---|---|",
    ]
    for qtype in sorted(counts["by_type"], key=type_sort_key):
        c = counts["by_type"][qtype]
        out.append(
            f"| {qtype} | {c['raw']} | {c['dropped_abstention']} | {c['dropped_other']} | {c['scored']} |"
        )
    if counts["dropped_abstention"]["question_ids"]:
        ids = ", ".join(f"`{q}`" for q in counts["dropped_abstention"]["question_ids"])
        out += ["", f"Abstention questions dropped: {ids}"]
    src = gold["source_counts"]
    out += [
        "",
        "## Gold",
        "",
        f"- rule: {gold['rule']}",
        f"- gold from answer_session_ids: {src['answer_session_ids']} questions; "
        f"from turn-level has_answer (fallback): {src['has_answer_turns']} questions",
        f"- answer_session_ids not found in their haystack (not counted): "
        f"{gold['answer_ids_not_in_haystack']}",
        f"- scored questions whose evidence has no user turn marked has_answer: "
        f"{gold['questions_without_user_side_evidence']} (LongMemEval's run_retrieval.py would "
        "skip these; they are scored here)",
    ]
    if gold.get("caveat"):
        out.append(f"- caveat: {gold['caveat']}")
    out += ["", "## Results", ""]
    out += [
        "Every figure is a mean over the questions in its row (the `questions` column is its "
        "denominator). recall@k = |gold ∩ top-k| / |gold| per question (the scope document's "
        "fractional recall); recall_any@k = 1 if any gold session is in the top k (hit rate); "
        "recall_all@k = 1 only if every gold session is; ndcg_any@k as LongMemEval's "
        "eval_utils.py (binary relevance, ranks 1 and 2 both undiscounted). In parentheses: "
        "numerator/denominator (summed per-question values / questions).",
        "",
    ]
    for k in results["k"]:
        out += [f"### k = {k}", "", *_metric_table(results, k), ""]
    out += ["## System", ""]
    for key in sorted(system):
        out.append(f"- {key}: `{system[key]}`")
    out += ["", "## Timing (local diagnostic, not a result)", ""]
    if timing:
        inside = timing["seconds_inside_system"]
        out += [
            f"- workers: {timing['workers']}; questions: {timing['questions']}; "
            f"stored memories: {timing['stored_memories']}",
            f"- wall time of the run stage: {timing['wall_seconds']:.2f} s "
            f"({timing['seconds_per_question'] * 1000:.1f} ms per question)",
            f"- time inside the system's calls: {inside:.2f} s; in tasks: "
            f"{timing['seconds_in_tasks']:.2f} s",
        ]
        if timing.get("harness_overhead_in_tasks") is not None:
            out.append(
                f"- harness overhead within tasks: {timing['harness_overhead_in_tasks'] * 100:.1f}% "
                "of the time inside the system; end to end (wall x workers): "
                f"{timing['harness_overhead_end_to_end'] * 100:.1f}%"
            )
    else:
        out.append("- no timing recorded for this run")
    out += [
        "",
        "Timings depend on this machine and its load; they are not part of results.json.",
        "",
    ]
    return "\n".join(out)
