"""The docs' dataset tables, generated from the dataset specs (`base.DATASETS`).

README.md and docs/index.md hold the dataset tables, docs/stages.md the dataset options'
table, between ``<!-- datasets-table:start -->`` and ``<!-- datasets-table:end -->``; a
test fails when a committed table and the specs disagree.
``python -m recallbench.datasets.tables readme|index|options`` prints one;
``python -m recallbench.datasets.tables write`` rewrites all three blocks in place (run it
from the repository's root after adding or changing a dataset).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from recallbench.datasets.base import DATASETS, DEFAULT_DATASET, DatasetSpec

#: the markers around a generated table
START, END = "<!-- datasets-table:start -->", "<!-- datasets-table:end -->"


def chosen_with(spec: DatasetSpec) -> str:
    """The validate command line that picks the dataset, its options in brackets, as a
    Markdown code span (pipes escaped for a table cell)."""
    words = ["recallbench validate"]
    if spec.name != DEFAULT_DATASET:
        words.append(f"--dataset {spec.name}")
    for option in spec.options:
        word = f"{option.flag} {option.metavar}".replace("|", "\\|")
        required = option.required and not option.default_file
        words.append(word if required else f"[{word}]")
    return "`" + " ".join(words) + "`"


def _name(spec: DatasetSpec, link: bool) -> str:
    cell = f"[{spec.title}]({spec.docs})" if link else f"`{spec.name}`"
    return cell + (" (default)" if spec.name == DEFAULT_DATASET else "")


def readme_table(specs: Iterable[DatasetSpec] | None = None) -> str:
    """README.md's table: dataset, what it reads, one scope, the command that chooses it."""
    lines = ["| dataset | what it reads | one scope is | chosen with |", "|---|---|---|---|"]
    for spec in DATASETS.values() if specs is None else specs:
        lines.append(
            f"| {_name(spec, False)} | {spec.reads} | {spec.scope} | {chosen_with(spec)} |"
        )
    return "\n".join(lines) + "\n"


def index_table(specs: Iterable[DatasetSpec] | None = None) -> str:
    """docs/index.md's table: dataset (linked to its page), what it is, how it is chosen."""
    lines = ["| dataset | what it is | how it is chosen |", "|---|---|---|"]
    for spec in DATASETS.values() if specs is None else specs:
        lines.append(f"| {_name(spec, True)} | {spec.what} | {chosen_with(spec)} |")
    return "\n".join(lines) + "\n"


def options_table() -> str:
    """docs/stages.md's table of the dataset options (validate, run, compare and the script
    take them all): each flag once, its default, the datasets that read it, its meaning."""
    from recallbench.datasets.base import shared_options

    lines = [
        "| option | default | datasets | meaning |",
        "|---|---|---|---|",
        f"| `--dataset` | `{DEFAULT_DATASET}` | | the reader: "
        + ", ".join(f"`{name}`" for name in DATASETS)
        + " |",
    ]
    for option, owners in shared_options().values():
        flag = f"`{option.flag} FILE`" if option.type == "file" else f"`{option.flag}`"
        if option.default_file:
            default = f"`benchmarks/retrieval/{option.default_file}`"
        else:
            default = f"`{option.default}`" if option.default else "none"
        names = ", ".join(f"`{name}`" for name in owners)
        lines.append(f"| {flag} | {default} | {names} | {option.doc or option.help} |")
    return "\n".join(lines) + "\n"


TABLES = {"readme": readme_table, "index": index_table, "options": options_table}
#: the page each table is committed in, relative to the repository's root
PAGES = {"readme": "README.md", "index": "docs/index.md", "options": "docs/stages.md"}


def with_table(text: str, table: str, page: str) -> str:
    """`text` with its one generated block replaced by `table`."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"{page}: needs exactly one {START} ... {END} block")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def write_tables(root: Path) -> list[str]:
    """Rewrite every page's generated block under `root`; the pages that changed."""
    changed = []
    for name, page in PAGES.items():
        path = root / page
        text = path.read_text(encoding="utf-8")
        new = with_table(text, TABLES[name](), page)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str]) -> int:
    if argv == ["write"]:
        try:
            changed = write_tables(Path.cwd())
        except (OSError, ValueError) as exc:
            print(f"recallbench.datasets.tables: error: {exc}", file=sys.stderr)
            return 1
        print(
            f"rewrote {', '.join(changed)}" if changed else "every table is current",
            file=sys.stderr,
        )
        return 0
    if len(argv) != 1 or argv[0] not in TABLES:
        print(
            "usage: python -m recallbench.datasets.tables readme|index|options|write",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(TABLES[argv[0]]())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
