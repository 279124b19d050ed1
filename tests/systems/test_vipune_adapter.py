"""The vipune adapter's own parts: vipune's errors, its home, its limits, its model.

vipune's binary cannot be built here, so these run the adapter against its pure parts and,
where the adapter must run end to end, against `vipune_protocol.py`: a protocol fixture (not
vipune) that reproduces vipune 0.1.8's command-line protocol for exactly these behaviours,
following the source lines its docstring names. The contract test of the real binary is in
test_systems_contract.py (skipped where no binary is found).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from recallbench.core.errors import RecallbenchError
from recallbench.systems import vipune_cli
from recallbench.systems.base import StoreRecord
from recallbench.systems.vipune_cli import VipuneSystem

FIXTURE = Path(__file__).with_name("vipune_protocol.py")


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home, empty, and the fixture as the vipune binary; every call logged."""
    home = tmp_path / "home"
    home.mkdir()
    for key in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "HF_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("VIPUNE_EMBEDDING_MODEL", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RECALLBENCH_VIPUNE", str(FIXTURE))
    monkeypatch.setenv("VIPUNE_FIXTURE_LOG", str(tmp_path / "calls.jsonl"))
    return home


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def records(*texts: str) -> list[StoreRecord]:
    return [StoreRecord(f"m{i}", f"id-{i}", text) for i, text in enumerate(texts)]


# --------------------------------------------------------------------------- item 20: errors


def test_a_json_error_shows_its_error_field() -> None:
    """With --json vipune prints `{"error": ...}` pretty-printed on stdout and exits 1: the
    message read `vipune search: exit 1: }` (the last stdout line)."""
    stdout = json.dumps({"error": "Invalid input: Limit 20000 exceeds maximum allowed"}, indent=2)
    assert vipune_cli.vipune_error(stdout + "\n", "") == (
        "Invalid input: Limit 20000 exceeds maximum allowed"
    )


@pytest.mark.parametrize(
    ("stdout", "stderr", "shown"),
    [
        ("", "error: unexpected argument '--bogus' found\n\nUsage: vipune\n", "Usage: vipune"),
        ("partial\nlast words\n", "", "last words"),
        ('{\n  "status": "weird"\n}\n', "", "}"),  # JSON without `error`: the last line
        ("", "", "no output"),
        ('{"error": "a\\u001b]0;pwned\\u0007 b\\nc"}', "", "aU+001B]0;pwnedU+0007 b c"),
    ],
)
def test_other_failures_fall_back_to_their_last_line(stdout: str, stderr: str, shown: str) -> None:
    assert vipune_cli.vipune_error(stdout, stderr) == shown


def test_a_failing_call_is_one_line_with_vipunes_reason(user_home: Path, tmp_path: Path) -> None:
    system = VipuneSystem("vipune", hybrid=True)
    store = system.open_store(tmp_path / "store")
    store.ingest(records("alpha beta"))
    # the fixture refuses a limit above 10,000 as vipune does; the adapter now refuses it first,
    # so call the store's runner directly to see how a vipune failure reads
    with pytest.raises(RecallbenchError) as caught:
        store._run("list", "--limit", "20000")
    assert str(caught.value) == (
        "vipune list: exit 1: Invalid input: Limit 20000 exceeds maximum allowed (10000)"
    )


# --------------------------------------------------------------------------- item 21: home


def test_the_environment_points_vipunes_home_inside_the_store(tmp_path: Path) -> None:
    home = tmp_path / "store" / vipune_cli.HOME_DIR
    base = {
        "HOME": "/home/user",
        "PATH": "/usr/bin",
        "XDG_CONFIG_HOME": "/home/user/.config",
        "VIPUNE_DATABASE_PATH": "/home/user/elsewhere.db",
        "VIPUNE_MODEL_CACHE": "/home/user/models",
        "VIPUNE_EMBEDDING_MODEL": "BAAI/bge-base-en-v1.5",
    }
    env = vipune_cli.vipune_environment(home, base)
    assert env["HOME"] == str(home)
    for key in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "VIPUNE_MODEL_CACHE"):
        assert Path(env[key]).is_relative_to(home), key
    assert "VIPUNE_DATABASE_PATH" not in env  # the database is --db-path
    assert env["PATH"] == "/usr/bin"
    assert env["VIPUNE_EMBEDDING_MODEL"] == "BAAI/bge-base-en-v1.5"  # the user's choice stays
    # vipune's model stays where hf-hub keeps it
    assert env["HF_HOME"] == "/home/user/.cache/huggingface"
    assert vipune_cli.vipune_environment(home, {**base, "HF_HOME": "/m"})["HF_HOME"] == "/m"


def test_no_call_writes_in_the_users_home(user_home: Path, tmp_path: Path) -> None:
    """`version` ran without --db-path and every call created ~/.vipune/models (vipune's
    ensure_directories runs before --db-path is applied)."""
    before = sorted(str(p.relative_to(user_home)) for p in user_home.rglob("*"))
    system = VipuneSystem("vipune", hybrid=True)
    config = system.configuration()
    assert config["implementation_version"] == "0.1.8"
    store = system.open_store(tmp_path / "store")
    assert store.ingest(records("alpha beta", "gamma delta")) == 2
    assert [h.memory_id for h in store.search("gamma", 1)] == ["m1"]
    assert store.digest()
    assert len(calls(tmp_path)) == 1 + 2 + 1 + 1 + 1  # version, 2 adds, count, search, digest
    assert sorted(str(p.relative_to(user_home)) for p in user_home.rglob("*")) == before
    assert (tmp_path / "store" / vipune_cli.HOME_DIR / ".vipune" / "models").is_dir()


def test_a_linked_vipune_home_is_refused(user_home: Path, tmp_path: Path) -> None:
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "store" / vipune_cli.HOME_DIR).symlink_to(elsewhere)
    with pytest.raises(RecallbenchError, match="not a directory of the store"):
        store.ingest(records("alpha"))
    assert list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------- item 22: limits


def test_a_store_of_ten_thousand_memories_is_counted_and_digested(
    user_home: Path, tmp_path: Path
) -> None:
    """count and digest asked `list --limit N+1`: refused by vipune at 10,000 memories."""
    system = VipuneSystem("vipune", hybrid=True)
    directory = tmp_path / "store"
    system.open_store(directory)
    n = 10_000  # vipune's MAX_SEARCH_LIMIT
    rows = [
        {
            "id": f"v{i}",
            "project_id": vipune_cli.PROJECT,
            "content": f"text {i}",
            "metadata": None,
            "created_at": f"2026-01-01T00:00:{i:09d}Z",
        }
        for i in range(n)
    ]
    (directory / vipune_cli.DB).write_text(json.dumps(rows))  # the fixture's database
    ids = {"ids": {f"v{i}": f"m{i}" for i in range(n)}, "identifiers": {}}
    (directory / vipune_cli.IDS).write_bytes(orjson.dumps(ids))
    store = system.attach(directory)
    assert store.count() == n
    assert store.digest()
    assert calls(tmp_path)[-1][-2:] == ["--limit", "10000"]


def test_more_memories_than_vipune_lists_are_refused_before_adding(
    user_home: Path, tmp_path: Path
) -> None:
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    many = [StoreRecord(f"m{i}", "x", "t") for i in range(10_001)]
    with pytest.raises(RecallbenchError, match=r"10,001 memories .* more than the 10,000"):
        store.ingest(many)
    assert calls(tmp_path) == []


def test_a_top_k_above_vipunes_limit_is_refused_up_front(user_home: Path, tmp_path: Path) -> None:
    store = VipuneSystem("vipune-semantic", hybrid=False).open_store(tmp_path / "store")
    store.ingest(records("alpha"))
    before = len(calls(tmp_path))
    with pytest.raises(RecallbenchError) as caught:
        store.search("alpha", 10_001)
    assert str(caught.value) == (
        "vipune search: limit 10,001, more than the 10,000 vipune returns in one call "
        "(it has no offset to page with)"
    )
    assert len(calls(tmp_path)) == before
    assert [h.memory_id for h in store.search("alpha", 10_000)] == ["m0"]


@pytest.mark.parametrize("query", ["", " ", "\t\n", "\u3000\u2003", "\u00a0 \u2028"])
def test_a_blank_query_has_no_hits_without_calling_vipune(
    user_home: Path, tmp_path: Path, query: str
) -> None:
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    store.ingest(records("alpha"))
    before = len(calls(tmp_path))
    assert store.search(query, 5) == []
    assert len(calls(tmp_path)) == before


def test_a_query_rust_does_not_trim_still_goes_to_vipune(user_home: Path, tmp_path: Path) -> None:
    """U+001C is whitespace to Python's str.strip, not to Rust's trim: vipune embeds it."""
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    store.ingest(records("alpha"))
    before = len(calls(tmp_path))
    store.search("\x1c", 5)
    assert len(calls(tmp_path)) == before + 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("é" * 50_001, "text of 100,002 bytes, more than the 100,000 bytes vipune accepts"),
        (" \n\t", "vipune refuses an empty or whitespace-only text"),
    ],
)
def test_a_text_vipune_refuses_is_refused_up_front_naming_the_memory(
    user_home: Path, tmp_path: Path, text: str, reason: str
) -> None:
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    batch = [StoreRecord("fine", "x", "a fine text"), StoreRecord("big\x1b[2J", "y", text)]
    with pytest.raises(RecallbenchError) as caught:
        store.ingest(batch)
    assert str(caught.value) == f"vipune add: memory 'bigU+001B[2J': {reason}"
    assert calls(tmp_path) == []  # nothing added, not even the fine one


def test_a_text_of_exactly_the_limit_is_added(user_home: Path, tmp_path: Path) -> None:
    store = VipuneSystem("vipune", hybrid=True).open_store(tmp_path / "store")
    assert store.ingest([StoreRecord("m", "x", "a" * 100_000)]) == 1


# --------------------------------------------------------------------------- item 23: model


def test_the_recorded_embedder_is_what_vipune_is_configured_with(
    user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configuration always said bge-small-en-v1.5, whatever vipune embedded with."""
    system = VipuneSystem("vipune", hybrid=True)
    default = system.configuration()["embedder"]
    assert default == "vipune's default model, as configured in vipune 0.1.8"
    monkeypatch.setenv("VIPUNE_EMBEDDING_MODEL", "BAAI/bge-base-en-v1.5")
    chosen = system.configuration()["embedder"]
    assert chosen == "BAAI/bge-base-en-v1.5 (VIPUNE_EMBEDDING_MODEL), ONNX Runtime"
    assert "bge-small" not in default + chosen
