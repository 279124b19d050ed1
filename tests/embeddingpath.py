"""What the embedding-path tests share (tests/e2e/test_embedding_path.py and
test_embedding_cache.py): the CLI in process, the fixture suite's arguments, a cache's bytes,
and the fixtures validated once with minilm's cache made by `prep`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from recallbench.cli.main import main
from recallbench.engine.vectorcache import FILES, MANIFEST, rows_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "retrieval"
LEARNED = ("minilm", "hybrid-rrf", "hotmem-minilm")
RESULT_FILES = ("runs.json", "results.json")


def cli(build: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["--build-dir", str(build), "-q", *map(str, args)])


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def one_line_error(result: Result, command: str) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"recallbench {command}: error: ")
    return lines[0]


def fixture_args() -> list[str | Path]:
    return ["--corpus", FIXTURES / "corpus.jsonl", "--queries", FIXTURES / "queries.jsonl"]


def cache_bytes(cache: Path) -> dict[str, bytes]:
    manifest = orjson.loads((cache / MANIFEST).read_bytes())
    out = {name: (rows_dir(cache, manifest) / name).read_bytes() for name in FILES}
    out[MANIFEST] = (cache / MANIFEST).read_bytes()
    return out


def validated_with_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures validated once, and minilm's cache made by `prep` with one worker."""
    root = tmp_path_factory.mktemp("embedding-path")
    build = root / "build"
    ok(cli(build, "validate", *fixture_args()))
    ok(cli(build, "prep", "--cache", root / "cache", "--system", "minilm", "--workers", "1"))
    return {"root": root, "build": build, "cache": root / "cache"}
