"""The contract every registered system keeps: built-ins, semantic ones and installed plugins.

The checks are `recallbench check-plugin`'s (`recallbench.commands.checkplugin`), run here on the
contract's small data (`checkplugin.contract_data`), one test per check and system. The one
check left out here is `other-process` (a second Python process per system); `recallbench
check-plugin` runs it, and `tests/systems/test_check_plugin.py` runs the whole command on
the core systems and the example plugins.

Parametrized over `system_names()`; nothing is skipped but `vipune` and `vipune-semantic`
when no `vipune` binary is found (it cannot be built on our machines). Any other system that
is not available here fails with its install hint (CI installs every extra and the example
plugins). A check that does not apply to a system (no clone path, say) passes at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recallbench.commands import checkplugin
from recallbench.core.errors import RecallbenchError
from recallbench.systems import get_system
from recallbench.systems.base import truncation_report
from recallbench.systems.registry import find_binary, system_names

#: Systems that drive a program no package installs: their contract runs only where it is.
NEEDS_A_PROGRAM = {"vipune": "vipune", "vipune-semantic": "vipune"}
DATA = checkplugin.contract_data()


@pytest.fixture(params=system_names())
def system(request):
    program = NEEDS_A_PROGRAM.get(request.param)
    if program is not None and find_binary(program) is None:
        # the one skip: vipune's binary cannot be built on our machines (its crates and its
        # model are out of reach); everything else must be available
        pytest.skip(
            f"{request.param}: no `{program}` binary here (its Rust crates and its model "
            f"cannot be fetched on these machines); set RECALLBENCH_VIPUNE or put `{program}` "
            "on PATH to run this contract"
        )
    try:
        return get_system(request.param)
    except RecallbenchError as exc:  # unavailable: fail (with the install hint), never skip
        pytest.fail(f"system {request.param!r} is not available here: {exc}")


def keeps(check: str, system, tmp_path: Path) -> None:
    """The check passes for `system` (or does not apply to it)."""
    found = checkplugin.check_named(check)
    if not checkplugin.applies(found, system):
        return
    try:
        checkplugin.run_check(found, system.name, DATA, tmp_path / check, system)
    except checkplugin.CheckFailed as failed:
        pytest.fail(f"{system.name}: {check}: {failed}")


def test_declared_capabilities_match_the_system(system, tmp_path: Path) -> None:
    keeps("listed", system, tmp_path)


def test_configuration_is_a_json_object(system, tmp_path: Path) -> None:
    keeps("configuration", system, tmp_path)


def test_a_fresh_store_is_empty(system, tmp_path: Path) -> None:
    keeps("fresh-store", system, tmp_path)


def test_ingest_counts_and_refuses_a_repeated_id(system, tmp_path: Path) -> None:
    keeps("ingest", system, tmp_path)


def test_two_runs_give_the_same_order(system, tmp_path: Path) -> None:
    keeps("same-order", system, tmp_path)


def test_memory_ids_are_opaque(system, tmp_path: Path) -> None:
    keeps("opaque-ids", system, tmp_path)


def test_attach_reopens_the_same_store(system, tmp_path: Path) -> None:
    keeps("attach", system, tmp_path)


def test_digest_changes_when_a_record_is_missing(system, tmp_path: Path) -> None:
    keeps("digest", system, tmp_path)


def test_a_store_at_a_reused_path_is_fresh(system, tmp_path: Path) -> None:
    keeps("path-reuse", system, tmp_path)


def test_the_texts_read_back_are_the_texts_ingested(system, tmp_path: Path) -> None:
    keeps("content", system, tmp_path)


def test_lexical_matches_when_the_system_has_them(system, tmp_path: Path) -> None:
    keeps("lexical", system, tmp_path)


def test_the_embedder_feeds_a_vector_cache(system, tmp_path: Path) -> None:
    if system.embedder is None:
        assert truncation_report(None, ["x"]) is None
    keeps("embedder", system, tmp_path)


def test_clone_path_round_trip_and_tamper_rejection(system, tmp_path: Path) -> None:
    keeps("clone", system, tmp_path)


def test_structured_search_when_the_system_asks_for_structure(system, tmp_path: Path) -> None:
    keeps("structured", system, tmp_path)
