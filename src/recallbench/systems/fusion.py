"""Reciprocal rank fusion (RRF) over any registered systems, and the `hybrid-rrf` reference.

Each child system is searched to its depth (at least the search's limit) and the lists are
fused:

    score(d) = sum over children c of 1 / (k + rank_c(d))      (ranks from 1)

A child that did not return `d` adds nothing. Order: score descending, ties by memory id
ascending (each score is summed in a fixed order, so equal rank patterns tie exactly).
The configuration records the children (with their own configurations), `k` and the depths.

The store is a directory holding each child's store in a subdirectory named after the child
(plus `fusion.json`, naming the children). Capabilities compose: a clone path when every
child has one (a package with one subdirectory per child's package and a manifest naming
them; corruptions are the children's, suffixed `:<child>`), an embedder when the children
that embed share one (the prep cache then feeds those children), lexical diagnostics when
any child has them.

`hybrid-rrf` is BM25 + MiniLM dense retrieval fused with k = 25: the recipe of vipune's
`search_hybrid` (RRF k = 25, recency weight 0), with all-MiniLM-L6-v2 in place of
bge-small (no package ships bge-small weights for offline use). It is that recipe, not
vipune.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from recallbench.builddir.artifacts import atomic_write_bytes
from recallbench.core.errors import RecallbenchError
from recallbench.systems.base import (
    Corruption,
    Hit,
    PackageInfo,
    SnapshotRejected,
    StoreRecord,
    System,
    TimedCalls,
    VectorLookup,
)
from recallbench.systems.packaging import MANIFEST, copy_package, package_size
from recallbench.systems.registry import get_system, register

MARKER = "fusion.json"
PACKAGE_FORMAT = "recallbench-fusion-v1"
_CHILD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def rrf(ranked_lists: Sequence[Sequence[str]], k: float) -> list[tuple[str, float]]:
    """Fuse ranked id lists: `(id, sum of 1 / (k + rank))`, score descending, then id.

    Each id's terms are summed smallest first, so two ids with the same ranks (in any
    children) get bit-identical scores and fall to the id order."""
    terms: dict[str, list[float]] = {}
    for ranked in ranked_lists:
        for rank, memory_id in enumerate(ranked, start=1):
            terms.setdefault(memory_id, []).append(1.0 / (k + rank))
    scores = {d: sum(sorted(t)) for d, t in terms.items()}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


class FusionEmbedder:
    """The children's shared embedder, timed as the fusion system's own work."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def max_tokens(self) -> int | None:
        return self.inner.max_tokens

    def identity(self) -> str:
        return self.inner.identity()

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_texts(texts)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self.inner.token_counts(texts)


class FusionStore:
    """One store per child, in `directory/<child name>`."""

    def __init__(self, system: FusionSystem, directory: Path, stores: Sequence[Any]) -> None:
        self._system = system
        self.directory = directory
        self.stores = list(stores)

    def ingest(self, records: Sequence[StoreRecord]) -> int:
        counts = [store.ingest(records) for store in self.stores]
        if len(set(counts)) != 1:
            raise SnapshotRejected(
                "ingest_dropped",
                "children hold different counts: "
                + ", ".join(
                    f"{c.name} {n}" for c, n in zip(self._system.children, counts, strict=True)
                ),
            )
        return counts[0]

    def search(self, query: str, limit: int) -> list[Hit]:
        system = self._system
        lists = []
        identifiers: dict[str, str] = {}
        for child, store in zip(system.children, self.stores, strict=True):
            hits = store.search(query, max(system.depth[child.name], limit))
            lists.append([h.memory_id for h in hits])
            for h in hits:
                identifiers.setdefault(h.memory_id, h.identifier)
        with system._inside():
            fused = rrf(lists, system.k)[:limit]
        return [Hit(d, score, identifiers[d]) for d, score in fused]

    def lexical_matches(self, query: str) -> tuple[str, list[str]]:
        """The union of the lexical children's matches."""
        names, ids = [], set()
        for child, store in zip(self._system.children, self.stores, strict=True):
            if getattr(child, "lexical", False):
                matcher, matched = store.lexical_matches(query)
                names.append(f"{matcher} ({child.name})")
                ids.update(matched)
        return " + ".join(names), sorted(ids)

    def count(self) -> int:
        return min(store.count() for store in self.stores)

    def texts(self) -> list[tuple[str, str]]:
        """(memory id, text) of every record, as each child reads them back (a RecallbenchError
        when the children hold different texts, or one cannot read them back)."""
        held = []
        for child, store in zip(self._system.children, self.stores, strict=True):
            read = getattr(store, "texts", None)
            if not callable(read):
                raise RecallbenchError(f"{child.name}'s store cannot read its texts back")
            held.append(sorted(read()))
        if any(pairs != held[0] for pairs in held[1:]):
            raise RecallbenchError(f"{self._system.name}: its children hold different texts")
        return held[0]

    def digest(self) -> str:
        """Over each child's own digest (they agree when every child holds the same records)."""
        pairs = [
            [c.name, s.digest()] for c, s in zip(self._system.children, self.stores, strict=True)
        ]
        return hashlib.sha256(orjson.dumps(pairs)).hexdigest()

    def close(self) -> None:
        for store in self.stores:
            store.close()


class FusionClone:
    """A package with one subdirectory per child (the child's own package) and a manifest."""

    def __init__(self, system: FusionSystem) -> None:
        self._system = system

    def snapshot(self, store: FusionStore, package_dir: Path) -> PackageInfo:
        package_dir = Path(package_dir)
        package_dir.mkdir(parents=True, exist_ok=False)
        counts = [
            child.clone.snapshot(child_store, package_dir / child.name).records
            for child, child_store in zip(self._system.children, store.stores, strict=True)
        ]
        manifest = {
            "format": PACKAGE_FORMAT,
            "children": self._system.child_names,
            "record_count": counts[0],
        }
        atomic_write_bytes(
            package_dir / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)
        )
        return PackageInfo(records=counts[0], size_bytes=package_size(package_dir))

    def _check_manifest(self, package_dir: Path) -> int:
        try:
            manifest = orjson.loads((Path(package_dir) / MANIFEST).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise SnapshotRejected("unreadable", f"fusion manifest unreadable: {exc}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT:
            raise SnapshotRejected("format", f"{package_dir}: not a {PACKAGE_FORMAT} package")
        if manifest.get("children") != self._system.child_names:
            raise SnapshotRejected(
                "children_mismatch",
                f"package of {manifest.get('children')}, this system fuses {self._system.child_names}",
            )
        return int(manifest.get("record_count", -1))

    def _count_check(self, expected: int, counts: Sequence[int]) -> None:
        for child, n in zip(self._system.children, counts, strict=True):
            if n != expected:
                raise SnapshotRejected(
                    "record_count_mismatch", f"{child.name}: {n} records, manifest says {expected}"
                )

    def verify(self, package_dir: Path, work_dir: Path) -> int:
        expected = self._check_manifest(package_dir)
        counts = []
        for child in self._system.children:
            try:
                counts.append(
                    child.clone.verify(Path(package_dir) / child.name, Path(work_dir) / child.name)
                )
            except SnapshotRejected as exc:
                raise SnapshotRejected(exc.reason, f"{child.name}: {exc}") from None
        self._count_check(expected, counts)
        return expected

    def restore(self, package_dir: Path, directory: Path) -> FusionStore:
        expected = self._check_manifest(package_dir)
        directory = self._system._mark(Path(directory))
        stores = []
        try:
            for child in self._system.children:
                try:
                    stores.append(
                        child.clone.restore(Path(package_dir) / child.name, directory / child.name)
                    )
                except SnapshotRejected as exc:
                    raise SnapshotRejected(exc.reason, f"{child.name}: {exc}") from None
            self._count_check(expected, [s.count() for s in stores])
        except BaseException:
            for s in stores:
                s.close()
            raise
        return FusionStore(self._system, directory, stores)

    def corruptions(self, package_dir: Path, work_dir: Path) -> list[Corruption]:
        """Every child's corruptions, each in a copy of the whole package (`<name>:<child>`)."""
        out = []
        work_dir = Path(work_dir)
        for child in self._system.children:
            scratch = work_dir / "children" / child.name
            for c in child.clone.corruptions(Path(package_dir) / child.name, scratch):
                dest = copy_package(package_dir, work_dir, f"{c.name}-{child.name}")
                shutil.rmtree(dest / child.name)
                shutil.copytree(c.package_dir, dest / child.name)
                out.append(
                    Corruption(f"{c.name}:{child.name}", f"{child.name}: {c.description}", dest)
                )
        return out


class FusionSystem(TimedCalls):
    """RRF over child systems (instances of any registered system)."""

    def __init__(
        self,
        name: str,
        children: Sequence[System],
        *,
        k: float = 60,
        depth: int | Mapping[str, int] = 100,
        description: str | None = None,
        notes: Mapping[str, Any] | None = None,
    ) -> None:
        names = [c.name for c in children]
        if len(children) < 2 or len(set(names)) != len(names):
            raise RecallbenchError(
                f"fusion {name!r}: needs two or more distinct children, got {names}"
            )
        bad = [n for n in names if not _CHILD_NAME.match(n)]
        if bad:
            raise RecallbenchError(f"fusion {name!r}: child names must be plain names: {bad}")
        if k <= 0:
            raise RecallbenchError(f"fusion {name!r}: k must be positive, got {k}")
        self.name = name
        self.description = description
        self.children = list(children)
        self.child_names = names
        self.k = k
        self.depth = {n: int(depth[n] if isinstance(depth, Mapping) else depth) for n in names}
        if min(self.depth.values()) < 1:
            raise RecallbenchError(f"fusion {name!r}: depths must be at least 1")
        self.notes = dict(notes or {})
        self.lexical = any(getattr(c, "lexical", False) for c in children)
        self.clone = FusionClone(self) if all(getattr(c, "clone", None) for c in children) else None
        embedders = [c.embedder for c in children if getattr(c, "embedder", None) is not None]
        identities = {e.identity() for e in embedders}
        self.embedder = FusionEmbedder(embedders[0]) if len(identities) == 1 else None

    def configuration(self) -> dict[str, Any]:
        return {
            "method": "reciprocal rank fusion",
            "score": "sum over children of 1 / (k + rank), ranks from 1",
            "k": self.k,
            "depth": dict(self.depth),
            "depth_rule": "each child is searched to max(depth, top_k)",
            "ties": "memory id ascending",
            "children": {c.name: c.configuration() for c in self.children},
            "clone_format": PACKAGE_FORMAT if self.clone is not None else None,
            **self.notes,
        }

    def seconds_inside(self) -> float:
        return self._seconds_inside + sum(c.seconds_inside() for c in self.children)

    def _mark(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / MARKER).exists():
            raise FileExistsError(f"{directory / MARKER}: a store already exists here")
        atomic_write_bytes(directory / MARKER, orjson.dumps({"children": self.child_names}))
        return directory

    def open_store(self, directory: Path, *, vectors: VectorLookup | None = None) -> FusionStore:
        """Each child's fresh store; `vectors` go to the children that embed (they share
        the fusion's embedder identity)."""
        directory = self._mark(Path(directory))
        stores = []
        for child in self.children:
            takes_vectors = (
                getattr(child, "embedder", None) is not None and self.embedder is not None
            )
            stores.append(
                child.open_store(directory / child.name, vectors=vectors if takes_vectors else None)
            )
        return FusionStore(self, directory, stores)

    def attach(self, directory: Path, *, vectors: VectorLookup | None = None) -> FusionStore:
        directory = Path(directory)
        if not (directory / MARKER).exists():
            raise FileNotFoundError(f"{directory / MARKER}: no fusion store here")
        held = orjson.loads((directory / MARKER).read_bytes()).get("children")
        if held != self.child_names:
            raise RecallbenchError(f"{directory}: a fusion of {held}, not {self.child_names}")
        stores = []
        for child in self.children:
            takes_vectors = (
                getattr(child, "embedder", None) is not None and self.embedder is not None
            )
            stores.append(
                child.attach(directory / child.name, vectors=vectors if takes_vectors else None)
            )
        return FusionStore(self, directory, stores)


def rrf_system(
    name: str,
    children: Sequence[str],
    *,
    k: float = 60,
    depth: int | Mapping[str, int] = 100,
    **kw: Any,
) -> FusionSystem:
    """RRF over registered systems, by name."""
    return FusionSystem(name, [get_system(c) for c in children], k=k, depth=depth, **kw)


#: RRF k = 25 (the k vipune's scope document names), each child read to depth 50
HYBRID_K = 25
HYBRID_DEPTH = 50


@register(
    "hybrid-rrf",
    description="RRF (k = 25) of bm25 + minilm",
    capabilities=("clone", "embedder", "lexical"),
    extra="semantic",
)
def hybrid_rrf_system() -> FusionSystem:
    return rrf_system(
        "hybrid-rrf",
        ["bm25", "minilm"],
        k=HYBRID_K,
        depth=HYBRID_DEPTH,
        notes={
            "recipe": "RRF (k = 25) of bm25 + minilm; not vipune's hybrid search (the "
            "`vipune` system runs that)",
            "recency_weight": 0,
        },
    )
