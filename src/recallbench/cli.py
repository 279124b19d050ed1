"""Command line: one subcommand per stage (placeholder while stages are built)."""

import click


@click.group()
def main() -> None:
    """recallbench: retrieval-quality evidence for agent memory stores."""
