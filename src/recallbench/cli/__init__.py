"""The command-line interface: the `recallbench` command (`main`), its shared options and
the plumbing it shares with scripts/retrieval_eval.py."""
