"""SGLang-shaped and layer-wise clients.

SGLang's LMCache MP connector (``LMCache/LMCache:lmcache/integration/sglang/multi_process_adapter.py@6f45e604``,
class ``LMCacheMPConnector``): one DEALER per TP rank, REGISTER with **6** frames (``instance_id = os.getpid()``, a flat
list of K pools then V pools ``[page_buffer_size, heads, head size]``, ``model_path``, ``tp_size``, ``"sglang"``,
``{"tokens_per_block": page_size}``), keys ``IPCCacheEngineKey`` without ``num_kv_readers``, flat page-id lists
(``slot // page_size``), LOOKUP + QUERY from *every* rank under the same request id, RETRIEVE with ``[0] * pad_pages``
placeholders and the pad counted in pages, PING without an instance id.

vLLM's layer-wise MP connector (``protocols/layerwise.py@3ed3c8ba``): ``register_layerwise_ipc_event_pool`` and
``retrieve_layerwise`` sent by name to a server started without ``--layerwise-batch``: it answers ``(0, [])`` and a closing
miss frame ``(b"", True, False)``, as LMCache's server does with the mode off (docs/sglang.md). With the mode on:
layerwise_scenarios.py (CPU) and testclient/gpu/layerwise_check.py (the layer-wise copy).
"""

import contextlib
from dataclasses import dataclass
from typing import Optional

import torch

from . import expect, protocol
from .codec import encode
from .messages import ZERO_EVENT
from .protocol import Request
from .ops import Op
from .registry import Options, scenario
from .report import Report
from .shm_kv import LAYOUTS, SENTINEL, Geometry, Segments, ShmKVCache, _raw
from .wire import Client
from .worker import BlockAllocator, Worker, new_instance_id, random_tokens

from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper

PAGE = 16          # SGLang --page-size
HEADS = 4
HEAD_SIZE = 32
LAYERS = 3
MLA_WIDTH = 96


@dataclass(frozen=True)
class SglangKey:
    """``IPCCacheEngineKey`` as SGLang's connector builds it: 7 fields, no ``num_kv_readers`` (read as 1)."""

    model_name: str
    world_size: int
    worker_id: Optional[int]
    token_ids: tuple
    start: int
    end: int
    request_id: str


class SglangPools:
    """One TP rank's KV pools in POSIX shm: ``LAYERS`` K pools then ``LAYERS`` V pools (MHA), or ``LAYERS`` MLA pools."""

    def __init__(self, pages: int, seed: int, mla: bool = False):
        self.slots = pages * PAGE
        shape = (self.slots, 1, MLA_WIDTH) if mla else (self.slots, HEADS, HEAD_SIZE)
        count = LAYERS if mla else 2 * LAYERS
        self._segments = Segments()
        self.tensors = [self._segments.tensor(shape, torch.bfloat16)[1] for _ in range(count)]
        gen = torch.Generator().manual_seed(seed)
        for t in self.tensors:
            t.copy_((torch.rand(t.shape, generator=gen) * 1.5 + 0.5).to(t.dtype))

    def wrappers(self) -> list:
        return [CpuShmTensorWrapper.from_tensor(t, n) for t, n in zip(self.tensors, self._segments.names)]

    def page_bytes(self, page: int) -> bytes:
        return b"".join(_raw(t[page * PAGE:(page + 1) * PAGE]) for t in self.tensors)

    def snapshot(self, pages) -> list:
        return [self.page_bytes(p) for p in pages]

    def fill(self, pages, value: float) -> None:
        for p in pages:
            for t in self.tensors:
                t[p * PAGE:(p + 1) * PAGE].fill_(value)

    def filled_with(self, page: int, value: float) -> bool:
        return all(bool((t[page * PAGE:(page + 1) * PAGE] == value).all()) for t in self.tensors)

    def close(self) -> None:
        self.tensors = []
        self._segments.release()


class SglangRank:
    """One SGLang TP rank: its DEALER, pools and pid-like instance id; each step one recorded check."""

    def __init__(self, report: Report, client: Client, pools: SglangPools, model: str, rank: int, tp: int,
                 instance_id: int):
        self.w = Worker(report, client, None, model, instance_id, prefix=f"rank {rank}: ")
        self.pools, self.model, self.rank, self.tp = pools, model, rank, tp

    def register(self, name="REGISTER_KV_CACHE (6 frames, engine sglang)", wrappers=None, hints=None, ok=True) -> None:
        hints = {"tokens_per_block": PAGE} if hints is None else hints
        self.w.step(name, Request(Op.REGISTER_KV_CACHE, (
            self.w.instance_id, self.pools.wrappers() if wrappers is None else wrappers, self.model, self.tp,
            "sglang", hints)), expect.NO_PAYLOAD, required=ok)

    def key(self, tokens, request_id, start=0, end=None, lookup=False) -> SglangKey:
        return SglangKey(self.model, self.tp, None if lookup else self.rank, tuple(tokens), start,
                         len(tokens) if end is None else end, request_id)

    def store(self, name, key, pages, ok=True) -> None:
        self.w.step(name, Request(Op.STORE, (key, self.w.instance_id, list(pages), ZERO_EVENT)),
                    expect.transfer_reply(ok))

    def retrieve(self, name, key, pages, skip_pages=0, ok=True) -> None:
        self.w.step(name, Request(Op.RETRIEVE, (key, self.w.instance_id, list(pages), ZERO_EVENT, skip_pages)),
                    expect.transfer_reply(ok))

    def lookup(self, name, key) -> None:
        self.w.step(name, Request(Op.LOOKUP, (key, self.tp)), expect.NO_PAYLOAD)


def _verify(report: Report, name: str, pools: SglangPools, pages, expected) -> None:
    bad = [p for p, want in zip(pages, expected) if pools.page_bytes(p) != want]
    report.check(name, not bad, f"{len(pages)} pages byte-equal" if not bad else f"{len(bad)} pages differ, first {bad[0]}")


@scenario("sglang", "SGLang's MP connector on 2 TP ranks: 6-frame REGISTER of K-then-V pools, flat page ids, per-rank "
                    "LOOKUP/QUERY under one request id, placeholder pages, PING without id; byte-exact")
def sglang(report: Report, opts: Options) -> None:
    chunk = opts.chunk_size
    per_chunk = chunk // PAGE
    n_tokens = 2 * chunk
    rng = opts.rng("sglang")
    pages = 1 + 6 * 2 * per_chunk
    model = "org/sglang-model##lmcache-kv-dtype-v1-" + "0123456789abcdef0123456789abcdef"
    with contextlib.ExitStack() as stack:
        ranks = []
        for r in range(2):
            client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
            pools = SglangPools(pages, rng.getrandbits(32))
            stack.callback(pools.close)
            ranks.append(SglangRank(report, client, pools, model, r, 2, 10_000 + rng.randrange(50_000)))
        for rank in ranks:
            rank.w.step("GET_CHUNK_SIZE", protocol.get_chunk_size(), expect.int_reply(chunk))
            rank.register()
            rank.w.step("PING with no payload frame", Request(Op.PING, ()), expect.TRUE)
            rank.w.step("PING(None)", protocol.ping(None), expect.TRUE)

        tokens = random_tokens(rng, n_tokens + 7)          # a partial tail, as SGLang's prompt
        aligned = n_tokens
        request_id = "sglang-rid-1"
        alloc = BlockAllocator(pages)
        alloc.take(1)                                       # page 0: SGLang's padding page
        stored = alloc.take(2 * per_chunk)
        originals = [rank.pools.snapshot(stored) for rank in ranks]
        for rank in ranks:
            rank.store(f"STORE [0,{aligned}) from {len(stored)} flat page ids", rank.key(tokens[:aligned + 7], request_id,
                       end=aligned), stored)
            rank.pools.fill(stored, 0.0)

        # every rank looks up with the same request id before any queries: each must get its own count
        for rank in ranks:
            rank.lookup("LOOKUP (same request id on every rank, no num_kv_readers)", rank.key(tokens, request_id, end=aligned,
                                                                                              lookup=True))
        for rank in ranks:
            rank.w.query("QUERY_PREFETCH_STATUS = 2 on this rank", request_id, 2)

        # RETRIEVE as retrieve_kv: the first chunk's first 3 pages already in the radix tree (placeholders 0, pad in pages)
        pad_pages = 3
        target = alloc.take(2 * per_chunk - pad_pages)
        for i, rank in enumerate(ranks):
            rank.pools.fill([0], SENTINEL)
            rank.retrieve(f"RETRIEVE [0,{aligned}) with {pad_pages} placeholder pages, skip {pad_pages} (pages)",
                          rank.key(tokens, request_id, end=aligned), [0] * pad_pages + target, skip_pages=pad_pages)
            _verify(report, f"rank {i}: retrieved pages equal the stored ones", rank.pools, target, originals[i][pad_pages:])
            report.check(f"rank {i}: padding page 0 untouched", rank.pools.filled_with(0, SENTINEL))

        # a whole retrieve, nested page lists (the newest server's list[list[int]]) accepted too
        full = alloc.take(2 * per_chunk)
        for i, rank in enumerate(ranks):
            rank.lookup("LOOKUP again", rank.key(tokens, "sglang-rid-2", end=aligned, lookup=True))
            rank.w.query("QUERY = 2", "sglang-rid-2", 2)
            rank.w.step("RETRIEVE with nested page ids", Request(Op.RETRIEVE, (
                rank.key(tokens, "sglang-rid-2", end=aligned), rank.w.instance_id, [full], ZERO_EVENT, 0)),
                expect.transfer_reply(True))
            _verify(report, f"rank {i}: nested-list RETRIEVE byte-exact", rank.pools, full, originals[i])
            rank.w.step("FREE_LOOKUP_LOCKS [0,0) as after a full retrieve", Request(Op.FREE_LOOKUP_LOCKS, (
                rank.key(tokens, "sglang-rid-2", end=0, lookup=True), 2)), expect.NO_PAYLOAD)
            rank.w.step("END_SESSION", Request(Op.END_SESSION, ("sglang-rid-2",)), expect.NO_PAYLOAD)
            rank.w.step("END_SESSION", Request(Op.END_SESSION, (request_id,)), expect.NO_PAYLOAD)

        # a rank whose peer never stored: rank 1 of a world of 2 missing -> 0 on both ranks
        solo = random_tokens(rng, n_tokens)
        ranks[0].store("STORE on rank 0 only", ranks[0].key(solo, "solo"), alloc.take(2 * per_chunk))
        for rank in ranks:
            rank.lookup("LOOKUP of a prefix only rank 0 stored", rank.key(solo, "solo", lookup=True))
            rank.w.query("QUERY = 0", "solo", 0)
            rank.w.step("END_SESSION", Request(Op.END_SESSION, ("solo",)), expect.NO_PAYLOAD)

        # malformed shapes: every one answered, the server keeps serving
        bad = ranks[0]
        bad.store("STORE naming the padding page 0 fails", bad.key(random_tokens(rng, chunk), "pad"),
                  [0] + list(range(1, per_chunk)), ok=False)
        bad.retrieve("RETRIEVE with a placeholder after real pages fails", bad.key(tokens, "late-pad", end=aligned),
                     list(range(1, per_chunk)) + [0] + list(range(per_chunk + 1, 2 * per_chunk + 1)), ok=False)
        odd = SglangRank(report, bad.w.client, bad.pools, model, 0, 1, 1)
        odd.register("REGISTER of an odd number of K/V pools is answered", wrappers=bad.pools.wrappers()[:-1], ok=False)
        odd.store("its STORE fails", odd.key(random_tokens(rng, chunk), "odd"), list(range(1, per_chunk + 1)), ok=False)
        nohint = SglangRank(report, bad.w.client, bad.pools, model, 0, 1, 2)
        nohint.register("REGISTER without tokens_per_block is answered", hints={}, ok=False)
        nohint.store("its STORE fails", nohint.key(random_tokens(rng, chunk), "nohint"), list(range(1, per_chunk + 1)), ok=False)
        bad.w.step("REGISTER with 5 frames (no layout hints) is answered", Request(Op.REGISTER_KV_CACHE, (
            3, bad.pools.wrappers(), model, 1, "sglang")), expect.NO_PAYLOAD)
        bad.w.step("PING after the malformed requests", Request(Op.PING, ()), expect.TRUE)
        for rank in ranks:
            rank.w.step("UNREGISTER_KV_CACHE", protocol.unregister_kv_cache(rank.w.instance_id), expect.NO_PAYLOAD)


@scenario("sglang-mla", "SGLang MLA pools [slots, 1, width] per layer: 6-frame REGISTER, STORE, LOOKUP, RETRIEVE byte-exact")
def sglang_mla(report: Report, opts: Options) -> None:
    chunk = opts.chunk_size
    per_chunk = chunk // PAGE
    rng = opts.rng("sglang-mla")
    pages = 1 + 4 * per_chunk
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        pools = SglangPools(pages, rng.getrandbits(32), mla=True)
        stack.callback(pools.close)
        rank = SglangRank(report, client, pools, "org/sglang-mla", 0, 1, 70_000 + rng.randrange(1000))
        rank.register()
        tokens = random_tokens(rng, 2 * chunk)
        source, target = list(range(1, 1 + 2 * per_chunk)), list(range(1 + 2 * per_chunk, 1 + 4 * per_chunk))
        original = pools.snapshot(source)
        rank.store("STORE 2 chunks", rank.key(tokens, "mla"), source)
        rank.lookup("LOOKUP", rank.key(tokens, "mla", lookup=True))
        rank.w.query("QUERY = 2", "mla", 2)
        rank.retrieve("RETRIEVE into other pages", rank.key(tokens, "mla"), target)
        _verify(report, "MLA pages byte-exact", pools, target, original)
        rank.w.step("END_SESSION", Request(Op.END_SESSION, ("mla",)), expect.NO_PAYLOAD)
        rank.w.step("UNREGISTER_KV_CACHE", protocol.unregister_kv_cache(rank.w.instance_id), expect.NO_PAYLOAD)


LAYERWISE_OFF = encode([0, []])
LAYERWISE_MISS = encode([b"", True, False])


@scenario("layerwise", "vLLM's layer-wise connector: register_layerwise_ipc_event_pool answers (0, []), retrieve_layerwise "
                       "one closing miss frame (also malformed); the per-chunk path keeps working")
def layerwise(report: Report, opts: Options) -> None:
    chunk, per_chunk = opts.chunk_size, opts.blocks_per_chunk
    rng = opts.rng("layerwise")
    alloc = BlockAllocator(6 * per_chunk)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=alloc.num_blocks), seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, "testclient/layerwise", new_instance_id(rng))
        w.register()
        w.step("register_layerwise_ipc_event_pool (by name) = (0, [])",
               Request("register_layerwise_ipc_event_pool", (w.instance_id,)), LAYERWISE_OFF)
        tokens = random_tokens(rng, 2 * chunk)
        key = w.key(tokens, "lw-1")
        source = alloc.take(2 * per_chunk)
        original = kv.snapshot(source)
        w.store("STORE 2 chunks", key, source, required=True)
        w.lookup_hits("LOOKUP", key, 2)
        target = alloc.take(2 * per_chunk)
        kv.fill_blocks(target, SENTINEL)
        w.step("retrieve_layerwise = one closing frame (b'', True, False): a miss",
               Request("retrieve_layerwise", (key, w.instance_id, [target], ZERO_EVENT, 0)), LAYERWISE_MISS)
        report.check("retrieve_layerwise wrote nothing", all(kv.block_is_filled_with(b, SENTINEL) for b in target))
        w.step("retrieve_layerwise with 2 of its 5 frames: still answered",
               Request("retrieve_layerwise", (key, w.instance_id)), LAYERWISE_MISS)
        w.step("retrieve_layerwise with a key that is not a map: still answered",
               Request("retrieve_layerwise", ("not-a-key", w.instance_id, [target], ZERO_EVENT, 0)), LAYERWISE_MISS)
        w.step("register_layerwise_ipc_event_pool without its instance id: still answered",
               Request("register_layerwise_ipc_event_pool", ()), LAYERWISE_OFF)
        w.retrieve("per-chunk RETRIEVE of the same key still works", key.with_(request_id="lw-2"), target, required=True)
        w.verify_blocks("per-chunk RETRIEVE byte-exact", target, original)
        w.end_session("END_SESSION", "lw-1")
        w.unregister()
