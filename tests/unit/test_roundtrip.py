"""snapshot-roundtrip: ranking comparison by hand, and the real HotMem package round trip."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import hotmem.interchange
import pytest
from conftest import CORPUS, QUERIES

from recallbench.builddir.artifacts import envelope
from recallbench.builddir.scopespool import SPOOL
from recallbench.core.errors import ArtifactError, RecallbenchError
from recallbench.datasets.base import roundtrip_summary
from recallbench.datasets.fixture_rules import decide
from recallbench.engine.workerstate import StoreDamaged
from recallbench.stages.decide import run_decide
from recallbench.stages.hydrate import run_hydrate
from recallbench.stages.query import run_query
from recallbench.stages.roundtrip import compare_rankings, run_roundtrip, sample_scopes
from recallbench.stages.score import run_score
from recallbench.stages.validate import publish_suite, run_validate

PATHS = {"corpus": CORPUS, "queries": QUERIES}
SCOPE = "00000"  # the one scope of the fixture suite, as stores/ and roundtrip/ name it


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


# --- the sample of scopes ------------------------------------------------------------------


def test_sample_is_every_scope_when_there_are_no_more() -> None:
    assert sample_scopes(["b", "a", "c"], 3) == {"a", "b", "c"}
    assert sample_scopes(["b", "a", "c"], 20) == {"a", "b", "c"}


def test_sample_is_the_smallest_sha256_of_the_scope_ids() -> None:
    ids = [f"scope-{i}" for i in range(50)]
    by_hash = sorted(ids, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    chosen = sample_scopes(ids, 7)
    assert chosen == set(by_hash[:7])
    assert sample_scopes(list(reversed(ids)), 7) == chosen  # independent of dataset order


# --- the real round trip -----------------------------------------------------------------


def stage_chain(build: Path, system: str = "hotmem", keep: bool | None = None) -> dict[str, Any]:
    """suite, hydrate and runs envelopes (and timings) of a fresh store under `build`."""
    suite = run_validate("fixtures", PATHS, spool=build / SPOOL)
    publish_suite(suite, build / "suite.json")  # later stages read validate's scope spool
    hydrate, hydrate_timing = run_hydrate(suite, build, system, keep=keep)
    runs, runs_timing = run_query(suite, hydrate, build, top_k=5)
    return {
        "suite": suite,
        "hydrate": hydrate,
        "runs": runs,
        "dir": build,
        "timings": {"hydrate": hydrate_timing, "runs": runs_timing},
    }


@pytest.fixture
def queried(tmp_path: Path) -> dict[str, Any]:
    """suite, hydrate and runs envelopes of a fresh HotMem store under tmp_path/build."""
    return stage_chain(tmp_path / "build")


def roundtrip(
    q: dict[str, Any], runs: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    return run_roundtrip(q["suite"], q["hydrate"], runs or q["runs"], q["dir"])


def tampered(runs: dict[str, Any], edit) -> dict[str, Any]:
    """A runs envelope with edited data, rebuilt so that its fingerprint matches."""
    data = copy.deepcopy(runs["data"])
    edit(data)
    return envelope("runs", data, runs["inputs"])


def check(data: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in data["corruption_checks"] if c["name"] == name]
    return found


def test_real_roundtrip_is_equivalent(queried: dict[str, Any]) -> None:
    rt, timing = roundtrip(queried)
    data = rt["data"]
    assert rt["artifact"] == "roundtrip"
    assert rt["inputs"] == {
        "suite": queried["suite"]["fingerprint"],
        "hydrate": queried["hydrate"]["fingerprint"],
        "runs": queried["runs"]["fingerprint"],
    }
    assert data["available"] is True
    assert data["equivalence"] == {"numerator": 57, "denominator": 57, "value": 1.0}
    assert data["records"] == {"source": 80, "packaged": 80, "verified": 80, "clone": 80}
    assert data["clone_digest_matches"] is True
    assert data["sample"]["scopes_total"] == data["sample"]["scopes_sampled"] == 1
    assert data["sample"]["scope_ids"] == ["suite"]
    assert timing["package_bytes"] > 0
    assert timing["records"] == 80
    assert "package_bytes" not in json.dumps(data)  # machine-specific figures stay out of data
    work = queried["dir"] / "roundtrip" / SCOPE
    assert (work / "package" / "manifest.json").is_file()
    assert (work / "clone" / "hotmem.sqlite").is_file()


def test_roundtrip_data_is_the_same_run_after_run(queried: dict[str, Any]) -> None:
    first, _ = roundtrip(queried)
    second, _ = roundtrip(queried)
    assert first == second  # same fingerprint: nothing time-specific in the artifact


def test_raw_byte_corruption_is_rejected_with_a_hotmem_reason(queried: dict[str, Any]) -> None:
    cc = check(roundtrip(queried)[0]["data"], "raw_byte")
    assert cc["all_rejected"] is True
    assert (cc["scopes"], cc["rejected"]) == (1, 1)
    assert set(cc["reasons"]) <= hotmem_reason_codes()
    assert cc["reasons"] == ["corrupt_compression"]
    match = re.fullmatch(r"byte (\d+) of (\S+) flipped", cc["description"])
    assert match, cc["description"]
    offset, name = int(match.group(1)), match.group(2)
    assert name == "memories.jsonl.gz"
    # the corrupted copy really differs from the package in exactly that one byte
    work = queried["dir"] / "roundtrip" / SCOPE
    good = (work / "package" / name).read_bytes()
    bad = (work / "corrupted" / "raw_byte" / name).read_bytes()
    assert len(good) == len(bad)
    assert [i for i, (a, b) in enumerate(zip(good, bad, strict=True)) if a != b] == [offset]


def test_stale_manifest_corruption_is_rejected_by_the_digest(queried: dict[str, Any]) -> None:
    """A consistent content change under an unchanged manifest: the compressor is happy,
    only HotMem's own digest check can catch it."""
    cc = check(roundtrip(queried)[0]["data"], "stale_manifest")
    assert cc["all_rejected"] is True
    assert set(cc["reasons"]) <= hotmem_reason_codes()
    assert cc["reasons"] == ["decompressed_digest_mismatch"]
    work = queried["dir"] / "roundtrip" / SCOPE
    good, bad = work / "package", work / "corrupted" / "stale_manifest"
    assert (good / "manifest.json").read_bytes() == (bad / "manifest.json").read_bytes()
    assert (good / "memories.jsonl.gz").stat().st_size == (bad / "memories.jsonl.gz").stat().st_size
    before = gzip.decompress((good / "memories.jsonl.gz").read_bytes()).splitlines()
    after = gzip.decompress((bad / "memories.jsonl.gz").read_bytes()).splitlines()  # valid gzip
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [len(before) - 1]  # the last record: the rest is compressed once
    a, b = json.loads(before[-1]), json.loads(after[-1])
    assert a["fact_text"] != b["fact_text"]
    assert {k: v for k, v in a.items() if k != "fact_text"} == {
        k: v for k, v in b.items() if k != "fact_text"
    }


def test_hotmem_reason_codes_are_found() -> None:
    """Guard for the helper: the scan finds HotMem's known codes."""
    assert {
        "corrupt_compression",
        "decompressed_digest_mismatch",
        "missing_manifest",
        "path_escape",
    } <= hotmem_reason_codes()


def test_tampered_runs_break_equivalence_and_decide_picks_rule_1(
    queried: dict[str, Any],
) -> None:
    def swap_first_two(data: dict[str, Any]) -> None:
        row = data["queries"][3]
        row["hits"][0], row["hits"][1] = row["hits"][1], row["hits"][0]

    runs = tampered(queried["runs"], swap_first_two)
    qid = runs["data"]["queries"][3]["query_id"]
    rt, _ = roundtrip(queried, runs)
    data = rt["data"]
    assert data["equivalence"]["numerator"] == 56
    assert data["equivalence"]["denominator"] == 57
    assert data["equivalence"]["value"] < 1.0
    drift = data["per_query"][qid]
    assert drift["identical"] is False and drift["same_set"] is True
    assert drift["moved_positions"] == [1, 2]
    assert [q for q, d in data["per_query"].items() if not d["identical"]] == [qid]

    scores = run_score(queried["suite"], runs)
    summary = roundtrip_summary(rt["data"])
    assert summary["drifted_queries"] == [qid]
    decision = decide({**scores["data"], "roundtrip": summary})
    assert decision["rule"] == 1
    assert decision["action"] == "fix_clone_compatibility"
    assert decision["evidence"] == {"equivalence": 56 / 57}
    assert [r["met"] for r in decision["rules"]] == [True, True, True, False]
    assert [r["fired"] for r in decision["rules"]] == [True, False, False, False]
    # the stage applies the same rules the dataset defines
    assert run_decide(queried["suite"], scores, rt)["data"] == decision


def test_score_only_tampering_keeps_logical_equivalence(queried: dict[str, Any]) -> None:
    def nudge(data: dict[str, Any]) -> None:
        data["queries"][0]["hits"][4]["score"] -= 0.01

    runs = tampered(queried["runs"], nudge)
    data = roundtrip(queried, runs)[0]["data"]
    assert data["equivalence"]["numerator"] == 57
    d = data["per_query"][runs["data"]["queries"][0]["query_id"]]
    assert d["identical"] is True
    assert d["max_score_drift"] == pytest.approx(0.01, abs=1e-9)


def test_roundtrip_refuses_runs_from_another_hydrate(queried: dict[str, Any]) -> None:
    other = envelope("runs", queried["runs"]["data"], {**queried["runs"]["inputs"], "hydrate": "0"})
    with pytest.raises(ArtifactError, match=r"runs\.json is stale.*recallbench query"):
        roundtrip(queried, other)


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM memories WHERE id = 'mem-fin-001'",
        "UPDATE memories SET fact_text = fact_text || ' (edited)' WHERE id = 'mem-fin-001'",
    ],
)
def test_a_damaged_source_store_is_refused_not_reported_as_a_clone_failure(
    queried: dict[str, Any], damage: str
) -> None:
    db = sqlite3.connect(queried["dir"] / "stores" / SCOPE / "hotmem.sqlite")
    with db:
        assert db.execute(damage).rowcount == 1
    db.close()
    with pytest.raises(StoreDamaged, match=r"run `recallbench hydrate` again"):
        roundtrip(queried)
    assert not (queried["dir"] / "roundtrip" / SCOPE / "package").exists()


def test_transient_stores_are_rebuilt_for_the_round_trip(tmp_path: Path) -> None:
    q = stage_chain(tmp_path / "build", keep=False)
    assert q["hydrate"]["data"]["mode"] == "transient"
    assert q["hydrate"]["data"]["stores"] is None
    assert q["runs"]["data"]["scopes"][0]["records"] == 80
    assert not (tmp_path / "build" / "stores").exists()  # query built, searched, removed
    assert not (tmp_path / "build" / "work").exists()
    data = roundtrip(q)[0]["data"]
    assert data["equivalence"] == {"numerator": 57, "denominator": 57, "value": 1.0}
    assert data["records"] == {"source": 80, "packaged": 80, "verified": 80, "clone": 80}
    assert all(c["all_rejected"] for c in data["corruption_checks"])
    assert not (tmp_path / "build" / "roundtrip" / SCOPE / "source").exists()


def test_transient_and_kept_stores_give_the_same_runs(
    queried: dict[str, Any], tmp_path: Path
) -> None:
    transient = stage_chain(tmp_path / "transient", keep=False)
    assert transient["runs"]["data"]["queries"] == queried["runs"]["data"]["queries"]
    # a kept store's facts carry the digest hydrate recorded; a transient store's its records
    kept = queried["runs"]["data"]["scopes"]
    assert transient["runs"]["data"]["scopes"] == [
        {"scope_id": s["scope_id"], "records": s["records"]} for s in kept
    ]
    # the round trip of a rebuilt store checks its clone against the rebuilt store's digest
    data = roundtrip(transient)[0]["data"]
    assert data["clone_digest_matches"] is True
    assert data["equivalence"]["value"] == 1.0


def test_a_system_without_a_clone_path_gets_n_a(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    q = stage_chain(tmp_path / "build", system="lancedb-fts")
    rt, timing = roundtrip(q)
    data = rt["data"]
    assert data["available"] is False
    assert data["reason"] == "n/a: lancedb-fts has no clone path"
    assert data["sample"]["scopes_sampled"] == 0 and data["sample"]["scope_ids"] == []
    assert "equivalence" not in data
    assert timing == {}
    assert not (tmp_path / "build" / "roundtrip").exists()
    scores = run_score(q["suite"], q["runs"])
    summary = roundtrip_summary(rt["data"])
    assert summary == {
        "available": False,
        "reason": "n/a: lancedb-fts has no clone path",
        "equivalence": None,
    }
    # no equivalence figure: rule 1 cannot fire
    assert decide({**scores["data"], "roundtrip": summary})["rules"][0]["met"] is False


def test_each_stage_resolves_its_system_once(tmp_path: Path, monkeypatch) -> None:
    """hydrate, query and snapshot-roundtrip each look their system up in the registry once
    per run and carry the object: the serial engine's worker (in this process) uses the
    stage's, it does not resolve the name again."""
    from plugintools import count_lookups

    looked_up = count_lookups(monkeypatch)
    chain = stage_chain(tmp_path / "build")
    after_hydrate_and_query = list(looked_up)
    roundtrip(chain)
    assert after_hydrate_and_query == ["hotmem", "hotmem"]  # hydrate's and query's
    assert looked_up == ["hotmem"] * 3  # and snapshot-roundtrip's


def test_a_stage_refuses_a_carried_system_of_another_name(queried: dict[str, Any]) -> None:
    """A stage given a system object (`run`'s, carried across its stages) checks it is the
    system the upstream artifacts name (hydrate: the name it is asked to run) and refuses
    another in one line, before any work."""
    from recallbench.systems import registry

    other = registry.get_system("bm25")
    build = queried["dir"]
    refusals = [
        lambda: run_hydrate(queried["suite"], build / "h", "hotmem", system=other),
        lambda: run_query(queried["suite"], queried["hydrate"], build, top_k=5, system=other),
        lambda: run_roundtrip(
            queried["suite"], queried["hydrate"], queried["runs"], build, system=other
        ),
    ]
    said = []
    for refused in refusals:
        with pytest.raises(RecallbenchError) as caught:
            refused()
        said.append(str(caught.value))
    assert said == [
        "the system given is 'bm25', but the run names 'hotmem': pass the system of that name",
        *[
            "the system given is 'bm25', but hydrate.json names 'hotmem': pass the system of "
            "that name"
        ]
        * 2,
    ]
    assert not (build / "h").exists() and not (build / "roundtrip").exists()
