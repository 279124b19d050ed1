"""The plugin surface (reliability round three, item 24): `recallbench.plugin` names what a
plugin may import, versioned by `PLUGIN_API` (recorded in every results envelope)."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import warnings
from pathlib import Path

import recallbench.plugin as plugin
from recallbench.systems import base
from recallbench.systems import packaging as kit

ROOT = Path(__file__).resolve().parents[2]


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
    harness_only |= {"truncation_shares", "truncation_counts", "structured", "content_cuts"}
    harness_only |= {"describe_input_limit", "declared_input_limit", "content_loss_report"}
    harness_only |= {"CONTENT_COUNTS"}
    for home in (base, kit):
        public = {n for n, v in vars(home).items() if not n.startswith("_") and _defined(home, v)}
        assert public - harness_only <= set(module.__all__), sorted(public - set(module.__all__))
    assert module.PLUGIN_API == "1.1"


def test_the_results_envelope_records_the_plugin_api(fixture_run) -> None:
    """Beside the result document (not in it), so the baseline does not change."""
    results = fixture_run.envelopes["results"]
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
