"""The LongMemEval lane: session-level recall on the public long-term-memory benchmark.

Modules, in pipeline order:

* `reader`    streams a LongMemEval JSON file (one instance at a time), checks each record
              and recognises known releases by sha256.
* `pairs`     turns an instance into a scored pair (or a counted drop): one session = one
              memory under an opaque id, gold = the evidence sessions.
* `generator` writes format-faithful synthetic data for tests and benchmarks.
* `cache`     the prep phase's vector cache (float32, keyed by embedder identity + text hash).
* `executor`  runs per-question tasks serially or in processes, results in question order.
* `task`      what one worker does for one question: fresh store, ingest, search, delete.
* `official_metrics`  recall_any / recall_all / ndcg_any as LongMemEval's eval_utils.py
              defines them (re-implemented).
* `stages`    validate, prep, run (hydrate + query), score, report: artifacts in
              ``<build>/longmemeval/``.
* `pipeline`  `run_lane`, the in-process chain; `cli` the click group.
"""

#: The cutoffs reported (those not above the run's search limit).
K_VALUES: tuple[int, ...] = (1, 5, 10)
#: Per-call search limit of the scope document (MAX_SEARCH_LIMIT).
MAX_SEARCH_LIMIT = 10_000
DEFAULT_TOP_K = 10
SESSION_TEXT_MODES: tuple[str, ...] = ("user", "all")
LANE_DIR = "longmemeval"
#: The dataset's six question types, in its own order (report order; unknown types follow).
QUESTION_TYPES: tuple[str, ...] = (
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
)


def type_sort_key(question_type: str) -> tuple[int, str]:
    """Known types in the dataset's order, then any other type alphabetically."""
    if question_type in QUESTION_TYPES:
        return (QUESTION_TYPES.index(question_type), "")
    return (len(QUESTION_TYPES), question_type)
