"""End to end: every stage through the CLI against the real HotMem 0.2.6 on the committed suite."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import hotmem
import orjson
import pytest
from conftest import (
    BASELINE,
    CORPUS,
    QUERIES,
    STAGE_OUTPUTS,
    cli,
    copy_build,
    load_json,
    run_fixtures,
    run_stages,
    stage_args,
)

from recallbench import __version__
from recallbench.builddir.artifacts import (
    ARTIFACTS,
    SCHEMA_VERSION,
    STAGE_NAMES,
    STAGES,
    dumps,
    envelope_fingerprint,
    file_sha256,
    read_artifact,
    read_timing,
)
from recallbench.builddir.lock import LOCK_NAME
from recallbench.builddir.scopespool import SPOOL
from recallbench.commands.pipeline import Run
from recallbench.datasets.fixture_rules import POLICY_NAME
from recallbench.datasets.fixtures.reader import LEVEL, load_fixture_scope
from recallbench.systems.packaging import records_digest

ENVELOPE_KINDS = ("suite", "hydrate", "runs", "roundtrip", "scores", "results", "decision")
SCOPE = "00000"  # the fixture suite's one scope, as stores/ and roundtrip/ name it


def result_bytes(build: Path) -> bytes:
    """The result document (results.json's data) in canonical bytes: a baseline's form."""
    return dumps(read_artifact(build, "results")["data"])


def test_the_stage_table_is_the_pipeline_order() -> None:
    assert [s for s, _ in STAGE_OUTPUTS] == list(STAGE_NAMES)
    assert STAGE_NAMES == (
        "validate",
        "hydrate",
        "query",
        "snapshot-roundtrip",
        "score",
        "report",
        "decide",
    )
    assert [f for _, f in STAGE_OUTPUTS] == [f"{k}.json" for k in ENVELOPE_KINDS]


def test_every_artifact_is_written(staged_build: Path) -> None:
    for _, name in STAGE_OUTPUTS:
        assert (staged_build / name).is_file(), name
    assert (
        (staged_build / "report.md")
        .read_text(encoding="utf-8")
        .startswith("# Retrieval quality report")
    )
    assert (staged_build / "stores" / SCOPE / "hotmem.sqlite").is_file()
    work = staged_build / "roundtrip" / SCOPE
    assert (work / "package" / "manifest.json").is_file()
    assert (work / "clone" / "hotmem.sqlite").is_file()
    for kind in ("hydrate", "runs", "roundtrip"):  # the stages that time work
        assert (staged_build / "timings" / f"{kind}.json").is_file(), kind
    # no temp file of an interrupted publish is left behind
    assert not [p for p in staged_build.rglob(".*.tmp")]


def test_envelopes_name_their_upstream_fingerprints(staged_build: Path) -> None:
    env = {kind: read_artifact(staged_build, kind) for kind in ENVELOPE_KINDS}
    for kind, e in env.items():
        assert e["artifact"] == kind
        assert e["schema_version"] == SCHEMA_VERSION == 2
        assert e["recallbench_version"] == __version__
        # the fingerprint covers the kind, the schema version, the inputs and the data
        assert e["fingerprint"] == envelope_fingerprint(kind, e["inputs"], e["data"])
    fp = {kind: e["fingerprint"] for kind, e in env.items()}
    assert len(set(fp.values())) == len(fp)  # seven different artifacts
    assert env["suite"]["inputs"] == {
        "corpus": file_sha256(CORPUS),
        "queries": file_sha256(QUERIES),
    }
    assert env["hydrate"]["inputs"] == {"suite": fp["suite"]}
    assert env["runs"]["inputs"] == {"suite": fp["suite"], "hydrate": fp["hydrate"]}
    assert env["roundtrip"]["inputs"] == {
        "suite": fp["suite"],
        "hydrate": fp["hydrate"],
        "runs": fp["runs"],
    }
    assert env["scores"]["inputs"] == {"suite": fp["suite"], "runs": fp["runs"]}
    assert env["results"]["inputs"] == {
        k: fp[k] for k in ("suite", "hydrate", "runs", "roundtrip", "scores")
    }
    assert env["decision"]["inputs"] == {
        "suite": fp["suite"],
        "scores": fp["scores"],
        "roundtrip": fp["roundtrip"],
    }


def test_each_artifact_records_the_inputs_its_stage_declares(
    staged_build: Path, fixture_run: Run
) -> None:
    """Through the CLI (`load_inputs`) and in process (`run_pipeline`), each stage's
    artifact is made from exactly the artifacts its `Stage.inputs` declares; run_pipeline
    makes every stage's artifact, in the order of STAGES (a stage added there is chained)."""
    for s in STAGES:
        for made in (read_artifact(staged_build, s.kind), fixture_run.envelopes[s.kind]):
            assert sorted(k for k in made["inputs"] if k in ARTIFACTS) == sorted(s.inputs), (
                s.command
            )
    assert list(fixture_run.envelopes) == [s.kind for s in STAGES]


def test_the_stages_write_only_their_declared_outputs(staged_build: Path) -> None:
    declared = {name.rstrip("/") for s in STAGES for name in s.outputs}
    written = {
        str(p.relative_to(staged_build))
        for p in [*staged_build.iterdir(), *(staged_build / "timings").iterdir()]
        if p.name != "timings"
    }
    # the build dir's lock and report's matplotlib cache (made only when this process has
    # no font list yet) are no stage's outputs; the fixtures have no structure spool
    assert written - {".cache"} == declared - {"scopes-structure.jsonl"} | {LOCK_NAME}


def test_suite_records_the_identity_of_the_validated_files(staged_build: Path) -> None:
    data = read_artifact(staged_build, "suite")["data"]
    assert data["dataset"] == "fixtures"
    assert data["identity"]["known"] is True
    assert data["identity"]["files"] == [
        {
            "role": role,
            "name": path.name,
            "size_bytes": path.stat().st_size,
            "sha256": file_sha256(path),
        }
        for role, path in (("corpus", CORPUS), ("queries", QUERIES))
    ]
    assert data["levels"] == [{"name": LEVEL, "prefix": "", "description": "one fixture memory"}]
    assert data["counts"]["scopes"] == 1
    assert data["counts"]["memories"] == 80
    assert data["counts"]["queries"] == data["counts"]["queries_raw"] == 57
    assert data["drops"] == [] and data["counts"]["dropped"] == {}
    assert [{k: v for k, v in s.items() if k != "spool"} for s in data["scopes"]] == [
        {"scope_id": "suite", "memories": 80, "queries": 57}
    ]
    # the suite names the rules `decide` applies to this dataset
    assert data["decision_policy"] == POLICY_NAME
    assert read_artifact(staged_build, "decision")["data"]["policy"] == POLICY_NAME


def test_suite_names_the_scope_spool_later_stages_read(staged_build: Path) -> None:
    env = read_artifact(staged_build, "suite")
    spool = staged_build / SPOOL
    assert env["spool_path"] == str(spool.resolve())
    assert env["data"]["spool"] == {
        "file": SPOOL,
        "sha256": file_sha256(spool),
        "bytes": spool.stat().st_size,
    }
    # the spool holds the validated scope: every memory and query, as the workers take them;
    # the scope index says where its line lies and what its sha256 is
    (line,) = spool.read_bytes().splitlines(keepends=True)
    assert env["data"]["scopes"][0]["spool"] == {
        "offset": 0,
        "bytes": len(line),
        "sha256": hashlib.sha256(line).hexdigest(),
    }
    item = orjson.loads(line)
    scope, _ = load_fixture_scope(CORPUS, QUERIES)
    assert item["scope_id"] == "suite"
    assert [m["memory_id"] for m in item["memories"]] == [m.memory_id for m in scope.memories]
    assert [q["query_id"] for q in item["queries"]] == [q.query_id for q in scope.queries]


def test_timings_are_sidecars_of_the_artifact_they_describe(staged_build: Path) -> None:
    for kind in ("hydrate", "runs", "roundtrip"):
        env = read_artifact(staged_build, kind)
        timing = read_timing(staged_build, env)
        assert timing is not None, kind
        assert timing["artifact_fingerprint"] == env["fingerprint"]
        assert timing["label"].startswith("local diagnostic")
        assert timing["wall_seconds"] > 0
        # wall time never enters an artifact, so it cannot change a fingerprint
        assert "wall_seconds" not in dumps(env["data"]).decode()
        assert "timings" not in env["inputs"]


def test_hydrate_stored_every_memory_in_hotmem(staged_build: Path) -> None:
    data = read_artifact(staged_build, "hydrate")["data"]
    assert data["system"] == "hotmem"
    assert data["mode"] == "kept"
    assert data["configuration"]["hotmem_version"] == hotmem.__version__ == "0.2.6"
    assert data["capabilities"] == {"clone": True, "embedder": True, "lexical": True}
    scope, _ = load_fixture_scope(CORPUS, QUERIES)
    assert data["stores"] == [
        {
            "scope_id": "suite",
            "records": 80,
            "digest": records_digest((m.memory_id, m.text) for m in scope.memories),
        }
    ]
    # the store on disk holds exactly the corpus, read back without recallbench
    db = sqlite3.connect(staged_build / "stores" / SCOPE / "hotmem.sqlite")
    try:
        rows = dict(db.execute("SELECT id, fact_text FROM memories"))
    finally:
        db.close()
    assert rows == {m.memory_id: m.text for m in scope.memories}


def test_query_rows_hold_top_k_hits_in_score_order(staged_build: Path) -> None:
    scope, _ = load_fixture_scope(CORPUS, QUERIES)
    runs_env = read_artifact(staged_build, "runs")
    runs = runs_env["data"]
    assert runs["top_k"] == 5
    assert runs["levels"] == [LEVEL]
    assert runs["store_mode"] == "kept"
    assert [r["query_id"] for r in runs["queries"]] == [q.query_id for q in scope.queries]
    relevance = {q.query_id: dict(q.relevance[LEVEL]) for q in scope.queries}
    known_ids = {m.memory_id for m in scope.memories}
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
        level = row["levels"][LEVEL]
        assert level["ranking"] == ids and level["scores"] == scores
        assert level["gold"] == relevance[row["query_id"]]
        relevant = {i for i, g in level["gold"].items() if g >= 2}
        assert {m["id"] for m in row["missed"].get(LEVEL, [])} == relevant - set(ids)
    timing = read_timing(staged_build, runs_env)
    assert timing["repeat"] == 1
    assert timing["latency"]["samples"] == 57


def test_first_query_returns_the_expected_memories(staged_build: Path) -> None:
    """A concrete ranking from HotMem (the two near-duplicate targets rank 1 and 2)."""
    row = read_artifact(staged_build, "runs")["data"]["queries"][0]
    assert row["query_id"] == "q-lexical-001"
    assert [h["memory_id"] for h in row["hits"]][:2] == ["mem-fin-001", "mem-fin-002"]
    gold = row["levels"][LEVEL]["gold"]
    assert [gold.get(h["memory_id"], 0) for h in row["hits"]][:2] == [3, 3]
    returned = read_artifact(staged_build, "results")["data"]["queries"][0]["returned"]
    assert [(r["id"], r["grade"]) for r in returned[:2]] == [("mem-fin-001", 3), ("mem-fin-002", 3)]


def test_roundtrip_is_equivalent_and_rejects_corruption(staged_build: Path) -> None:
    rt = read_artifact(staged_build, "roundtrip")["data"]
    assert rt["available"] is True
    assert rt["equivalence"] == {"numerator": 57, "denominator": 57, "value": 1.0}
    assert rt["records"] == {"source": 80, "packaged": 80, "verified": 80, "clone": 80}
    assert rt["clone_digest_matches"] is True
    assert len(rt["per_query"]) == 57
    assert all(d["identical"] and d["max_score_drift"] == 0.0 for d in rt["per_query"].values())
    checks = {c["name"]: c for c in rt["corruption_checks"]}
    assert set(checks) == {"raw_byte", "stale_manifest"}
    assert all(c["all_rejected"] and c["rejected"] == c["scopes"] == 1 for c in checks.values())
    assert checks["raw_byte"]["reasons"] == ["corrupt_compression"]
    assert checks["stale_manifest"]["reasons"] == ["decompressed_digest_mismatch"]


def test_decide_prints_and_records_the_rule(staged_build: Path, tmp_path: Path) -> None:
    decision = read_artifact(staged_build, "decision")["data"]
    assert decision["rule"] == 2
    assert decision["action"] == "semantic_embeddings"
    assert decision == read_artifact(staged_build, "results")["data"]["decision"]
    result = cli(copy_build(staged_build, tmp_path / "build"), "decide")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("rule 2: Add portable semantic embeddings next")


def test_results_pass_the_baseline_gate(staged_build: Path) -> None:
    result = cli(staged_build, *stage_args("check-baseline"))
    assert result.exit_code == 0, result.output
    assert "result matches" in result.stderr
    assert result_bytes(staged_build) == BASELINE.read_bytes()


def test_run_equals_the_staged_commands(staged_build: Path, tmp_path: Path) -> None:
    build = tmp_path / "run-build"
    result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("rule 2: ")  # after the table
    for _, name in STAGE_OUTPUTS:
        assert (build / name).is_file(), name
    # every artifact is the same, fingerprints included: timings live in the sidecars
    for kind in ENVELOPE_KINDS:
        run_env, staged_env = read_artifact(build, kind), read_artifact(staged_build, kind)
        assert run_env["fingerprint"] == staged_env["fingerprint"], kind
        assert run_env["data"] == staged_env["data"], kind
    assert (build / "results.json").read_bytes() == (staged_build / "results.json").read_bytes()
    for kind in ("hydrate", "runs", "roundtrip"):
        assert read_timing(build, read_artifact(build, kind)) is not None, kind


def test_run_writes_copies_where_output_and_report_point(tmp_path: Path) -> None:
    """`recallbench run --output F --report R`, as the script's options: the build directory
    gets every artifact, F the results envelope, R the Markdown report with its plots and
    HTML report beside it, the same bytes as the build's own."""
    build, out = tmp_path / "build", tmp_path / "out"
    output, report = out / "r.json", out / "md" / "r.md"
    result = cli(
        build,
        "run",
        "--corpus",
        CORPUS,
        "--queries",
        QUERIES,
        "--output",
        output,
        "--report",
        report,
    )
    assert result.exit_code == 0, result.output
    data = f"{report.parent / 'report-data'}/"
    assert f", {output}, {report}, {report.parent / 'r.html'}, {data}; the stage" in result.stderr
    assert output.read_bytes() == (build / "results.json").read_bytes()
    assert report.read_text(encoding="utf-8") == (build / "report.md").read_text(encoding="utf-8")
    assert (report.parent / "r.html").read_bytes() == (build / "report.html").read_bytes()
    plots = sorted(p.relative_to(build) for p in (build / "report-plots").iterdir())
    assert plots and all(
        (report.parent / p).read_bytes() == (build / p).read_bytes() for p in plots
    )
    data = sorted(p.name for p in (build / "report-data").iterdir())
    assert data and all(
        (report.parent / "report-data" / n).read_bytes() == (build / "report-data" / n).read_bytes()
        for n in data
    )  # report.html's data files beside each copy of it
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == sorted(
        ["r.json", "r.md", "r.html", *(p.name for p in plots), *data]
    )


def test_two_runs_give_byte_identical_results(tmp_path: Path) -> None:
    outputs = []
    for name in ("first", "second"):
        build = tmp_path / name
        result = cli(build, "run", "--corpus", CORPUS, "--queries", QUERIES)
        assert result.exit_code == 0, result.output
        outputs.append((build / "results.json").read_bytes())
        assert result_bytes(build) == BASELINE.read_bytes()
    assert outputs[0] == outputs[1]


def test_rerunning_a_stage_in_place_keeps_the_chain_valid(tmp_path: Path) -> None:
    """Rerunning any stage and everything after it in the same build dir works (no stale
    refusal), and gives the same artifacts."""
    build = tmp_path / "build"
    run_stages(build)
    before = {kind: read_artifact(build, kind)["fingerprint"] for kind in ENVELOPE_KINDS}
    run_stages(build, ["hydrate", "query", "snapshot-roundtrip", "score", "report", "decide"])
    after = {kind: read_artifact(build, kind)["fingerprint"] for kind in ENVELOPE_KINDS}
    assert after == before
    assert result_bytes(build) == BASELINE.read_bytes()


@pytest.mark.parametrize("top_k", [1, 3])
def test_top_k_option_reaches_every_artifact(tmp_path: Path, top_k: int) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"])
    assert cli(build, "query", "--top-k", top_k, "--repeat", 2).exit_code == 0
    run_stages(build, ["snapshot-roundtrip", "score", "report", "decide"])
    runs_env = read_artifact(build, "runs")
    runs = runs_env["data"]
    assert runs["top_k"] == top_k
    assert {len(r["hits"]) for r in runs["queries"]} == {top_k}
    timing = read_timing(build, runs_env)
    assert timing["repeat"] == 2
    assert timing["latency"]["samples"] == 2 * 57
    result = read_artifact(build, "results")["data"]
    assert result["run"]["top_k"] == top_k
    names = [f"mrr@{top_k}", f"ndcg@{top_k}", f"fp_rate@{top_k}", f"duplicate_slot_rate@{top_k}"]
    recall = ["recall@1"] if top_k == 1 else ["recall@1", f"recall@{top_k}"]
    assert [m["name"] for m in result["run"]["measures"]] == recall + names
    assert set(result["metrics"]["overall"]) == set(recall + names)
    assert read_artifact(build, "scores")["data"]["top_k"] == top_k
    assert read_artifact(build, "decision")["data"]["top_k"] == top_k
    header = next(
        x
        for x in (build / "report.md").read_text("utf-8").splitlines()
        if x.startswith("| category |")
    )
    # the means; the slot rates (fp_rate, duplicate_slot_rate) are in a table of their own
    assert header == "| category | queries | " + " | ".join(recall + names[:2]) + " |"
    assert result["roundtrip"]["equivalence"]["numerator"] == 57
    assert all(len(q["returned"]) == top_k for q in result["queries"])


def test_results_json_is_refused_by_the_gate_when_top_k_differs(tmp_path: Path) -> None:
    build = tmp_path / "build"
    run_stages(build, ["validate", "hydrate"])
    assert cli(build, "query", "--top-k", 3).exit_code == 0
    run_stages(build, ["snapshot-roundtrip", "score", "report"])
    result = cli(build, *stage_args("check-baseline"))
    assert result.exit_code == 3, result.output
    assert "the baseline was made with top-k 5, this run used 3" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "recallbench check-baseline: error: result differs from"
    )
    assert load_json(build / "results.json")["data"]["run"]["top_k"] == 3


def test_run_resolves_its_system_once_and_sets_it_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` (`run_pipeline`, the serial engine) looks its system up in the registry once and
    carries that object through hydrate, query and snapshot-roundtrip: each stage's worker
    (in this process) takes it, and its `setup()` runs once, not once per stage."""
    from plugintools import count_lookups

    from recallbench.engine import workerstate
    from recallbench.systems import registry

    looked_up = count_lookups(monkeypatch)
    counting, setups, workers = registry.get_system, [], []

    def with_setup(name: str = registry.DEFAULT_SYSTEM) -> object:
        system = counting(name)
        system.setup = lambda: setups.append(system)  # the hook a plugin may declare
        return system

    def init_worker(config: dict) -> None:
        workers.append(config["instance"])
        real_init_worker(config)

    real_init_worker = workerstate.init_worker
    monkeypatch.setattr(registry, "get_system", with_setup)
    monkeypatch.setattr(workerstate, "init_worker", init_worker)
    run = run_fixtures(tmp_path)
    run.close()
    assert looked_up == ["hotmem"]
    # hydrate's, query's and snapshot-roundtrip's worker: one object, set up once
    assert len(workers) == 3 and all(w is setups[0] for w in workers) and len(setups) == 1
    assert run.envelopes["roundtrip"]["data"]["available"] is True
