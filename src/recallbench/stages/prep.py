"""prep: embed every distinct memory and query text of a validated dataset once, into a
vector cache that hydrate/query/snapshot-roundtrip read, so per-run work needs no model.

`recallbench prep --cache DIR` makes a cache explicitly. The making itself (the fixed
batches, each embedded as one forward pass by a worker, and the manifest) lives in
`recallbench.vectorprep`, because hydrate, query and snapshot-roundtrip make the same cache
themselves (`vectorprep.vector_cache`) when their system's embedder is not batch-invariant
and no `--cache` is given: a stage never imports another stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recallbench.stagework import Execution
from recallbench.vectorprep import make_vector_cache


def run_prep(
    suite_env: Mapping[str, Any],
    cache_dir: Path,
    system_name: str,
    *,
    execution: Execution | None = None,
    sort_by_length: bool = True,
) -> dict[str, Any]:
    """Write the cache; return its manifest (with `timing`, a local diagnostic).

    The previous cache in `cache_dir`, if any, stays valid until the new one is complete
    (see `recallbench.cache.CacheWriter`)."""
    return make_vector_cache(
        suite_env, cache_dir, system_name, execution=execution, sort_by_length=sort_by_length
    )
