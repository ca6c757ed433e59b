"""Stub package (see lmcache/__init__.py)."""
