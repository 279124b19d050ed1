"""The statistics of a comparison (`recallbench.metrics.stats`, `compare.compare_results`): a pair's
figures never move with the company it keeps, exact tests against brute force, the random
test's floor, Holm and BH against statsmodels, intervals and power against their formulas,
and the CI gate's exit code."""

from __future__ import annotations

import copy
import gc
import itertools
import json
import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from recallbench.cli.main import CORRECTION_CHOICES, main
from recallbench.commands.compare import compare_results, gate_failures, power_table
from recallbench.metrics import stats
from recallbench.report.comparison import p_text, reading_notes, render_markdown

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "benchmarks" / "retrieval" / "baseline.json"


def _baseline() -> dict:
    return orjson.loads(BASELINE.read_bytes())


def _perturbed(base: dict, seed: int, label: str) -> dict:
    """A copy of the baseline result whose per-query values moved at random (a system of
    its own for the statistics: only the per-query values are read)."""
    rng = np.random.default_rng(seed)
    doc = copy.deepcopy(base)
    doc["system"] = {**doc["system"], "name": label}
    for q in doc["queries"]:
        for name, value in q["metrics"].items():
            numeric = isinstance(value, float | int) and not isinstance(value, bool)
            if numeric and rng.random() < 0.5:
                q["metrics"][name] = float(rng.integers(0, 5)) / 4
    return doc


def _pair(doc: dict, challenger: str) -> dict:
    return next(p for p in doc["comparisons"] if p["challenger"] == challenger)


def _without_adjusted(pair: dict) -> dict:
    """The pair's figures but the adjusted p-values (which depend on the family's size)."""
    pair = copy.deepcopy(pair)
    for m in pair["metrics"].values():
        m["overall"].pop("p_adjusted")
        for c in m["per_category"].values():
            c.pop("p_adjusted")
    return pair


def test_a_pairs_figures_do_not_depend_on_the_other_systems_or_their_order() -> None:
    a = _baseline()
    b, c = _perturbed(a, 1, "b"), _perturbed(a, 2, "c")
    abc = compare_results([a, b, c], ["a", "b", "c"], resamples=500)
    acb = compare_results([a, c, b], ["a", "c", "b"], resamples=500)
    ab = compare_results([a, b], ["a", "b"], resamples=500)
    # p, interval, MDE, W/T/L and every other figure of b vs a: identical in all three
    assert _without_adjusted(_pair(abc, "b")) == _without_adjusted(_pair(acb, "b"))
    assert _without_adjusted(_pair(abc, "b")) == _without_adjusted(_pair(ab, "b"))
    # b's own intervals too
    assert abc["means"]["b"] == acb["means"]["b"] == ab["means"]["b"]
    # the adjusted p-values differ only through the family's size: with the same family
    # (b and c in either order) they are equal; with b alone they are Holm over b's tests
    assert _pair(abc, "b") == _pair(acb, "b")
    # the family: the rows where the systems differ (a row tied on every query tests nothing)
    alone = [m["overall"] for m in _pair(ab, "b")["metrics"].values()]
    tested = [o for o in alone if o["wins"] + o["losses"]]
    assert len(tested) >= 2 and ab["statistics"]["families"]["overall"]["tests"] == len(tested)
    assert abc["statistics"]["families"]["overall"]["tests"] > len(tested)
    assert [o["p_adjusted"] for o in tested] == stats.adjust([o["p_value"] for o in tested], "holm")
    assert all(o["p_adjusted"] == 1.0 for o in alone if o not in tested)
    # the seed is the only other input: another seed moves a random figure
    other = compare_results([a, b], ["a", "b"], resamples=500, seed=1)
    assert _pair(other, "b") != _pair(ab, "b")
    assert abc["statistics"]["streams"] == stats.STREAM_RULE


def _brute_force_p(d: list[float]) -> float:
    """Two-sided sign-flip p by enumerating every sign pattern of every difference (zeros
    included: flipping a zero changes nothing, so the share is the same)."""
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


def test_seven_non_zero_differences_give_the_exact_p() -> None:
    rng = np.random.default_rng(5)
    d = [0.0] * 9 + [round(x, 3) for x in rng.normal(0.2, 0.5, 7)]
    test = stats.sign_flip(d, resamples=10_000, rng=stats.stream(0, "t"))
    assert test.exact and test.non_zero == 7 and test.patterns == 128 and test.floor is None
    assert test.p_value == pytest.approx(_brute_force_p(d), abs=1e-15)
    # the same through a comparison row: 43 ties and 7 wins, as on the fixtures' recall@1
    s = stats.sign_flip([0.0] * 43 + [1.0] * 7, resamples=10_000, rng=stats.stream(0, "t"))
    assert s.exact and s.p_value == pytest.approx(2 / 128)


@pytest.mark.parametrize("m", [1, 2, 5, 12, 16])
def test_the_exact_test_agrees_with_brute_force(m: int) -> None:
    d = list(np.random.default_rng(m).integers(-3, 4, m).astype(float))
    if not any(d):
        d[0] = 1.0
    test = stats.sign_flip(d, resamples=100, rng=stats.stream(0, "t"))
    assert test.exact
    assert test.p_value == pytest.approx(_brute_force_p(d), abs=1e-15)


def test_many_differences_draw_random_patterns_and_never_print_below_the_floor() -> None:
    d = np.random.default_rng(3).normal(1.0, 0.1, 200)  # far from 0: no pattern as extreme
    test = stats.sign_flip(d, resamples=10_000, rng=stats.stream(0, "t"))
    assert not test.exact and test.non_zero == 200 and test.patterns == 10_000
    assert test.floor == pytest.approx(1 / 10_001)
    assert test.p_value == pytest.approx(test.floor) and test.at_floor
    figures = {"p_value": test.p_value, "p_floor": test.floor, "p_adjusted": 3 * test.p_value}
    assert p_text(figures) == "< 0.0001"  # never a bare 0.0001 that reads as the p itself
    assert p_text(figures, "p_adjusted") == "< 0.0003"  # 3/10001, rounded up
    # a random p above the floor prints as a number, and is never below the floor
    d = np.random.default_rng(4).normal(0.0, 1.0, 300)
    test = stats.sign_flip(d, resamples=2_000, rng=stats.stream(0, "t"))
    assert test.p_value >= test.floor and not test.at_floor
    assert p_text({"p_value": test.p_value, "p_floor": test.floor}) == f"{test.p_value:.4f}"


def test_holm_and_bh_agree_with_statsmodels(monkeypatch: pytest.MonkeyPatch) -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    multipletests = multitest.multipletests
    # multipletests runs gc.collect() on every Holm call (30-150 ms in a test process): a
    # collection changes no arithmetic, so the 1,000 calls below skip it
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(11)
    for _ in range(1000):
        k = int(rng.integers(1, 30))
        p = rng.random(k) ** rng.uniform(0.5, 4)  # many small p-values, some ties below
        if rng.random() < 0.2:
            p[: k // 2] = p[0]
        for ours, theirs in (("holm", "holm"), ("bh", "fdr_bh")):
            expected = multipletests(p, alpha=0.05, method=theirs)[1]
            assert np.allclose(stats.adjust(p, ours), expected, rtol=0, atol=1e-12)
    assert stats.adjust([0.01, 0.5], "none") == [0.01, 0.5]
    assert CORRECTION_CHOICES == stats.CORRECTIONS


def test_wilson_interval_by_hand() -> None:
    # 7 of 10, z = 1.959964: centre (0.7 + z^2/20) / (1 + z^2/10), half-width as documented
    z = 1.959963984540054
    n, p = 10, 0.7
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = stats.wilson_interval(7, 10)
    assert (low, high) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert (low, high) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    # a 0/1 sample gets Wilson's interval; anything else the bootstrap
    got = stats.mean_interval([1, 1, 1, 0, 1, 0, 1, 1, 0, 1], seed=0, names=("x",), resamples=200)
    assert got.method == "wilson" and (got.low, got.high) == pytest.approx((low, high))
    all_ones = stats.mean_interval([1.0] * 7, seed=0, names=("x",), resamples=200)
    assert all_ones.method == "wilson" and all_ones.low < 1.0 == all_ones.high
    boot = stats.mean_interval([0.2, 0.5, 0.9, 0.4], seed=0, names=("x",), resamples=500)
    assert boot.method == "bootstrap" and boot.low <= boot.mean <= boot.high
    assert stats.mean_interval([0.3], seed=0, names=("x",), resamples=200).low is None
    assert stats.mean_interval([], seed=0, names=("x",), resamples=200) is None


def test_the_mde_and_the_questions_needed_follow_their_formulas() -> None:
    from scipy import stats as sps

    sd, n = 0.3, 50
    expected = (sps.t.ppf(0.975, n - 1) + sps.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)
    assert stats.minimum_detectable(sd, n) == pytest.approx(expected, rel=1e-12)
    needed = stats.questions_needed(sd, 0.05)
    # the fewest queries whose MDE reaches the effect: one fewer does not
    assert stats.minimum_detectable(sd, needed) <= 0.05 < stats.minimum_detectable(sd, needed - 1)
    # close to the normal approximation ((z_a + z_b) sd / effect)^2 = 282.5
    assert 283 <= needed <= 286
    assert stats.questions_needed(0.0, 0.05) is None
    assert stats.minimum_detectable(0.3, 1) is None


def _built_worse(base: dict, by: float) -> dict:
    """The baseline made worse by `by` on every query's ndcg@5 where it can lose that much."""
    worse = copy.deepcopy(base)
    for q in worse["queries"]:
        value = q["metrics"].get("ndcg@5")
        if value is not None and value >= by:
            q["metrics"]["ndcg@5"] = value - by
    return worse


def test_the_gate_fails_only_a_significant_and_material_loss() -> None:
    base = _baseline()
    doc = compare_results([base, _built_worse(base, 0.2)], ["ref", "worse"], resamples=500)
    o = doc["comparisons"][0]["metrics"]["ndcg@5"]["overall"]
    assert o["ci95"][1] < -0.01 and o["p_adjusted"] < 0.05
    (line,) = gate_failures(doc, [("ndcg@5", 0.01)])
    assert line.startswith("worse is worse than ref on ndcg@5 by more than 0.01: -0.")
    assert "95% CI [" in line and "p Holm" in line
    assert gate_failures(doc, [("ndcg@5", 0.5)]) == []  # not worse by that much
    assert gate_failures(doc, [("recall@5", 0.0)]) == []  # unchanged measure
    same = compare_results([base, copy.deepcopy(base)], ["ref", "same"], resamples=500)
    assert gate_failures(same, [("ndcg@5", 0.0)]) == []


def _saved(tmp: Path, result: dict, name: str) -> Path:
    """`result` saved as a results envelope under tmp/name/results.json (by `report`'s own
    writer: a real artifact compare and power read)."""
    from recallbench.builddir.artifacts import dumps, envelope

    path = tmp / name / "results.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(dumps(envelope("results", result, {})))
    return path


def test_compare_fail_if_worse_exits_4_on_a_worse_pair_and_0_otherwise(tmp_path: Path) -> None:
    base = _baseline()
    ref = _saved(tmp_path, base, "ref")
    worse = _saved(tmp_path, _built_worse(base, 0.2), "worse")
    runner = CliRunner()

    def compare(*paths: Path, gate: str) -> object:
        args = ["--build-dir", str(tmp_path / "b"), "compare", "--resamples", "500"]
        args += [a for p in paths for a in ("--result", str(p))] + ["--fail-if-worse", gate]
        return runner.invoke(main, args)

    r = compare(ref, worse, gate="ndcg@5:0.01")
    assert r.exit_code == 4, r.output
    assert "worse: hotmem (worse) is worse than hotmem (ref) on ndcg@5 by more than 0.01" in (
        r.stderr
    )
    assert (tmp_path / "b" / "compare.json").is_file()  # the comparison is written first
    assert compare(worse, ref, gate="ndcg@5:0.01").exit_code == 0  # the other way: better
    assert compare(ref, worse, gate="ndcg@5:0.5").exit_code == 0  # not by that margin
    bad = compare(ref, worse, gate="ndcg@5:-1")
    assert bad.exit_code == 2 and "must be a number >= 0" in bad.stderr
    unknown = compare(ref, worse, gate="ndcg@7")
    assert unknown.exit_code == 1 and "not a compared measure; one of" in unknown.stderr


def test_power_prints_the_questions_an_effect_needs(tmp_path: Path) -> None:
    base = _baseline()
    ref = _saved(tmp_path, base, "ref")
    other = _saved(tmp_path, _perturbed(base, 1, "b"), "other")
    r = CliRunner().invoke(
        main, ["power", "--result", str(ref), "--result", str(other), "--effect", "0.02"]
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].split()[-3:] == ["questions", "for", "0.02"]
    (row,) = power_table(
        [base, _perturbed(base, 1, "b")], ["hotmem", "b"], effect=0.02, measures=["ndcg@5"]
    )
    assert row["queries_needed"] == stats.questions_needed(row["sd_difference"], 0.02)
    assert f"{row['queries_needed']:,}" in r.stdout
    j = CliRunner().invoke(main, ["power", "--result", str(ref), "--result", str(other), "--json"])
    assert json.loads(j.stdout)["rows"][0]["queries_needed"] is None  # no --effect


def test_every_output_carries_the_intervals_the_correction_and_the_mde(tmp_path: Path) -> None:
    """compare.json, compare.md, compare.html and stdout; "Reading this" is written from
    the data (n, the correction, the floor, the MDE in words)."""
    out = tmp_path / "b"
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(out), "compare", "--resamples", "300"]
        + ["--system", "hotmem", "--system", "bm25"],
    )
    assert r.exit_code == 0, r.output
    doc = orjson.loads((out / "compare.json").read_bytes())
    mean = doc["means"]["bm25"]["ndcg@5"]
    ci = f"0.800 [{mean['ci95'][0]:.3f}, {mean['ci95'][1]:.3f}]"
    o = doc["comparisons"][0]["metrics"]["ndcg@5"]["overall"]
    assert o["mde"] > 0 and o["p_adjusted"] >= o["p_value"]
    markdown = (out / "compare.md").read_text().replace("\\[", "[").replace("\\]", "]")
    for text in (r.stdout, markdown, (out / "compare.html").read_text()):
        assert ci in text
        assert f"{o['mde']:.3f}" in text
        assert "Holm" in text
    notes = reading_notes(doc)
    assert any("Holm correction over the 4 tests of the overall rows" in n for n in notes)
    assert any("Holm correction over the" in n and "category rows" in n for n in notes)
    assert any(f"could detect a difference of {o['mde']:.3f} in ndcg@5" in n for n in notes)
    assert any("cannot go below" in n for n in notes)  # the 22-win ndcg@5 row is random
    assert "5-8 queries" not in render_markdown(doc)


def test_reading_this_speaks_of_the_dataset_compared() -> None:
    base = _baseline()
    doc = compare_results([base, _perturbed(base, 1, "b")], ["a", "b"], resamples=300)
    doc["dataset"]["name"] = "locomo"
    text = "\n".join(reading_notes(doc))
    assert "fixture" not in text and "this locomo file" in text
    assert f"{doc['dataset']['queries']} scored queries" in text


def test_the_bootstrap_agrees_with_scipys_percentile_bootstrap() -> None:
    """`stats.bootstrap_interval` is numpy's draws of the definition scipy.stats.bootstrap
    (method="percentile") implements: on one sample the two intervals differ only by the
    resampling noise (each bound's Monte Carlo error is about 0.001 here)."""
    from scipy import stats as sps

    for seed, n in ((1, 50), (2, 500)):
        x = np.random.default_rng(seed).random(n) ** 2
        ours = stats.bootstrap_interval(x, resamples=20_000, rng=stats.stream(0, "check"))
        theirs = sps.bootstrap(
            (x,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(9)
        ).confidence_interval
        assert ours == pytest.approx((theirs.low, theirs.high), abs=0.006)
        assert ours[0] < float(x.mean()) < ours[1]
