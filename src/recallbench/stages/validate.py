"""validate: read the JSONL fixtures, check everything, emit the normalized suite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from recallbench.artifacts import envelope, file_sha256
from recallbench.datasets.fixtures import load_fixture_suite
from recallbench.errors import ArtifactError
from recallbench.suite import Suite


def run_validate(corpus: Path, queries: Path) -> dict[str, Any]:
    """Validate both fixture files; return the `suite` envelope or raise ValidationFailed."""
    suite = load_fixture_suite(corpus, queries)
    per_category = Counter(q.category for q in suite.queries)
    data = {
        "suite": suite.to_dict(),
        "sources": {
            "corpus": {"file": Path(corpus).name, "sha256": file_sha256(corpus)},
            "queries": {"file": Path(queries).name, "sha256": file_sha256(queries)},
        },
        "counts": {
            "memories": len(suite.memories),
            "queries": len(suite.queries),
            "per_category": {c: per_category[c] for c in suite.categories},
            "duplicate_groups": len(set(suite.duplicate_groups.values())),
        },
    }
    inputs = {
        "corpus": data["sources"]["corpus"]["sha256"],
        "queries": data["sources"]["queries"]["sha256"],
    }
    env = envelope("suite", data, inputs)
    env["source_paths"] = {"corpus": str(corpus), "queries": str(queries)}
    return env


def suite_of(suite_env: dict[str, Any]) -> Suite:
    """The Suite inside a suite envelope, refusing it when its fixture files changed since."""
    for name, path in suite_env.get("source_paths", {}).items():
        path = Path(path)
        if path.exists() and file_sha256(path) != suite_env["inputs"][name]:
            raise ArtifactError(
                f"{path} changed after validation; run `recallbench validate` again"
            )
    return Suite.from_dict(suite_env["data"]["suite"])
