"""Stub of ``lmcache.v1.platform.cpu.shm`` (CPU KV tensors in POSIX shared memory)."""

from lmcache.v1.platform.base.ipc_wrapper import DeviceIPCWrapper


class CpuShmTensorWrapper(DeviceIPCWrapper):
    """Same attributes, assigned in the same order, as LMCache's ``__init__``.

    Pickle writes the instance ``__dict__`` in insertion order, so the assignment order below is
    part of the wire format (protocol doc §0.4).
    """

    SHM_NAME_PREFIX = "/lmcache_kv_"

    def __init__(self, *, shm_name, nbytes, dtype, shape, stride, storage_offset=0):
        self.shm_name = shm_name
        self.nbytes = nbytes
        self.handle = None
        self.dtype = dtype
        self.shape = tuple(shape)
        self.stride = tuple(stride)
        self.storage_offset = storage_offset
        self.device_uuid = "cpu"

    @classmethod
    def from_tensor(cls, tensor, shm_name):
        """Mirror of the real constructor, which takes the (shm-backed) tensor itself."""
        return cls(
            shm_name=shm_name,
            nbytes=tensor.numel() * tensor.element_size(),
            dtype=tensor.dtype,
            shape=tuple(tensor.shape),
            stride=tuple(tensor.stride()),
            storage_offset=int(tensor.storage_offset()),
        )
