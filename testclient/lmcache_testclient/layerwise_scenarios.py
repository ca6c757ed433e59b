"""LMCache's layer-wise mode (``--layerwise-batch N``) on the CPU path, with the frames of vLLM's layer-wise worker
(layerwise.py).

LMCache has no layer-wise retrieval for CPU workers: its event pool needs the worker's device event backend, which a CPU
(shared-memory) registration has none of (``lmcache_driven_transfer_layerwise.py@1565d9a3`` ``_ensure_event_pool``), so a
layer-wise server answers its pool request ``(0, [])`` and the worker stops at registration. What CPU tests can hold the
server to: every request of either op is answered (LMCache's server raises inside the handler for a retrieve without a
pool, and its worker then waits out its timeout), a per-chunk RETRIEVE is refused with ``(b"", False)`` as LMCache's
layer-wise module refuses it, and nothing is written. The byte-exact layer-wise round trip runs on the GPU host
(testclient/gpu/layerwise_check.py).
"""

import contextlib

from . import expect, protocol
from .codec import encode
from .layerwise import call_retrieve_layerwise, register_pool, retrieve_layerwise
from .messages import ZERO_EVENT
from .protocol import Request
from .ops import Op
from .registry import Options, scenario
from .report import Report
from .shm_kv import LAYOUTS, SENTINEL, Geometry, ShmKVCache
from .wire import Client
from .worker import BlockAllocator, Worker, new_instance_id, random_tokens

POOL_NONE = encode([0, []])
CLOSING_MISS = [b"", True, False]


def _closing_miss(report: Report, name: str, client: Client, request: Request, timeout_s: float) -> None:
    lw = call_retrieve_layerwise(client, request, timeout_s)
    report.check(name, lw.frames == [CLOSING_MISS], f"frames {lw.frames!r}")


@scenario("layerwise-mode", "a server with --layerwise-batch N, CPU workers: event pool (0, []) (LMCache has none for CPU), "
                            "retrieve_layerwise answered by its closing frame, per-chunk RETRIEVE refused (b'', False), "
                            "malformed and unknown-instance requests answered, nothing written")
def layerwise_mode(report: Report, opts: Options) -> None:
    chunk, per_chunk = opts.chunk_size, opts.blocks_per_chunk
    rng = opts.rng("layerwise-mode")
    alloc = BlockAllocator(6 * per_chunk)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=alloc.num_blocks), seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, "testclient/layerwise-mode", new_instance_id(rng))
        w.register()
        w.step("register_layerwise_ipc_event_pool of a CPU worker = (0, [])", register_pool(w.instance_id), POOL_NONE)
        tokens = random_tokens(rng, 2 * chunk)
        key = w.key(tokens, "lwm-1")
        source = alloc.take(2 * per_chunk)
        w.store("STORE 2 chunks (layer-wise mode changes only retrieval)", key, source, required=True)
        w.lookup_hits("LOOKUP", key, 2)
        target = alloc.take(2 * per_chunk)
        kv.fill_blocks(target, SENTINEL)
        _closing_miss(report, "retrieve_layerwise of a CPU worker = its closing frame (b'', True, False) alone", client,
                      retrieve_layerwise(key, w.instance_id, [target], ZERO_EVENT), opts.timeout_s)
        w.step("per-chunk RETRIEVE refused in layer-wise mode: (b'', False)",
               protocol.retrieve(key.with_(request_id="lwm-2"), w.instance_id, [target]), encode([b"", False]))
        report.check("neither retrieve wrote a block", all(kv.block_is_filled_with(b, SENTINEL) for b in target))

        unknown = w.instance_id ^ 0x5A5A
        w.step("register_layerwise_ipc_event_pool of an unknown instance = (0, [])", register_pool(unknown), POOL_NONE)
        _closing_miss(report, "retrieve_layerwise of an unknown instance = its closing frame", client,
                      retrieve_layerwise(key, unknown, [target], ZERO_EVENT), opts.timeout_s)
        w.step("retrieve_layerwise with 2 of its 5 frames: the closing frame",
               Request("retrieve_layerwise", (key, w.instance_id)), encode(CLOSING_MISS))
        w.step("retrieve_layerwise with a key that is not a map: the closing frame",
               Request("retrieve_layerwise", ("not-a-key", w.instance_id, [target], ZERO_EVENT, 0)), encode(CLOSING_MISS))
        w.step("retrieve_layerwise with a 10-byte event handle: the closing frame",
               retrieve_layerwise(key, w.instance_id, [target], b"\x01" * 10), encode(CLOSING_MISS))
        w.step("register_layerwise_ipc_event_pool without its instance id = (0, [])", Request("register_layerwise_ipc_event_pool", ()),
               POOL_NONE)
        report.check("still nothing written", all(kv.block_is_filled_with(b, SENTINEL) for b in target))
        w.step("END_SESSION", Request(Op.END_SESSION, ("lwm-1",)), expect.NO_PAYLOAD)
        w.unregister()
