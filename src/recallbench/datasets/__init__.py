"""Dataset readers: each turns a source into scopes of the internal model (`base`)."""
