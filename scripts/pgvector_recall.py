"""Recall of the pgvector HNSW stores against the exact ranking of the same vectors.

For docs/stores.md: memories = the distinct turns of a generated (synthetic) LongMemEval
file, queries = its questions, all-MiniLM-L6-v2 vectors computed once and fed to every
store (the vector cache's path). Each approximate store is built twice (two fresh servers)
and searched at top-k; its recall@k is |its top k ∩ the exact top k| / k, averaged over the
queries, against the exact cosine ranking (numpy over the same vectors; the exact stores
`llamaindex-pgvector`, `langgraph-postgres` kind=flat and `mem0-pgvector` hnsw=false are
checked against it, mem0 against its own exact variant since its BM25 half reorders).
Also: how many queries the two builds rank identically.

    python scripts/pgvector_recall.py --memories 3000 --queries 200 --top-k 10
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from recallbench.datasets.longmemeval.generator import generate
from recallbench.systems import get_system
from recallbench.systems.base import StoreRecord
from recallbench.systems.semantic import shared_embedder


def texts(memories: int, queries: int, seed: int) -> tuple[list[str], list[str]]:
    with tempfile.TemporaryDirectory() as work:
        data = Path(work) / "lme.json"
        generate(data, shape="s", questions=max(queries // 4, 4), seed=seed,
                 sessions_per_question=max(memories // 20, 10), session_chars=200)  # fmt: skip
        doc = orjson.loads(data.read_bytes())
    turns = list(dict.fromkeys(
        t["content"].strip() for q in doc for s in q["haystack_sessions"] for t in s
        if t["content"].strip()
    ))  # fmt: skip
    rng = random.Random(seed)
    rng.shuffle(turns)
    mems = turns[:memories]
    asked = [q["question"] for q in doc] + [t[: len(t) // 2].strip() for t in turns[memories:]]
    return mems, asked[:queries]


def ranked(name: str, env: dict[str, str], records, lookup, queries, top_k: int) -> tuple:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        system = get_system(name)
        with tempfile.TemporaryDirectory(dir=os.environ.get("BUILD_TMP")) as work:
            start = time.perf_counter()
            store = system.open_store(Path(work) / "s", vectors=lookup)
            store.ingest(records)
            built = time.perf_counter() - start
            start = time.perf_counter()
            out = [[h.memory_id for h in store.search(q, top_k)] for q in queries]
            searched = time.perf_counter() - start
            store.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out, built, searched


def recall(approx: list[list[str]], exact: list[list[str]], k: int) -> float:
    return sum(len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact, strict=True)) / len(
        exact
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", default="", help="run the systems whose name has this")
    args = parser.parse_args()
    mems, queries = texts(args.memories, args.queries, args.seed)
    vectors = shared_embedder().embed_batch(mems + queries)
    table = {t: [float(x) for x in v] for t, v in zip(mems + queries, vectors, strict=True)}
    lookup = table.__getitem__
    ids = [f"m{i:05d}" for i in range(len(mems))]
    records = [StoreRecord(i, "x", t) for i, t in zip(ids, mems, strict=True)]
    m = np.asarray([table[t] for t in mems])
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    exact = []
    for q in queries:
        v = np.asarray(table[q])
        scores = m @ (v / np.linalg.norm(v))
        exact.append([ids[i] for i in np.argsort(-scores, kind="stable")[: args.top_k]])
    print(f"{len(mems)} memories, {len(queries)} queries, top-k {args.top_k}, all-MiniLM-L6-v2")
    runs = [
        ("llamaindex-pgvector", {}, None),
        ("langgraph-postgres", {"RECALLBENCH_INDEX_LANGGRAPH_POSTGRES": "kind=flat"}, None),
        ("llamaindex-pgvector-hnsw", {}, None),
        (
            "llamaindex-pgvector-hnsw",
            {"RECALLBENCH_INDEX_LLAMAINDEX_PGVECTOR_HNSW": "ef_search=100"},
            None,
        ),
        ("langgraph-postgres", {}, None),
        ("mem0-pgvector", {"RECALLBENCH_INDEX_MEM0_PGVECTOR": "hnsw=false"}, None),
        ("mem0-pgvector", {}, "mem0-pgvector hnsw=false"),
    ]
    mem0_exact = None
    for name, env, against in runs:
        if args.only not in name:
            continue
        label = " ".join([name, *(v for v in env.values())])
        first, built, searched = ranked(name, env, records, lookup, queries, args.top_k)
        reference = mem0_exact if against else exact
        line = (f"{label}: recall@{args.top_k} vs {against or 'exact'} "
                f"{recall(first, reference, args.top_k):.4f} (build {built:.0f} s, "
                f"{len(queries)} searches {searched:.1f} s)")  # fmt: skip
        if "hnsw=false" in label:
            mem0_exact = first
        if "kind=flat" not in label and name != "llamaindex-pgvector" and "hnsw=false" not in label:
            second, _, _ = ranked(name, env, records, lookup, queries, args.top_k)
            same = sum(a == b for a, b in zip(first, second, strict=True))
            line += f"; two builds rank {same} of {len(queries)} queries identically"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
