"""Stub of ``lmcache.v1.platform.cuda.ipc_wrapper`` (CUDA IPC wrappers, data only)."""

from lmcache.v1.platform.base.ipc_wrapper import DeviceIPCWrapper


class CudaIPCWrapper(DeviceIPCWrapper):
    """``handle`` is the 8-tuple of ``UntypedStorage._share_cuda_()`` (protocol doc §6.3).

    Attribute order = assignment order in LMCache's ``__init__`` = order in the pickle.
    """

    def __init__(self, *, handle, dtype, shape, stride, storage_offset, device_uuid):
        self.handle = tuple(handle)
        self.dtype = dtype
        self.shape = tuple(shape)
        self.stride = tuple(stride)
        self.storage_offset = storage_offset
        self.device_uuid = device_uuid


class RawCudaIPCWrapper(CudaIPCWrapper):
    """Isolated-IPC wrapper: a raw 64-byte ``cudaIpcMemHandle_t`` of the allocation base.

    Deliberately does not call ``CudaIPCWrapper.__init__``: the real class assigns its private
    fields first, then the shared ones, then ``_opens``, and the pickle keeps that order.
    """

    def __init__(self, *, ipc_handle_reserved, alloc_offset, nbytes, dtype, shape, stride,
                 device_uuid, storage_offset=0):
        self._ipc_handle_reserved = bytes(ipc_handle_reserved)
        self._alloc_offset = alloc_offset
        self._nbytes = nbytes
        self.handle = None
        self.dtype = dtype
        self.shape = tuple(shape)
        self.stride = tuple(stride)
        self.storage_offset = storage_offset
        self._opens = 0
        self.device_uuid = device_uuid
