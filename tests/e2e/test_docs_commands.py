"""The docs' shell commands, run as written.

"Evaluate your own memory store" (docs/own-store.md) is followed verbatim, block by block, in
a scratch directory and a scratch virtual environment that sees this project's installed
packages (a .pth file) and holds recallbench (editable, from this checkout) and the new
`mine` package; nothing is installed into the project's own environment.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def sh_blocks(page: Path) -> list[str]:
    return SH_BLOCK.findall(page.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def scratch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv whose site-packages also reads this environment's (no index needed), with
    recallbench installed editable from this checkout (so it has its own console script)."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    (purelib / "project-env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    py = venv / "bin" / "python"
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-e",
            str(ROOT),
        ],
        check=True,
    )
    return venv


def test_own_store_page_followed_verbatim(scratch_venv: Path, tmp_path: Path) -> None:
    blocks = sh_blocks(ROOT / "docs" / "own-store.md")
    # the user's store is the challenger: the reference comes first
    assert any("compare --system bm25 --system mine" in b for b in blocks)
    env = {
        **os.environ,
        "PATH": f"{scratch_venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(scratch_venv),
        "PIP_NO_BUILD_ISOLATION": "false",  # build with this env's setuptools: no index
        "PIP_NO_DEPS": "true",  # recallbench is already importable
    }
    env.pop("PYTHONPATH", None)
    outputs = []
    for block in blocks[1:]:  # the first block is the page's preview of the last one
        cwd = tmp_path
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (block, done.stdout[-2000:], done.stderr[-2000:])
        outputs.append(done.stdout)
    listing = next(
        o for b, o in zip(blocks[1:], outputs, strict=True) if "recallbench systems" in b
    )
    assert re.search(r"^mine\s+available", listing, re.M), listing
    checked = next(o for b, o in zip(blocks[1:], outputs, strict=True) if "check-plugin" in b)
    assert re.search(r"^ok +other-process: ", checked, re.M), checked
    assert not re.search(r"^FAIL", checked, re.M), checked
    compared = next(o for b, o in zip(blocks[1:], outputs, strict=True) if "compare" in b)
    assert re.search(r"^mine vs bm25: ndcg@5 ", compared, re.M), compared
    assert re.search(r"^mine vs minilm: ndcg@5 ", compared, re.M), compared
    # the page quotes the two headlines as they are printed
    page = (ROOT / "docs" / "own-store.md").read_text(encoding="utf-8")
    quoted = [line for line in page.splitlines() if line.startswith("mine vs ")]
    printed = [line for line in compared.splitlines() if line.startswith("mine vs ")]
    assert quoted == printed, printed
    compare_md = (tmp_path / "build" / "compare.md").read_text(encoding="utf-8")
    assert "## mine against bm25" in compare_md
    minilm_md = (tmp_path / "build-minilm" / "compare.md").read_text(encoding="utf-8")
    assert "## mine against minilm" in minilm_md


def test_the_example_plugin_compares_with_the_reference(tmp_path: Path) -> None:
    """`pip install ./examples/plugin-system` (make setup does) then the compare line of
    examples/plugin-system/README.md (`recallbench compare --system bm25 --system lancedb`)
    works: the plugin is found through its entry point and compared per query with
    paired statistics, bm25 the reference."""
    from click.testing import CliRunner

    from recallbench.cli.main import main

    readme = ROOT / "examples" / "plugin-system" / "README.md"
    line = next(
        c
        for c in sh_blocks(readme)[0].splitlines()
        if c.startswith(".venv/bin/recallbench compare")
    )
    args = line.split("#")[0].split()[1:]
    assert args == ["compare", "--system", "bm25", "--system", "lancedb"], line
    result = CliRunner().invoke(main, ["--build-dir", str(tmp_path), *args])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("lancedb vs bm25: ndcg@5 ")
    compare_md = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert "## lancedb against bm25" in compare_md
    assert "| lancedb | lancedb | " in compare_md


def test_the_quickstart_commands_run_as_written(tmp_path: Path) -> None:
    """docs/quickstart.md: five commands, each with its section; the three `recallbench`
    ones run as written (this environment's recallbench for `.venv/bin/recallbench`) in a
    scratch directory, and the compare line the page quotes is the one compare prints.
    (`make eval` is run by tests/e2e/test_readme.py; the browser one opens a window.)"""
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    commands = sh_blocks(ROOT / "docs" / "quickstart.md")[0].strip().splitlines()
    assert len(commands) == 5
    assert commands[:2] == ["make eval", "python3 -m webbrowser build/report.html"]
    for n, command in enumerate(commands, 1):
        shown = command.replace(".venv/bin/", "")
        assert f"\n## {n}. `{shown}`: " in page, shown
    recallbench = str(Path(sys.executable).parent / "recallbench")
    env = {**os.environ, "NO_PROGRESS": "1"}
    outputs = []
    for command in commands[2:]:
        assert command.startswith(".venv/bin/recallbench ")
        args = command.split()[1:]
        done = subprocess.run(
            [recallbench, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        outputs.append(done.stdout)
    assert outputs[0].splitlines()[0].split()[:2] == ["hotmem", "available"]
    for name in ("results.json", "report.md", "report.html", "decision.json"):
        assert (tmp_path / "build" / "bm25" / name).is_file(), name
    for name in ("compare.json", "compare.md", "compare.html"):
        assert (tmp_path / "build" / name).is_file(), name
    (line,) = [x for x in outputs[2].splitlines() if x.startswith("hotmem vs bm25: ")]
    quoted = re.search(r"`(hotmem vs bm25: [^`]*)`", page)
    assert quoted is not None
    assert " ".join(quoted.group(1).split()) == line
