"""The pipeline stages. Each is a function from upstream artifact envelopes (and options) to
a new envelope; the CLI, nox and `pipeline.py` only call them."""
