"""End to end: every stage through the CLI against the real HotMem 0.2.6 on the committed suite."""

from __future__ import annotations

from pathlib import Path

import hotmem
import pytest
from conftest import (
    BASELINE,
    CORPUS,
    QUERIES,
    STAGE_OUTPUTS,
    cli,
    load_json,
    run_stages,
    stage_args,
)

from recallbench import __version__
from recallbench.artifacts import SCHEMA_VERSION, dumps, file_sha256, fingerprint, read_artifact
from recallbench.datasets.fixtures import load_fixture_suite
from recallbench.stages.report import normalize

ENVELOPE_KINDS = ("suite", "hydrate", "runs", "roundtrip", "scores", "decision")


def normalized_bytes(results_json: Path) -> bytes:
    return dumps(normalize(load_json(results_json)))


def test_every_artifact_is_written(staged_build: Path) -> None:
    for _, name in STAGE_OUTPUTS:
        assert (staged_build / name).is_file(), name
    assert (
        (staged_build / "report.md")
        .read_text(encoding="utf-8")
        .startswith("# Retrieval quality report")
    )
    assert (staged_build / "store" / "hotmem.sqlite").is_file()
    assert (staged_build / "roundtrip" / "package" / "manifest.json").is_file()
    assert (staged_build / "roundtrip" / "clone" / "hotmem.sqlite").is_file()


def test_envelopes_name_their_upstream_fingerprints(staged_build: Path) -> None:
    env = {kind: read_artifact(staged_build, kind) for kind in ENVELOPE_KINDS}
    for kind, e in env.items():
        assert e["artifact"] == kind
        assert e["schema_version"] == SCHEMA_VERSION == 1
        assert e["recallbench_version"] == __version__
        assert e["fingerprint"] == fingerprint(e["data"])
    fp = {kind: e["fingerprint"] for kind, e in env.items()}
    assert len(set(fp.values())) == len(fp)  # six different artifacts
    assert env["suite"]["inputs"] == {
        "corpus": file_sha256(CORPUS),
        "queries": file_sha256(QUERIES),
    }
    assert env["suite"]["source_paths"] == {"corpus": str(CORPUS), "queries": str(QUERIES)}
    assert env["hydrate"]["inputs"] == {"suite": fp["suite"]}
    assert env["runs"]["inputs"] == {"suite": fp["suite"], "hydrate": fp["hydrate"]}
    assert env["roundtrip"]["inputs"] == {
        "suite": fp["suite"],
        "hydrate": fp["hydrate"],
        "runs": fp["runs"],
    }
    assert env["scores"]["inputs"] == {
        "suite": fp["suite"],
        "runs": fp["runs"],
        "roundtrip": fp["roundtrip"],
    }
    assert env["decision"]["inputs"] == {"scores": fp["scores"]}


def test_hydrate_stored_every_memory_in_hotmem(staged_build: Path) -> None:
    data = read_artifact(staged_build, "hydrate")["data"]
    assert data["system"] == "hotmem"
    assert data["records"] == 80
    assert data["configuration"]["hotmem_version"] == hotmem.__version__ == "0.2.6"


def test_query_rows_hold_top_k_hits_in_score_order(staged_build: Path) -> None:
    suite = load_fixture_suite(CORPUS, QUERIES)
    grades = {q.query_id: q.relevance for q in suite.queries}
    runs = read_artifact(staged_build, "runs")["data"]
    assert runs["top_k"] == 5 and runs["repeat"] == 1
    assert [r["query_id"] for r in runs["queries"]] == [q.query_id for q in suite.queries]
    known_ids = {m.memory_id for m in suite.memories}
    for row in runs["queries"]:
        hits = row["hits"]
        assert len(hits) == 5, row["query_id"]
        ids = [h["memory_id"] for h in hits]
        assert len(set(ids)) == 5 and set(ids) <= known_ids
        scores = [h["score"] for h in hits]
        assert all(a >= b for a, b in zip(scores, scores[1:], strict=False)), (
            row["query_id"],
            scores,
        )
        assert [h["grade"] for h in hits] == [grades[row["query_id"]].get(i, 0) for i in ids]
        assert len(runs["latency_ms"][row["query_id"]]) == 1


def test_first_query_returns_the_expected_memories(staged_build: Path) -> None:
    """A concrete ranking from HotMem (the two near-duplicate targets rank 1 and 2)."""
    row = read_artifact(staged_build, "runs")["data"]["queries"][0]
    assert row["query_id"] == "q-lexical-001"
    assert [h["memory_id"] for h in row["hits"]][:2] == ["mem-fin-001", "mem-fin-002"]
    assert [h["grade"] for h in row["hits"]][:2] == [3, 3]


def test_roundtrip_is_equivalent_and_rejects_corruption(staged_build: Path) -> None:
    rt = read_artifact(staged_build, "roundtrip")["data"]
    assert rt["equivalence"] == {"numerator": 57, "denominator": 57, "value": 1.0}
    assert rt["records"] == {"source": 80, "packaged": 80, "verified": 80, "clone": 80}
    assert len(rt["per_query"]) == 57
    assert all(d["identical"] and d["max_score_drift"] == 0.0 for d in rt["per_query"].values())
    cc = rt["corruption_check"]
    assert cc["rejected"] is True
    assert cc["reason"] == "corrupt_compression"
    assert cc["flipped_bytes"] == 1


def test_decide_prints_and_records_the_rule(staged_build: Path) -> None:
    decision = read_artifact(staged_build, "decision")["data"]
    assert decision["rule"] == 2
    assert decision["action"] == "semantic_embeddings"
    assert decision == load_json(staged_build / "results.json")["decision"]


def test_results_pass_the_baseline_gate(staged_build: Path) -> None:
    result = cli(staged_build, *stage_args("check-baseline"))
    assert result.exit_code == 0, result.output
    assert "result matches" in result.stderr


def test_run_equals_the_staged_commands(staged_build: Path, tmp_path: Path) -> None:
    build = tmp_path / "run-build"
    result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("rule 2: ")
    for _, name in STAGE_OUTPUTS:
        assert (build / name).is_file(), name
    assert normalized_bytes(build / "results.json") == normalized_bytes(
        staged_build / "results.json"
    )
    # the same artifacts too, apart from timings (and fingerprints of data holding timings)
    assert read_artifact(build, "suite") == read_artifact(staged_build, "suite")
    assert (
        read_artifact(build, "decision")["data"] == read_artifact(staged_build, "decision")["data"]
    )
    staged_runs = read_artifact(staged_build, "runs")["data"]["queries"]
    assert read_artifact(build, "runs")["data"]["queries"] == staged_runs


def test_two_runs_give_byte_identical_normalized_results(tmp_path: Path) -> None:
    outputs = []
    for name in ("first", "second"):
        build = tmp_path / name
        result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
        assert result.exit_code == 0, result.output
        outputs.append(normalized_bytes(build / "results.json"))
    assert outputs[0] == outputs[1]
    assert outputs[0] == BASELINE.read_bytes()


def test_rerunning_a_stage_in_place_keeps_the_chain_valid(tmp_path: Path) -> None:
    """Rerunning query and everything after it in the same build dir works (no stale refusal)."""
    build = tmp_path / "build"
    run_stages(build)
    before = normalized_bytes(build / "results.json")
    run_stages(build, ["query", "snapshot-roundtrip", "score", "report", "decide"])
    assert normalized_bytes(build / "results.json") == before


@pytest.mark.parametrize("top_k", [1, 3])
def test_top_k_option_reaches_every_artifact(tmp_path: Path, top_k: int) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"])
    assert cli(build, "query", "--top-k", top_k, "--repeat", 2).exit_code == 0
    run_stages(build, ["snapshot-roundtrip", "score", "report"])
    runs = read_artifact(build, "runs")["data"]
    assert runs["top_k"] == top_k and runs["repeat"] == 2
    assert {len(r["hits"]) for r in runs["queries"]} == {top_k}
    assert all(len(v) == 2 for v in runs["latency_ms"].values())
    result = load_json(build / "results.json")
    assert result["run"]["top_k"] == top_k
    names = [f"mrr@{top_k}", f"ndcg@{top_k}", f"fp_rate@{top_k}", f"duplicate_slot_rate@{top_k}"]
    recall = ["recall@1"] if top_k == 1 else ["recall@1", f"recall@{top_k}"]
    assert result["run"]["metrics"] == recall + names
    assert set(result["metrics"]["overall"]) == set(recall + names)
    header = next(
        x
        for x in (build / "report.md").read_text("utf-8").splitlines()
        if x.startswith("| category |")
    )
    assert header == "| category | " + " | ".join(recall + names) + " |"
    assert result["roundtrip"]["equivalence"]["numerator"] == 57
