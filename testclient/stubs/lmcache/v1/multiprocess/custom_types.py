"""Stub of ``lmcache.v1.multiprocess.custom_types`` (older builds, E1/E2 and early E4).

Only the old ``CudaIPCWrapper`` lives here; the message types of this module are msgpack-encoded
(not pickled) and are mirrored in ``lmcache_testclient.messages``.
"""


class CudaIPCWrapper:
    """The pre-``platform`` CUDA wrapper.

    Later builds assign handle, dtype, shape, stride, storage_offset, device_uuid. The first E1
    builds had no stride/storage_offset and a ``torch.Size`` shape: pass ``stride=None`` for that
    form (and a ``torch.Size`` as shape, which pickles as ``torch.Size`` + REDUCE).
    """

    def __init__(self, *, handle, dtype, shape, device_uuid, stride=None, storage_offset=0):
        self.handle = tuple(handle)
        self.dtype = dtype
        if stride is None:  # E1 form: keep the caller's shape object (a torch.Size there)
            self.shape = shape
        else:
            self.shape = tuple(shape)
            self.stride = tuple(stride)
            self.storage_offset = storage_offset
        self.device_uuid = device_uuid
