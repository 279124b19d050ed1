"""recallbench: reproducible retrieval-quality evidence for agent memory stores."""

__version__ = "0.1.0"
