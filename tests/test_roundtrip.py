"""snapshot-roundtrip: ranking comparison by hand, and the real HotMem package round trip."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import hotmem.interchange
import pytest
from conftest import CORPUS, QUERIES

from recallbench.artifacts import envelope
from recallbench.errors import ArtifactError
from recallbench.stages.decide import decide
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.roundtrip import compare_rankings, run_roundtrip
from recallbench.stages.score import run_score
from recallbench.stages.validate import run_validate


def hits(*pairs: tuple[str, float]) -> list[dict[str, Any]]:
    return [{"memory_id": m, "score": s} for m, s in pairs]


def hotmem_reason_codes() -> set[str]:
    """Every `PackageError("<reason>"` code in HotMem's interchange package source."""
    root = Path(hotmem.interchange.__file__).parent
    codes: set[str] = set()
    for path in root.rglob("*.py"):
        codes |= set(re.findall(r'PackageError\(\s*"([a-z_]+)"', path.read_text("utf-8")))
    return codes


# --- compare_rankings by hand ------------------------------------------------------------


def test_identical_rankings() -> None:
    a = hits(("m1", 0.9), ("m2", 0.5), ("m3", 0.1))
    assert compare_rankings(a, copy.deepcopy(a)) == {
        "identical": True,
        "same_set": True,
        "moved_positions": [],
        "only_before": [],
        "only_after": [],
        "max_score_drift": 0.0,
        "after": ["m1", "m2", "m3"],
    }


def test_swapped_order() -> None:
    before = hits(("m1", 0.9), ("m2", 0.5), ("m3", 0.1))
    after = hits(("m2", 0.5), ("m1", 0.9), ("m3", 0.1))
    d = compare_rankings(before, after)
    assert d["identical"] is False
    assert d["same_set"] is True
    assert d["moved_positions"] == [1, 2]
    assert d["only_before"] == [] and d["only_after"] == []
    assert d["max_score_drift"] == 0.0
    assert d["after"] == ["m2", "m1", "m3"]


def test_score_drift_with_the_same_order() -> None:
    before = hits(("m1", 0.9), ("m2", 0.5))
    after = hits(("m1", 0.875), ("m2", 0.5))
    d = compare_rankings(before, after)
    assert d["identical"] is True  # logical (id) equivalence holds
    assert d["moved_positions"] == []
    assert d["max_score_drift"] == pytest.approx(0.025, abs=1e-12)


def test_missing_and_new_ids() -> None:
    before = hits(("m1", 0.9), ("m2", 0.5), ("m3", 0.25))
    after = hits(("m1", 0.8), ("m4", 0.5))
    d = compare_rankings(before, after)
    assert d["identical"] is False
    assert d["same_set"] is False
    assert d["moved_positions"] == [2, 3]
    assert d["only_before"] == ["m2", "m3"]
    assert d["only_after"] == ["m4"]
    assert d["max_score_drift"] == pytest.approx(0.1, abs=1e-12)  # over common ids only (m1)


def test_empty_after() -> None:
    d = compare_rankings(hits(("m1", 0.9)), [])
    assert d["identical"] is False
    assert d["moved_positions"] == [1]
    assert d["only_before"] == ["m1"]
    assert d["max_score_drift"] == 0.0


# --- the real round trip -----------------------------------------------------------------


@pytest.fixture
def queried(tmp_path: Path) -> dict[str, Any]:
    """suite, hydrate and runs envelopes of a fresh HotMem store under tmp_path/store."""
    suite = run_validate(CORPUS, QUERIES)
    hydrate = run_hydrate(suite, tmp_path / "store", "hotmem")
    runs = run_query(suite, hydrate, tmp_path / "store", top_k=5)
    return {"suite": suite, "hydrate": hydrate, "runs": runs, "dir": tmp_path}


def roundtrip(q: dict[str, Any], runs: dict[str, Any] | None = None) -> dict[str, Any]:
    return run_roundtrip(
        q["suite"], q["hydrate"], runs or q["runs"], q["dir"] / "store", q["dir"] / "rt"
    )


def tampered(runs: dict[str, Any], edit) -> dict[str, Any]:
    """A runs envelope with edited data, rebuilt so that its fingerprint matches."""
    data = copy.deepcopy(runs["data"])
    edit(data)
    return envelope("runs", data, runs["inputs"])


def test_real_roundtrip_is_equivalent(queried: dict[str, Any]) -> None:
    rt = roundtrip(queried)
    data = rt["data"]
    assert rt["artifact"] == "roundtrip"
    assert data["equivalence"] == {"numerator": 57, "denominator": 57, "value": 1.0}
    assert data["records"] == {"source": 80, "packaged": 80, "verified": 80, "clone": 80}
    assert data["timing"]["package_bytes"] > 0
    assert (queried["dir"] / "rt" / "package" / "manifest.json").is_file()


def test_corrupted_package_is_rejected_with_a_hotmem_reason(queried: dict[str, Any]) -> None:
    cc = roundtrip(queried)["data"]["corruption_check"]
    assert cc["rejected"] is True
    assert cc["reason"] in hotmem_reason_codes()
    assert cc["reason"] == "corrupt_compression"
    assert cc["file"] == "memories.jsonl.gz"
    assert cc["flipped_bytes"] == 1
    # the corrupted copy really differs from the package in exactly one byte
    good = (queried["dir"] / "rt" / "package" / cc["file"]).read_bytes()
    bad = (queried["dir"] / "rt" / "package-corrupted" / cc["file"]).read_bytes()
    assert len(good) == len(bad)
    assert sum(1 for a, b in zip(good, bad, strict=True) if a != b) == 1


def test_hotmem_reason_codes_are_found() -> None:
    """Guard for the helper: the scan finds HotMem's known codes."""
    assert {"corrupt_compression", "missing_manifest", "path_escape"} <= hotmem_reason_codes()


def test_tampered_runs_break_equivalence_and_decide_picks_rule_1(
    queried: dict[str, Any],
) -> None:
    def swap_first_two(data: dict[str, Any]) -> None:
        row = data["queries"][3]
        row["hits"][0], row["hits"][1] = row["hits"][1], row["hits"][0]

    runs = tampered(queried["runs"], swap_first_two)
    qid = runs["data"]["queries"][3]["query_id"]
    rt = roundtrip(queried, runs)
    data = rt["data"]
    assert data["equivalence"]["numerator"] == 56
    assert data["equivalence"]["denominator"] == 57
    assert data["equivalence"]["value"] < 1.0
    drift = data["per_query"][qid]
    assert drift["identical"] is False and drift["same_set"] is True
    assert drift["moved_positions"] == [1, 2]
    assert [q for q, d in data["per_query"].items() if not d["identical"]] == [qid]

    scores = run_score(queried["suite"], runs, rt)
    assert scores["data"]["roundtrip"]["drifted_queries"] == [qid]
    decision = decide(scores["data"])
    assert decision["rule"] == 1
    assert decision["action"] == "fix_clone_compatibility"
    assert decision["evidence"] == {"equivalence": 56 / 57}
    assert [r["met"] for r in decision["rules"]] == [True, True, True, False]


def test_score_only_tampering_keeps_logical_equivalence(queried: dict[str, Any]) -> None:
    def nudge(data: dict[str, Any]) -> None:
        data["queries"][0]["hits"][4]["score"] -= 0.01

    runs = tampered(queried["runs"], nudge)
    data = roundtrip(queried, runs)["data"]
    assert data["equivalence"]["numerator"] == 57
    d = data["per_query"][runs["data"]["queries"][0]["query_id"]]
    assert d["identical"] is True
    assert d["max_score_drift"] == pytest.approx(0.01, abs=1e-9)


def test_roundtrip_refuses_runs_from_another_hydrate(queried: dict[str, Any]) -> None:
    other = envelope("runs", queried["runs"]["data"], {**queried["runs"]["inputs"], "hydrate": "0"})
    with pytest.raises(ArtifactError, match=r"runs\.json is stale.*recallbench query"):
        roundtrip(queried, other)
