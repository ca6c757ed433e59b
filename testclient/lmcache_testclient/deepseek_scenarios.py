"""DeepSeek-V4(-Flash, V4.1)-shaped registrations (issue 48; hybrid-and-l2.md §A.2.3, §A.3.2), on the CPU
shared-memory path, at chunk 256 (LMCache's default and the V4.1 recipe's ``--chunk-size 256``).

The geometry follows the recipes (``recipes/deepseek_v4_flash.rst``, ``deepseek_v41_flash.rst``) and
LMCache's design note (``hybrid-kv-cache-groups.md``: "DeepSeek-V4-Flash: 256/64/8/4" tokens per block,
MLA / indexer caches packing 4 and 128 tokens into a slot): fp8 records as uint8, float32 indexer, a
128-token sliding window on blocks smaller than a chunk, and V4.1's compressor scratch ring
(``prefix_cacheable`` false), which is never stored nor needed for a hit.

A compressed group's block of ``tokens_per_block`` tokens holds ``slots_per_block`` slots; a chunk
covers ``chunk * slots_per_block / tokens_per_block`` of them. A sub-chunk window keeps only the last
``window / tokens_per_block`` blocks of each chunk (LMCache's ``get_subchunk_sw_size_tokens``).
"""

import json
import os

import torch

from .hybrid_kv import SENTINEL_BYTE, GroupSpec
from .hybrid_scenarios import NULL, Blocks, _hybrid
from .report import Report
from .registry import Options, scenario
from .worker import random_tokens

CHUNK = 256
WINDOW = 128


def v4_flash_groups(chunks: int) -> list:
    """Window group (blocks of 64, 584-byte records), ratio-4 latent (8 tokens on 2 slots), ratio-4 float32
    indexer (4 tokens on 1 slot, the index group leader), ratio-128 latent (256 tokens on 2 slots)."""
    def nb(tpb):
        return (CHUNK // tpb) * chunks + 1
    return [GroupSpec((0, 1), (nb(64), 64, 584), torch.uint8, 0, 64, sw_size_tokens=WINDOW, tokens_per_state=0),
            GroupSpec((2, 3), (nb(8), 2, 584), torch.uint8, 0, 8, engine_group_id=1),
            GroupSpec((4, 5), (nb(4), 1, 32), torch.float32, 0, 4, engine_group_id=2, cache_role="indexer",
                      is_index_group_leader=True),
            GroupSpec((6,), (nb(256), 2, 584), torch.uint8, 0, 256, engine_group_id=3)]


def v41_flash_groups(chunks: int) -> list:
    """Two window groups (blocks of 32), the ratio-2 compressed KV and its uint8 indexer on one engine group
    (blocks of 64 tokens on 32 slots, tokens_per_state 2), and the scratch ring (prefix_cacheable false)."""
    nb32, nb64 = (CHUNK // 32) * chunks + 1, (CHUNK // 64) * chunks + 1
    return [GroupSpec((0, 1), (nb32, 32, 584), torch.uint8, 0, 32, sw_size_tokens=WINDOW, tokens_per_state=0),
            GroupSpec((2, 3), (nb32, 32, 584), torch.uint8, 0, 32, sw_size_tokens=WINDOW, tokens_per_state=0,
                      engine_group_id=1),
            GroupSpec((4,), (nb64, 32, 584), torch.uint8, 0, 64, tokens_per_state=2, engine_group_id=2),
            GroupSpec((5,), (nb64, 32, 132), torch.uint8, 0, 64, tokens_per_state=2, engine_group_id=2),
            GroupSpec((6,), (8, 8, 96), torch.float32, 0, 0, engine_group_id=3, prefix_cacheable=False)]


def _windowed(g: GroupSpec, ids: list, end_tokens: int) -> list:
    """vLLM's view of a sliding-window group: blocks wholly before the window of the tokens up to
    ``end_tokens`` are the null block."""
    if g.sw_size_tokens <= 0:
        return list(ids)
    return [NULL if (i + 1) * g.tokens_per_block <= end_tokens - g.sw_size_tokens else b for i, b in enumerate(ids)]


def _kept(g: GroupSpec, ids: list, chunks: int) -> list:
    """The ids a transfer moves: the last window / tokens_per_block of each chunk's blocks (all, without a window)."""
    per_chunk = CHUNK // g.tokens_per_block
    kept = per_chunk if g.sw_size_tokens <= 0 or g.sw_size_tokens >= CHUNK else g.sw_size_tokens // g.tokens_per_block
    return [ids[c * per_chunk + i] for c in range(chunks) for i in range(per_chunk - kept, per_chunk)]


def _layer_block(kv, layer: int, block: int) -> bytes:
    return kv.tensors[layer].view(torch.uint8).select(0, block).contiguous().numpy().tobytes()


def _write_l2_expectation(opts: Options, w, kv, tokens: list, ids: list, object_groups: list, chunks: list) -> None:
    """What LMCache's fs_native adapter holds for these chunks: per (chunk, object group) the concatenation, in kernel-group
    order, of segments [kv_size 1, layers, kept slots, hidden] (gpu_context.py _TempGPUBuffer; hybrid-and-l2.md §A.6). The
    Java test names the files from the tokens (keys.h key_to_filename) and compares the bytes."""
    os.makedirs(opts.out_dir, exist_ok=True)
    for c in chunks:
        for og, members in enumerate(object_groups):
            data = bytearray()
            for gi in members:
                g = kv.groups[gi]
                per_chunk = CHUNK // g.tokens_per_block
                kept = _kept(g, ids[gi][c * per_chunk:(c + 1) * per_chunk], 1)
                for layer in g.layers:
                    for b in kept:
                        data += _layer_block(kv, layer, b)
            with open(os.path.join(opts.out_dir, f"og{og}-chunk{c}.bin"), "wb") as f:
                f.write(bytes(data))
    with open(os.path.join(opts.out_dir, "expect.json"), "w") as f:
        json.dump({"model": w.model_name, "chunk": CHUNK, "tokens": tokens, "chunks": chunks,
                   "object_groups": len(object_groups)}, f)


def _require_chunk(report: Report, opts: Options) -> bool:
    return report.check("the server's chunk is 256 (the recipes' geometry)", opts.chunk_size == CHUNK,
                        f"--chunk-size {opts.chunk_size}")


@scenario("deepseek-v4", "DeepSeek-V4-Flash-like: 4 groups (tokens per block 64/8/4/256, ratios 4 and 128, uint8 + float32), "
                         "a 128-token window on 256-token chunks; byte-exact per group, window blocks only, a hit needs every group")
def deepseek_v4(report: Report, opts: Options) -> None:
    if not _require_chunk(report, opts):
        return
    groups = v4_flash_groups(chunks=6)
    with _hybrid(report, opts, "deepseek-v4", groups) as (w, kv, rng):
        w.register_groups("REGISTER 4 DeepSeek-V4 groups", kv.infos())
        allocs = [Blocks(g.shape[0]) for g in groups]
        per_chunk = [CHUNK // g.tokens_per_block for g in groups]
        tokens = random_tokens(rng, 2 * CHUNK)
        key = w.key(tokens, "req-v4")
        source = [_windowed(g, a.take(2 * n), 2 * CHUNK) for g, a, n in zip(groups, allocs, per_chunk)]
        stored = [kv.snapshot(g, [b for b in _kept(groups[g], source[g], 2) if b != NULL]) for g in range(len(groups))]
        w.store_groups("STORE 2 chunks (the window group's chunk-0 ids and chunk-1 first half null, as vLLM frees them)",
                       key, source, required=True)
        w.lookup_hits("LOOKUP 2 chunks hits 2", key, 2)
        w.lookup_hits("LOOKUP chunk 0 alone hits 0: the window group has no object there (a hit needs every group)",
                      key.with_(end=CHUNK, request_id="req-v4-1"), 0)
        if opts.out_dir:
            _write_l2_expectation(opts, w, kv, tokens, source, [[0], [1, 2, 3]], [1])
        target = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
        for g, ids in enumerate(target):
            kv.fill(g, ids, SENTINEL_BYTE)
        w.retrieve_groups("RETRIEVE 2 chunks into other blocks", key, target, required=True)
        for g, ids in enumerate(target):
            kept = _kept(groups[g], ids, 2)
            if groups[g].sw_size_tokens > 0:
                kept = kept[len(kept) // 2:]  # the window group reads only the last chunk's object
            w.verify_group(f"group {g}: the moved blocks equal the stored ones", g, kept, stored[g][-len(kept):])
            untouched = [b for b in ids if b not in kept]
            report.check(f"group {g}: the {len(untouched)} blocks outside the window untouched",
                         all(kv.filled_with(g, b, SENTINEL_BYTE) for b in untouched))
        # skip_first_n_tokens 64: the ratio-4 groups leave 8 and 16 blocks alone; the window (tokens 128-255 of
        # each chunk) and the ratio-128 slots (tokens 0-127 not wholly skipped) are written whole
        skip_target = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
        for g, ids in enumerate(skip_target):
            kv.fill(g, ids, SENTINEL_BYTE)
        w.retrieve_groups("RETRIEVE with skip_first_n_tokens=64", key, skip_target, skip=64)
        for g in (1, 2):
            skipped = 64 // groups[g].tokens_per_block
            report.check(f"group {g}: the {skipped} skipped blocks untouched",
                         all(kv.filled_with(g, b, SENTINEL_BYTE) for b in skip_target[g][:skipped]))
            w.verify_group(f"group {g}: the rest equal the stored blocks", g, skip_target[g][skipped:], stored[g][skipped:])
        w.verify_group("group 3: both ratio-128 blocks written", 3, skip_target[3], stored[3])
        for rid in ("req-v4", "req-v4-1"):
            w.end_session(f"END_SESSION {rid}", rid)
        w.unregister()


@scenario("deepseek-v41", "DeepSeek-V4.1-Flash-like: two 32-token window groups, the ratio-2 KV and indexer on one engine "
                          "group, and the scratch ring (prefix_cacheable false) that is neither stored, read nor required")
def deepseek_v41(report: Report, opts: Options) -> None:
    if not _require_chunk(report, opts):
        return
    groups = v41_flash_groups(chunks=4)
    with _hybrid(report, opts, "deepseek-v41", groups) as (w, kv, rng):
        w.register_groups("REGISTER 5 DeepSeek-V4.1 groups (one a scratch ring)", kv.infos())
        allocs = [Blocks(g.shape[0]) for g in groups[:4]]
        per_chunk = [CHUNK // g.tokens_per_block for g in groups[:4]]
        kv.fill(4, range(8), SENTINEL_BYTE)
        tokens = random_tokens(rng, 2 * CHUNK)
        key = w.key(tokens, "req-v41")
        source = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]  # every window block still held: both chunks stored
        stored = [kv.snapshot(g, _kept(groups[g], source[g], 2)) for g in range(4)]
        w.store_groups("STORE 2 chunks, the scratch ring's ids too", key, source + [[1, 2]], required=True)
        w.lookup_hits("LOOKUP 2 chunks hits 2 (the scratch ring is not required)", key, 2)
        w.lookup_hits("LOOKUP chunk 0 hits 1 (its window objects were stored)", key.with_(end=CHUNK, request_id="req-v41-1"), 1)
        target = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
        for g, ids in enumerate(target):
            kv.fill(g, ids, SENTINEL_BYTE)
        w.retrieve_groups("RETRIEVE 2 chunks", key, target + [[3, 4]], required=True)
        for g, ids in enumerate(target):
            kept = _kept(groups[g], ids, 2)
            if groups[g].sw_size_tokens > 0:
                kept = kept[len(kept) // 2:]
            w.verify_group(f"group {g}: the moved blocks equal the stored ones", g, kept, stored[g][-len(kept):])
            untouched = [b for b in ids if b not in kept]
            report.check(f"group {g}: the {len(untouched)} blocks outside the window untouched",
                         all(kv.filled_with(g, b, SENTINEL_BYTE) for b in untouched))
        report.check("the scratch ring untouched (never read, never written)",
                     all(kv.filled_with(4, b, SENTINEL_BYTE) for b in range(8)))
        w.store_groups("STORE with 4 block lists for 5 groups fails", key, source, ok=False)
        w.ping("then PING")
        for rid in ("req-v41", "req-v41-1"):
            w.end_session(f"END_SESSION {rid}", rid)
        w.unregister()
