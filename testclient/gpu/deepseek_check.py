"""DeepSeek-V4(-Flash, V4.1)-shaped GPU scenarios (issue 48) for gpu_check.py, and the DeepSeek-like layout of
inflight_bench.py --model deepseek-v4-like: the same checks as the CPU integration test (DeepSeekIT, the testclient's
deepseek-v4 / deepseek-v41 scenarios), with CUDA tensors shared through real IPC handles.

  V4-Flash-like (recipes/deepseek_v4_flash.rst; hybrid-kv-cache-groups.md "256/64/8/4", ratios 4 and 128): a 128-token
  window on blocks of 64 (584-byte fp8_ds_mla records as uint8), the ratio-4 latent (8 tokens on 2 slots), the ratio-4
  float32 indexer (4 tokens on 1 slot), the ratio-128 latent (256 tokens on 2 slots); chunk 256, object groups separate.
  V4.1-Flash-like (recipes/deepseek_v41_flash.rst): two 32-token window groups, the ratio-2 KV and its uint8 indexer on
  one engine group (64 tokens on 32 slots), and the compressor scratch ring (prefix_cacheable false), never touched.

Run on the GPU host as part of gpu_check.py (see testclient/gpu/run-on-device.sh), or alone:

    python3 testclient/gpu/deepseek_check.py --java .device/jre/bin/java --classpath '.device/lib/*' --out $OUT/deepseek
"""

import os
import random
import sys

NULL = 0
CHUNK = 256
WINDOW = 128


def info(engine_group, layers, tokens_per_block, window=-1, tokens_per_state=1, role="sparse", leader=False, cacheable=True):
    """EngineGroupInfo as LMCache's msgspec Struct encodes it: the six core fields, then group_view.py's V4.1 fields."""
    return {"engine_group_id": engine_group, "layer_indices": list(layers), "tokens_per_block": tokens_per_block,
            "sw_size_tokens": window, "extra_object_group_tag": 0, "recurrent_state": False,
            "tokens_per_state": tokens_per_state, "cache_role": role, "state_content_bytes": None,
            "block_stride_alignment": None, "is_index_group_leader": leader, "prefix_cacheable": cacheable,
            "page_size_padded": None, "num_head_slots": None}


def v4_groups(chunks):
    """(info, shape, dtype name) per kernel group of the V4-Flash-like registration; block axis 0 ([nb, slots, hs])."""
    def nb(tpb):
        return (CHUNK // tpb) * 3 * chunks + 1
    return [(info(0, (0, 1), 64, WINDOW, tokens_per_state=0), (nb(64), 64, 584), "uint8"),
            (info(1, (2, 3), 8), (nb(8), 2, 584), "uint8"),
            (info(2, (4, 5), 4, role="indexer", leader=True), (nb(4), 1, 32), "float32"),
            (info(3, (6,), 256), (nb(256), 2, 584), "uint8")]


def v41_groups(chunks):
    nb32, nb64 = (CHUNK // 32) * 3 * chunks + 1, (CHUNK // 64) * 3 * chunks + 1
    return [(info(0, (0, 1), 32, WINDOW, tokens_per_state=0), (nb32, 32, 584), "uint8"),
            (info(1, (2, 3), 32, WINDOW, tokens_per_state=0), (nb32, 32, 584), "uint8"),
            (info(2, (4,), 64, tokens_per_state=2), (nb64, 32, 584), "uint8"),
            (info(2, (5,), 64, tokens_per_state=2), (nb64, 32, 132), "uint8"),
            (info(3, (6,), 0, cacheable=False), (8, 8, 96), "float32")]


def bench_layout(chunks, scatter, rng, layers=43):
    """inflight_bench's DeepSeek-like layout at a model's depth, bench.ldqa's deepseek-v4-like model: every group pages
    128 tokens a block; `layers` window layers (128 slots of 584-byte uint8 records, window 128: each chunk keeps its
    last block), half as many ratio-4 latents (32 slots) with a float32 ratio-4 indexer (32 slots x 128) and as many
    ratio-128 latents (1 slot). vLLM frees the window blocks before the last window, so a request of many chunks moves
    the window group's last block only. Returns (groups, src, dst, bytes per op); no torch, so a CPU test checks it."""
    block, half = 128, layers // 2
    per_chunk = CHUNK // block
    blocks = 3 * chunks * per_chunk + 1
    first = 0
    specs = []
    for count, tpb_slots, hs, dtype, extra in ((layers, 128, 584, "uint8", {"window": WINDOW, "tokens_per_state": 0}),
                                               (half, 32, 584, "uint8", {}),
                                               (half, 32, 128, "float32", {"role": "indexer", "leader": True}),
                                               (layers - half, 1, 584, "uint8", {})):
        specs.append((info(len(specs), range(first, first + count), block, **extra), (blocks, tpb_slots, hs), dtype))
        first += count
    src, dst = [], []
    for _ in specs:
        ids = list(range(1, blocks))
        if scatter:
            rng.shuffle(ids)
        src.append(ids[:chunks * per_chunk])
        dst.append(ids[chunks * per_chunk:2 * chunks * per_chunk])
    src[0] = [NULL] * (chunks * per_chunk - 1) + src[0][-1:]
    dst[0] = [NULL] * (chunks * per_chunk - 1) + dst[0][-1:]
    size = {"uint8": 1, "float32": 4}
    window = layers * 128 * 584
    per_chunk_bytes = sum(len(s[0]["layer_indices"]) * s[1][1] * s[1][2] * size[s[2]] for s in specs[1:]) * per_chunk
    nbytes = window + chunks * per_chunk_bytes
    return specs, src, dst, {"store": nbytes, "retrieve": nbytes}


def kept(spec, ids, chunks):
    """The ids a transfer moves: a sub-chunk window's last window / tokens_per_block blocks of each chunk, else all."""
    tpb, window = spec[0]["tokens_per_block"], spec[0]["sw_size_tokens"]
    per_chunk = CHUNK // tpb
    keep = window // tpb if 0 < window < CHUNK else per_chunk
    return [ids[c * per_chunk + i] for c in range(chunks) for i in range(per_chunk - keep, per_chunk)]


class DeepSeekWorker:
    """One CUDA tensor per layer, each group with its own dtype; a HybridWorker (hybrid_check.py) for the rest."""

    def __new__(cls, g, server, model, specs, seed=0):
        import torch
        import hybrid_check

        class Worker(hybrid_check.HybridWorker):
            def __init__(self):  # noqa: N807 -- the base's fields, tensors of each group's dtype
                self.g, self.model, self.specs = g, model, specs
                self.groups = [(s[0]["layer_indices"], s[1], 0, s[0]["tokens_per_block"], s[0]["sw_size_tokens"], False)
                               for s in specs]
                self.client = g.Client(server.port)
                self.instance = random.Random(seed).getrandbits(63)
                gen = torch.Generator(device="cuda").manual_seed(seed)
                self.tensors = [None] * sum(len(s[0]["layer_indices"]) for s in specs)
                for spec in specs:
                    for layer in spec[0]["layer_indices"]:
                        t = torch.empty(spec[1], device="cuda", dtype=getattr(torch, spec[2]))
                        raw = t.view(torch.uint8)
                        raw.copy_(torch.randint(0, 256, raw.shape, device="cuda", generator=gen, dtype=torch.uint8))
                        self.tensors[layer] = t
                self.keep = []

            def infos(self):
                return [s[0] for s in self.specs]

            def block(self, gi, b):
                return torch.cat([self.tensors[layer].view(torch.uint8).select(0, b).reshape(-1)
                                  for layer in self.specs[gi][0]["layer_indices"]])

            def fill(self, gi, blocks, value):
                for b in blocks:
                    for layer in self.specs[gi][0]["layer_indices"]:
                        self.tensors[layer].view(torch.uint8).select(0, b).fill_(value)

        return Worker()


def _per_chunk(spec):
    tpb = spec[0]["tokens_per_block"]
    return CHUNK // tpb if tpb else 0


def v4_flash(g, server):
    import torch
    check = g.check
    specs = v4_groups(chunks=2)
    w = DeepSeekWorker(g, server, "gpu-check/deepseek-v4", specs, seed=48)
    check("deepseek-v4: REGISTER 4 groups (tokens per block 64/8/4/256, ratios 4 and 128, uint8 + float32)", w.register() is None)
    rng = random.Random(48)
    tokens = [rng.randrange(150000) for _ in range(2 * CHUNK)]
    n = [_per_chunk(s) for s in specs]
    src = [list(range(1, 1 + 2 * k)) for k in n]
    dst = [list(range(1 + 2 * k, 1 + 4 * k)) for k in n]
    src[0] = [NULL] * 6 + src[0][6:]  # vLLM frees the window group's blocks before the last 128 tokens
    stored = [[w.block(gi, b).clone() for b in kept(specs[gi], src[gi], 2)] for gi in range(4)]
    check("deepseek-v4: STORE 2 chunks", w.transfer("store", tokens, src, "ds4-2"))
    check("deepseek-v4: LOOKUP+QUERY = 2", g.lookup_after_store(w, tokens, 2 * CHUNK, "ds4-2", 2) == 2)
    check("deepseek-v4: LOOKUP of chunk 0 = 0 (the window group has no object there: a hit needs every group)",
          w.lookup(tokens, CHUNK, "ds4-1") == 0)
    for gi in range(4):
        w.fill(gi, dst[gi], 0xA5)
    torch.cuda.synchronize()
    check("deepseek-v4: RETRIEVE into other blocks", w.transfer("retrieve", tokens, dst, "ds4-2"))
    for gi in range(4):
        moved = kept(specs[gi], dst[gi], 2)
        if gi == 0:
            moved = moved[len(moved) // 2:]  # the window group reads the last chunk's object only
        equal = all(torch.equal(w.block(gi, d), b) for d, b in zip(moved, stored[gi][-len(moved):]))
        untouched = all(bool((w.block(gi, b) == 0xA5).all()) for b in dst[gi] if b not in moved)
        check(f"deepseek-v4: group {gi} byte-equal where moved, untouched elsewhere", equal and untouched)
    check("deepseek-v4: UNREGISTER", w.client.call("unregister", w.instance) is None)


def v41_flash(g, server):
    import torch
    check = g.check
    specs = v41_groups(chunks=2)
    w = DeepSeekWorker(g, server, "gpu-check/deepseek-v41", specs, seed=41)
    check("deepseek-v41: REGISTER 5 groups (one the scratch ring)", w.register() is None)
    rng = random.Random(41)
    tokens = [rng.randrange(150000) for _ in range(2 * CHUNK)]
    n = [_per_chunk(s) for s in specs[:4]]
    src = [list(range(1, 1 + 2 * k)) for k in n] + [[1, 2]]
    dst = [list(range(1 + 2 * k, 1 + 4 * k)) for k in n] + [[3, 4]]
    w.fill(4, range(8), 0x5A)
    stored = [[w.block(gi, b).clone() for b in kept(specs[gi], src[gi], 2)] for gi in range(4)]
    check("deepseek-v41: STORE 2 chunks, the scratch ring's ids too", w.transfer("store", tokens, src, "ds41-2"))
    check("deepseek-v41: LOOKUP+QUERY = 2 (the scratch ring not required)",
          g.lookup_after_store(w, tokens, 2 * CHUNK, "ds41-2", 2) == 2)
    for gi in range(4):
        w.fill(gi, dst[gi], 0xA5)
    torch.cuda.synchronize()
    check("deepseek-v41: RETRIEVE 2 chunks", w.transfer("retrieve", tokens, dst, "ds41-2"))
    for gi in range(4):
        moved = kept(specs[gi], dst[gi], 2)
        if specs[gi][0]["sw_size_tokens"] > 0:
            moved = moved[len(moved) // 2:]
        equal = all(torch.equal(w.block(gi, d), b) for d, b in zip(moved, stored[gi][-len(moved):]))
        untouched = all(bool((w.block(gi, b) == 0xA5).all()) for b in dst[gi] if b not in moved)
        check(f"deepseek-v41: group {gi} byte-equal where moved, untouched elsewhere", equal and untouched)
    check("deepseek-v41: the scratch ring untouched", all(bool((w.block(4, b) == 0x5A).all()) for b in range(8)))
    check("deepseek-v41: UNREGISTER", w.client.call("unregister", w.instance) is None)


def run_tests(g, server, args):
    for name, run in (("deepseek-v4", lambda: v4_flash(g, server)), ("deepseek-v41", lambda: v41_flash(g, server))):
        try:
            run()
        except Exception as e:  # noqa: BLE001 -- recorded as a failed check, the other results are still written
            g.check(f"{name}: ran to completion", False, repr(e))


def bench_worker(g, server, chunks, scatter, rng, seed):
    """bench_layout's worker, registered (CUDA tensors): inflight_bench.py --model deepseek-v4-like."""
    specs, src, dst, nbytes = bench_layout(chunks, scatter, rng)
    w = DeepSeekWorker(g, server, f"inflight/deepseek-v4-like-{seed}", specs, seed=seed)
    assert w.register() is None
    return w, src, dst, nbytes, w.lookup


def main():
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_check

    args = gpu_check.script_args().parse_args()
    os.makedirs(args.out, exist_ok=True)
    server = gpu_check.Server(args.java, args.classpath, args.out, 1)
    try:
        run_tests(gpu_check, server, args)
    finally:
        server.stop()
    failed = [r for r in gpu_check.RESULTS if not r["ok"]]
    gpu_check.log(f"{len(gpu_check.RESULTS) - len(failed)} passed, {len(failed)} failed")
    with open(os.path.join(args.out, "deepseek_tests.json"), "w") as f:
        json.dump(gpu_check.RESULTS, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
