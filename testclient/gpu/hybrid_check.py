"""Hybrid-model GPU scenarios (issue 14) for gpu_check.py: the same checks as the CPU integration
tests (HybridIT), with CUDA tensors shared through real IPC handles, plus a STORE/RETRIEVE rate of
a hybrid layout next to a raw copy of the same bytes.

  Gemma-like: sliding-window layers (blocks of 32 tokens, head dim 256, window of 4 chunks) and
              full-attention layers (blocks of 16, head dim 512), chunk 256, object groups separate.
  Qwen-like:  Mamba state pages [nb, 2, N, 1, hs] (recurrent, one snapshot per chunk) and
              full attention with logical blocks of N, at --chunk-size N = 544.

gpu_check.py hands in itself as ``g`` (Server, Client, Worker.wait, check, log, pack/ext helpers)
rather than being imported here: run as a script, it is __main__, and a second import would be a
second copy with its own results list.
"""

import pickle
import random
import time

import torch

from lmcache.v1.platform.cuda.ipc_wrapper import CudaIPCWrapper

NULL = 0  # vLLM's null block: what it sends for blocks a group does not hold


def info(engine_group, layers, tokens_per_block, window=-1, recurrent=False):
    """EngineGroupInfo as LMCache's msgspec Struct encodes it: a map of the six fields, in order."""
    return {"engine_group_id": engine_group, "layer_indices": list(layers), "tokens_per_block": tokens_per_block,
            "sw_size_tokens": window, "extra_object_group_tag": 0, "recurrent_state": recurrent}


def hkey(model, tokens, start, end, request, worker_id=0):
    return {"model_name": model, "world_size": 1, "worker_id": worker_id, "token_ids": tokens, "start": start, "end": end,
            "request_id": request, "cache_salt": "", "request_configs": None, "num_kv_readers": 1}


class HybridWorker:
    """One tensor per layer on the GPU; ``groups`` is a list of (layers, shape, block_axis, tokens_per_block, window, recurrent)."""

    def __init__(self, g, server, model, groups, dtype=torch.bfloat16, seed=0):
        self.g, self.model, self.groups = g, model, groups
        self.client = g.Client(server.port)
        self.instance = random.Random(seed).getrandbits(63)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        count = sum(len(spec[0]) for spec in groups)
        self.tensors = [None] * count
        for layers, shape, _, _, _, _ in groups:
            for layer in layers:
                self.tensors[layer] = torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)
        self.keep = []

    def infos(self):
        return [info(i, layers, tpb, window, recurrent) for i, (layers, _, _, tpb, window, recurrent) in enumerate(self.groups)]

    def register(self):
        uuid = str(torch.cuda.get_device_properties(self.tensors[0].device).uuid)
        wrappers = []
        for t in self.tensors:
            handle = t.untyped_storage()._share_cuda_()
            w = CudaIPCWrapper(handle=handle, dtype=t.dtype, shape=t.shape, stride=t.stride(), storage_offset=t.storage_offset(),
                               device_uuid=uuid)
            wrappers.append(self.g.ext(1, pickle.dumps(w, protocol=4)))
        return self.client.call("register", self.instance, wrappers, self.model, 1, "vllm", {"kv_layout": "NHD"}, self.infos())

    def block(self, gi, b):
        layers, _, axis, _, _, _ = self.groups[gi]
        return torch.cat([self.tensors[layer].select(axis, b).reshape(-1) for layer in layers])

    def fill(self, gi, blocks, value):
        layers, _, axis, _, _, _ = self.groups[gi]
        for b in blocks:
            for layer in layers:
                self.tensors[layer].select(axis, b).fill_(value)

    def event(self):
        ev = torch.cuda.Event(interprocess=True)
        ev.record()
        self.keep.append(ev)
        return bytes(ev.ipc_handle())

    def transfer(self, op, tokens, lists, request, skip=0):
        frames = [hkey(self.model, tokens, 0, len(tokens), request), self.instance, [list(ids) for ids in lists], self.event()]
        handle, ok = self.client.call(op, *(frames + [skip] if op == "retrieve" else frames))
        self.g.Worker.wait(handle)
        return ok

    def lookup(self, tokens, end, request, timeout=5.0):
        """LOOKUP, then QUERY_PREFETCH_STATUS until it answers a count (None while the STORE's writes are in flight)."""
        assert self.client.call("lookup", hkey(self.model, tokens, 0, end, request, worker_id=None), 1) is None
        return self.g.query_until_answered(self.client, request, timeout)


def gemma_like(g, server):
    chunk, nb = 256, 128
    groups = [((0, 2), (2, nb, 32, 2, 256), 1, 32, 4 * chunk, False), ((1, 3), (2, nb, 16, 2, 512), 1, 16, -1, False)]
    w = HybridWorker(g, server, "gpu-check/gemma-like", groups, seed=21)
    check = g.check
    check("gemma-like: REGISTER 2 groups (blocks 32/16, head dims 256/512)", w.register() is None)
    rng = random.Random(21)
    tokens = [rng.randrange(150000) for _ in range(2 * chunk)]
    src = [list(range(1, 17)), list(range(1, 33))]
    dst = [list(range(17, 33)), list(range(33, 65))]
    before = [[w.block(gi, b).clone() for b in ids] for gi, ids in enumerate(src)]
    check("gemma-like: STORE 2 chunks", w.transfer("store", tokens, src, "gl-1"))
    check("gemma-like: LOOKUP+QUERY = 2", g.lookup_after_store(w, tokens, 2 * chunk, "gl-1", 2) == 2)
    for gi in range(2):
        w.fill(gi, dst[gi], 0.0)
    torch.cuda.synchronize()
    check("gemma-like: RETRIEVE into other blocks", w.transfer("retrieve", tokens, dst, "gl-1"))
    equal = all(torch.equal(w.block(gi, d), b) for gi in range(2) for d, b in zip(dst[gi], before[gi]))
    check("gemma-like: both groups byte-equal after the round trip", equal)
    # the window: 6 chunks, sliding ids null for chunks 0-1 (outside the 4-chunk window at the end)
    tokens6 = [rng.randrange(150000) for _ in range(6 * chunk)]
    ids6 = [[NULL] * 16 + list(range(64, 96)), list(range(1, 97))]
    w.fill(0, [NULL], 7.0)
    torch.cuda.synchronize()
    stored6 = [[w.block(0, b).clone() for b in ids6[0][16:]], [w.block(1, b).clone() for b in ids6[1]]]
    check("gemma-like: STORE 6 chunks, sliding ids null for chunks 0-1", w.transfer("store", tokens6, ids6, "gl-6"))
    check("gemma-like: LOOKUP 6 chunks = 6", g.lookup_after_store(w, tokens6, 6 * chunk, "gl-6", 6) == 6)
    check("gemma-like: LOOKUP of the first 2 chunks = 0 (outside the window nothing was stored)",
          w.lookup(tokens6, 2 * chunk, "gl-2") == 0)
    w.fill(0, ids6[0][16:], 0.0)
    w.fill(1, ids6[1], 0.0)
    torch.cuda.synchronize()
    check("gemma-like: RETRIEVE 6 chunks", w.transfer("retrieve", tokens6, ids6, "gl-6"))
    check("gemma-like: in-window sliding blocks and full blocks byte-equal",
          all(torch.equal(w.block(0, b), d) for b, d in zip(ids6[0][16:], stored6[0]))
          and all(torch.equal(w.block(1, b), d) for b, d in zip(ids6[1], stored6[1])))
    check("gemma-like: the null block was never written", bool((w.block(0, NULL) == 7.0).all()))
    check("gemma-like: UNREGISTER", w.client.call("unregister", w.instance) is None)


def qwen_like(g, args):
    n = 544
    try:
        server = g.Server(args.java, args.classpath, args.out, 1, extra=("--chunk-size", str(n)))
    except Exception as e:  # noqa: BLE001 -- a failed check; the other results are still written
        g.check("qwen-like: a server with --chunk-size 544 starts", False, repr(e))
        return
    check = g.check
    try:
        groups = [((0, 1, 2), (16, 2, n, 1, 128), 0, n, n, True), ((3, 4), (16, 2, n, 1, 256), 0, n, -1, False)]
        w = HybridWorker(g, server, "gpu-check/qwen-like", groups, seed=22)
        check("qwen-like: REGISTER Mamba pages + full attention at chunk 544", w.register() is None)
        rng = random.Random(22)
        tokens = [rng.randrange(150000) for _ in range(3 * n)]
        w.fill(0, [NULL], 7.0)
        torch.cuda.synchronize()
        snapshot = w.block(0, 5).clone()
        attention = [w.block(1, b).clone() for b in (1, 2, 3)]
        check("qwen-like: STORE 3 chunks, a snapshot at the end of chunk 2 only", w.transfer("store", tokens, [[NULL, NULL, 5], [1, 2, 3]], "q-3"))
        check("qwen-like: LOOKUP 3 = 3", g.lookup_after_store(w, tokens, 3 * n, "q-3", 3) == 3)
        check("qwen-like: LOOKUP 2 = 0 (no snapshot at the end of chunk 1)", w.lookup(tokens, 2 * n, "q-2") == 0)
        check("qwen-like: RETRIEVE 3 chunks", w.transfer("retrieve", tokens, [[NULL, NULL, 9], [11, 12, 13]], "q-3"))
        check("qwen-like: the restored state equals the snapshot", torch.equal(w.block(0, 9), snapshot))
        check("qwen-like: attention blocks byte-equal", all(torch.equal(w.block(1, d), b) for d, b in zip((11, 12, 13), attention)))
        check("qwen-like: the null block was never written", bool((w.block(0, NULL) == 7.0).all()))
        check("qwen-like: a short Mamba list fails closed (with a valid event)",
              not w.transfer("store", [rng.randrange(150000) for _ in range(3 * n)], [[NULL, 6], [4, 5, 6]], "q-short"))
        check("qwen-like: UNREGISTER", w.client.call("unregister", w.instance) is None)
    finally:
        server.stop()


def run_tests(g, server, args):
    for name, run in (("gemma-like", lambda: gemma_like(g, server)), ("qwen-like", lambda: qwen_like(g, args))):
        try:
            run()
        except Exception as e:  # noqa: BLE001 -- recorded as a failed check, the other results are still written
            g.check(f"{name}: ran to completion", False, repr(e))


# --- benchmark ----------------------------------------------------------------------------------

def _pipelined(w, requests, op, depth=4):
    pending, t0 = [], time.perf_counter()
    for tokens, lists, rid in requests:
        frames = [hkey(w.model, tokens, 0, len(tokens), rid), w.instance, lists, w.event()]
        pending.append(w.client.send(op, *(frames + [0] if op == "retrieve" else frames)))
        if len(pending) >= depth:
            _, (handle, ok) = w.client.recv()
            assert ok, f"{op} failed"
            w.g.Worker.wait(handle)
            pending.pop(0)
    while pending:
        _, (handle, ok) = w.client.recv()
        assert ok, f"{op} failed"
        w.g.Worker.wait(handle)
        pending.pop(0)
    return time.perf_counter() - t0


def bench_hybrid(g, server, layers=8, chunks=4, requests=24, seed=13):
    """Gemma-like hybrid: `layers` sliding-window layers (32-token blocks, 4 heads x 256) and `layers`
    full-attention ones (16-token blocks, 4 heads x 512), bf16: 64 KiB pieces, two object groups."""
    chunk = 256
    per_chunk = (chunk // 32, chunk // 16)
    needed = [chunks * p for p in per_chunk]
    sliding = tuple(range(0, 2 * layers, 2))
    full = tuple(range(1, 2 * layers, 2))
    groups = [(sliding, (2, 4 * needed[0], 32, 4, 256), 1, 32, 4 * chunk, False),
              (full, (2, 4 * needed[1], 16, 4, 512), 1, 16, -1, False)]
    w = HybridWorker(g, server, "gpu-check/gemma-bench", groups, seed=seed)
    assert w.register() is None
    rng = random.Random(seed)
    # scattered block ids, as in a long-running vLLM, and never the null block
    src, dst = [], []
    for n in needed:
        ids = list(range(1, 4 * n))
        rng.shuffle(ids)
        src.append(ids[:n])
        dst.append(ids[2 * n:3 * n])
    piece = 32 * 4 * 256 * 2
    request_bytes = 2 * piece * (len(sliding) * needed[0] + len(full) * needed[1])
    store_s, retrieve_s = [], []
    gpu_before = {op: server.gpu_copy(op) for op in ("store", "retrieve")}
    for rep in range(3):
        reqs = [([rng.randrange(150000) for _ in range(chunks * chunk)], src, f"h{seed}-{rep}-{i}") for i in range(requests)]
        store_s.append(_pipelined(w, reqs, "store"))
        retrieve_s.append(_pipelined(w, [(t, dst, rid) for t, _, rid in reqs], "retrieve"))
        server.clear()
    total = requests * request_bytes
    row = {"layout": f"Gemma-like hybrid ({layers} sliding layers: 32-token blocks, 4 x 256; {layers} full: 16-token blocks, 4 x 512;"
                     " bf16, 64 KiB pieces, 2 object groups)", "piece_bytes": piece, "request_bytes": request_bytes}
    for op in ("store", "retrieve"):
        seconds, copied = (a - b for a, b in zip(server.gpu_copy(op), gpu_before[op]))
        row[f"{op}_gpu_gbps"] = copied / seconds / 1e9 if seconds else 0.0
    row["store_gbps"] = total / min(store_s) / 1e9
    row["retrieve_gbps"] = total / min(retrieve_s) / 1e9
    raw = g.raw_copy_gbps(request_bytes)
    row.update({"raw_d2h_gbps": raw["d2h"], "raw_h2d_gbps": raw["h2d"]})
    row["store_vs_raw"] = row["store_gbps"] / raw["d2h"]
    row["retrieve_vs_raw"] = row["retrieve_gbps"] / raw["h2d"]
    w.client.call("unregister", w.instance)
    return row
