"""Systems side by side: paired statistics checked by hand, reproducibility, refusals."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from recallbench.cli import main
from recallbench.compare import compare_results, paired_stats, render_markdown
from recallbench.errors import RecallbenchError

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "benchmarks" / "retrieval" / "baseline.json"


def stats_of(a, b, resamples=2000):
    return paired_stats(a, b, resamples=resamples, rng=np.random.default_rng(0))


def test_exact_sign_flip_all_wins() -> None:
    # d = [1, 1, 1]: of the 2**3 sign patterns only +++ and --- reach |mean| >= 1 -> p = 2/8.
    s = stats_of([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert s["test"] == "exact sign-flip"
    assert s["p_value"] == pytest.approx(0.25)
    assert (s["wins"], s["ties"], s["losses"]) == (3, 0, 0)
    assert s["mean_difference"] == 1.0
    assert s["ci95"] == [1.0, 1.0]  # every bootstrap resample has mean difference 1


def test_exact_sign_flip_mixed() -> None:
    # d = [1, 1, 1, -1], mean 0.5: |sum of signed d| >= 2 for 1 + 4 + 4 + 1 = 10 of 16 patterns.
    s = stats_of([0.0] * 4, [1.0, 1.0, 1.0, -1.0])
    assert s["p_value"] == pytest.approx(10 / 16)
    assert (s["wins"], s["ties"], s["losses"]) == (3, 0, 1)
    assert s["ci95"][0] < 0.5 < s["ci95"][1]


def test_identical_systems_have_nothing_to_test() -> None:
    s = stats_of([0.2, 0.5, 1.0], [0.2, 0.5, 1.0])
    assert s["p_value"] == 1.0 and s["ci95"] == [0.0, 0.0] and s["ties"] == 3


def test_too_few_queries_gives_no_p_value() -> None:
    s = stats_of([0.0], [1.0])
    assert s["p_value"] is None and s["ci95"] is None and s["wins"] == 1


def test_large_n_uses_seeded_random_resamples_reproducibly() -> None:
    rng = np.random.default_rng(7)
    a = rng.random(40).tolist()
    b = (np.asarray(a) + 0.05).tolist()
    first = stats_of(a, b)
    assert first["test"].startswith("sign-flip, 2000 random")
    assert first == stats_of(a, b)
    assert first["p_value"] < 0.001  # every difference is +0.05
    assert first["ci95"][0] == pytest.approx(0.05) and first["ci95"][1] == pytest.approx(0.05)


def _baseline() -> dict:
    return orjson.loads(BASELINE.read_bytes())


def test_compare_a_result_with_itself_shows_no_difference() -> None:
    base = _baseline()
    doc = compare_results([base, copy.deepcopy(base)], ["a", "b"])
    for m in doc["comparisons"][0]["metrics"].values():
        assert m["overall"]["mean_difference"] == 0.0
        assert m["overall"]["losses"] == m["overall"]["wins"] == 0
    assert "## b against a" in render_markdown(doc)


def test_compare_refuses_other_suites_and_top_k() -> None:
    base = _baseline()
    other = copy.deepcopy(base)
    other["suite"]["sources"]["corpus"]["sha256"] = "0" * 64
    with pytest.raises(RecallbenchError, match="another suite"):
        compare_results([base, other], ["a", "b"])
    other = copy.deepcopy(base)
    other["run"]["top_k"] = 3
    with pytest.raises(RecallbenchError, match="top-k"):
        compare_results([base, other], ["a", "b"])
    with pytest.raises(RecallbenchError, match="at least two"):
        compare_results([base], ["a"])


def test_cli_compares_real_systems_reproducibly(tmp_path: Path) -> None:
    runner = CliRunner()
    outs = []
    for i in range(2):
        out = tmp_path / f"c{i}.json"
        r = runner.invoke(
            main,
            [
                "--build-dir",
                str(tmp_path / "build"),
                "-q",
                "compare",
                "--resamples",
                "500",
                "--system",
                "hotmem",
                "--system",
                "hotmem-mmr",
                "--corpus",
                str(ROOT / "benchmarks/retrieval/corpus.jsonl"),
                "--queries",
                str(ROOT / "benchmarks/retrieval/queries.jsonl"),
                "--output",
                str(out),
                "--report",
                str(tmp_path / f"c{i}.md"),
            ],
        )
        assert r.exit_code == 0, r.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    doc = orjson.loads(outs[0])
    assert [s["label"] for s in doc["systems"]] == ["hotmem", "hotmem-mmr"]
    dup = doc["comparisons"][0]["rates"]["duplicate_slot_rate@5"]
    # MMR exists to spread near-duplicates: it must not add duplicate slots on this suite.
    assert dup["challenger"]["numerator"] <= dup["reference"]["numerator"]
    assert not any((tmp_path / "build").iterdir())  # temporary stores are gone


def test_cli_rejects_both_modes(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "compare", "--system", "hotmem", "--result", str(BASELINE)],
    )
    assert r.exit_code == 2 and "either --system or --result" in r.output
