"""The lane's stages as functions from artifacts to artifacts, under ``<build>/longmemeval/``.

::

    FILE ──validate──> validate.json         counts, drops and why, gold sources, release
    FILE ──prep──────> CACHE/                 one float32 vector per distinct text (optional)
    FILE ──run───────> runs.json + timing.json   per question: fresh store (hydrate),
                                                  one search (query), store deleted
         ──score─────> scores.json            recall@k, recall_any@k, recall_all@k, ndcg_any@k
         ──report────> results.json + report.md

Hydrate and query run inside one per-question task (`task.run_question`) because each
question's store is throwaway: keeping 470-500 SQLite files between two commands would
cost disk and time and prove nothing more. Every artifact is an envelope (kind, schema
version, fingerprint of its data, fingerprints of its inputs); a stage refuses a missing,
foreign or stale upstream artifact with a line naming the command to rerun. `timing.json`
is a local diagnostic and never an input of score or report's normalised results.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from recallbench import __version__
from recallbench.artifacts import atomic_write_bytes, dumps, envelope, load_envelope
from recallbench.artifacts import require_made_from as check_made_from
from recallbench.errors import ArtifactError, RecallbenchError
from recallbench.longmemeval import (
    DEFAULT_TOP_K,
    K_VALUES,
    LANE_DIR,
    MAX_SEARCH_LIMIT,
    SESSION_TEXT_MODES,
    official_metrics,
    task,
    type_sort_key,
)
from recallbench.longmemeval.cache import CacheWriter, VectorCache, text_key
from recallbench.longmemeval.executor import make_executor
from recallbench.longmemeval.pairs import (
    GOLD_FROM_SESSIONS,
    GOLD_FROM_TURNS,
    Drop,
    Pair,
    classify,
    make_pair,
)
from recallbench.longmemeval.reader import DataFile, describe_file, identify, progress_enabled
from recallbench.metrics import RELEVANT_GRADE, recall_at_k, total
from recallbench.systems import DEFAULT_SYSTEM, get_system

#: kind -> (file name in <build>/longmemeval/, command that makes it)
KINDS: dict[str, tuple[str, str]] = {
    "longmemeval-validate": ("validate.json", "recallbench longmemeval validate FILE"),
    "longmemeval-runs": ("runs.json", "recallbench longmemeval run FILE"),
    "longmemeval-scores": ("scores.json", "recallbench longmemeval score"),
    "longmemeval-results": ("results.json", "recallbench longmemeval report"),
}
TIMING = "timing.json"
PREP_TIMING = "prep_timing.json"
REPORT_MD = "report.md"
FALLBACK_CAVEAT = (
    "gold for some questions was aggregated from turn-level has_answer labels (no "
    "answer_session_ids): it is only as complete as those labels"
)

Log = Callable[[str], None]


def _quiet_log(message: str) -> None:
    pass


# -- artifacts --------------------------------------------------------------------------


def lane_dir(build_dir: Path) -> Path:
    return Path(build_dir) / LANE_DIR


def artifact_file(build_dir: Path, kind: str) -> Path:
    return lane_dir(build_dir) / KINDS[kind][0]


def write_lane_artifact(
    build_dir: Path, kind: str, data: Mapping[str, Any], inputs: Mapping[str, str]
) -> dict[str, Any]:
    env = envelope(kind, data, inputs)
    atomic_write_bytes(artifact_file(build_dir, kind), dumps(env))
    return env


def read_lane_artifact(build_dir: Path, kind: str) -> dict[str, Any]:
    """Read a lane artifact, checking kind, schema version and fingerprint."""
    return load_envelope(artifact_file(build_dir, kind), kind, KINDS[kind][1])


def require_made_from(env: Mapping[str, Any], *upstreams: Mapping[str, Any]) -> None:
    check_made_from(env, *upstreams, registry=KINDS)


@contextmanager
def _bar(total: int | None, desc: str, unit: str, quiet: bool, **extra: Any) -> Iterator[tqdm]:
    bar = tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=not progress_enabled(quiet),
        leave=False,
        dynamic_ncols=True,
        **extra,
    )
    try:
        yield bar
    finally:
        bar.close()


def _announce(meta: Mapping[str, Any], path: Path, log: Log, warn: Log) -> None:
    if meta["known"]:
        log(f"{path}: loaded {meta['label']}")
    else:
        warn(
            f"warning: {path}: {meta['label']}; results are not comparable with published "
            "LongMemEval numbers"
        )


# -- validate ---------------------------------------------------------------------------


def validate(
    data_file: Path,
    *,
    build_dir: Path,
    quiet: bool = False,
    log: Log = _quiet_log,
    warn: Log = _quiet_log,
) -> dict[str, Any]:
    """Stream the file once: check every record, count and classify the questions."""
    source = DataFile(data_file)
    raw_types: Counter[str] = Counter()
    scored_types: Counter[str] = Counter()
    abstention: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    gold_sources: Counter[str] = Counter()
    missing_gold_ids = 0
    questions_missing_gold = 0
    duplicate_ids = 0
    questions_with_duplicates = 0
    no_user_side = 0
    no_labels = 0
    gold_sizes: Counter[int] = Counter()
    sessions_per_question: list[int] = []
    distinct: set[bytes] = set()
    first_seen: dict[str, int] = {}
    with _bar(source.size, "validate", "B", quiet, unit_scale=True, unit_divisor=1024) as bar:
        for inst in source.instances(progress=bar.update):
            if inst.question_id in first_seen:
                raise RecallbenchError(
                    f"{source.path}: record[{inst.index}]: duplicate question_id "
                    f"{inst.question_id!r} (first at record[{first_seen[inst.question_id]}])"
                )
            first_seen[inst.question_id] = inst.index
            raw_types[inst.question_type] += 1
            sessions_per_question.append(len(inst.session_ids))
            distinct.update(text_key(sid)[:16] for sid in inst.session_ids)
            verdict = classify(inst)
            if isinstance(verdict, Drop):
                entry = {
                    "index": verdict.index,
                    "question_id": verdict.question_id,
                    "question_type": verdict.question_type,
                }
                if verdict.category == "abstention":
                    abstention.append(entry)
                else:
                    other.append({**entry, "reason": verdict.reason})
                continue
            scored_types[inst.question_type] += 1
            gold_sources[verdict.source] += 1
            gold_sizes[len(verdict.gold)] += 1
            if verdict.missing:
                missing_gold_ids += len(verdict.missing)
                questions_missing_gold += 1
            if verdict.duplicate_ids:
                duplicate_ids += verdict.duplicate_ids
                questions_with_duplicates += 1
            if verdict.user_side_evidence is False:
                no_user_side += 1
            elif verdict.user_side_evidence is None:
                no_labels += 1
    assert source.sha256 is not None
    meta = identify(source.path, source.sha256)
    _announce(meta, source.path, log, warn)
    types = sorted(raw_types, key=type_sort_key)
    abstention_by_type = Counter(d["question_type"] for d in abstention)
    other_by_type = Counter(d["question_type"] for d in other)
    scored = sum(scored_types.values())
    data = {
        "data_file": {**describe_file(source.path, source.sha256, source.size), "identity": meta},
        "records": source.records,
        "scored": scored,
        "dropped": {
            "abstention": {
                "count": len(abstention),
                "rule": "'_abs' in question_id: abstention questions have no evidence location",
                "questions": abstention,
            },
            "other": {"count": len(other), "questions": other},
        },
        "question_types": {
            t: {
                "raw": raw_types[t],
                "dropped_abstention": abstention_by_type[t],
                "dropped_other": other_by_type[t],
                "scored": scored_types[t],
            }
            for t in types
        },
        "gold": {
            "source_counts": {
                GOLD_FROM_SESSIONS: gold_sources[GOLD_FROM_SESSIONS],
                GOLD_FROM_TURNS: gold_sources[GOLD_FROM_TURNS],
            },
            "gold_sessions_per_question": {str(k): v for k, v in sorted(gold_sizes.items())},
            "answer_ids_not_in_haystack": missing_gold_ids,
            "questions_with_answer_ids_not_in_haystack": questions_missing_gold,
            "questions_without_user_side_evidence": no_user_side,
            "questions_without_has_answer_labels": no_labels,
        },
        "haystack": {
            "sessions_total": sum(sessions_per_question),
            "sessions_min": min(sessions_per_question),
            "sessions_median": statistics.median(sessions_per_question),
            "sessions_max": max(sessions_per_question),
            "distinct_session_ids": len(distinct),
            "duplicate_session_ids_ignored": duplicate_ids,
            "questions_with_duplicate_session_ids": questions_with_duplicates,
        },
    }
    if scored == 0:
        raise RecallbenchError(f"{source.path}: no question left to score after the drops")
    return write_lane_artifact(build_dir, "longmemeval-validate", data, {})


def _check_same_file(source: DataFile, validated: Mapping[str, Any]) -> None:
    recorded = validated["data"]["data_file"]
    if source.size != recorded["size_bytes"]:
        raise ArtifactError(
            f"{source.path}: not the file validate.json was made from "
            f"({source.size} bytes, validated {recorded['name']} had {recorded['size_bytes']}); "
            "run `recallbench longmemeval validate FILE` first"
        )


def _check_same_digest(source: DataFile, validated: Mapping[str, Any]) -> None:
    if source.sha256 != validated["data"]["data_file"]["sha256"]:
        raise ArtifactError(
            f"{source.path}: changed since validate (sha256 differs); "
            "run `recallbench longmemeval validate FILE` again"
        )


def _check_mode(session_text: str) -> None:
    if session_text not in SESSION_TEXT_MODES:
        raise RecallbenchError(
            f"--session-text must be one of {', '.join(SESSION_TEXT_MODES)}, not {session_text!r}"
        )


def _pairs(
    source: DataFile, session_text: str, progress: Callable[[int], Any] | None = None
) -> Iterator[Pair]:
    for inst in source.instances(progress=progress):
        pair = make_pair(inst, session_text)
        if isinstance(pair, Pair):
            yield pair


# -- prep -------------------------------------------------------------------------------

PREP_BATCH = 64


def prep(
    data_file: Path,
    *,
    cache_dir: Path,
    build_dir: Path,
    workers: int = 1,
    session_text: str = "user",
    system: str = DEFAULT_SYSTEM,
    quiet: bool = False,
    log: Log = _quiet_log,
    warn: Log = _quiet_log,
) -> dict[str, Any]:
    """Embed every distinct session text of the scored pairs, and every question, once.

    Returns {"manifest": ..., "timing": ...}. Needs validate.json for the file.
    """
    _check_mode(session_text)
    validated = read_lane_artifact(build_dir, "longmemeval-validate")
    source = DataFile(data_file)
    _check_same_file(source, validated)
    parent_system = get_system(system)
    identity = parent_system.embedder_identity()
    writer = CacheWriter(Path(cache_dir), identity)
    seen: set[bytes] = set()
    counts = Counter()
    batches: deque[list[bytes]] = deque()
    started = time.perf_counter()
    inside = 0.0
    task_seconds = 0.0

    def texts_to_embed() -> Iterator[list[str]]:
        batch: list[str] = []
        keys: list[bytes] = []
        for pair in _pairs(source, session_text):
            counts["questions"] += 1
            candidates = [(pair.question, "question_texts")]
            candidates += [(d.text, "session_texts") for d in pair.documents]
            for text, what in candidates:
                counts[f"{what}_seen"] += 1
                key = text_key(text)
                if key in seen:
                    continue
                seen.add(key)
                counts[f"distinct_{what}"] += 1
                batch.append(text)
                keys.append(key)
                if len(batch) >= PREP_BATCH:
                    batches.append(keys)
                    yield batch
                    batch, keys = [], []
        if batch:
            batches.append(keys)
            yield batch

    config = {"system": system, "work_dir": None, "cache": None}
    try:
        with (
            _bar(validated["data"]["scored"], "prep", "q", quiet) as bar,
            make_executor(workers, task.init_worker, (config,), task.close_worker) as executor,
        ):
            done_questions = 0
            for result in executor.map_questions(task.embed_batch, texts_to_embed()):
                keys = batches.popleft()
                writer.add(keys, result["blob"], result["dimension"])
                inside += result["seconds_inside"]
                task_seconds += result["seconds_task"]
                bar.update(counts["questions"] - done_questions)
                done_questions = counts["questions"]
    except BaseException:
        writer.abort()
        raise
    _check_same_digest(source, validated)
    wall = time.perf_counter() - started
    manifest = writer.finish(
        {
            "data_file": {
                "name": source.path.name,
                "sha256": source.sha256,
                "size_bytes": source.size,
            },
            "session_text": session_text,
            "system": system,
            "texts": {
                "questions": counts["questions"],
                "question_texts_seen": counts["question_texts_seen"],
                "session_texts_seen": counts["session_texts_seen"],
                "distinct_question_texts": counts["distinct_question_texts"],
                "distinct_session_texts": counts["distinct_session_texts"],
            },
            "recallbench_version": __version__,
        }
    )
    log(
        f"{cache_dir}: {manifest['count']} vectors ({identity}, --session-text {session_text}) "
        f"in {wall:.1f} s"
    )
    timing = {
        "label": "local diagnostic: wall time on this machine, not a result",
        "workers": workers,
        "questions": counts["questions"],
        "wall_seconds": wall,
        "seconds_inside_system": inside,
        "seconds_in_tasks": task_seconds,
        "texts_embedded": manifest["count"],
        "harness_overhead_in_tasks": (task_seconds - inside) / inside if inside else None,
        "harness_overhead_end_to_end": (wall * workers - inside) / inside if inside else None,
    }
    atomic_write_bytes(lane_dir(build_dir) / PREP_TIMING, dumps(timing))
    return {"manifest": manifest, "timing": timing}


# -- run (hydrate + query) --------------------------------------------------------------


def run(
    data_file: Path,
    *,
    build_dir: Path,
    cache_dir: Path | None = None,
    workers: int = 1,
    session_text: str = "user",
    top_k: int = DEFAULT_TOP_K,
    system: str = DEFAULT_SYSTEM,
    quiet: bool = False,
    log: Log = _quiet_log,
    warn: Log = _quiet_log,
    keep_stores: bool = False,
) -> dict[str, Any]:
    """Every scored pair: fresh store, ingest its sessions, one search; rankings in order.

    `keep_stores` (tests only) leaves each question's store on disk under
    ``<build>/longmemeval/work/`` for inspection.
    """
    _check_mode(session_text)
    if not 1 <= top_k <= MAX_SEARCH_LIMIT:
        raise RecallbenchError(
            f"--top-k must be between 1 and {MAX_SEARCH_LIMIT} (the per-call search limit)"
        )
    if workers < 1:
        raise RecallbenchError("--workers must be at least 1")
    validated = read_lane_artifact(build_dir, "longmemeval-validate")
    source = DataFile(data_file)
    _check_same_file(source, validated)
    data_sha = validated["data"]["data_file"]["sha256"]
    parent_system = get_system(system)
    identity = parent_system.embedder_identity()
    cache_spec = None
    if cache_dir is not None:
        # full check (incl. the files' sha256) once here; workers only re-check identity
        VectorCache.open(
            Path(cache_dir),
            embedder_identity=identity,
            data_sha256=data_sha,
            session_text=session_text,
        ).close()
        cache_spec = {
            "directory": str(Path(cache_dir).resolve()),
            "embedder_identity": identity,
            "data_sha256": data_sha,
            "session_text": session_text,
        }
    work_dir = lane_dir(build_dir) / "work"
    work_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "system": system,
        "work_dir": str(work_dir.resolve()),
        "cache": cache_spec,
        "keep_stores": keep_stores,
    }
    pending: dict[int, Pair] = {}

    def items() -> Iterator[dict[str, Any]]:
        for pair in _pairs(source, session_text):
            pending[pair.index] = pair
            yield {**pair.payload(), "top_k": top_k}

    questions: list[dict[str, Any]] = []
    inside = 0.0
    task_seconds = 0.0
    rows = 0
    started = time.perf_counter()
    with (
        _bar(validated["data"]["scored"], "run", "q", quiet) as bar,
        make_executor(workers, task.init_worker, (config,), task.close_worker) as executor,
    ):
        for result in executor.map_questions(task.run_question, items()):
            pair = pending.pop(result["index"])
            memory_ids = [memory_id for memory_id, _ in result["hits"]]
            score_of = dict(result["hits"])
            ranking = pair.sessions_for(memory_ids, top_k)
            by_session = {sid: d.memory_id for d in pair.documents for sid in d.session_ids}
            questions.append(
                {
                    "index": pair.index,
                    "question_id": pair.question_id,
                    "question_type": pair.question_type,
                    "gold": list(pair.gold),
                    "gold_source": pair.gold_source,
                    "sessions": pair.sessions,
                    "stored_memories": len(pair.documents),
                    "ranking": ranking,
                    "scores": [score_of[by_session[sid]] for sid in ranking],
                }
            )
            inside += result["seconds_inside"]
            task_seconds += result["seconds_task"]
            rows += result["rows"]
            bar.update(1)
    wall = time.perf_counter() - started
    if not keep_stores:  # workers' (empty) directories; each store was deleted after use
        shutil.rmtree(work_dir, ignore_errors=True)
    _check_same_digest(source, validated)
    if len(questions) != validated["data"]["scored"]:  # pragma: no cover - same rules
        raise RecallbenchError(
            f"{source.path}: run scored {len(questions)} questions, validate counted {validated['data']['scored']}"
        )
    data = {
        "data_sha256": data_sha,
        "session_text": session_text,
        "top_k": top_k,
        "search_limit": {"per_call": top_k, "max_per_call": MAX_SEARCH_LIMIT},
        "system": {"name": parent_system.name, **parent_system.configuration()},
        "embedder_identity": identity,
        "vectors": "cache" if cache_spec else "inline",
        "questions": questions,
    }
    env = write_lane_artifact(
        build_dir, "longmemeval-runs", data, {"longmemeval-validate": validated["fingerprint"]}
    )
    timing = {
        "label": "local diagnostic: wall time on this machine, not a result",
        "runs_fingerprint": env["fingerprint"],
        "workers": workers,
        "questions": len(questions),
        "stored_memories": rows,
        "wall_seconds": wall,
        "seconds_inside_system": inside,
        "seconds_in_tasks": task_seconds,
        "harness_overhead_in_tasks": (task_seconds - inside) / inside if inside else None,
        "harness_overhead_end_to_end": (wall * workers - inside) / inside if inside else None,
        "share_inside_system": inside / (wall * workers) if wall else None,
        "seconds_per_question": wall / len(questions) if questions else None,
    }
    atomic_write_bytes(lane_dir(build_dir) / TIMING, dumps(timing))
    log(f"run: {len(questions)} questions in {wall:.1f} s with {workers} worker(s)")
    return env


# -- score ------------------------------------------------------------------------------


def _cell_mean(values: list[float]) -> dict[str, Any]:
    n = len(values)
    s = math.fsum(values)
    return {"value": s / n if n else None, "numerator": s, "denominator": n}


def _cell_count(values: list[float]) -> dict[str, Any]:
    n = len(values)
    hits = int(sum(values))
    return {"value": hits / n if n else None, "numerator": hits, "denominator": n}


def question_metrics(ranking: list[str], gold: list[str], ks: tuple[int, ...]) -> dict[str, Any]:
    """Every metric of one question at every k, from its ranking (dataset ids) and gold."""
    grades = {g: RELEVANT_GRADE for g in gold}
    out: dict[str, Any] = {}
    for k in ks:
        ratio = recall_at_k(ranking, grades, k)
        any_, all_, ndcg = official_metrics.evaluate_ids(ranking, gold, k)
        out[f"recall@{k}"] = ratio.value if ratio is not None else None
        out[f"gold_found@{k}"] = ratio.numerator if ratio is not None else 0
        out[f"recall_any@{k}"] = any_
        out[f"recall_all@{k}"] = all_
        out[f"ndcg_any@{k}"] = ndcg
    return out


def _aggregate(rows: list[dict[str, Any]], ks: tuple[int, ...]) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for k in ks:
        metrics[f"recall@{k}"] = _cell_mean([r[f"recall@{k}"] for r in rows])
        pooled = total(
            recall_at_k(r["ranking"], {g: RELEVANT_GRADE for g in r["gold"]}, k) for r in rows
        )
        metrics[f"recall_pooled@{k}"] = pooled.to_dict()
        metrics[f"recall_any@{k}"] = _cell_count([r[f"recall_any@{k}"] for r in rows])
        metrics[f"recall_all@{k}"] = _cell_count([r[f"recall_all@{k}"] for r in rows])
        metrics[f"ndcg_any@{k}"] = _cell_mean([r[f"ndcg_any@{k}"] for r in rows])
    return {"questions": len(rows), "metrics": metrics}


def score(*, build_dir: Path) -> dict[str, Any]:
    """recall@k (fractional), recall_any@k, recall_all@k, ndcg_any@k: overall and per type."""
    validated = read_lane_artifact(build_dir, "longmemeval-validate")
    runs = read_lane_artifact(build_dir, "longmemeval-runs")
    require_made_from(runs, validated)
    top_k = runs["data"]["top_k"]
    ks = tuple(k for k in K_VALUES if k <= top_k)
    rows = []
    for q in runs["data"]["questions"]:
        rows.append({**q, **question_metrics(q["ranking"], q["gold"], ks)})
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_type.setdefault(r["question_type"], []).append(r)
    data = {
        "k": list(ks),
        "overall": _aggregate(rows, ks),
        "by_type": {t: _aggregate(by_type[t], ks) for t in sorted(by_type, key=type_sort_key)},
        "per_question": [
            {
                "question_id": r["question_id"],
                "question_type": r["question_type"],
                "gold": len(r["gold"]),
                **{key: r[key] for key in r if "@" in key},
            }
            for r in rows
        ],
    }
    inputs = {
        "longmemeval-validate": validated["fingerprint"],
        "longmemeval-runs": runs["fingerprint"],
    }
    return write_lane_artifact(build_dir, "longmemeval-scores", data, inputs)


# -- report -----------------------------------------------------------------------------


def read_timing(build_dir: Path, runs_fingerprint: str | None = None) -> dict[str, Any] | None:
    path = lane_dir(build_dir) / TIMING
    if not path.is_file():
        return None
    try:
        timing = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None
    if runs_fingerprint is not None and timing.get("runs_fingerprint") != runs_fingerprint:
        return None
    return timing


def report(*, build_dir: Path) -> dict[str, Any]:
    """results.json (normalised: nothing machine-specific) and report.md (adds timings)."""
    from recallbench.longmemeval.report import render_markdown

    validated = read_lane_artifact(build_dir, "longmemeval-validate")
    runs = read_lane_artifact(build_dir, "longmemeval-runs")
    scores = read_lane_artifact(build_dir, "longmemeval-scores")
    require_made_from(runs, validated)
    require_made_from(scores, validated, runs)
    v, r, s = validated["data"], runs["data"], scores["data"]
    fallback = v["gold"]["source_counts"][GOLD_FROM_TURNS] > 0
    results = {
        "lane": "longmemeval",
        "recallbench_version": __version__,
        "data_file": {
            "name": v["data_file"]["name"],
            "sha256": v["data_file"]["sha256"],
            "size_bytes": v["data_file"]["size_bytes"],
            "release": v["data_file"]["identity"]["label"],
            "known": v["data_file"]["identity"]["known"],
        },
        "session_text": r["session_text"],
        "top_k": r["top_k"],
        "k": s["k"],
        "search_limit": r["search_limit"],
        "system": r["system"],
        "embedder_identity": r["embedder_identity"],
        "vectors": r["vectors"],
        "counts": {
            "records": v["records"],
            "dropped_abstention": {
                "count": v["dropped"]["abstention"]["count"],
                "rule": v["dropped"]["abstention"]["rule"],
                "question_ids": [d["question_id"] for d in v["dropped"]["abstention"]["questions"]],
            },
            "dropped_other": [
                {"question_id": d["question_id"], "reason": d["reason"]}
                for d in v["dropped"]["other"]["questions"]
            ],
            "scored": v["scored"],
            "by_type": v["question_types"],
        },
        "gold": {
            **v["gold"],
            "rule": (
                "answer_session_ids (ids present in the haystack); turn-level has_answer "
                "aggregated to sessions when a record has none"
            ),
            "fallback_used": fallback,
            "caveat": FALLBACK_CAVEAT if fallback else None,
        },
        "haystack": v["haystack"],
        "metrics": {"overall": s["overall"], "by_type": s["by_type"]},
    }
    inputs = {
        "longmemeval-validate": validated["fingerprint"],
        "longmemeval-runs": runs["fingerprint"],
        "longmemeval-scores": scores["fingerprint"],
    }
    env = write_lane_artifact(build_dir, "longmemeval-results", results, inputs)
    timing = read_timing(build_dir, runs["fingerprint"])
    atomic_write_bytes(lane_dir(build_dir) / REPORT_MD, render_markdown(results, timing).encode())
    return {**results, "local_diagnostics": timing, "artifact_fingerprint": env["fingerprint"]}
