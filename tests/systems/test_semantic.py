"""`hotmem-minilm`: HotMem's own search with a learned embedder from the optional extra.

Without the extra the system must refuse with one clear line; with it (`make setup`
installs it, so nothing here is skipped) it runs end to end, deterministically, offline.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BASELINE, load_json, run_fixtures

from recallbench.core.errors import RecallbenchError
from recallbench.systems import get_system, registry


def test_without_the_extra_the_system_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulate an install without the extra: one of its modules cannot be found."""
    monkeypatch.setitem(registry.EXTRAS, "semantic", (("no_such_module_for_test",), "make setup"))
    with pytest.raises(RecallbenchError, match=r"'hotmem-minilm' needs .*make setup"):
        get_system("hotmem-minilm")
    assert get_system("hotmem").name == "hotmem"  # the core is unaffected


def test_minilm_finds_paraphrases_the_hash_embedder_misses(tmp_path: Path) -> None:
    first = run_fixtures(tmp_path / "a", system="hotmem-minilm").result
    second = run_fixtures(tmp_path / "b", system="hotmem-minilm").result
    assert first == second  # deterministic, run after run
    assert first["system"]["embedding_model"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert first["system"]["embedding_dimension"] == 384
    assert first["roundtrip"]["equivalence"]["value"] == 1.0
    para = first["metrics"]["per_category"]["semantic_paraphrase"]["recall@5"]["value"]
    hash_para = load_json(BASELINE)["metrics"]["per_category"]["semantic_paraphrase"]["recall@5"]
    assert hash_para["value"] == 0.0
    assert para > 0.5


def test_a_cached_longmemeval_run_never_loads_the_model(tmp_path: Path) -> None:
    rb = [sys.executable, "-m", "recallbench.cli.main", "--build-dir", str(tmp_path / "b"), "-q"]
    data = tmp_path / "d.json"
    steps = [
        [
            "longmemeval",
            "generate",
            "--shape",
            "s",
            "--questions",
            "4",
            "--seed",
            "2",
            "--sessions-per-question",
            "4",
            "--session-chars",
            "200",
            "--out",
            str(data),
        ],
        ["validate", "--dataset", "longmemeval", "--data", str(data)],
        ["prep", "--cache", str(tmp_path / "c"), "--system", "hotmem-minilm"],
    ]
    for step in steps:
        proc = subprocess.run([*rb, *step], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    check = (
        "import sys; from recallbench.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules\n"
    )
    args = [
        "--build-dir",
        str(tmp_path / "b"),
        "-q",
        "run",
        "--dataset",
        "longmemeval",
        "--data",
        str(data),
        "--cache",
        str(tmp_path / "c"),
        "--system",
        "hotmem-minilm",
    ]
    proc = subprocess.run(
        [sys.executable, "-c", check, *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    result = load_json(tmp_path / "b" / "results.json")["data"]
    assert result["system"]["name"] == "hotmem-minilm"
    assert result["dataset"]["dataset"] == "longmemeval"
    assert result["counts"]["queries"] == len(result["queries"]) > 0


def test_loading_the_model_leaves_scikit_learn_unimported_until_it_is_needed() -> None:
    """sentence-transformers imports scikit-learn for one function the embedder never calls:
    a process that loads the model does not import it (seconds of every embedding process's
    start), the vectors are the model's, and scikit-learn still imports, and that function
    still works, when something asks for them."""
    script = (
        "import sys\n"
        "from recallbench.systems.semantic import MiniLMEmbedder\n"
        "vectors = MiniLMEmbedder().embed_batch(['a cat on a mat', 'stock prices fell'])\n"
        "assert len(vectors) == 2 and all(len(v) == 384 for v in vectors)\n"
        "assert 'sklearn' not in sys.modules, sorted(m for m in sys.modules if 'sklearn' in m)\n"
        "from sentence_transformers.util import similarity\n"
        "assert similarity.pairwise_distances([[0.0, 3.0]], [[4.0, 0.0]])[0][0] == 5.0\n"
        "import sklearn.metrics\n"
        "assert sklearn.metrics.__file__ and 'sklearn' in sys.modules\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
