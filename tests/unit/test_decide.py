"""The decision rules on hand-made score dicts: each rule, its boundary, and the rule order
(the fixture suite's HotMem rules); then the generic decide stage, which applies a dataset's
rules or says plainly that the dataset has none."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from recallbench.builddir.artifacts import envelope, inputs_of
from recallbench.commands.pipeline import Run
from recallbench.core.errors import ArtifactError
from recallbench.datasets.base import dataset_policy, roundtrip_summary
from recallbench.datasets.fixture_rules import ACTIONS, GUARDRAILS, decide
from recallbench.datasets.fixtures import reader as fixtures
from recallbench.stages import decide as decide_stage
from recallbench.systems.rules import decision

FORBIDDEN = re.compile(
    r"entit|hosted|learned|cross-encoder|\bLLM\b|Cohere|OpenAI|Voyage|Anthropic", re.IGNORECASE
)


def scores(
    equivalence: float | None = 1.0,
    exact: float | None = 1.0,
    paraphrase: float | None = 1.0,
    dup: float | None = 0.0,
    k: int = 5,
) -> dict[str, Any]:
    """The smallest `scores` data that decide() reads."""

    def summary(value: float | None) -> dict[str, Any]:
        return {"value": value}

    return {
        "top_k": k,
        "per_category": {
            "exact_lexical": {f"recall@{k}": summary(exact)},
            "semantic_paraphrase": {f"recall@{k}": summary(paraphrase)},
            "near_duplicate_diversity": {f"duplicate_slot_rate@{k}": summary(dup)},
        },
        "roundtrip": {"equivalence": {"value": equivalence}},
    }


def states(decision: dict[str, Any]) -> list[tuple[int, bool, bool]]:
    return [(r["rule"], r["met"], r["fired"]) for r in decision["rules"]]


def test_rule_1_equivalence_56_of_57() -> None:
    d = decide(scores(equivalence=56 / 57))
    assert d["rule"] == 1
    assert d["action"] == "fix_clone_compatibility"
    assert d["recommendation"] == ACTIONS["fix_clone_compatibility"]
    assert "clone/index compatibility" in d["recommendation"]
    assert d["evidence"] == {"equivalence": 56 / 57}
    assert states(d) == [(1, True, True), (2, False, False), (3, False, False), (4, False, False)]


def test_full_equivalence_does_not_fire_rule_1() -> None:
    d = decide(scores(equivalence=1.0))
    assert d["rule"] == 4
    assert d["rules"][0]["met"] is False


def test_rule_2_gap_of_exactly_15_points_fires() -> None:
    d = decide(scores(exact=1.0, paraphrase=0.85))
    assert d["rule"] == 2
    assert d["action"] == "semantic_embeddings"
    assert "#78" in d["recommendation"]
    assert d["evidence"]["gap_points"] == 15.0
    assert d["evidence"]["exact_lexical_recall@5"] == 1.0
    assert d["evidence"]["semantic_paraphrase_recall@5"] == 0.85


def test_rule_2_gap_of_14_points_does_not_fire() -> None:
    d = decide(scores(exact=1.0, paraphrase=0.86))
    assert d["rule"] == 4
    assert d["rules"][1]["met"] is False
    assert d["rules"][1]["measured"]["gap_points"] == 14.0


@pytest.mark.parametrize(
    ("exact", "paraphrase"),
    # every pair is 15 points apart on paper; in binary floating point several are not
    [(1.0, 0.85), (0.95, 0.8), (0.7, 0.55), (0.3, 0.15), (0.15, 0.0), (0.6, 0.45), (0.45, 0.3)],
)
def test_rule_2_boundary_is_float_safe(exact: float, paraphrase: float) -> None:
    assert decide(scores(exact=exact, paraphrase=paraphrase))["rule"] == 2


def test_rule_2_just_below_the_boundary() -> None:
    assert decide(scores(exact=1.0, paraphrase=0.8501))["rule"] == 4


def test_rule_2_with_recall_from_fractions() -> None:
    """exact 7/7 vs paraphrase 6/7: 14.29 points, below; vs 5/7: 28.57 points, above."""
    assert decide(scores(exact=7 / 7, paraphrase=6 / 7))["rule"] == 4
    assert decide(scores(exact=7 / 7, paraphrase=5 / 7))["rule"] == 2


def test_rule_2_does_not_fire_when_paraphrase_is_better() -> None:
    assert decide(scores(exact=0.2, paraphrase=0.9))["rule"] == 4


def test_rule_3_duplicate_rate_above_20_percent_fires() -> None:
    d = decide(scores(dup=0.21))
    assert d["rule"] == 3
    assert d["action"] == "deterministic_reranking"
    assert "#80" in d["recommendation"]
    assert d["evidence"] == {"duplicate_slot_rate@5": 0.21}


@pytest.mark.parametrize("dup", [0.20, 6 / 30, 1 / 5, 0.0])
def test_rule_3_at_or_below_20_percent_does_not_fire(dup: float) -> None:
    d = decide(scores(dup=dup))
    assert d["rule"] == 4
    assert d["rules"][2]["met"] is False


def test_rule_3_seven_of_thirty_fires() -> None:
    assert decide(scores(dup=7 / 30))["rule"] == 3


def test_rule_4_when_nothing_holds() -> None:
    d = decide(scores())
    assert d["rule"] == 4
    assert d["action"] == "retain_and_expand"
    assert d["evidence"] == {}
    assert "expand the fixtures" in d["recommendation"]
    assert states(d) == [(1, False, False), (2, False, False), (3, False, False), (4, True, True)]


def test_rule_1_beats_2_and_3() -> None:
    d = decide(scores(equivalence=0.5, exact=1.0, paraphrase=0.0, dup=0.9))
    assert d["rule"] == 1
    assert states(d) == [(1, True, True), (2, True, False), (3, True, False), (4, False, False)]


def test_rule_2_beats_3() -> None:
    d = decide(scores(exact=1.0, paraphrase=0.0, dup=0.9))
    assert d["rule"] == 2
    assert states(d) == [(1, False, False), (2, True, True), (3, True, False), (4, False, False)]


def test_rule_1_and_3_without_2() -> None:
    d = decide(scores(equivalence=0.9, dup=0.5))
    assert states(d) == [(1, True, True), (2, False, False), (3, True, False), (4, False, False)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"equivalence": None},
        {"exact": None, "paraphrase": 0.0},
        {"exact": 1.0, "paraphrase": None},
        {"exact": None, "paraphrase": None},
        {"dup": None},
        {"equivalence": None, "exact": None, "paraphrase": None, "dup": None},
    ],
)
def test_not_applicable_inputs_do_not_fire(kwargs: dict[str, Any]) -> None:
    d = decide(scores(**kwargs))
    assert d["rule"] == 4
    assert [r["met"] for r in d["rules"][:3]] == [False, False, False]


def test_not_applicable_gap_is_reported_as_none() -> None:
    d = decide(scores(exact=None, paraphrase=0.0))
    assert d["rules"][1]["measured"]["gap_points"] is None


def test_missing_categories_do_not_fire() -> None:
    data = scores(equivalence=1.0)
    data["per_category"] = {}
    assert decide(data)["rule"] == 4


def test_decide_reads_the_metrics_at_the_run_cutoff() -> None:
    """With top_k 3 the rules use recall@3 and duplicate_slot_rate@3, not the @5 names."""
    d = decide(scores(exact=1.0, paraphrase=0.0, k=3))
    assert d["rule"] == 2 and d["top_k"] == 3
    assert "Recall@3" in d["rules"][1]["condition"]
    data = scores(exact=1.0, paraphrase=0.0, k=3)
    data["per_category"]["exact_lexical"]["recall@5"] = {"value": 0.0}
    assert decide(data)["rule"] == 2
    assert decide(scores(dup=0.5, k=10))["rules"][2]["measured"] == {"duplicate_slot_rate@10": 0.5}


def test_exactly_one_rule_fires_and_it_is_the_first_met() -> None:
    for eq in (1.0, 0.5, None):
        for para in (1.0, 0.5, None):
            for dup in (0.0, 0.5, None):
                d = decide(scores(equivalence=eq, paraphrase=para, dup=dup))
                fired = [r["rule"] for r in d["rules"] if r["fired"]]
                first_met = next(r["rule"] for r in d["rules"] if r["met"])
                assert fired == [first_met] == [d["rule"]]


def test_guardrails_are_always_present() -> None:
    for data in (scores(), scores(equivalence=0.1), scores(paraphrase=0.0), scores(dup=0.9)):
        d = decide(data)
        assert d["guardrails"] == GUARDRAILS
        assert len(d["guardrails"]) == 3
        text = " ".join(d["guardrails"])
        assert "Entity extraction is never recommended" in text
        assert "hosted or learned reranker is never recommended" in text
        assert "not release thresholds" in text


@pytest.mark.parametrize(
    "data",
    [scores(equivalence=0.1), scores(paraphrase=0.0), scores(dup=0.9), scores()],
    ids=["rule1", "rule2", "rule3", "rule4"],
)
def test_no_recommendation_is_entity_extraction_or_a_hosted_reranker(data: dict) -> None:
    d = decide(data)
    assert not FORBIDDEN.search(d["recommendation"]), d["recommendation"]
    assert not FORBIDDEN.search(d["action"])
    for r in d["rules"]:
        assert not FORBIDDEN.search(r["action"])
        assert not FORBIDDEN.search(ACTIONS[r["action"]])


def test_every_action_text_is_free_of_forbidden_recommendations() -> None:
    assert set(ACTIONS) == {
        "fix_clone_compatibility",
        "semantic_embeddings",
        "deterministic_reranking",
        "retain_and_expand",
    }
    for text in ACTIONS.values():
        assert not FORBIDDEN.search(text), text


def test_decide_is_deterministic_and_does_not_modify_its_input() -> None:
    data = scores(equivalence=0.9, paraphrase=0.0, dup=0.5)
    frozen = repr(data)
    assert decide(data) == decide(data)
    assert repr(data) == frozen


def test_the_decision_names_its_policy_and_cutoff() -> None:
    d = decide(scores(k=3))
    assert d["policy"] == "hotmem-fixture-rules"
    assert d["top_k"] == 3
    assert [r["action"] for r in d["rules"]] == list(ACTIONS)


# --- the generic decide stage ----------------------------------------------------------------


def suite_data(dataset: str) -> dict[str, Any]:
    """The one field of a `suite` artifact's data that decide() reads."""
    return {"dataset": dataset}


def stage_inputs(
    policy_input: dict[str, Any], system: str = "hotmem"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the stage reads for a policy input made by `scores()`: the scores artifact's data
    (no round trip in it) and a roundtrip artifact's data of `system` with that equivalence."""
    data = {key: value for key, value in policy_input.items() if key != "roundtrip"}
    roundtrip = {
        "system": system,
        "available": True,
        "equivalence": policy_input["roundtrip"]["equivalence"],
        "corruption_checks": [{"all_rejected": True}],
        "per_query": {"q1": {"identical": True}},
        "sample": {"scopes_sampled": 1},
    }
    return data, roundtrip


def test_the_round_trip_reaches_the_policy_as_its_summary() -> None:
    data, roundtrip = stage_inputs(scores(equivalence=0.5))
    roundtrip["per_query"]["q0"] = {"identical": False}
    assert roundtrip_summary(roundtrip) == {
        "available": True,
        "equivalence": {"value": 0.5},
        "corruption_rejected": True,
        "drifted_queries": ["q0"],
        "scopes_sampled": 1,
    }
    assert roundtrip_summary({"available": False, "reason": "no clone"}) == {
        "available": False,
        "reason": "no clone",
        "equivalence": None,
    }
    assert decision(suite_data("fixtures"), data, roundtrip)["rule"] == 1


def test_the_fixture_suite_carries_the_hotmem_rules() -> None:
    assert dataset_policy("fixtures") is fixtures.decide
    for data in (scores(), scores(equivalence=0.1), scores(paraphrase=0.0), scores(dup=0.9)):
        assert decision(suite_data("fixtures"), *stage_inputs(data)) == decide(data)


@pytest.mark.parametrize("dataset", ["longmemeval", "locomo"])
def test_a_dataset_without_rules_gets_a_plain_statement(dataset: str) -> None:
    assert dataset_policy(dataset) is None
    # scores that would fire rule 1 under the fixture rules: no rule applies here
    d = decision(suite_data(dataset), *stage_inputs(scores(equivalence=0.1, k=10)))
    assert d == {
        "policy": None,
        "rule": None,
        "action": None,
        "recommendation": f"no decision rules: the {dataset} dataset defines none; "
        "read the metrics",
        "evidence": {},
        "top_k": 10,
        "rules": [],
        "guardrails": [],
    }
    assert decide_stage.headline(d) == f"no rule: {d['recommendation']}"


def test_headline_names_the_fired_rule() -> None:
    d = decision(suite_data("fixtures"), *stage_inputs(scores(paraphrase=0.5)))
    assert decide_stage.headline(d) == f"rule 2: {ACTIONS['semantic_embeddings']}"


def test_run_decide_wraps_the_decision_with_its_inputs_fingerprints() -> None:
    suite_env = envelope("suite", suite_data("fixtures"), {})
    data, roundtrip = stage_inputs(scores(paraphrase=0.5))
    scores_env = envelope("scores", data, inputs_of(suite_env))
    roundtrip_env = envelope("roundtrip", roundtrip, inputs_of(suite_env))
    env = decide_stage.run_decide(suite_env, scores_env, roundtrip_env)
    assert env["artifact"] == "decision"
    assert env["inputs"] == {
        "suite": suite_env["fingerprint"],
        "scores": scores_env["fingerprint"],
        "roundtrip": roundtrip_env["fingerprint"],
    }
    assert env["data"]["rule"] == 2
    assert env["data"] == decide(scores(paraphrase=0.5))


def test_run_decide_refuses_scores_made_from_another_suite() -> None:
    suite_env = envelope("suite", suite_data("fixtures"), {})
    other = envelope("suite", suite_data("locomo"), {})
    data, roundtrip = stage_inputs(scores())
    scores_env = envelope("scores", data, inputs_of(other))
    roundtrip_env = envelope("roundtrip", roundtrip, inputs_of(suite_env))
    with pytest.raises(ArtifactError, match=r"scores\.json is stale.*recallbench score"):
        decide_stage.run_decide(suite_env, scores_env, roundtrip_env)


def test_run_decide_refuses_a_round_trip_of_other_runs() -> None:
    suite_env = envelope("suite", suite_data("fixtures"), {})
    runs_a = envelope("runs", {"n": 1}, inputs_of(suite_env))
    runs_b = envelope("runs", {"n": 2}, inputs_of(suite_env))
    data, roundtrip = stage_inputs(scores())
    scores_env = envelope("scores", data, inputs_of(suite_env, runs_a))
    roundtrip_env = envelope("roundtrip", roundtrip, inputs_of(suite_env, runs_b))
    with pytest.raises(ArtifactError, match=r"different runs.*snapshot-roundtrip"):
        decide_stage.run_decide(suite_env, scores_env, roundtrip_env)
    other_suite = envelope("suite", suite_data("locomo"), {})
    stale = envelope("roundtrip", roundtrip, inputs_of(other_suite, runs_a))
    with pytest.raises(ArtifactError, match=r"roundtrip\.json is stale"):
        decide_stage.run_decide(suite_env, scores_env, stale)


def test_the_lane_decision_is_the_result_decision(fixture_run: Run) -> None:
    made = fixture_run.envelopes["decision"]
    envs = fixture_run.envelopes
    assert made["data"] == fixture_run.result["decision"]
    assert made["inputs"] == inputs_of(envs["suite"], envs["scores"], envs["roundtrip"])
    summary = roundtrip_summary(envs["roundtrip"]["data"])
    assert made["data"] == decide({**envs["scores"]["data"], "roundtrip": summary})
    assert made["data"]["rule"] == 2


# --- rules belong to the systems they were written for ----------------------------------------


def test_the_fixture_rules_declare_the_hotmem_family() -> None:
    from recallbench.datasets.fixture_rules import SYSTEMS
    from recallbench.datasets.fixtures.spec import SPEC

    assert SPEC.policy_systems == SYSTEMS == ("hotmem", "hotmem-minilm")
    assert SPEC.policy_roadmap == "HotMem's roadmap"


@pytest.mark.parametrize("system", ["hotmem", "hotmem-minilm"])
def test_the_hotmem_family_gets_the_rules(system: str) -> None:
    d = decision(suite_data("fixtures"), *stage_inputs(scores(paraphrase=0.5), system))
    assert d == decide(scores(paraphrase=0.5))
    assert decide_stage.headline(d).startswith("rule 2: ")


@pytest.mark.parametrize("system", ["bm25", "hotmem-mmr", "minilm", "mine"])
def test_any_other_system_gets_one_line_and_no_hotmem_advice(system: str) -> None:
    # scores that fire rule 2 for HotMem
    d = decision(suite_data("fixtures"), *stage_inputs(scores(paraphrase=0.5), system))
    line = decide_stage.headline(d)
    assert line == f"no rule: the committed rules are HotMem's roadmap; no rule applies to {system}"
    assert d["rule"] is None and d["rules"] == [] and d["guardrails"] == []
    assert "#78" not in repr(d) and "#80" not in repr(d)


def mine_rules(evidence: dict[str, Any]) -> dict[str, Any]:
    """A plugin's rules for its system `mine`."""
    return {
        "policy": "mine-rules",
        "rule": 1,
        "action": "tune",
        "recommendation": f"tune mine (gap at k={evidence['top_k']})",
        "evidence": {},
        "top_k": evidence["top_k"],
        "rules": [],
        "guardrails": [],
    }


def installed(
    decide_fn: Any = mine_rules,
    systems: tuple[str, ...] = ("mine",),
    distribution: str = "mine-store",
) -> Any:
    """`mine_rules` (or `decide_fn`) as distribution `distribution` 0.1 would declare them."""
    from recallbench.datasets import base

    rules = base.DecisionRules("mine-rules", "fixtures", systems, decide_fn)
    return base.InstalledRules(rules, distribution, "0.1", "mine-rules = mine_store:RULES")


#: plugin systems and the distributions that provide them, as `mine_installed` installs them
PLUGIN_SYSTEMS = {
    "mine": {"distribution": "mine-store", "version": "0.1"},
    "theirs": {"distribution": "their-store", "version": "2"},
}


@pytest.fixture
def mine_installed(monkeypatch: pytest.MonkeyPatch):
    """The systems `PLUGIN_SYSTEMS` installed; `install(*rules)` puts rule sets in place of
    the installed ones."""
    from recallbench.datasets import base
    from recallbench.systems import rules as rules_module

    provider = rules_module.system_provider
    monkeypatch.setattr(
        rules_module, "system_provider", lambda name: PLUGIN_SYSTEMS.get(name) or provider(name)
    )
    return lambda *sets: monkeypatch.setattr(base, "plugin_rules", lambda: list(sets))


def test_a_plugin_declares_rules_for_its_own_systems(mine_installed) -> None:
    from recallbench.datasets import base

    mine_installed(installed())
    d = decision(suite_data("fixtures"), *stage_inputs(scores(), "mine"))
    assert d["policy"] == "mine-rules" and d["recommendation"] == "tune mine (gap at k=5)"
    # another dataset, another system: not theirs
    other = decision(suite_data("longmemeval"), *stage_inputs(scores(), "mine"))
    assert other["rule"] is None
    assert decision(suite_data("fixtures"), *stage_inputs(scores()))["rule"] == 4  # hotmem
    # two rule sets for one system: refused in one line naming both
    mine_installed(installed(), installed())
    with pytest.raises(base.RecallbenchError, match=r"2 installed rule sets apply to mine"):
        decision(suite_data("fixtures"), *stage_inputs(scores(), "mine"))


@pytest.fixture
def installed_packages(monkeypatch: pytest.MonkeyPatch):
    """`install(root)`: the distributions in `root` installed (on sys.path) for this test;
    the registry's entry points are read again now and after the test."""
    import importlib

    from recallbench.systems import registry

    def install(root: Path) -> None:
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        registry.clear_cache()

    yield install
    registry.clear_cache()


def _rules_package(root: Path, entry: str) -> None:
    """An installed package (a dist-info on sys.path) providing the system `tiny`, whose
    entry point in the group `recallbench.rules` is `entry`."""
    from plugindist import install_distribution

    source = (
        "from recallbench.datasets.base import DecisionRules\n"
        "def decide(evidence):\n"
        "    k = evidence['top_k']\n"
        "    return {'policy': 'tiny', 'rule': 1, 'action': 'look',\n"
        "            'recommendation': f'look at k={k}', 'evidence': {}, 'top_k': k,\n"
        "            'rules': [], 'guardrails': []}\n"
        "RULES = DecisionRules('tiny', 'fixtures', ('tiny',), decide)\n"
        "NOT_RULES = object()\n"
        "def make():\n"
        "    from recallbench.systems.bm25 import BM25System\n"
        "    return BM25System('tiny')\n"
    )
    install_distribution(
        root,
        "tiny-rules",
        "0.1",
        {"tiny_rules.py": source},
        {"recallbench.systems": {"tiny": "tiny_rules:make"}, "recallbench.rules": {"tiny": entry}},
    )


def test_plugin_rules_come_from_the_entry_point_group(tmp_path: Path, installed_packages) -> None:
    from recallbench.datasets.base import plugin_rules

    _rules_package(tmp_path / "ok", "tiny_rules:RULES")
    installed_packages(tmp_path / "ok")
    (found,) = plugin_rules()
    assert (found.rules.name, found.distribution, found.version) == ("tiny", "tiny-rules", "0.1")
    assert found.entry_point == "tiny = tiny_rules:RULES"
    d = decision(suite_data("fixtures"), *stage_inputs(scores(), "tiny"))
    assert decide_stage.headline(d) == "rule 1: look at k=5"
    assert decision(suite_data("fixtures"), *stage_inputs(scores()))["rule"] == 4  # hotmem's


def test_plugin_rules_that_are_not_rules_are_refused_in_one_line(
    tmp_path: Path, installed_packages
) -> None:
    from recallbench.datasets.base import RecallbenchError, plugin_rules

    _rules_package(tmp_path / "bad", "tiny_rules:NOT_RULES")
    installed_packages(tmp_path / "bad")
    with pytest.raises(RecallbenchError, match=r"decision rules tiny \(tiny_rules:NOT_RULES\)"):
        plugin_rules()


# --- a plugin's rules: only for its own systems, and at the boundary (issue 38) ---------------


@pytest.mark.parametrize(
    ("system", "owner"),
    [("bm25", "recallbench 0.1.0"), ("hotmem", "recallbench 0.1.0"), ("theirs", "their-store 2")],
)
def test_rules_for_a_system_another_package_provides_are_refused(
    mine_installed, system: str, owner: str
) -> None:
    """Issue 38: any installed package could declare rules for `bm25` or `hotmem` (`run
    --system bm25` printed "rule 9: FAKE"). Only the distribution that provides a system may
    declare its rules; anything else is one line naming both, before any rule runs."""
    from recallbench import __version__
    from recallbench.core.errors import RecallbenchError

    ran: list[str] = []
    mine_installed(installed(lambda e: ran.append("ran"), systems=("mine", system)))
    with pytest.raises(RecallbenchError) as refused:
        decision(suite_data("fixtures"), *stage_inputs(scores(), system))
    assert str(refused.value) == (
        "decision rules 'mine-rules' (mine-store 0.1, entry point mine-rules = "
        f"mine_store:RULES) are for the system '{system}', which "
        f"{owner.replace('0.1.0', __version__)} provides: only the package that provides a "
        "system may declare its rules; uninstall mine-store"
    )
    assert ran == []
    # the same rule set decides its own system; a distribution name is compared as pip does
    mine_installed(installed(distribution="Mine_Store"))
    assert decision(suite_data("fixtures"), *stage_inputs(scores(), "mine"))["rule"] == 1


def _decided_by(decide_fn: Any, mine_installed, timeout: float | None = None) -> Any:
    mine_installed(installed(decide_fn))
    from recallbench.systems.rules import decide_run

    return decide_run(suite_data("fixtures"), *stage_inputs(scores(), "mine"), call_timeout=timeout)


def _without(field: str) -> Any:
    return lambda e: {k: v for k, v in mine_rules(e).items() if k != field}


def _with(**changed: Any) -> Any:
    return lambda e: {**mine_rules(e), **changed}


def _raise(e: Any) -> Any:
    raise ValueError("the rules are broken")


def _exit(e: Any) -> Any:
    raise SystemExit(0)


def _hang(e: Any) -> Any:
    import time

    while True:
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("decide_fn", "problem"),
    [
        (_raise, "raised ValueError: the rules are broken"),
        (_exit, "called sys.exit(0); a system must not exit the harness"),
        (_hang, "did not return within --call-timeout 0.3 s"),
        (lambda e: None, "returned None, not a decision (an object with policy, rule, "),
        (_without("recommendation"), "returned a decision without 'recommendation'"),
        (_with(rule=float("nan")), "returned a float as 'rule', not int or str or null"),
        (_with(top_k=True), "returned a bool as 'top_k', not int"),
        (_with(evidence={"gap": float("nan")}), "returned nan at evidence.gap; a decision "),
        (_with(evidence={"gap": float("inf")}), "returned inf at evidence.gap; a decision "),
        (_with(evidence={"n": 2**70}), "returned an int of 71 bits at evidence.n"),
        (_with(evidence={1: "x"}), "returned the key 1 at evidence; keys must be strings"),
        (_with(evidence={"x": object()}), "returned an object at evidence.x, which is not JSON"),
        (_with(rules=[{"rule": 1}]), "returned a decision without 'rules[0].condition'"),
        (_with(guardrails=[3]), "returned an int at guardrails[0], not a string"),
    ],
)
def test_a_plugins_rules_run_at_the_boundary(mine_installed, decide_fn: Any, problem: str) -> None:
    """Issue 38: rules that raised, returned None or a dict without `recommendation` gave
    49-54-line tracebacks, rules that never returned hung `run` whatever --call-timeout, and
    a NaN they returned reached `run --json` as a bare `NaN`. Each is one line naming the
    rules, their distribution and what they did."""
    from recallbench.systems.boundary import SystemCallFailed

    with pytest.raises(SystemCallFailed) as failed:
        _decided_by(decide_fn, mine_installed, timeout=0.3)
    prefix = "decision rules 'mine-rules' (mine-store 0.1): decide (mine on fixtures) "
    assert str(failed.value).startswith(prefix + problem), str(failed.value)
    assert "\n" not in str(failed.value)


def test_a_plugins_rules_get_a_copy_of_the_evidence_and_their_source_is_named(
    mine_installed,
) -> None:
    """The rules cannot change the scores the result reports; the decision is theirs,
    checked, and where the rules came from is returned with it."""
    data, roundtrip = stage_inputs(scores(), "mine")
    before = repr(data)

    def meddle(evidence: dict[str, Any]) -> dict[str, Any]:
        evidence["per_category"]["exact_lexical"]["recall@5"]["value"] = 0.0
        evidence["top_k"] = 99
        return mine_rules(evidence)

    mine_installed(installed(meddle))
    from recallbench.systems.rules import decide_run

    made, source = decide_run(suite_data("fixtures"), data, roundtrip)
    assert repr(data) == before
    assert made["recommendation"] == "tune mine (gap at k=99)"
    assert source is not None and source.record() == {
        "name": "mine-rules",
        "kind": "plugin",
        "distribution": "mine-store",
        "version": "0.1",
        "entry_point": "mine-rules = mine_store:RULES",
    }
    _, hotmem = decide_run(suite_data("fixtures"), *stage_inputs(scores()))
    assert hotmem is not None and (hotmem.kind, hotmem.dataset) == ("dataset", "fixtures")
    assert decide_run(suite_data("fixtures"), *stage_inputs(scores(), "bm25"))[1] is None
