"""recallbench: reproducible retrieval-quality evidence for agent memory stores."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("recallbench")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
