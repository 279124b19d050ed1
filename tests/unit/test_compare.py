"""Systems side by side: paired statistics checked by hand, reproducibility, refusals, and
comparisons over every dataset (fixtures, LongMemEval, LoCoMo), paired per query id."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from recallbench.builddir.lock import LOCK_NAME
from recallbench.cli.main import main
from recallbench.commands.compare import (
    compare_results,
    paired_stats,
    reference_first,
    result_labels,
)
from recallbench.commands.pipeline import run_pipeline
from recallbench.core.errors import RecallbenchError
from recallbench.datasets.locomo import generator as locomo_generator
from recallbench.datasets.longmemeval import generator as longmemeval_generator
from recallbench.report.comparison import headline, render_markdown
from recallbench.report.result import per_query_values

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "benchmarks" / "retrieval" / "baseline.json"


def stats_of(a, b, resamples=2000):
    return paired_stats(a, b, resamples=resamples, seed=0, names=("a", "b", "m", "overall"))


def test_exact_sign_flip_all_wins() -> None:
    # d = [1, 1, 1]: of the 2**3 sign patterns only +++ and --- reach |mean| >= 1 -> p = 2/8.
    s = stats_of([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert s["test"] == "exact sign-flip over 2^3 patterns"
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
    assert first["test"].startswith("sign-flip, 2,000 random")
    assert first == stats_of(a, b)
    # every difference is +0.05: no random pattern is as extreme, p is the floor 1/(R+1)
    assert first["p_value"] == first["p_floor"] == pytest.approx(1 / 2001)
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


def test_compare_refuses_other_files_options_datasets_and_top_k() -> None:
    base = _baseline()
    other = copy.deepcopy(base)
    other["dataset"]["identity"]["files"][0]["sha256"] = "0" * 64
    with pytest.raises(RecallbenchError, match="b: made from another dataset, file or reader"):
        compare_results([base, other], ["a", "b"])
    other = copy.deepcopy(base)
    other["dataset"]["options"] = {"unit": "turn"}
    with pytest.raises(RecallbenchError, match="another dataset, file or reader options"):
        compare_results([base, other], ["a", "b"])
    other = copy.deepcopy(base)
    other["dataset"]["dataset"] = "locomo"
    with pytest.raises(RecallbenchError, match="another dataset, file or reader options"):
        compare_results([base, other], ["a", "b"])
    other = copy.deepcopy(base)
    other["run"]["top_k"] = 3
    with pytest.raises(RecallbenchError, match="top-k 3 differs from a's 5"):
        compare_results([base, other], ["a", "b"])
    with pytest.raises(RecallbenchError, match="at least two"):
        compare_results([base], ["a"])
    with pytest.raises(RecallbenchError, match="labels must be distinct"):
        compare_results([base, copy.deepcopy(base)], ["a", "a"])


def test_compare_pairs_queries_by_id_not_by_position() -> None:
    base = _baseline()
    shuffled = copy.deepcopy(base)
    shuffled["queries"].reverse()
    doc = compare_results([base, shuffled], ["a", "b"], resamples=200)
    for m in doc["comparisons"][0]["metrics"].values():
        assert m["overall"]["mean_difference"] == 0.0
        assert (m["overall"]["wins"], m["overall"]["losses"]) == (0, 0)
    # one query made worse is one loss, in its own category only
    worse = copy.deepcopy(shuffled)
    q = next(x for x in worse["queries"] if x["query_id"] == "q-lexical-001")
    assert q["metrics"]["mrr@5"] == 1.0
    q["metrics"]["mrr@5"] = 0.0
    mrr = compare_results([base, worse], ["a", "b"], resamples=200)["comparisons"][0]["metrics"][
        "mrr@5"
    ]
    assert (mrr["overall"]["wins"], mrr["overall"]["losses"]) == (0, 1)
    assert mrr["overall"]["mean_difference"] == pytest.approx(-1 / 50)
    assert mrr["per_category"]["exact_lexical"]["losses"] == 1
    assert sum(c["losses"] for c in mrr["per_category"].values()) == 1


def test_headline_is_one_line_per_challenger_on_ndcg_at_k() -> None:
    base = _baseline()
    doc = compare_results([base, copy.deepcopy(base), copy.deepcopy(base)], ["a", "b", "c"])
    lines = headline(doc).splitlines()
    mean = doc["means"]["a"]["ndcg@5"]
    assert mean["mean"] == pytest.approx(0.648, abs=5e-4) and mean["method"] == "bootstrap"
    ci = f"0.648 [{mean['ci95'][0]:.3f}, {mean['ci95'][1]:.3f}]"
    assert lines == [
        f"{label} vs a: ndcg@5 {ci} -> {ci} (+0.000, 95% CI [+0.000, +0.000], "
        "p 1.0000, p Holm 1.0000, W/T/L 0/50/0, n=50, MDE n/a)"
        for label in ("b", "c")
    ]
    assert render_markdown(doc, headline_only=True) == headline(doc)
    # without nDCG@k: recall@k; without either: the first measure
    pair = doc["comparisons"][0]
    del pair["metrics"]["ndcg@5"]
    assert headline(doc).splitlines()[0].startswith("b vs a: recall@5 0.702 [")
    del pair["metrics"]["recall@5"]
    assert headline(doc).splitlines()[0].startswith("b vs a: recall@1 0.467 [")


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
    # byte-identical but for the cost table (local diagnostics, measured anew by each run)
    docs = [orjson.loads(o) for o in outs]
    costs = [d.pop("cost") for d in docs]
    assert docs[0] == docs[1]
    assert orjson.dumps(docs[0], option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        docs[1], option=orjson.OPT_SORT_KEYS
    )
    for cost in costs:
        assert set(cost["systems"]) == {"hotmem", "hotmem-mmr"}
        for figures in cost["systems"].values():
            assert figures["query_p50_ms"] > 0 and figures["latency_samples"] == 57
            assert figures["ingest_records_per_second"] > 0 and figures["store_mb"] > 0
            assert figures["wall_seconds"] > 0 and figures["cold_start_ms"] > 0
    doc = docs[0]
    assert [s["label"] for s in doc["systems"]] == ["hotmem", "hotmem-mmr"]
    dup = doc["comparisons"][0]["rates"]["duplicate_slot_rate@5"]
    # MMR exists to spread near-duplicates: it must not add duplicate slots on this suite.
    assert dup["challenger"]["numerator"] <= dup["reference"]["numerator"]
    # temporary stores are gone; the (emptied) build-directory lock file, matplotlib's font
    # list and compare's timing sidecar stay (no vectors: hotmem's hash embedder needs none)
    left = {p.name for p in (tmp_path / "build").iterdir()} - {".cache"}
    assert left == {LOCK_NAME, "timings"}
    assert (tmp_path / "build" / LOCK_NAME).read_bytes() == b""


def test_cli_rejects_both_modes(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path), "compare", "--system", "hotmem", "--result", str(BASELINE)],
    )
    assert r.exit_code == 2 and "either --system or --result" in r.output


# --- conversational datasets ------------------------------------------------------------------

CONVERSATIONAL = ("longmemeval", "locomo")


@pytest.fixture(scope="module")
def conversational(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    """dataset -> system -> result document, for generated data (hotmem and bm25), plus a
    second LongMemEval file ("longmemeval-other") made with another seed."""
    work = tmp_path_factory.mktemp("conversational")
    data = {
        "longmemeval": work / "longmemeval.json",
        "longmemeval-other": work / "longmemeval-other.json",
        "locomo": work / "locomo.json",
    }
    shape = {"shape": "s", "questions": 12, "sessions_per_question": 8, "session_chars": 300}
    longmemeval_generator.generate(data["longmemeval"], seed=1, **shape)
    longmemeval_generator.generate(data["longmemeval-other"], seed=2, **shape)
    locomo_generator.generate(data["locomo"], conversations=2, seed=0)
    out: dict[str, dict[str, dict]] = {}
    for name, path in data.items():
        dataset = name.split("-")[0]
        systems = ("hotmem",) if name.endswith("other") else ("hotmem", "bm25")
        out[name] = {
            system: run_pipeline(
                dataset, {"data": path}, work / f"{name}-{system}", system=system, top_k=10
            ).result
            for system in systems
        }
    return out


@pytest.mark.parametrize("dataset", CONVERSATIONAL)
def test_compare_two_systems_on_a_conversational_dataset(
    conversational: dict[str, dict[str, dict]], dataset: str
) -> None:
    ref, challenger = conversational[dataset]["hotmem"], conversational[dataset]["bm25"]
    assert ref["dataset"]["dataset"] == dataset
    scored = ref["counts"]["queries"]
    assert scored == len(ref["queries"]) == len(challenger["queries"])
    assert ref["counts"]["dropped"]  # the drops are not in any pair
    dropped = {d["query_id"] for d in ref["drops"]}
    doc = compare_results([ref, challenger], ["hotmem", "bm25"], resamples=200)
    assert doc["dataset"]["name"] == dataset
    assert doc["dataset"]["queries"] == scored
    assert doc["top_k"] == 10
    assert [s["label"] for s in doc["systems"]] == ["hotmem", "bm25"]
    pair = doc["comparisons"][0]
    # every per-query measure of the dataset, none pooled, all compared over every question
    assert list(pair["metrics"]) == [m["name"] for m in ref["run"]["measures"]]
    assert "recall_any@10" in pair["metrics"] and "ndcg_any@5" in pair["metrics"]
    assert pair["rates"] == {}
    for name, m in pair["metrics"].items():
        o = m["overall"]
        assert o["queries"] == scored, name
        assert o["wins"] + o["ties"] + o["losses"] == scored, name
        assert sum(c["queries"] for c in m["per_category"].values()) == scored, name
        # the means are the per-question values of each result, paired by question id
        a, b = per_query_values(ref, name), per_query_values(challenger, name)
        assert not dropped & set(a)
        assert o["reference_mean"] == pytest.approx(sum(a.values()) / scored), name
        assert o["challenger_mean"] == pytest.approx(sum(b.values()) / scored), name
        diffs = [b[q] - a[q] for q in a]
        assert o["wins"] == sum(d > 0 for d in diffs), name
        assert o["losses"] == sum(d < 0 for d in diffs), name
    assert list(pair["metrics"]["recall@10"]["per_category"]) == ref["dataset"]["categories"]
    text = render_markdown(doc)
    assert "## bm25 against hotmem" in text
    assert f"{scored} scored queries, top-10" in text
    line = headline(doc)  # conversational datasets score ndcg_any, not ndcg@k: recall@k
    o = pair["metrics"]["recall@10"]["overall"]
    assert line.startswith(f"bm25 vs hotmem: recall@10 {o['reference_mean']:.3f} [")
    assert f"] -> {o['challenger_mean']:.3f} [" in line
    assert f"W/T/L {o['wins']}/{o['ties']}/{o['losses']}, n={scored}, MDE " in line


def test_compare_refuses_results_from_different_files(
    conversational: dict[str, dict[str, dict]],
) -> None:
    same = conversational["longmemeval"]["hotmem"]
    other = conversational["longmemeval-other"]["hotmem"]
    with pytest.raises(RecallbenchError, match="other: made from another dataset, file"):
        compare_results([same, other], ["same", "other"])
    with pytest.raises(RecallbenchError, match="locomo: made from another dataset"):
        compare_results([same, conversational["locomo"]["hotmem"]], ["lme", "locomo"])


def _saved_result(path: Path, change=None) -> Path:
    """A fingerprint-valid results.json (the envelope `recallbench report` writes) holding
    the baseline's result document, changed by `change`."""
    from recallbench.builddir.artifacts import dumps, envelope

    doc = orjson.loads(BASELINE.read_bytes())
    if change is not None:
        change(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps(envelope("results", doc, {})))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # compared as if current before
        (lambda d: d.update(schema_version=1), "result schema version 1, this recallbench reads"),
        (lambda d: d.update(schema="someone.else"), "not a recallbench.result document"),
        # a KeyError traceback before
        (lambda d: d["run"].pop("top_k"), "the result has no readable run.top_k"),
        (lambda d: d["queries"][3].pop("metrics"), "no readable queries[3].metrics"),
        (lambda d: d["dataset"]["identity"].update(files=None), "dataset.identity.files"),
    ],
)
def test_compare_result_refuses_what_it_cannot_read_in_one_line(
    tmp_path: Path, change, message: str
) -> None:
    good = _saved_result(tmp_path / "good" / "results.json")
    bad = _saved_result(tmp_path / "bad" / "results.json", change)
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "compare", "--result", str(good)]
        + ["--result", str(bad)],
    )
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1, lines
    # both hold the baseline's hotmem result: labelled by system, the directory breaks the tie
    assert lines[0].startswith("recallbench compare: error: hotmem (bad): "), lines[0]
    assert message in lines[0]
    assert not (tmp_path / "b" / "compare.json").exists()


def test_compare_checks_its_outputs_before_it_reads_a_result(tmp_path: Path) -> None:
    """--output naming a --result file is refused as such before that file is read (an
    unreadable result's error came first while compare read the results before the check)."""
    good = _saved_result(tmp_path / "good" / "results.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json\n", encoding="utf-8")
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "compare", "--result", str(good)]
        + ["--result", str(broken), "--output", str(broken)],
    )
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"recallbench compare: error: --output {broken} would overwrite ")
    assert "the --result file" in line
    assert broken.read_text(encoding="utf-8") == "{not json\n"


# --- framing: one reference, every other a challenger; labels by system -----------------------


def test_saved_results_are_labelled_by_system_and_the_directory_breaks_a_tie() -> None:
    def result(name: str) -> dict:
        return {"system": {"name": name}}

    paths = [Path("b-lme3/results.json"), Path("b-lme4/results.json"), Path("x/mine.json")]
    assert result_labels(paths, [result("bm25"), result("hotmem"), result("mine")]) == [
        "bm25",
        "hotmem",
        "mine",
    ]
    assert result_labels(paths, [result("bm25"), result("bm25"), result("mine")]) == [
        "bm25 (b-lme3)",
        "bm25 (b-lme4)",
        "mine",
    ]
    same_dir = [Path("a/b/results.json"), Path("c/b/results.json")]
    assert result_labels(same_dir, [result("bm25"), result("bm25")]) == [
        "bm25 (a/b/results.json)",
        "bm25 (c/b/results.json)",
    ]
    # a document without a system name keeps its place's label (and is refused later)
    assert result_labels([Path("old/results.json")], [{}]) == ["old"]


def test_reference_first_keeps_the_challengers_order() -> None:
    assert reference_first(["mine", "bm25", "minilm"], "bm25", "systems") == [1, 0, 2]
    with pytest.raises(RecallbenchError, match=r"--reference x: not one of the systems \(a, b\)"):
        reference_first(["a", "b"], "x", "systems")


def test_the_headline_reads_challenger_vs_reference_with_challenger_deltas() -> None:
    base = orjson.loads(BASELINE.read_bytes())
    better = copy.deepcopy(base)
    for q in better["queries"]:
        if "ndcg@5" in q["metrics"] and q["metrics"]["ndcg@5"] is not None:
            q["metrics"]["ndcg@5"] = 1.0
    doc = compare_results([base, better], ["bm25", "mine"], resamples=200)
    line = headline(doc)
    assert line.startswith("mine vs bm25: ndcg@5 0.648 [")
    assert "] -> 1.000 [" in line and "(+0.352, " in line
    o = doc["comparisons"][0]["metrics"]["ndcg@5"]["overall"]
    assert o["wins"] > 0 and o["losses"] == 0  # the wins are the challenger's


def test_the_headline_escapes_labels_for_the_terminal() -> None:
    base = orjson.loads(BASELINE.read_bytes())
    doc = compare_results([base, base], ["ref", "evil\x1b]0;owned\x07\rX"], resamples=200)
    line = headline(doc)
    assert "\x1b" not in line and "\r" not in line and "\x07" not in line
    assert line.startswith("evilU+001B]0;ownedU+0007U+000DX vs ref: ")


def test_cli_reference_option_orders_saved_results(tmp_path: Path) -> None:
    old = _saved_result(tmp_path / "old" / "results.json")
    new = _saved_result(tmp_path / "new" / "results.json")
    args = ["--build-dir", str(tmp_path / "b"), "-q", "compare", "--resamples", "200"]
    args += ["--result", str(old), "--result", str(new)]
    r = CliRunner().invoke(main, [*args, "--reference", "hotmem (new)"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("hotmem (old) vs hotmem (new): ndcg@5 ")
    doc = orjson.loads((tmp_path / "b" / "compare.json").read_bytes())
    assert [s["label"] for s in doc["systems"]] == ["hotmem (new)", "hotmem (old)"]
    refused = CliRunner().invoke(main, [*args, "--reference", "bm25"])
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == [
        "recallbench compare: error: --reference bm25: not one of the --result labels "
        "(hotmem (old), hotmem (new))"
    ]


def test_cli_reference_system_is_run_first_and_every_other_is_a_challenger(
    tmp_path: Path,
) -> None:
    """`compare --reference bm25 --system hotmem-mmr`: bm25 is run too, as the reference;
    the line reads `hotmem-mmr vs bm25`, and the closing lines follow."""
    r = CliRunner().invoke(
        main,
        ["--build-dir", str(tmp_path / "b"), "compare", "--resamples", "200"]
        + ["--reference", "bm25", "--system", "hotmem-mmr"],
    )
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    # the decision table first (the reference first in it), then each system's table
    assert lines[0] == "Which system: retrieval"
    assert lines[3].startswith("bm25 (reference) ") and lines[4].startswith("hotmem-mmr ")
    at = lines.index("bm25 (reference):")
    assert lines[at + 1].split()[:2] == ["category", "n"]
    assert lines.index("Which system: cost") < at < lines.index("hotmem-mmr (challenger):")
    assert lines[-1].startswith("hotmem-mmr vs bm25: ndcg@5 0.800 [")
    err = r.stderr.splitlines()
    assert err[-2].startswith(f"wrote {tmp_path / 'b' / 'compare.json'}, ")
    assert "compare.html" in err[-2]
    assert err[-1].startswith("57 queries scored by each of 2 systems in ")
    unknown = CliRunner().invoke(
        main, ["--build-dir", str(tmp_path / "c"), "compare", "--reference", "nope"]
    )
    assert unknown.exit_code == 2 and "'nope' is not a registered system" in unknown.stderr
    assert not (tmp_path / "c" / "compare.json").exists()


def test_run_comparison_is_compare_over_plain_values(tmp_path: Path) -> None:
    """compare's orchestration (`compare.run_comparison`) without the command: the saved
    results put in order, every file written, the figures returned; the command writes
    the same compare.json and compare.md."""
    from recallbench.commands.compare import run_comparison

    old = _saved_result(tmp_path / "old" / "results.json")
    new = _saved_result(tmp_path / "new" / "results.json")
    compared = run_comparison(
        tmp_path / "f",
        saved=[old, new],
        reference="hotmem (new)",
        resamples=200,
        gates=[("ndcg@5", 0.0)],
    )
    assert compared.labels == ["hotmem (new)", "hotmem (old)"]
    assert [s["label"] for s in compared.doc["systems"]] == compared.labels
    assert compared.worse == []  # the same figures: nothing worse
    files = [tmp_path / "f" / name for name in ("compare.json", "compare.md", "compare.html")]
    assert compared.written[:3] == files and all(path.is_file() for path in files)
    closing = compared.closing_json(1.0)
    assert closing["reference"] == "hotmem (new)" and closing["seconds"] == 1.0
    args = ["--build-dir", str(tmp_path / "c"), "-q", "compare", "--resamples", "200"]
    r = CliRunner().invoke(
        main, [*args, "--result", str(old), "--result", str(new), "--reference", "hotmem (new)"]
    )
    assert r.exit_code == 0, r.output
    for name in ("compare.json", "compare.md"):
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "f" / name).read_bytes()


def test_compare_resolves_each_system_once(tmp_path: Path, monkeypatch) -> None:
    """`recallbench compare` of two systems looks each up in the registry once: the object
    serves its embedder identity (the vector cache), its whole run (hydrate, query and
    snapshot-roundtrip, serial engine) and its cost row."""
    from plugintools import count_lookups

    looked_up = count_lookups(monkeypatch)
    fixtures = ROOT / "benchmarks" / "retrieval"
    r = CliRunner().invoke(
        main,
        [
            *("--build-dir", str(tmp_path / "build"), "-q", "compare", "--resamples", "200"),
            *("--system", "hotmem", "--system", "bm25"),
            *("--corpus", str(fixtures / "corpus.jsonl")),
            *("--queries", str(fixtures / "queries.jsonl")),
        ],
    )
    assert r.exit_code == 0, r.output
    assert looked_up == ["hotmem", "bm25"]
    doc = orjson.loads((tmp_path / "build" / "compare.json").read_bytes())
    assert set(doc["cost"]["systems"]) == {"hotmem", "bm25"}
