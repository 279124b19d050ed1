"""The dense reference (`minilm`) and truncation diagnostics (the `semantic` extra; never skipped:
CI installs it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from recallbench.systems import get_system
from recallbench.systems.base import SnapshotRejected, StoreRecord, truncation_report
from recallbench.systems.semantic import model_path, shared_embedder


def test_max_tokens_and_token_counts_agree_with_the_loaded_model() -> None:
    """Read from the packaged files (no torch); the model itself says the same."""
    embedder = shared_embedder()
    model = embedder._load()
    assert embedder.max_tokens == model.max_seq_length == 256
    texts = ["hello world", "Résumé of the café meeting, 10:00.", "word " * 400]
    expected = [len(ids) for ids in model.tokenizer(texts, verbose=False)["input_ids"]]
    assert embedder.token_counts(texts) == expected
    assert expected[2] > 256


def test_truncation_report_counts_what_the_model_never_sees() -> None:
    embedder = get_system("minilm").embedder
    short, long = "a short memory", "word " * 400
    counts = embedder.token_counts([short, long])
    report = truncation_report(embedder, [short, long])
    assert report == {
        "max_tokens": 256,
        "texts": 2,
        "texts_over_limit": 1,
        "tokens_total": sum(counts),
        "tokens_unseen": counts[1] - 256,
        "tokens_of_long_texts": counts[1],
        "share_unseen_of_long_texts": (counts[1] - 256) / counts[1],
        "share_unseen": (counts[1] - 256) / sum(counts),
    }
    assert truncation_report(get_system("hotmem").embedder, [long]) is None  # hash: no limit
    assert truncation_report(get_system("bm25").embedder, [long]) is None  # no embedder
    assert get_system("hotmem-minilm").embedder.max_tokens == 256


def test_minilm_is_exact_cosine_with_ties_by_id(tmp_path: Path) -> None:
    system = get_system("minilm")
    texts = ["the cat sat on the mat", "stock markets fell sharply", "the cat sat on the mat"]
    store = system.open_store(tmp_path / "s")
    store.ingest([StoreRecord(i, "d", t) for i, t in zip(["m3", "m2", "m1"], texts, strict=True)])
    vectors = np.asarray(system.embedder.embed_texts([*texts, "a kitten on a rug"]))
    cosines = vectors[:3] @ vectors[3] / np.linalg.norm(vectors[:3], axis=1)
    hits = store.search("a kitten on a rug", 3)
    assert [h.memory_id for h in hits] == ["m1", "m3", "m2"]  # equal texts: id ascending
    assert [h.score for h in hits] == pytest.approx([cosines[2], cosines[0], cosines[1]], abs=1e-6)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["records.jsonl", "vectors.npy"]


def test_minilm_refuses_a_package_from_another_embedder(tmp_path: Path) -> None:
    system = get_system("minilm")
    store = system.open_store(tmp_path / "s")
    store.ingest([StoreRecord("m1", "d", "a memory")])
    system.clone.snapshot(store, tmp_path / "pkg")
    manifest_path = tmp_path / "pkg" / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    assert manifest["embedder"] == system.embedder.identity()
    manifest_path.write_bytes(orjson.dumps({**manifest, "embedder": "other-model@384"}))
    with pytest.raises(SnapshotRejected) as rejected:
        system.clone.verify(tmp_path / "pkg", tmp_path / "w")
    assert rejected.value.reason == "embedder_mismatch"


def test_the_model_comes_from_the_package() -> None:
    assert (model_path() / "model.safetensors").is_file()
