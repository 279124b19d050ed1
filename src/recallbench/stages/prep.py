"""prep: embed every distinct memory and query text of a validated dataset once, into a
vector cache that hydrate/query/snapshot-roundtrip read, so per-run work needs no model.

`recallbench prep --cache DIR` makes a cache explicitly (or, with `--import FILE`, from
vectors made elsewhere: `vectorprep.import_vector_cache`). The making itself (the fixed
batches, each embedded as one forward pass by a worker, and the manifest) lives in
`recallbench.engine.vectorprep`, because hydrate, query and snapshot-roundtrip make the same cache
themselves (`vectorprep.vector_cache`) when their system's embedder is not batch-invariant
and no `--cache` is given: a stage never imports another stage.
"""

from __future__ import annotations

from recallbench.engine.vectorprep import make_vector_cache

#: the stage's entry point: write the cache, return its manifest (the same function the
#: other stages call when they make the cache themselves)
run_prep = make_vector_cache
