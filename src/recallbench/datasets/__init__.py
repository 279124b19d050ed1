"""Readers that turn datasets into the internal suite model."""
