"""Stub of ``lmcache.v1.platform.base.ipc_wrapper``.

LMCache registers ext code 1 for this base class; every wire-level KV-cache wrapper subclasses it
so that one ext code carries them all. The base class itself never appears in a pickle.
"""


class DeviceIPCWrapper:
    """Marker base class: instances are sent as ext(1, pickle.dumps(obj))."""
