"""Stub package of ``lmcache.v1.platform.devices`` (the module paths since LMCache/LMCache#5282)."""
