"""Stub package of ``lmcache.v1.platform.devices.cuda``."""
