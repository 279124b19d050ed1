"""The fixture lane chained in-process: the same stage functions the CLI calls, in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recallbench.stages.decide import run_decide
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.report import run_report
from recallbench.stages.roundtrip import run_roundtrip
from recallbench.stages.score import run_score
from recallbench.stages.validate import run_validate

STAGES = ("validate", "hydrate", "query", "snapshot-roundtrip", "score", "report", "decide")


@dataclass
class LaneOutput:
    """Every artifact envelope of one run, plus the result document and its Markdown."""

    envelopes: dict[str, dict[str, Any]]
    result: dict[str, Any]
    markdown: str


def run_fixture_lane(
    corpus: Path,
    queries: Path,
    work_dir: Path,
    *,
    top_k: int = 5,
    repeat: int = 1,
    system: str = "hotmem",
) -> LaneOutput:
    """validate -> hydrate -> query -> snapshot-roundtrip -> score -> report -> decide.

    Stores and packages go under `work_dir` (`store/`, `roundtrip/`); nothing else is written.
    """
    work_dir = Path(work_dir)
    store_dir = work_dir / "store"
    suite = run_validate(corpus, queries)
    hydrate = run_hydrate(suite, store_dir, system)
    runs = run_query(suite, hydrate, store_dir, top_k=top_k, repeat=repeat)
    roundtrip = run_roundtrip(suite, hydrate, runs, store_dir, work_dir / "roundtrip")
    scores = run_score(suite, runs, roundtrip)
    result, markdown = run_report(suite, hydrate, runs, roundtrip, scores)
    decision = run_decide(scores)
    envelopes = {
        "suite": suite,
        "hydrate": hydrate,
        "runs": runs,
        "roundtrip": roundtrip,
        "scores": scores,
        "decision": decision,
    }
    return LaneOutput(envelopes=envelopes, result=result, markdown=markdown)
