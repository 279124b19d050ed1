"""The result document (`result`), its Markdown view (`markdown`) and, later, its plots."""
