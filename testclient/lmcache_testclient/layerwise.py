"""vLLM's layer-wise MP connector, frame for frame (``LMCacheLayerwiseMPConnector``).

What LMCache's layer-wise worker sends and reads (``lmcache/v1/multiprocess/transfer_context/worker_transfer_layerwise.py@1565d9a3``,
``lmcache/v1/multiprocess/futures_layerwise.py@3ed3c8ba``, ``protocols/layerwise.py@3ed3c8ba``):

* right after REGISTER_KV_CACHE, ``register_layerwise_ipc_event_pool(instance_id)`` -> ``(layerwise_batch, handles)``; the
  worker refuses to go on when the batch is 0 or the list is empty;
* ``retrieve_layerwise(key, instance_id, block_ids, event_ipc_handle, skip_first_n_tokens)``, the five payloads of RETRIEVE,
  answered by several frames under the request's uid, each ``(payload, is_final, succeeded)``: an intermediate frame's payload
  is ``<3i`` ``(first_layer, count, pool_index)`` or, layer-major, ``(-1, n, leader)`` followed by ``n`` ``<i`` indices
  (``lmcache_driven_transfer_layerwise.py@1565d9a3``); the closing frame has ``is_final`` True and only its ``succeeded`` counts.

Both ops travel by name (no frozen op id). Pure Python: the CPU scenarios use it with pyzmq, the GPU check (testclient/gpu)
with its own DEALER.
"""

import struct
from typing import Optional

from .codec import decode
from .protocol import Request

REGISTER_POOL = "register_layerwise_ipc_event_pool"
RETRIEVE_LAYERWISE = "retrieve_layerwise"


def register_pool(instance_id: int) -> Request:
    return Request(REGISTER_POOL, (instance_id,))


def retrieve_layerwise(key, instance_id: int, block_ids, event: bytes, skip_first_n_tokens: int = 0) -> Request:
    return Request(RETRIEVE_LAYERWISE, (key, instance_id, block_ids, event, skip_first_n_tokens))


def layer_events(payload: bytes) -> dict:
    """One intermediate frame as the worker imports it: layer index -> pool index. Raises ValueError on a malformed frame."""
    if len(payload) < 12 or len(payload) % 4:
        raise ValueError(f"a layer batch frame of {len(payload)} bytes")
    first, count, pool_index = struct.unpack_from("<3i", payload)
    if first >= 0:
        if len(payload) != 12:
            raise ValueError(f"a (first_layer, count, pool_index) frame of {len(payload)} bytes")
        return {layer: pool_index for layer in range(first, first + count)}
    if first != -1 or len(payload) != 12 + 4 * count:
        raise ValueError(f"a layer-major frame ({first}, {count}) of {len(payload)} bytes")
    return {layer: pool_index for layer in struct.unpack_from(f"<{count}i", payload, 12)}


class LayerwiseRetrieve:
    """The frames of one retrieve_layerwise, read as the worker's ``LayerwiseDeviceMessagingFuture`` reads them."""

    def __init__(self, replies: list):
        self.frames = [decode(r.payload) if r.payload is not None else None for r in replies]
        self.events: dict = {}          # layer -> pool index, in arrival order
        self.batches: list = []         # per intermediate frame: its {layer: pool index}
        self.malformed: Optional[str] = None
        for frame in self.frames[:-1]:
            try:
                payload, is_final, _ = frame
                if is_final:
                    raise ValueError("an is_final frame before the last")
                batch = layer_events(payload)
            except (TypeError, ValueError) as exc:
                self.malformed = f"{frame!r}: {exc}"
                break
            self.batches.append(batch)
            self.events.update(batch)
        last = self.frames[-1]
        self.closed = isinstance(last, list) and len(last) == 3 and last[1] is True
        self.succeeded = self.closed and last[2] is True
        self.last_payload = last[0] if self.closed else None


def call_retrieve_layerwise(client, request: Request, timeout_s: Optional[float] = None) -> LayerwiseRetrieve:
    """Sends one retrieve_layerwise and reads its frames up to the closing one (``wire.Client`` or anything with its
    ``submit`` and ``wait_frames``)."""
    uid = client.submit(request)

    def closing(reply) -> bool:
        value = reply.value()
        return not (isinstance(value, list) and len(value) == 3 and value[1] is False)

    return LayerwiseRetrieve(client.wait_frames(uid, closing, timeout_s))
