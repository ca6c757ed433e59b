"""Stub of ``lmcache.v1.platform.devices.cuda.ipc_wrapper`` (the newest module path, LMCache/LMCache#5282): data only.

The classes pickle under this module's name. ``VmmCudaIPCWrapper``'s attributes are assigned in the order of LMCache's
``__init__`` (``lmcache/v1/platform/devices/cuda/ipc_wrapper.py@06a0554d``), and ``handle`` is the same bytes object as
``_export_id``, so the pickle holds a memo reference, as the real one does.
"""

from lmcache.v1.platform.cuda import ipc_wrapper as _previous


class CudaIPCWrapper(_previous.CudaIPCWrapper):
    pass


class RawCudaIPCWrapper(_previous.RawCudaIPCWrapper):
    pass


class VmmCudaIPCWrapper:
    def __init__(self, *, export_id, kind, fabric_blob, alloc_size, alloc_offset, nbytes, dtype, shape, stride,
                 device_uuid):
        self._export_id = bytes(export_id)
        self._kind = kind
        self._fabric_blob = None if fabric_blob is None else bytes(fabric_blob)
        self._fd = None
        self._alloc_size = alloc_size
        self._alloc_offset = alloc_offset
        self._nbytes = nbytes
        self.handle = self._export_id
        self.dtype = dtype
        self.shape = tuple(shape)
        self.stride = tuple(stride)
        self.storage_offset = 0
        self.device_uuid = device_uuid
        self._opens = 0
