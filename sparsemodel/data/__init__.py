"""Bundled data files (see README.md)."""
