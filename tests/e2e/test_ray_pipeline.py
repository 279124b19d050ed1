"""`--executor ray` gives byte-identical artifacts to the local executor on a generated
S-shaped LongMemEval file: the stages' tasks run as Ray actors (a local Ray with 2 CPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.builddir.artifacts import dumps
from recallbench.commands.pipeline import run_pipeline
from recallbench.datasets.longmemeval.generator import generate
from recallbench.engine.tasks import Execution

KINDS = ("suite", "hydrate", "runs", "roundtrip", "scores", "results", "decision")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ray-data") / "s.json"
    generate(path, shape="s", questions=12, seed=5, sessions_per_question=8, session_chars=300)
    return path


def test_ray_and_local_give_identical_artifacts(data: Path, tmp_path: Path) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:  # CI installs the ray extra: a missing Ray is a failure, not a skip
        pytest.fail("the ray extra is not installed: pip install -e '.[ray]'")
    runs = {}
    for name, execution in (
        ("local", Execution("local", 1)),
        ("ray", Execution("ray", 2)),
    ):
        run = run_pipeline(
            "longmemeval",
            {"data": data},
            tmp_path / name,
            system="bm25",
            top_k=10,
            sample=4,
            execution=execution,
        )
        # everything but where the run kept its files (the suite's spool path)
        runs[name] = {
            kind: dumps({k: v for k, v in run.envelopes[kind].items() if not k.startswith("spool")})
            for kind in KINDS
        }
    for kind in KINDS:
        assert runs["ray"][kind] == runs["local"][kind], kind
