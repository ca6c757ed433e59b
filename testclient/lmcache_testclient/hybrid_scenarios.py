"""Hybrid-model scenarios (hybrid-and-l2.md part A): several kernel groups per registration, each
with its own block list in STORE/RETRIEVE, as vLLM's hybrid KV-cache manager drives LMCache.

Block ids start at 1 in every group: vLLM's block 0 is the null block it hands out for blocks a
group does not hold (outside a sliding window, Mamba states between snapshots).
"""

import contextlib

import torch

from . import expect, protocol
from .codec import encode
from .hybrid_kv import SENTINEL_BYTE, GroupSpec, HybridKVCache
from .messages import EngineGroupInfo, RegisterEngineDrivenContextPayload
from .report import Report
from .registry import Options, scenario
from .wire import Client
from .worker import Worker, new_instance_id, random_tokens

NULL = 0


class Blocks:
    """Fresh block ids of one group, from 1 up (0 is vLLM's null block)."""

    def __init__(self, num_blocks: int):
        self.num_blocks, self._next = num_blocks, 1

    def take(self, n: int) -> list:
        if self._next + n > self.num_blocks:
            raise ValueError(f"scenario needs more than {self.num_blocks} blocks")
        ids = list(range(self._next, self._next + n))
        self._next += n
        return ids


class HybridWorker(Worker):
    """A worker whose STORE/RETRIEVE carry one block list per kernel group."""

    def register_groups(self, name: str, infos, wrappers=None, required: bool = True) -> None:
        self.step(name, protocol.register_kv_cache(
            self.instance_id, self.kv.wrappers() if wrappers is None else wrappers, self.model_name,
            world_size=1, engine_type="vllm", layout_hints={"kv_layout": "NHD"},
            engine_group_infos=infos), expect.NO_PAYLOAD, required)

    def store_groups(self, name: str, key, lists, ok: bool = True, required: bool = False) -> None:
        self.step(name, protocol.store(key, self.instance_id, [list(ids) for ids in lists]),
                  expect.transfer_reply(ok), required)

    def retrieve_groups(self, name: str, key, lists, ok: bool = True, skip: int = 0,
                        required: bool = False) -> None:
        self.step(name, protocol.retrieve(key, self.instance_id, [list(ids) for ids in lists],
                                          skip_first_n_tokens=skip), expect.transfer_reply(ok), required)

    def verify_group(self, name: str, g: int, blocks, expected) -> bool:
        bad = [b for b, want in zip(blocks, expected) if self.kv.block_bytes(g, b) != want]
        return self.report.check(self.prefix + name, not bad,
                                 f"{len(blocks)} blocks byte-equal" if not bad else f"{len(bad)} differ, first {bad[0]}")


@contextlib.contextmanager
def _hybrid(report: Report, opts: Options, label: str, groups):
    rng = opts.rng(label)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(HybridKVCache(groups, seed=rng.getrandbits(32)))
        w = HybridWorker(report, client, kv, f"testclient/{label}", new_instance_id(rng))
        report.note(f"{label}: groups {[(g.layers, g.shape, str(g.dtype), g.tokens_per_block, g.sw_size_tokens, g.recurrent_state) for g in groups]}")
        yield w, kv, rng


def _gemma_like(chunk: int, num_blocks: int) -> list:
    """Sliding-window layers (blocks of 32, head dim 128, window of 4 chunks) and full-attention
    layers (blocks of 16, head dim 256): two block sizes, one page size, as vLLM unifies them."""
    return [GroupSpec((0, 2), (2, num_blocks, 32, 1, 128), torch.bfloat16, 1, 32, sw_size_tokens=4 * chunk),
            GroupSpec((1, 3), (2, num_blocks, 16, 1, 256), torch.bfloat16, 1, 16, engine_group_id=1)]


def _round_trip(w: HybridWorker, kv: HybridKVCache, rng, chunk: int, label: str) -> None:
    """STORE 2 chunks of every group, LOOKUP = 2, RETRIEVE elsewhere byte-exact, and a skip."""
    per_chunk = [chunk // g.tokens_per_block for g in kv.groups]
    allocs = [Blocks(g.shape[g.block_axis]) for g in kv.groups]
    tokens = random_tokens(rng, 2 * chunk)
    key = w.key(tokens, f"req-{label}")
    source = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
    stored = [kv.snapshot(g, ids) for g, ids in enumerate(source)]
    w.store_groups("STORE 2 chunks, one block list per group", key, source, required=True)
    w.lookup_hits("LOOKUP", key, 2)
    target = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
    w.retrieve_groups("RETRIEVE into other blocks", key, target, required=True)
    for g, ids in enumerate(target):
        w.verify_group(f"group {g}: retrieved blocks equal the stored ones", g, ids, stored[g])
    # skip_first_n_tokens of one 32-token block: every group leaves its first 32 tokens alone
    skip_target = [a.take(2 * n) for a, n in zip(allocs, per_chunk)]
    for g, ids in enumerate(skip_target):
        kv.fill(g, ids, SENTINEL_BYTE)
    w.retrieve_groups("RETRIEVE with skip_first_n_tokens=32", key, skip_target, skip=32)
    for g, ids in enumerate(skip_target):
        skipped = 32 // kv.groups[g].tokens_per_block
        untouched = all(kv.filled_with(g, b, SENTINEL_BYTE) for b in ids[:skipped])
        w.report.check(f"group {g}: the {skipped} skipped block(s) untouched", untouched)
        w.verify_group(f"group {g}: the rest equal the stored blocks", g, ids[skipped:], stored[g][skipped:])
    w.end_session("END_SESSION", key.request_id)


@scenario("hybrid-merged", "(a) two groups (block sizes 32/16, head dims 128/256), one object group: round trip byte-exact")
def hybrid_merged(report: Report, opts: Options) -> None:
    with _hybrid(report, opts, "hybrid-merged", _gemma_like(opts.chunk_size, 128)) as (w, kv, rng):
        w.register_groups("REGISTER with 2 engine_group_infos", kv.infos())
        _round_trip(w, kv, rng, opts.chunk_size, "merged")
        w.unregister()


@scenario("hybrid-fp8", "uint8 (fp8_ds_mla 656-byte records) and float8_e4m3fn groups: opaque bytes, round trip byte-exact")
def hybrid_fp8(report: Report, opts: Options) -> None:
    groups = [GroupSpec((0, 1), (128, 16, 656), torch.uint8, 0, 16),
              GroupSpec((2, 3), (2, 128, 16, 2, 64), torch.float8_e4m3fn, 1, 16, engine_group_id=1)]
    with _hybrid(report, opts, "hybrid-fp8", groups) as (w, kv, rng):
        w.register_groups("REGISTER uint8 + float8_e4m3fn groups", kv.infos())
        _round_trip(w, kv, rng, opts.chunk_size, "fp8")
        w.unregister()


@scenario("hybrid-window", "(b) a one-chunk sliding window: null ids skipped on STORE, LOOKUP 3 = 3 and 2 = 0, RETRIEVE writes in-window blocks only")
def hybrid_window(report: Report, opts: Options) -> None:
    chunk = opts.chunk_size
    per_chunk = chunk // 16
    groups = [GroupSpec((0, 1), (2, 8 * per_chunk, 16, 2, 64), torch.bfloat16, 1, 16),
              GroupSpec((2,), (8 * per_chunk, 2, 16, 2, 64), torch.bfloat16, 0, 16, sw_size_tokens=chunk, engine_group_id=1)]
    with _hybrid(report, opts, "hybrid-window", groups) as (w, kv, rng):
        w.register_groups("REGISTER full attention + one-chunk window", kv.infos())
        full, window = Blocks(8 * per_chunk), Blocks(8 * per_chunk)
        tokens = random_tokens(rng, 3 * chunk)
        key = w.key(tokens, "req-window")
        full_ids = full.take(3 * per_chunk)
        window_ids = [NULL] * (2 * per_chunk) + window.take(per_chunk)  # vLLM: outside the window is the null block
        kv.fill(1, [NULL], SENTINEL_BYTE)
        full_data, window_data = kv.snapshot(0, full_ids), kv.snapshot(1, window_ids[2 * per_chunk:])
        w.store_groups("STORE 3 chunks, window ids null for chunks 0-1", key, [full_ids, window_ids], required=True)
        w.lookup_hits("LOOKUP 3 chunks hits 3", key, 3)
        w.lookup_hits("LOOKUP the first 2 chunks hits 0 (no window objects there)",
                      key.with_(end=2 * chunk, request_id="req-window-2"), 0)
        full_target = full.take(3 * per_chunk)
        window_target = [NULL] * (2 * per_chunk) + window.take(per_chunk)
        w.retrieve_groups("RETRIEVE 3 chunks", key, [full_target, window_target], required=True)
        w.verify_group("full-attention blocks equal the stored ones", 0, full_target, full_data)
        w.verify_group("in-window blocks equal the stored ones", 1, window_target[2 * per_chunk:], window_data)
        report.check("block 0 (the null block) untouched", kv.filled_with(1, NULL, SENTINEL_BYTE))
        w.end_session("END_SESSION", key.request_id)
        w.end_session("END_SESSION (the 2-chunk lookup)", "req-window-2")
        w.unregister()


@scenario("hybrid-mamba", "(c) Mamba state pages [nb, 2, N, 1, hs] + full attention at chunk N: snapshots stored where ids are non-null")
def hybrid_mamba(report: Report, opts: Options) -> None:
    n = opts.chunk_size  # the unified block size: --chunk-size N
    groups = [GroupSpec((0, 1, 2), (8, 2, n, 1, 48), torch.bfloat16, 0, n, sw_size_tokens=n, recurrent_state=True),
              GroupSpec((3,), (16, 2, n, 1, 64), torch.bfloat16, 0, n, engine_group_id=1)]
    with _hybrid(report, opts, "hybrid-mamba", groups) as (w, kv, rng):
        w.register_groups("REGISTER Mamba + full attention", kv.infos())
        mamba, attention = Blocks(8), Blocks(16)
        kv.fill(0, [NULL], SENTINEL_BYTE)
        # align mode with one block per step: earlier chunks' snapshots were overwritten (null ids)
        key = w.key(random_tokens(rng, 3 * n), "req-mamba-a")
        snap, full_ids = mamba.take(1), attention.take(3)
        snap_data, full_data = kv.snapshot(0, snap), kv.snapshot(1, full_ids)
        w.store_groups("STORE 3 chunks, a snapshot at the end of chunk 2 only", key, [[NULL, NULL] + snap, full_ids], required=True)
        w.lookup_hits("LOOKUP 3 chunks hits 3", key, 3)
        w.lookup_hits("LOOKUP 2 chunks hits 0 (no snapshot at the end of chunk 1)", key.with_(end=2 * n, request_id="req-mamba-a2"), 0)
        # every chunk boundary snapshotted
        key_b = w.key(random_tokens(rng, 2 * n), "req-mamba-b")
        w.store_groups("STORE 2 chunks with a snapshot at each chunk end", key_b, [mamba.take(2), attention.take(2)])
        w.lookup_hits("second prefix: LOOKUP 2 hits 2", key_b, 2)
        w.lookup_hits("second prefix: LOOKUP 1 hits 1", key_b.with_(end=n, request_id="req-mamba-b1"), 1)
        # restore the first prefix: only the last chunk's state is written
        target_snap, target_full = mamba.take(1), attention.take(3)
        w.retrieve_groups("RETRIEVE 3 chunks", key, [[NULL, NULL] + target_snap, target_full], required=True)
        w.verify_group("the restored state equals the stored snapshot", 0, target_snap, snap_data)
        w.verify_group("attention blocks equal the stored ones", 1, target_full, full_data)
        report.check("block 0 (the null block) untouched", kv.filled_with(0, NULL, SENTINEL_BYTE))
        w.store_groups("STORE with a short Mamba list fails closed", w.key(random_tokens(rng, 3 * n), "req-mamba-short"),
                       [[NULL, mamba.take(1)[0]], attention.take(3)], ok=False)
        w.ping("then PING")
        for rid in ("req-mamba-a", "req-mamba-a2", "req-mamba-b", "req-mamba-b1"):
            w.end_session(f"END_SESSION {rid}", rid)
        w.unregister()


class HybridEngineDrivenPayload(RegisterEngineDrivenContextPayload):
    """An engine-driven registration that lists several KV groups (which LMCache refuses too)."""

    engine_group_infos: list = []


@scenario("hybrid-badgeometry", "(d) geometries the server cannot serve are refused at REGISTER; it keeps serving")
def hybrid_badgeometry(report: Report, opts: Options) -> None:
    chunk = opts.chunk_size
    groups = [GroupSpec((0, 1), (2, 64, 16, 2, 64), torch.bfloat16, 1, 16),
              GroupSpec((2,), (2, 64, 16, 2, 64), torch.bfloat16, 1, 16, engine_group_id=1)]
    cases = [
        ("a packed record (state_content_bytes 100) that is not the tensor's 256-byte rows",
         [EngineGroupInfo(0, (0, 1), 16, state_content_bytes=100), EngineGroupInfo(1, (2,), 16)]),
        ("sub-chunk window of 24 tokens on blocks of 16",
         [EngineGroupInfo(0, (0, 1), 16), EngineGroupInfo(1, (2,), 16, 24)]),
        ("layer index out of range", [EngineGroupInfo(0, (0, 1), 16), EngineGroupInfo(1, (2, 7), 16)]),
        ("tokens_per_block 8 on 16-slot blocks", [EngineGroupInfo(0, (0, 1), 8), EngineGroupInfo(1, (2,), 16)]),
    ]
    with _hybrid(report, opts, "hybrid-badgeometry", groups) as (w, kv, rng):
        key = w.key(random_tokens(rng, chunk), "req-bad")
        lists = [list(range(1, 1 + chunk // 16)), list(range(1, 1 + chunk // 16))]
        for case, infos in cases:
            w.register_groups(f"{case}: REGISTER (answered, refused)", infos)
            w.store_groups(f"{case}: STORE fails", key, lists, ok=False)
            w.ping(f"{case}: then PING")
        w.register_groups("a valid registration of the same instance", kv.infos())
        w.store_groups("then STORE works", key, lists)
        w.unregister()
        payload = HybridEngineDrivenPayload(instance_id=new_instance_id(rng), model_name=w.model_name, world_size=1,
                                            block_size=16, num_layers=2, hidden_dim_size=128, dtype_str="bfloat16",
                                            use_mla=False, num_physical_slots=None,
                                            engine_group_infos=[EngineGroupInfo(0, (0,)), EngineGroupInfo(1, (1,))])
        w.step("engine-driven REGISTER with 2 KV groups: refused (empty pool name)",
               protocol.register_engine_driven_context(payload), encode({"shm_name": "", "pool_size": 0}))
        w.ping("then PING")


@scenario("hybrid-status", "(e) registers sliding-window, full-attention and Mamba groups and leaves them registered for /status")
def hybrid_status(report: Report, opts: Options) -> None:
    chunk = opts.chunk_size
    groups = _gemma_like(chunk, 32) + [
        GroupSpec((4,), (8, 2, 16, 1, 64), torch.bfloat16, 0, 16, sw_size_tokens=16, recurrent_state=True, engine_group_id=2)]
    with _hybrid(report, opts, "hybrid-status", groups) as (w, kv, rng):
        w.register_groups("REGISTER 3 kernel groups", kv.infos())
        w.ping("PING")
        report.note(f"left registered: instance {w.instance_id}")

