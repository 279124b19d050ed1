"""The fixture suite's decision policy: the HotMem rules for the next retrieval change.

Rules, applied in order; the first that fires wins:
  1. snapshot/hydration logical equivalence below 100%  -> fix clone/index compatibility
  2. semantic_paraphrase Recall@k at least 15 points below exact_lexical Recall@k
                                                          -> portable semantic embeddings (#78)
  3. near_duplicate_diversity duplicate-slot rate above 20% -> optional deterministic reranking (#80)
  4. otherwise                                            -> retain the stack, expand fixtures
Never recommended from this benchmark: entity extraction, a hosted or learned reranker.
These are prioritization rules for the next investment, not release thresholds.

They are HotMem's roadmap (the issues #78 and #80 are HotMem's) and fire for the HotMem
family only (`SYSTEMS`, declared in the fixtures spec); any other system measured on the
suite gets "no rule applies" (`systems.rules.decide_run`) and its figures.
"""

from __future__ import annotations

from typing import Any

from recallbench.datasets.fixtures.spec import SPEC

POLICY_NAME = SPEC.policy_name  # its one definition: the fixtures spec
#: the systems these rules were written for (the HotMem family), also declared there
SYSTEMS = SPEC.policy_systems
PARAPHRASE_GAP_POINTS = 15.0
DUPLICATE_SLOT_LIMIT = 0.20

ACTIONS = {
    "fix_clone_compatibility": "Fix clone/index compatibility before any retrieval feature: "
    "results changed after snapshot -> verify -> clean hydrate.",
    "semantic_embeddings": "Add portable semantic embeddings next (Portable derived-index "
    "contract and optional semantic embedder, #78).",
    "deterministic_reranking": "Add optional deterministic reranking next (Evidence-gated "
    "optional reranking hook with deterministic local fallback, #80).",
    "retain_and_expand": "Retain the current retrieval stack and expand the fixtures before "
    "adding retrieval complexity.",
}
GUARDRAILS = [
    "Entity extraction is never recommended from this benchmark alone: entity enrichment "
    "needs a separate product and schema decision.",
    "A hosted or learned reranker is never recommended until a first-stage retrieval "
    "benchmark shows a candidate-ranking problem that fusion or MMR cannot address.",
    "These are prioritization rules for the next retrieval investment, not release thresholds.",
]


def _value(summary: dict[str, Any] | None) -> float | None:
    return None if summary is None else summary.get("value")


def decide(scores: dict[str, Any]) -> dict[str, Any]:
    """Apply the rules to a `scores` artifact's data with the round trip's summary under
    ``"roundtrip"`` (`systems.rules.decide_run` builds it); return the decision with its
    evidence."""
    k = scores["top_k"]
    per_cat = scores["per_category"]
    equivalence = (scores["roundtrip"].get("equivalence") or {}).get("value")
    exact = _value(per_cat.get("exact_lexical", {}).get(f"recall@{k}"))
    paraphrase = _value(per_cat.get("semantic_paraphrase", {}).get(f"recall@{k}"))
    gap = None if exact is None or paraphrase is None else round((exact - paraphrase) * 100, 9)
    dup = _value(per_cat.get("near_duplicate_diversity", {}).get(f"duplicate_slot_rate@{k}"))

    rules = [
        {
            "rule": 1,
            "condition": "snapshot/hydration logical top-k equivalence < 100%",
            "measured": {"equivalence": equivalence},
            "met": equivalence is not None and equivalence < 1.0,
            "action": "fix_clone_compatibility",
        },
        {
            "rule": 2,
            "condition": f"exact_lexical Recall@{k} - semantic_paraphrase Recall@{k} "
            f">= {PARAPHRASE_GAP_POINTS:g} points",
            "measured": {
                f"exact_lexical_recall@{k}": exact,
                f"semantic_paraphrase_recall@{k}": paraphrase,
                "gap_points": gap,
            },
            "met": gap is not None and gap >= PARAPHRASE_GAP_POINTS,
            "action": "semantic_embeddings",
        },
        {
            "rule": 3,
            "condition": f"near_duplicate_diversity duplicate-slot rate@{k} > "
            f"{DUPLICATE_SLOT_LIMIT:.0%}",
            "measured": {f"duplicate_slot_rate@{k}": dup},
            "met": dup is not None and dup > DUPLICATE_SLOT_LIMIT,
            "action": "deterministic_reranking",
        },
    ]
    rules.append(
        {
            "rule": 4,
            "condition": "none of the above",
            "measured": {},
            "met": not any(r["met"] for r in rules),
            "action": "retain_and_expand",
        }
    )
    chosen = next(r for r in rules if r["met"])  # the first rule whose condition holds
    for r in rules:
        r["fired"] = r is chosen
    return {
        "policy": POLICY_NAME,
        "rule": chosen["rule"],
        "action": chosen["action"],
        "recommendation": ACTIONS[chosen["action"]],
        "evidence": chosen["measured"],
        "top_k": k,
        "rules": rules,
        "guardrails": GUARDRAILS,
    }
