#!/usr/bin/env python3
"""SGLang's LMCache MP connector on a CUDA host (issue 47 items 3 and 6): real CUDA tensors shaped as SGLang allocates them,
real ``_share_cuda_()`` handles, real interprocess events, and the frames SGLang's connector sends
(``LMCache/LMCache:lmcache/integration/sglang/multi_process_adapter.py@6f45e604``, class ``LMCacheMPConnector``, "generation
A2"; the CPU twin is ``testclient/lmcache_testclient/sglang_scenarios.py``, the server side docs/sglang.md).

The pools are SGLang's ``MHATokenToKVPool._create_buffers`` (``sgl-project/sglang:python/sglang/srt/mem_cache/memory_pool.py``):
per layer one K and one V buffer ``torch.zeros((size + page_size, head_num, head_dim))``, ``size`` a multiple of the page
size; page 0 (slots ``[0, page_size)``) is the padding page ("the padded slot 0 is used for writing dummy outputs from padded
tokens"), the allocator hands out pages from 1 (``mem_cache/allocator.py``). The connector wraps them as one flat list, every
layer's K then every layer's V (``_wrap_sglang_kv_caches``), and sends, per TP rank on its own DEALER:

* GET_CHUNK_SIZE, then REGISTER with **6** frames ``(os.getpid(), wrappers, model_path, tp_size, "sglang",
  {"tokens_per_block": page_size})``;
* keys ``IPCCacheEngineKey(model_name, world_size, worker_id, token_ids, start, end, request_id)``: no ``num_kv_readers``;
* STORE ``(key [0, aligned_end), pid, flat page ids, event)``; LOOKUP ``(key with worker_id None, tp_size)`` and
  QUERY_PREFETCH_STATUS from **every** rank under the same request id; RETRIEVE ``(key, pid, [0] * pad_pages + fresh page
  ids, event, pad_pages)``; END_SESSION; PING without an instance id; UNREGISTER at close.

Checks: the 6-frame REGISTER on two TP ranks (the server reads SGLang MHA with the page size); STORE of 2 chunks from flat
page ids on both ranks; LOOKUP + QUERY per rank under one request id, each its own count; RETRIEVE with leading placeholder
pages (page 0 never written) and a plain one into other pages, every layer's K and V equal on the GPU; a rank whose peer never
stored gets 0; an MLA rank ([size + page, 1, width] per layer) round-trips the same way; on a world-1 rank: num_kv_readers
missing and 0 each take one read lock per hit chunk, which the one RETRIEVE gives back; the same prompt read back by a vLLM
NHD worker (one object for both engines); a STORE naming page 0 and a RETRIEVE with page 0 after real pages answer false
with valid events, store nothing and write nothing; a miss answers false with a valid event; PING without an instance id;
UNREGISTER, after which a STORE answers false with a valid event, and every IPC mapping is closed.

  python3 sglang_check.py --java J --classpath CP --out DIR      # on the GPU host (run-on-device.sh sglang)
  python3 sglang_check.py --self-check                            # anywhere: the frames against the CPU scenario's bytes
  python3 sglang_check.py --dry-run-cpu --java J --classpath CP --out DIR   # no GPU: every check but the vLLM one, on shm
                                                                  # pools, zero events, a server with --device host
"""

import argparse
import json
import os
import pickle
import random
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "stubs"))

import torch  # noqa: E402

import gpu_check as g  # noqa: E402  (Server, Client, Worker, check, RESULTS, pack/ext, CHUNK)
from lmcache.v1.multiprocess.custom_types import CudaIPCWrapper as LegacyCudaIPCWrapper  # noqa: E402
from lmcache.v1.platform.devices.cuda.ipc_wrapper import CudaIPCWrapper  # noqa: E402

PAGE = 16            # SGLang --page-size (docs/sglang.md's example)
HEADS = 8            # num_kv_heads of one TP rank
HEAD_DIM = 128
LAYERS = 4
MLA_WIDTH = 576      # kv_lora_rank 512 + qk_rope_head_dim 64 (DeepSeek V2/V3)
SENTINEL = -3.5      # exact in bfloat16: "page still filled with it" means no element was written
MODEL = "org/sglang-gpu##lmcache-kv-dtype-v1-0123456789abcdef0123456789abcdef"  # model_path, decorated as LMCache may
MISSING = object()   # num_kv_readers not in the key (SGLang's IPCCacheEngineKey has no such field)
DRY = False          # --dry-run-cpu: shm pools and zero events against a server with --device host (no GPU)
DEVICE = "cuda"
SHM_SEGMENTS = []    # the dry run's segments, unlinked at the end
# the module a wrapper is pickled from: SGLang's connector imports CudaIPCWrapper from custom_types, where builds of its time
# define it; builds where that module re-exports the platform class pickle the platform's path (the newest:
# lmcache.v1.platform.devices.cuda.ipc_wrapper, LMCache/LMCache#5282). Rank 0 sends the one, rank 1 the other.
WRAPPER_CLASSES = {"custom_types": LegacyCudaIPCWrapper, "devices": CudaIPCWrapper}


# --- frames (pure: checked by --self-check against the CPU scenario's bytes) ---------------------------------------------

def sglang_key(model, world_size, worker_id, tokens, start, end, request_id, readers=MISSING):
    """``IPCCacheEngineKey`` as ``_create_key`` builds it, a map in its field order; ``readers`` adds num_kv_readers (the
    older vLLM clients' 0), which SGLang never sends."""
    key = {"model_name": model, "world_size": world_size, "worker_id": worker_id, "token_ids": list(tokens), "start": start,
           "end": end, "request_id": request_id}
    if readers is not MISSING:
        key["num_kv_readers"] = readers
    return key


def register_payloads(instance, wrappers, model, tp_size, page):
    """REGISTER_KV_CACHE's 6 payloads: no engine_group_infos frame."""
    return [instance, list(wrappers), model, tp_size, "sglang", {"tokens_per_block": page}]


def store_payloads(key, instance, pages, event):
    return [key, instance, list(pages), event]


def retrieve_payloads(key, instance, fresh_pages, event, pad_pages=0):
    """retrieve_kv: ``[0] * prefix_pad_pages + fresh_block_ids`` and the pad counted in pages as the 5th frame."""
    return [key, instance, [0] * pad_pages + list(fresh_pages), event, pad_pages]


def request_frames(uid, op, payloads):
    """One request as LMCache's MessageQueueClient sends it: uid, op id, one msgpack frame per payload."""
    return [g.pack(uid), g.pack(g.OP[op])] + [g.pack(p) for p in payloads]


def kv_list(k_pool, v_pool):
    """_wrap_sglang_kv_caches' order: every layer's K, then every layer's V."""
    return list(k_pool) + list(v_pool)


def wrapper_ext(tensor, handle, device_uuid, module="custom_types"):
    """CudaIPCWrapper(tensor) pickled into msgpack ext 1: handle, dtype, shape, stride, storage_offset, device_uuid
    (``lmcache/v1/multiprocess/custom_types.py@00d6dd18``, ``__init__``; SGLang's pools are contiguous with offset 0)."""
    wrapper = WRAPPER_CLASSES[module](handle=handle, dtype=tensor.dtype, shape=tuple(tensor.shape), stride=tuple(tensor.stride()),
                                      storage_offset=int(tensor.storage_offset()), device_uuid=device_uuid)
    return g.ext(1, pickle.dumps(wrapper, protocol=4))


class SglangPool:
    """One TP rank's MHATokenToKVPool: ``layers`` K and ``layers`` V buffers ``[size + page, heads, head_dim]``, ``size =
    pages * page``; page 0 is the padding page, request pages are 1..pages. Random contents (the real pool starts zeroed
    and is written by attention), so a misplaced copy shows. ``mla``: MLATokenToKVPool's one ``kv_buffer`` per layer
    ``[size + page, 1, kv_lora_rank + qk_rope_head_dim]`` (what the connector gets as its K pools, with no V pools)."""

    def __init__(self, pages, device, seed, layers=LAYERS, page=PAGE, heads=HEADS, head_dim=HEAD_DIM, dtype=torch.bfloat16,
                 shm=False, mla=False):
        self.page, self.layers, self.num_pages, self.mla = page, layers, pages + 1, mla
        shape = (pages * page + page, 1, MLA_WIDTH) if mla else (pages * page + page, heads, head_dim)
        self.segments = None
        if shm:  # --dry-run-cpu: each pool in its own POSIX shm segment, registered as a CPU worker's
            from lmcache_testclient.shm_kv import Segments
            self.segments = Segments()
            SHM_SEGMENTS.append(self.segments)
            alloc = lambda: self.segments.tensor(shape, dtype)[1]  # noqa: E731
        else:
            alloc = lambda: torch.zeros(shape, dtype=dtype, device=device)  # noqa: E731
        self.k = [alloc() for _ in range(layers)]
        self.v = [] if mla else [alloc() for _ in range(layers)]
        gen = torch.Generator(device=device).manual_seed(seed)
        for t in self.tensors():
            t.copy_(torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype))

    def tensors(self):
        return kv_list(self.k, self.v)

    def name(self, i):
        return f"{'MLA' if self.mla else 'KV'[i // self.layers]} layer {i % self.layers}"

    def pages_of(self, i, pages):
        """Tensor i's pages as [len(pages), page, heads, head_dim] (a copy)."""
        t = self.tensors()[i]
        return t.view(self.num_pages, self.page, *t.shape[1:])[torch.tensor(list(pages), device=t.device)]

    def snapshot(self, pages):
        return [self.pages_of(i, pages).clone() for i in range(len(self.tensors()))]

    def differ(self, pages, expected):
        """The tensors whose pages differ from expected (a snapshot of as many pages): empty when every K and V is equal."""
        return [self.name(i) for i in range(len(self.tensors())) if not torch.equal(self.pages_of(i, pages), expected[i])]

    def fill(self, pages, value):
        for t in self.tensors():
            for p in pages:
                t[p * self.page:(p + 1) * self.page].fill_(value)

    def filled_with(self, pages, value):
        return all(bool((self.pages_of(i, pages) == value).all()) for i in range(len(self.tensors())))


# --- one SGLang TP rank on the GPU ---------------------------------------------------------------------------------------

class Rank:
    """One TP rank: its own DEALER, pools and pid-like instance id; every request through request_frames."""

    def __init__(self, server, pool, model, rank, tp, instance, module="custom_types"):
        self.client = g.Client(server.port)
        self.pool, self.model, self.rank, self.tp, self.instance, self.module = pool, model, rank, tp, instance, module
        self.label = f"sglang {'MLA ' if pool.mla else ''}rank {rank}/{tp}"
        self.keep = []

    def call(self, op, *payloads):
        uid = self.client.uid
        self.client.uid += 1
        self.client.dealer.send(request_frames(uid, op, payloads))
        got, value = self.client.recv()
        assert got == uid, f"reply uid {got} for request {uid}"
        return value

    def wrappers(self):
        if self.pool.segments is not None:  # --dry-run-cpu
            from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper
            return [g.ext(1, pickle.dumps(CpuShmTensorWrapper.from_tensor(t, n), protocol=4))
                    for t, n in zip(self.pool.tensors(), self.pool.segments.names)]
        uuid = str(torch.cuda.get_device_properties(self.pool.k[0].device).uuid)
        return [wrapper_ext(t, t.untyped_storage()._share_cuda_(), uuid, self.module) for t in self.pool.tensors()]

    def register(self):
        return self.call("register", *register_payloads(self.instance, self.wrappers(), self.model, self.tp, self.pool.page))

    def key(self, tokens, request_id, start=0, end=None, lookup=False, readers=MISSING):
        return sglang_key(self.model, self.tp, None if lookup else self.rank, tokens, start,
                          len(tokens) if end is None else end, request_id, readers)

    def event(self):
        """event.record(current_stream()) before the request, as store_kv / _submit_retrieve do."""
        if self.pool.segments is not None:  # --dry-run-cpu: a CPU worker's zero event
            return bytes(64)
        ev = torch.cuda.Event(interprocess=True)
        ev.record(torch.cuda.current_stream())
        self.keep.append(ev)
        return bytes(ev.ipc_handle())

    def _transfer(self, op, payloads):
        """(ok, whether the reply's event opened and completed, detail): to_cuda_future(...).result() waits on it."""
        reply = self.call(op, *payloads)
        try:
            handle, ok = reply
            if self.pool.segments is None:
                g.Worker.wait(handle)
            elif not (isinstance(handle, bytes) and len(handle) == 64):  # --dry-run-cpu: the shape only
                raise ValueError(f"event handle {handle!r}")
            return ok, True, ""
        except Exception as e:  # noqa: BLE001  (a garbage reply or handle is what the check reports)
            return None, False, f"{type(e).__name__}: {e}"[:160]

    def store(self, key, pages):
        return self._transfer("store", store_payloads(key, self.instance, pages, self.event()))

    def retrieve(self, key, fresh_pages, pad_pages=0, pages=None):
        payloads = retrieve_payloads(key, self.instance, fresh_pages, self.event(), pad_pages)
        if pages is not None:  # a malformed page list, sent as given
            payloads[2] = list(pages)
        return self._transfer("retrieve", payloads)

    def lookup(self, key):
        return self.call("lookup", key, self.tp)

    def query(self, request_id, timeout=10.0):
        """_wait_for_lookup: QUERY_PREFETCH_STATUS every millisecond until a count."""
        deadline = time.time() + timeout
        while True:
            hits = self.call("query", request_id)
            if hits is not None or time.time() > deadline:
                return hits
            time.sleep(0.001)


def read_locked(server):
    manager = server.status()["storage_manager"]
    return (manager.get("l1_managers", {}).get("default") or manager["l1_manager"])["read_locked_count"]


def until(predicate, timeout=5.0):
    """Polls predicate until true or timeout (the server gives read locks and mappings back beside its replies)."""
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def check_transfer(name, result, want_ok):
    ok, valid, detail = result
    g.check(name, valid and ok is want_ok, detail or f"ok={ok}")


# --- the checks ----------------------------------------------------------------------------------------------------------

def tp_ranks(server, rng):
    """Two TP ranks on one GPU (each its own connection and pools, as SGLang's per-rank processes): REGISTER, STORE from flat
    page ids, per-rank LOOKUP/QUERY under one request id, RETRIEVE with placeholders and plain, a peer that never stored."""
    per_chunk = g.CHUNK // PAGE
    pages = 6 * 2 * per_chunk
    pid = os.getpid()
    ranks = [Rank(server, SglangPool(pages, DEVICE, 4700 + r, shm=DRY), MODEL, r, 2, pid + r * 1_000_000, module)
             for r, module in enumerate(WRAPPER_CLASSES)]
    for rank in ranks:
        size = rank.call("chunk_size")
        g.check(f"{rank.label}: GET_CHUNK_SIZE is a multiple of the page size", size == g.CHUNK and size % PAGE == 0, f"{size}")
        g.check(f"{rank.label}: REGISTER, 6 frames, {2 * LAYERS} {'shm' if DRY else 'CUDA'} pools K then V ({rank.module} wrapper)",
                rank.register() is None)
        meta = server.status()["cache_context_meta"].get(str(rank.instance), {})
        layout = meta.get("kv_cache_layout", {})
        group = (layout.get("kernel_groups") or [{}])[0]
        g.check(f"{rank.label}: read as SGLang MHA, {LAYERS} layers, {pages + 1} pages of {PAGE}, KV_2LTD objects",
                meta.get("world_size") == 2 and layout.get("num_layers") == LAYERS and layout.get("num_blocks") == pages + 1
                and group.get("attention_backend") == "SGLANG_MHA" and group.get("tokens_per_block") == PAGE
                and group.get("object_layout") == "KV_2LTD", json.dumps(layout)[:300])
        g.check(f"{rank.label}: PING without a payload frame", rank.call("ping") is True)
        g.check(f"{rank.label}: PING(None)", rank.call("ping", None) is True)

    aligned = 2 * g.CHUNK
    tokens = [rng.randrange(150000) for _ in range(aligned + 7)]  # a partial tail, as a prompt; the key ends aligned
    stored = list(range(1, 1 + 2 * per_chunk))                    # the allocator's pages start at 1
    originals = [rank.pool.snapshot(stored) for rank in ranks]
    for rank in ranks:
        check_transfer(f"{rank.label}: STORE [0,{aligned}) from {len(stored)} flat page ids",
                       rank.store(rank.key(tokens, "sgl-rid-1", end=aligned), stored), True)
    for rank in ranks:
        rank.pool.fill(stored, 0.0)

    base = read_locked(server)
    for rank in ranks:  # every rank looks up before any rank queries: each must get its own count
        g.check(f"{rank.label}: LOOKUP, same request id on every rank, no num_kv_readers",
                rank.lookup(rank.key(tokens, "sgl-rid-1", end=aligned, lookup=True)) is None)
    for rank in ranks:
        hits = rank.query("sgl-rid-1")
        g.check(f"{rank.label}: QUERY_PREFETCH_STATUS = 2 on this rank", hits == 2, f"{hits}")

    pad = 3
    target = list(range(1 + 2 * per_chunk, 1 + 4 * per_chunk - pad))
    for rank in ranks:
        rank.pool.fill([0], SENTINEL)
        check_transfer(f"{rank.label}: RETRIEVE [0,{aligned}) with {pad} placeholder pages (page 0), skip {pad} (pages)",
                       rank.retrieve(rank.key(tokens, "sgl-rid-1", end=aligned), target, pad), True)
        bad = rank.pool.differ(target, [o[pad:] for o in originals[rank.rank]])
        g.check(f"{rank.label}: retrieved pages equal the stored ones, K and V of every layer", not bad, f"{bad}")
        g.check(f"{rank.label}: padding page 0 untouched (sentinel in every K and V)", rank.pool.filled_with([0], SENTINEL))

    full = list(range(1 + 4 * per_chunk, 1 + 6 * per_chunk))
    for rank in ranks:
        rank.lookup(rank.key(tokens, "sgl-rid-2", end=aligned, lookup=True))
    for rank in ranks:
        g.check(f"{rank.label}: second request: QUERY = 2", rank.query("sgl-rid-2") == 2)
        check_transfer(f"{rank.label}: RETRIEVE into other pages", rank.retrieve(rank.key(tokens, "sgl-rid-2", end=aligned), full),
                       True)
        bad = rank.pool.differ(full, originals[rank.rank])
        g.check(f"{rank.label}: round trip byte-exact, K and V of every layer", not bad, f"{bad}")
        g.check(f"{rank.label}: page 0 still untouched", rank.pool.filled_with([0], SENTINEL))
        for rid in ("sgl-rid-1", "sgl-rid-2"):
            g.check(f"{rank.label}: END_SESSION {rid}", rank.call("end_session", rid) is None)
    locked = until(lambda: read_locked(server) == base)
    g.check("sglang: every rank's RETRIEVE and END_SESSION gave the LOOKUPs' read locks back", locked,
            f"read_locked_count {read_locked(server)}, before the LOOKUPs {base}")

    solo = [rng.randrange(150000) for _ in range(g.CHUNK)]
    check_transfer("sglang rank 0/2: STORE of a prompt rank 1 never stores",
                   ranks[0].store(ranks[0].key(solo, "sgl-solo"), range(1 + 6 * per_chunk, 1 + 7 * per_chunk)), True)
    for rank in ranks:
        rank.lookup(rank.key(solo, "sgl-solo", lookup=True))
    for rank in ranks:
        hits = rank.query("sgl-solo")
        g.check(f"{rank.label}: QUERY = 0 for a chunk only rank 0 stored", hits == 0, f"{hits}")
        rank.call("end_session", "sgl-solo")
    return ranks


def readers_and_null_pages(server, rng):
    """A world-1 rank: num_kv_readers missing and 0 read as one reader; a vLLM NHD worker reads SGLang's object; page 0 in a
    STORE or after real pages of a RETRIEVE is refused with a valid event; a miss."""
    per_chunk = g.CHUNK // PAGE
    pages = 8 * per_chunk
    rank = Rank(server, SglangPool(pages, DEVICE, 4710, shm=DRY), g.MODEL, 0, 1, os.getpid() + 3_000_000)
    g.check(f"{rank.label}: REGISTER", rank.register() is None)
    tokens = [rng.randrange(150000) for _ in range(2 * g.CHUNK)]
    source = list(range(1, 1 + 2 * per_chunk))
    original = rank.pool.snapshot(source)
    check_transfer(f"{rank.label}: STORE 2 chunks", rank.store(rank.key(tokens, "sgl-w1"), source), True)

    target = list(range(1 + 2 * per_chunk, 1 + 4 * per_chunk))
    for label, readers in (("missing", MISSING), ("0", 0)):
        rid = f"sgl-readers-{label}"
        base = read_locked(server)
        rank.lookup(rank.key(tokens, rid, lookup=True, readers=readers))
        hits = rank.query(rid)
        now = read_locked(server)
        g.check(f"{rank.label}: num_kv_readers {label}: QUERY = 2, both chunks read-locked", hits == 2 and now == base + 2,
                f"hits {hits}, read_locked_count {base} -> {now}")
        rank.pool.fill(target, 0.0)
        check_transfer(f"{rank.label}: num_kv_readers {label}: RETRIEVE", rank.retrieve(rank.key(tokens, rid), target), True)
        bad = rank.pool.differ(target, original)
        g.check(f"{rank.label}: num_kv_readers {label}: byte-exact", not bad, f"{bad}")
        g.check(f"{rank.label}: num_kv_readers {label} is one reader: the one RETRIEVE gave the locks back",
                until(lambda: read_locked(server) == base), f"read_locked_count {read_locked(server)}, before {base}")
        rank.call("end_session", rid)

    if DRY:
        g.log("sglang: the vLLM worker's read of SGLang's object is skipped in the CPU dry run (gpu_check.Worker is CUDA's)")
    else:
        vllm_reads_sglang_object(server, tokens, original)

    # page 0 in a STORE: refused, nothing stored (its bytes were not read as a chunk)
    rank.pool.fill([0], SENTINEL)
    fresh = [rng.randrange(150000) for _ in range(g.CHUNK)]
    before = server.metric("lmcache_mp_transfer_failures_total", 'op="store",reason="null_page"')
    check_transfer(f"{rank.label}: STORE naming page 0 answers false with a valid event",
                   rank.store(rank.key(fresh, "sgl-pad"), [0] + list(range(1, per_chunk))), False)
    after = server.metric("lmcache_mp_transfer_failures_total", 'op="store",reason="null_page"')
    g.check(f"{rank.label}: counted as transfer_failures{{op=store,reason=null_page}}", after == before + 1, f"{before} -> {after}")
    rank.lookup(rank.key(fresh, "sgl-pad", lookup=True))
    hits = rank.query("sgl-pad")
    g.check(f"{rank.label}: the refused STORE stored nothing (LOOKUP = 0)", hits == 0, f"{hits}")
    rank.call("end_session", "sgl-pad")

    # page 0 after real pages of a RETRIEVE: refused, nothing written
    rank.pool.fill(target, SENTINEL)
    late = target[:per_chunk - 1] + [0] + target[per_chunk:]
    before = server.metric("lmcache_mp_transfer_failures_total", 'op="retrieve",reason="null_page"')
    check_transfer(f"{rank.label}: RETRIEVE with page 0 after real pages answers false with a valid event",
                   rank.retrieve(rank.key(tokens, "sgl-late-pad"), [], pages=late), False)
    after = server.metric("lmcache_mp_transfer_failures_total", 'op="retrieve",reason="null_page"')
    g.check(f"{rank.label}: counted as transfer_failures{{op=retrieve,reason=null_page}}", after == before + 1,
            f"{before} -> {after}")
    g.check(f"{rank.label}: the refused RETRIEVE wrote no page, page 0 included", rank.pool.filled_with(target + [0], SENTINEL))

    # a miss: tokens never stored
    miss = [rng.randrange(150000) for _ in range(g.CHUNK)]
    rank.lookup(rank.key(miss, "sgl-miss", lookup=True))
    g.check(f"{rank.label}: LOOKUP of a prompt never stored: QUERY = 0", rank.query("sgl-miss") == 0)
    rank.call("end_session", "sgl-miss")
    check_transfer(f"{rank.label}: RETRIEVE of a miss answers false with a valid event",
                   rank.retrieve(rank.key(miss, "sgl-miss"), target[:per_chunk]), False)
    return rank


def mla_rank(server, rng):
    """SGLang MLA on a world-1 rank: one [size + page, 1, width] pool per layer, the 6-frame REGISTER, STORE, LOOKUP, RETRIEVE
    with placeholder pages, every layer byte-exact, page 0 untouched."""
    per_chunk = g.CHUNK // PAGE
    rank = Rank(server, SglangPool(5 * per_chunk, DEVICE, 4720, shm=DRY, mla=True), "org/sglang-mla-gpu", 0, 1,
                os.getpid() + 4_000_000)
    g.check(f"{rank.label}: REGISTER of {LAYERS} pools [slots, 1, {MLA_WIDTH}]", rank.register() is None)
    layout = server.status()["cache_context_meta"].get(str(rank.instance), {}).get("kv_cache_layout", {})
    group = (layout.get("kernel_groups") or [{}])[0]
    g.check(f"{rank.label}: read as SGLang MLA, {LAYERS} layers", group.get("attention_backend") == "SGLANG_MLA"
            and group.get("is_mla") is True and layout.get("num_layers") == LAYERS, json.dumps(layout)[:300])
    tokens = [rng.randrange(150000) for _ in range(2 * g.CHUNK)]
    source = list(range(1, 1 + 2 * per_chunk))
    original = rank.pool.snapshot(source)
    check_transfer(f"{rank.label}: STORE 2 chunks", rank.store(rank.key(tokens, "sgl-mla"), source), True)
    rank.lookup(rank.key(tokens, "sgl-mla", lookup=True))
    g.check(f"{rank.label}: QUERY = 2", rank.query("sgl-mla") == 2)
    pad = 2
    target = list(range(1 + 2 * per_chunk, 1 + 4 * per_chunk - pad))
    rank.pool.fill([0], SENTINEL)
    check_transfer(f"{rank.label}: RETRIEVE with {pad} placeholder pages", rank.retrieve(rank.key(tokens, "sgl-mla"), target, pad),
                   True)
    bad = rank.pool.differ(target, [o[pad:] for o in original])
    g.check(f"{rank.label}: every layer byte-exact, page 0 untouched", not bad and rank.pool.filled_with([0], SENTINEL), f"{bad}")
    rank.call("end_session", "sgl-mla")
    return rank


def vllm_reads_sglang_object(server, tokens, original):
    """The same prompt, model and world size read by a vLLM NHD worker of the same geometry: one object for both engines
    (docs/sglang.md: the stored bytes are LMCache's KV_2LTD for both). ``original``: the SGLang rank's stored pages."""
    per_chunk = g.CHUNK // PAGE
    w = g.Worker(server, "nhd", layers=LAYERS, blocks=2 * per_chunk, block=PAGE, heads=HEADS, head=HEAD_DIM, seed=4711)
    g.check("sglang: a vLLM NHD worker of the same geometry registers", w.register() is None)
    hits = w.lookup(tokens, 2 * g.CHUNK, "sgl-vllm", timeout=10.0)
    blocks = list(range(2 * per_chunk))
    w.set_blocks(blocks, 0.0)
    ok = w.retrieve(tokens, 0, 2 * g.CHUNK, blocks, "sgl-vllm")
    same = all(torch.equal(w.tensors[layer][plane, blocks], original[plane * LAYERS + layer])
               for layer in range(LAYERS) for plane in (0, 1))
    g.check("sglang: the vLLM worker finds SGLang's 2 chunks and reads its K and V byte-exact (one object, KV_2LTD)",
            hits == 2 and ok and same, f"hits {hits}, ok {ok}, equal {same}")
    w.client.call("end_session", "sgl-vllm")
    g.check("sglang: the vLLM worker UNREGISTERs", w.client.call("unregister", w.instance) is None)


def run(args):
    server = g.Server(args.java, args.classpath, args.out, 2, device="host" if DRY else "cuda")
    try:
        checks(server)
    except Exception:  # noqa: BLE001  (recorded, so sglang_tests.json is written whatever broke)
        g.check("sglang: the run ended without an exception", False, traceback.format_exc()[-1500:])
    finally:
        server.stop()
        for segments in SHM_SEGMENTS:
            segments.release()
    failed = [r for r in g.RESULTS if not r["ok"]]
    g.log(f"sglang: {len(g.RESULTS) - len(failed)} passed, {len(failed)} failed")
    with open(os.path.join(args.out, "sglang_tests.json"), "w") as f:
        json.dump(g.RESULTS, f, indent=1)
    return 1 if failed else 0


def checks(server):
    """Every check, in order, on one server: the TP ranks, an MLA rank, the world-1 rank, then UNREGISTER and after it."""
    rng = random.Random(47)
    ranks = tp_ranks(server, rng) + [mla_rank(server, rng), readers_and_null_pages(server, rng)]
    for rank in ranks:
        g.check(f"{rank.label}: UNREGISTER", rank.call("unregister", rank.instance) is None)
    last = ranks[-1]
    check_transfer(f"{last.label}: after UNREGISTER a STORE answers false with a valid event",
                   last.store(last.key([5] * g.CHUNK, "sgl-gone"), list(range(1, 1 + g.CHUNK // PAGE))), False)
    g.check(f"{last.label}: PING without an instance id after UNREGISTER", last.call("ping") is True)
    closed = until(lambda: server.status().get("cuda", {}).get("open_ipc_mappings", 0) == 0)
    status = server.status()
    g.check("sglang: UNREGISTER closed every mapping (no registered GPU ids, no IPC mapping open)",
            closed and status.get("registered_gpu_ids") == [], f"{status.get('registered_gpu_ids')} / {status.get('cuda')}")


# --- --self-check: no GPU, no server ------------------------------------------------------------------------------------

def self_check():
    """The frames this script sends against the bytes the CPU scenario's SGLang client sends (lmcache_testclient, msgspec),
    the wrapper pickle's class and fields, and the pool shapes; on CPU tensors, with no server."""
    import pickletools
    sys.path.insert(0, os.path.join(HERE, ".."))
    from lmcache_testclient import sglang_scenarios as cpu
    from lmcache_testclient.codec import encode
    from lmcache_testclient.messages import ZERO_EVENT
    from lmcache_testclient.ops import Op

    results = []

    def expect(name, ok, detail=""):
        results.append((name, bool(ok)))
        print(f"{'PASS' if ok else 'FAIL'} self-check: {name} {detail}", flush=True)

    def cpu_frames(uid, op, payloads):
        return [encode(uid), encode(op)] + [encode(p) for p in payloads]

    for name in ("register", "unregister", "store", "retrieve", "lookup", "query", "end_session", "chunk_size", "ping"):
        wire = {"chunk_size": "GET_CHUNK_SIZE", "query": "QUERY_PREFETCH_STATUS", "register": "REGISTER_KV_CACHE",
                "unregister": "UNREGISTER_KV_CACHE"}.get(name, name.upper())
        expect(f"op id of {name} = Op.{wire}", g.OP[name] == Op[wire].value, f"{g.OP[name]}")
    expect("the CPU scenario's page size is ours", cpu.PAGE == PAGE)

    tokens = list(range(1000, 1000 + 2 * g.CHUNK + 7))
    end = 2 * g.CHUNK
    ours = sglang_key(MODEL, 2, 1, tokens, 0, end, "rid")
    theirs = cpu.SglangKey(MODEL, 2, 1, tuple(tokens), 0, end, "rid")
    expect("STORE/RETRIEVE key bytes = the CPU scenario's IPCCacheEngineKey", g.pack(ours) == encode(theirs))
    expect("LOOKUP key bytes (worker_id None)", g.pack(sglang_key(MODEL, 2, None, tokens, 0, end, "rid"))
           == encode(cpu.SglangKey(MODEL, 2, None, tuple(tokens), 0, end, "rid")))
    expect("the key has no num_kv_readers unless asked", "num_kv_readers" not in ours
           and sglang_key(MODEL, 1, 0, tokens, 0, end, "r", readers=0)["num_kv_readers"] == 0)

    pages = list(range(1, 33))
    frames = request_frames(5, "store", store_payloads(ours, 4242, pages, ZERO_EVENT))
    expect("STORE frames = the CPU scenario's (flat page ids, 4 payloads)",
           frames == cpu_frames(5, Op.STORE, (theirs, 4242, pages, ZERO_EVENT)) and len(frames) == 6)
    frames = request_frames(6, "retrieve", retrieve_payloads(ours, 4242, pages[3:], ZERO_EVENT, 3))
    expect("RETRIEVE frames = the CPU scenario's ([0] * pad + fresh pages, pad in pages)",
           frames == cpu_frames(6, Op.RETRIEVE, (theirs, 4242, [0] * 3 + pages[3:], ZERO_EVENT, 3)))
    lookup_key = sglang_key(MODEL, 2, None, tokens, 0, end, "rid")
    expect("LOOKUP frames = (key, tp_size)", request_frames(7, "lookup", [lookup_key, 2])
           == cpu_frames(7, Op.LOOKUP, (cpu.SglangKey(MODEL, 2, None, tuple(tokens), 0, end, "rid"), 2)))
    expect("PING without a payload frame = [uid, op]", request_frames(8, "ping", []) == cpu_frames(8, Op.PING, ()))
    expect("PING(None) = [uid, op, nil]", request_frames(9, "ping", [None]) == cpu_frames(9, Op.PING, (None,))
           and request_frames(9, "ping", [None])[2] == b"\xc0")
    expect("QUERY / END_SESSION / UNREGISTER / GET_CHUNK_SIZE frames",
           request_frames(1, "query", ["rid"]) == cpu_frames(1, Op.QUERY_PREFETCH_STATUS, ("rid",))
           and request_frames(2, "end_session", ["rid"]) == cpu_frames(2, Op.END_SESSION, ("rid",))
           and request_frames(3, "unregister", [4242]) == cpu_frames(3, Op.UNREGISTER_KV_CACHE, (4242,))
           and request_frames(4, "chunk_size", []) == cpu_frames(4, Op.GET_CHUNK_SIZE, ()))

    pool = SglangPool(pages=2 * g.CHUNK // PAGE, device="cpu", seed=1, layers=2, heads=2, head_dim=8)
    tensors = pool.tensors()
    expect("pools: [size + page, heads, head_dim] per layer, K then V, contiguous, offset 0",
           len(tensors) == 4 and all(tuple(t.shape) == (2 * g.CHUNK + PAGE, 2, 8) and t.is_contiguous()
                                     and t.storage_offset() == 0 for t in tensors)
           and tensors[0] is pool.k[0] and tensors[2] is pool.v[0])
    mla = SglangPool(pages=g.CHUNK // PAGE, device="cpu", seed=2, layers=3, mla=True)
    expect("MLA pools: one [size + page, 1, width] per layer, no V pools", len(mla.tensors()) == 3 and mla.v == []
           and all(tuple(t.shape) == (g.CHUNK + PAGE, 1, MLA_WIDTH) for t in mla.tensors()))
    handle = (0, b"\x02c" + bytes(64), tensors[0].untyped_storage().nbytes(), 512, b"/torch_1_2_3", 0, bytes(64), False)
    wrappers = [wrapper_ext(t, handle, "184cee46-72c4-7743-a092-b1281e71db2f", m) for t, m in zip(tensors[:2], WRAPPER_CLASSES)]
    reg = request_frames(0, "register", register_payloads(4242, wrappers, MODEL, 2, PAGE))
    cpu_reg = cpu_frames(0, Op.REGISTER_KV_CACHE, (4242, [], MODEL, 2, "sglang", {"tokens_per_block": PAGE}))
    expect("REGISTER: 6 payload frames, all but the wrappers = the CPU scenario's", len(reg) == 8
           and reg[:3] == cpu_reg[:3] and reg[4:] == cpu_reg[4:])
    for ext_value, module in zip(wrappers, WRAPPER_CLASSES):
        code = getattr(ext_value, "code", None)
        data = getattr(ext_value, "data", b"")
        strings = [arg for op, arg, _ in pickletools.genops(data) if op.name in ("SHORT_BINUNICODE", "BINUNICODE")]
        cls = WRAPPER_CLASSES[module]
        fields = ["handle", "dtype", "shape", "stride", "storage_offset", "device_uuid"]
        expect(f"{module} wrapper: ext 1, pickle names {cls.__module__}.CudaIPCWrapper and torch.bfloat16, fields in order",
               code == 1 and strings[:2] == [cls.__module__, "CudaIPCWrapper"] and "bfloat16" in strings
               and [s for s in strings if s in fields] == fields, f"{strings[:12]}")
    pool.fill([0], SENTINEL)
    expect("pools: fill / filled_with on page 0 only", pool.filled_with([0], SENTINEL) and not pool.filled_with([1], SENTINEL))
    snap = pool.snapshot([1, 2])
    expect("pools: snapshot / differ", pool.differ([1, 2], snap) == [] and pool.differ([2, 1], snap) == pool_names(pool))
    failed = [n for n, ok in results if not ok]
    print(f"sglang self-check: {len(results) - len(failed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


def pool_names(pool):
    return [pool.name(i) for i in range(len(pool.tensors()))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--self-check", action="store_true", help="check the frames against the CPU scenario's; no GPU, no server")
    p.add_argument("--dry-run-cpu", action="store_true",
                   help="every check but the vLLM one on shm pools against a server with --device host: the script's own logic")
    p.add_argument("--java")
    p.add_argument("--classpath")
    p.add_argument("--out")
    args = p.parse_args(argv)
    if args.self_check:
        return self_check()
    if not (args.java and args.classpath and args.out):
        p.error("--java, --classpath and --out are required (or --self-check)")
    if args.dry_run_cpu:
        global DRY, DEVICE
        DRY, DEVICE = True, "cpu"
        sys.path.insert(0, os.path.join(HERE, ".."))  # lmcache_testclient's shm segments
    else:
        torch.cuda.init()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
