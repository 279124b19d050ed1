"""The one embedding path on Ray: a run with `--executor ray --workers 2` and no cache (prep's
batches on Ray actors, into BUILD/vectors) gives the bytes of a local run with prep's cache,
which test_embedding_path.py shows are the bytes of every local path, for every learned
system. On Ray it runs for `minilm` alone: the engine only decides where prep's batches and
a scope's stages run, the same for every system, and each Ray run costs a minute on 2 cores
(a local Ray and the model in two actors); the learned systems' own paths to the cache are
checked locally (test_embedding_path.py) and on a two-node cluster (test_ray_cluster.py's
prep case). A file of its own, so that `make test`'s two workers share the embedding-path
runs.

No test compares floats computed by two different kernel paths: both sides share prep's
batches and this run's CPU kernels, so these tests run once (the portable rerun's rule:
tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from embeddingpath import LEARNED, RESULT_FILES, cli, fixture_args, ok, validated_with_cache


@pytest.fixture(scope="module")
def fixture_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures validated once, and minilm's cache made by `prep` with one worker."""
    return validated_with_cache(tmp_path_factory)


def test_a_ray_run_gives_the_bytes_of_a_local_one(fixture_cache, tmp_path) -> None:
    system = LEARNED[0]
    paths = {
        "prep cache": ["--cache", fixture_cache["cache"]],
        "ray": ["--executor", "ray", "--workers", "2"],
    }
    outputs = {}
    for label, extra in paths.items():
        build = tmp_path / label.replace(" ", "-")
        ok(cli(build, "run", *fixture_args(), "--system", system, *extra))
        outputs[label] = {name: (build / name).read_bytes() for name in RESULT_FILES}
    assert outputs["ray"] == outputs["prep cache"]
