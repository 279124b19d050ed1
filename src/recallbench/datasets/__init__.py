"""Dataset readers: each turns a source into scopes of the internal model
(`recallbench.core.model`); `base` holds the reader contract and the registry of dataset
specs."""
