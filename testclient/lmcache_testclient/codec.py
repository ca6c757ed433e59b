"""msgpack encoding as LMCache's ``get_customized_encoder``: msgspec, plus ext type 1 = pickle.

A KV-cache wrapper (any ``DeviceIPCWrapper`` subclass, or the old ``custom_types.CudaIPCWrapper``)
becomes ``msgspec.msgpack.Ext(1, pickle.dumps(wrapper))``; msgspec then picks ext8/16/32 by
length, as the real encoder does (``c7 f5 01`` for a 245-byte CPU-shm pickle).
"""

import pickle
from typing import Any

import msgspec

from lmcache.v1.multiprocess.custom_types import CudaIPCWrapper as LegacyCudaIPCWrapper
from lmcache.v1.platform.base.ipc_wrapper import DeviceIPCWrapper

WRAPPER_EXT_CODE = 1

# LMCache calls pickle.dumps(obj) with the default protocol: 4 up to Python 3.13 (what the golden
# frames hold), 5 from 3.14. Pin 4 so that the bytes do not depend on the interpreter running us.
PICKLE_PROTOCOL = 4

WRAPPER_TYPES = (DeviceIPCWrapper, LegacyCudaIPCWrapper)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, WRAPPER_TYPES):
        return msgspec.msgpack.Ext(WRAPPER_EXT_CODE, pickle.dumps(obj, protocol=PICKLE_PROTOCOL))
    raise TypeError(f"cannot msgpack-encode {type(obj).__qualname__}: not a wire type")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


def encode(obj: Any) -> bytes:
    """One frame: ``msgspec.msgpack`` bytes of ``obj`` (ints, str, bytes, lists, maps, messages)."""
    return _ENCODER.encode(obj)


def _keep_ext(code: int, data: memoryview) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(code, bytes(data))


_DECODER = msgspec.msgpack.Decoder(ext_hook=_keep_ext)


def decode(frame: bytes) -> Any:
    """Untyped decode; ext values come back as ``msgspec.msgpack.Ext`` (never unpickled)."""
    return _DECODER.decode(frame)
