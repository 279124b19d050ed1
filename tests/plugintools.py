"""Install a test plugin: a module written from source and its entry points, for this
process (`install_plugin`) or as a distribution other processes find too (`dist_plugin`);
`WORD_STORE`, the source of the word-overlap store and system the tests' plugins build on;
`count_lookups`, the registry lookups made from then on."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from recallbench.systems import registry
from recallbench.systems.registry import GROUP

#: a word-overlap store and its system, importing only recallbench.plugin: a plugin's source
#: starts with it and overrides what it tests (`kept`: what a row keeps of a text; `tie`: the
#: order of equal scores; `saved`: called after each ingest; the system's `new_rows` and
#: `stored_rows`: where a store's rows come from)
WORD_STORE = """
import json
from pathlib import Path

from recallbench.plugin import Hit, InputLimit, RecallbenchError, TimedCalls, records_digest

FILE = "rows.json"


class WordStore:
    def __init__(self, system, directory, rows):
        self.system = system
        self.path = Path(directory) / FILE
        self.rows = rows  # [memory id, identifier, the text kept]

    def kept(self, text):
        return text

    def tie(self, row):
        return row[0]

    def saved(self):
        self.path.write_text(json.dumps(self.rows))

    def ingest(self, records):
        held = {row[0] for row in self.rows}
        with self.system._inside():
            for r in records:
                if r.memory_id in held:
                    raise RecallbenchError(f"duplicate memory id {r.memory_id!r}")
                held.add(r.memory_id)
                self.rows.append([r.memory_id, r.identifier, self.kept(r.text)])
            self.saved()
        return len(self.rows)

    def search(self, query, top_k):
        with self.system._inside():
            words = set(query.lower().split())
            scored = [(len(words & set(row[2].lower().split())), row) for row in self.rows]
            scored.sort(key=lambda pair: (-pair[0], self.tie(pair[1])))
            return [Hit(row[0], float(s), row[1]) for s, row in scored[:top_k]]

    def count(self):
        return len(self.rows)

    def digest(self):
        return records_digest((row[0], row[2]) for row in self.rows)

    def close(self):
        pass


class WordSystem(TimedCalls):
    description = "A word-overlap store (a test plugin)"
    clone = None
    embedder = None
    lexical = False

    def __init__(self, name, store=WordStore):
        self.name = name
        self.store = store

    def configuration(self):
        return {"ranking": "query words found, ties by memory id"}

    def new_rows(self, directory):
        return []

    def stored_rows(self, directory, rows):
        return rows

    def open_store(self, directory, *, vectors=None):
        path = Path(directory) / FILE
        if path.exists():
            raise FileExistsError(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[]")
        return self.store(self, directory, self.new_rows(directory))

    def attach(self, directory):
        path = Path(directory) / FILE
        if not path.exists():
            raise FileNotFoundError(path)
        rows = self.stored_rows(directory, json.loads(path.read_text()))
        return self.store(self, directory, rows)
"""


@contextmanager
def install_plugin(
    monkeypatch: pytest.MonkeyPatch,
    where: Path,
    module: str,
    source: str,
    points: Mapping[str, str],
) -> Iterator[object]:
    """`source` as module `module` in `where`, its entry points (system name -> factory
    name) the only ones of `recallbench.systems` in this process; yields the module."""
    (where / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(where))
    found = [
        importlib.metadata.EntryPoint(name, f"{module}:{factory}", GROUP)
        for name, factory in points.items()
    ]
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **params: found if params.get("group") == GROUP else [],
    )
    registry.clear_cache()
    try:
        yield __import__(module)
    finally:
        registry.clear_cache()
        sys.modules.pop(module, None)


def dist_plugin(where: Path, module: str, source: str, points: Mapping[str, str]) -> Path:
    """`source` as module `module` with a ``.dist-info`` holding its entry points, in
    `where`: an installed distribution for any process with `where` on its path."""
    (where / f"{module}.py").write_text(source)
    info = where / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{n} = {module}:{f}\n" for n, f in points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + lines)
    return where


def count_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names the registry is asked for from now on (`registry.get_system`, also through
    the `recallbench.systems` package), in order; each is still resolved by the registry."""
    from recallbench import systems

    real = registry.get_system
    looked_up: list[str] = []

    def counting(name: str = registry.DEFAULT_SYSTEM) -> object:
        looked_up.append(name)
        return real(name)

    monkeypatch.setattr(registry, "get_system", counting)
    monkeypatch.setattr(systems, "get_system", counting)
    return looked_up
