"""The plugin surface (reliability round three, item 24): `recallbench.plugin` names what a
plugin may import, versioned by `PLUGIN_API` (recorded in every results envelope); a plugin
written against the previous release's imports (`from recallbench.systems.base import
records_digest`) still loads and works, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import textwrap
import warnings
from pathlib import Path

import pytest

import recallbench.plugin as plugin
from recallbench.systems import base, kit, registry
from recallbench.systems.registry import GROUP

ROOT = Path(__file__).resolve().parents[2]

#: the toy store of the previous release's docs/own-store.md, with its imports as they were
#: then, plus the moved kit names a clone path used (RecordsClone, jsonl_bytes)
OLD_PLUGIN = textwrap.dedent(
    '''
    """A plugin written against the previous release's docs."""
    import json
    from pathlib import Path

    from recallbench.errors import RecallbenchError
    from recallbench.systems.base import Hit, TimedCalls, records_digest
    from recallbench.systems.base import RECORDS_FILE, RecordsClone, jsonl_bytes


    class OldStore:
        def __init__(self, system, directory, rows):
            self.system = system
            self.directory = Path(directory)
            self.rows = rows

        def ingest(self, records):
            held = {row["id"] for row in self.rows}
            with self.system._inside():
                for r in records:
                    if r.memory_id in held:
                        raise RecallbenchError(f"duplicate memory id {r.memory_id!r}")
                    held.add(r.memory_id)
                    self.rows.append({"id": r.memory_id, "identifier": r.identifier,
                                      "text": r.text, "record": r})
                (self.directory / RECORDS_FILE).write_bytes(
                    jsonl_bytes(row["record"] for row in self.rows))
            return len(self.rows)

        def search(self, query, top_k):
            words = set(query.lower().split())
            scored = [(len(words & set(row["text"].lower().split())), row) for row in self.rows]
            scored.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
            return [Hit(row["id"], float(s), row["identifier"]) for s, row in scored[:top_k]]

        def count(self):
            return len(self.rows)

        def digest(self):
            return records_digest((row["id"], row["text"]) for row in self.rows)

        def close(self):
            self.rows = []


    class OldSystem(TimedCalls):
        """A word-overlap store importing from recallbench.systems.base."""

        embedder = None
        lexical = False

        def __init__(self):
            self.name = "old-imports"
            self.clone = RecordsClone(self, "old-imports-1")

        def configuration(self):
            return {"ranking": "query words found"}

        def open_store(self, directory, *, vectors=None):
            Path(directory).mkdir(parents=True, exist_ok=True)
            return OldStore(self, directory, [])

        def attach(self, directory):
            raise FileNotFoundError(directory)


    def make():
        return OldSystem()
    '''
)


@pytest.fixture
def old_plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The old plugin installed as the entry point `old-imports` (not yet imported)."""
    (tmp_path / "old_rb_plugin.py").write_text(OLD_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = importlib.metadata.EntryPoint("old-imports", "old_rb_plugin:make", GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **params: [point])
    registry.clear_cache()
    yield
    registry.clear_cache()
    import sys

    sys.modules.pop("old_rb_plugin", None)


def test_a_plugin_written_against_the_old_imports_loads_warns_and_works(
    old_plugin, tmp_path: Path
) -> None:
    """It failed with `ImportError: cannot import name 'records_digest'` after the split."""
    from recallbench.systems import get_system

    with pytest.warns(DeprecationWarning) as caught:
        system = get_system("old-imports")
    said = {str(w.message).split(" ")[0] for w in caught if w.category is DeprecationWarning}
    assert said == {
        "recallbench.systems.base.records_digest",
        "recallbench.systems.base.RECORDS_FILE",
        "recallbench.systems.base.RecordsClone",
        "recallbench.systems.base.jsonl_bytes",
    }
    assert all("import it from recallbench.plugin" in str(w.message) for w in caught)
    records = [
        plugin.StoreRecord("m1", "default", "the cat sat"),
        plugin.StoreRecord("m2", "default", "a dog ran"),
    ]
    store = system.open_store(tmp_path / "store")
    assert store.ingest(records) == 2
    assert [hit.memory_id for hit in store.search("dog", 2)] == ["m2", "m1"]
    assert store.digest() == kit.records_digest([("m1", "the cat sat"), ("m2", "a dog ran")])
    package = tmp_path / "package"
    assert system.clone.snapshot(store, package).records == 2  # the moved RecordsClone
    assert system.clone.verify(package, tmp_path / "work") == 2


def test_every_moved_name_imports_from_base_with_a_warning_and_is_the_kits() -> None:
    for name in sorted(base.MOVED_TO_KIT):
        with pytest.warns(DeprecationWarning, match=f"base.{name} moved to"):
            old = getattr(base, name)
        assert old is getattr(kit, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from recallbench.systems.base import Hit, StoreRecord  # noqa: F401  (never moved)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        base.nothing_here  # noqa: B018
    # every public name the kit defines was in base before the split, and is moved
    kit_names = {n for n, v in vars(kit).items() if not n.startswith("_") and _defined(kit, v)}
    assert kit_names == set(base.MOVED_TO_KIT)


def _defined(module, value) -> bool:
    return getattr(value, "__module__", module.__name__) == module.__name__ and not isinstance(
        value, type(importlib)
    )


def test_every_name_of_the_plugin_surface_imports_and_is_documented() -> None:
    """`from recallbench.plugin import NAME` for every name in __all__, the seam's and the
    kit's own objects, each named in docs/own-store.md's "What a plugin may import"."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the surface itself warns about nothing
        module = importlib.reload(plugin)
    docs = (ROOT / "docs" / "own-store.md").read_text("utf-8")
    section = docs.split("## What a plugin may import", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", section))
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        exec(f"from recallbench.plugin import {name}", {})
        assert name in documented, name
        value = getattr(module, name)
        for home in (base, kit):
            if name in vars(home) and name != "PLUGIN_API":
                assert value is vars(home)[name], name
    # the seam's public names a plugin uses, and all of the kit's, are in the surface
    harness_only = {"HarnessCallbacks", "timed_lookup", "capabilities", "truncation_report"}
    harness_only |= {"truncation_shares", "MOVED_TO_KIT", "structured", "content_cuts"}
    harness_only |= {"describe_input_limit", "declared_input_limit", "content_loss_report"}
    harness_only |= {"CONTENT_COUNTS"}
    for home in (base, kit):
        public = {n for n, v in vars(home).items() if not n.startswith("_") and _defined(home, v)}
        assert public - harness_only <= set(module.__all__), sorted(public - set(module.__all__))
    assert module.PLUGIN_API == "1.1"


def test_the_results_envelope_records_the_plugin_api(lane) -> None:
    """Beside the result document (not in it), so the baseline does not change."""
    results = lane.envelopes["results"]
    assert results["provenance"]["plugin_api"] == plugin.PLUGIN_API
    assert "plugin_api" not in repr(results["data"])


def test_the_example_plugin_and_the_docs_import_only_the_surface() -> None:
    sources = [
        ROOT / "examples" / "plugin-system" / "src" / "recallbench_lancedb" / "__init__.py",
        ROOT / "examples" / "plugin-dory" / "src" / "recallbench_dory" / "__init__.py",
        ROOT / "examples" / "plugin-structured" / "src" / "recallbench_turns" / "__init__.py",
        ROOT / "docs" / "own-store.md",
    ]
    for path in sources:
        imports = re.findall(r"^from (recallbench[.\w]*) import", path.read_text(), re.M)
        assert imports and set(imports) == {"recallbench.plugin"}, (path, imports)
