#!/usr/bin/env python3
"""One request in flight through the whole server path, on a GPU host (issue 17).

A request with a cached prefix waits for its own RETRIEVE before its first token, so what matters is
the time of one request alone: from sending it (frames built beforehand, the worker's event already
recorded) to the server's event being complete in the worker, as vLLM's get_finished sees it. For
1, 4, 16 and 64 chunks of Llama-8B-shaped KV (32 layers, 8 KV heads x 128, bf16, block 16: 32 MiB a
chunk), consecutive and scattered blocks, STORE and RETRIEVE, best of --repeats, next to a raw pinned
copy of the same bytes in the same run, and the server's handler time per request (receive to reply
queued, from its latency metric).

    python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --out $OUT/inflight

Issue 30 adds, in the same run: the floor (inflight_floor.py: the raw copy of the request's bytes plus one bare ZeroMQ
round trip of the client's frame sizes to an echo ROUTER) and floor / request next to raw / request; the first
--fresh-requests requests of a freshly started server per cell (0: none) against the same cell warm; --model gemma-like
(hybrid_check.py's two-group layout: 8 sliding-window layers of 32-token blocks, 4 x 256, and 8 full-attention layers of
16-token blocks, 4 x 512) instead of the Llama-8B shapes; --scattered to measure scattered blocks whatever --pattern says.

    python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
        --chunks 1,4,16,64 --warmup 1500 --fresh-requests 20 --scattered --out $OUT/inflight

Issue 28: --subscribers 0,8 runs every round of every cell once with no KV-event subscriber and once with 8 attached (the
order alternating per round, so both share the machine's state), each a subscribe_kv_events stream on its own DEALER in a
child process (kv_subscriber.py: its GIL is not the timed worker's), acking every batch at once, resuming from its cursor
when attached again; the row's plain figures are the first count's, row["subscribers"] has each count's request times and
handler time, row["subscriber_ratios"] time with 8 / time with 0 (best and median, STORE and RETRIEVE), and the records,
batches and lost batches every subscriber received. The server's KV-event log must be on (--kv-event-log-size, default
32768). --model qwen-like (issue 30): hybrid_check.qwen_like's Mamba state pages [nb, 2, 544, 1, 128] and full attention
[nb, 2, 544, 1, 256], 18 + 6 layers interleaved 3:1, on a server with --chunk-size 544: a STORE writes one snapshot per
chunk, a RETRIEVE reads the last chunk's only, so the row has store_bytes and retrieve_bytes and each op's raw baseline is of
its own bytes.

    python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
        --chunks 1,4,16,64 --warmup 1500 --subscribers 0,8 --out $OUT/inflight-subs
    python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
        --chunks 1,4,16,64 --warmup 1500 --model qwen-like --out $OUT/inflight-qwen

--model deepseek-v4-like (issue 48): deepseek_check.bench_layout, bench.ldqa's DeepSeek-V4-like model at depth 43 (43
window layers of 128 slots of 584-byte uint8 records keeping each chunk's last block, 21 ratio-4 latents and a float32
ratio-4 indexer of 32 slots, 22 ratio-128 latents of 1 slot, blocks of 128 tokens), each op next to a raw copy of its bytes:

    python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
        --chunks 1,4,16,64 --warmup 1500 --model deepseek-v4-like --out $OUT/inflight-deepseek

Every server starts with the ahead-of-time cache, as bin/lmcache-server and the image start it (issue 30): --aot-cache train
(the default) first trains one for this runtime and these jars (gpu_check.train_aot_cache: AotTraining's CPU rounds through
aot-launch.sh, ~11 s on the H200 host) into --out; the JSON's aot_cache says whether each fresh server's JVM used it.
--aot-cache none starts without one (what fresh servers measured before 2026-12-01 late: fresh/warm 0.74-0.84 at one chunk);
--fresh-after-pinned makes a fresh server's first request wait until the pool's background pinning is done. A fresh
server's worker connects when GET /healthcheck answers 200 (--fresh-connect ready, the default), the rest of the pool being
prefaulted beside its first requests; --fresh-connect prepared waits for the whole prefault first, as every sweep did before.

LMCACHE_JAVA_OPTS reaches the server's JVM (for example a JFR recording or an A/B property), LMCACHE_BENCH_TAG names
the JSON, LMCACHE_BENCH_TRANSPORT=zmtp uses the pure-Python client instead of libzmq, LMCACHE_BENCH_NO_WORKER_EVENT=1
sends no worker event. Each row also has the worker's split of its best request (send, reply, open, wait), a wall-clock
raw baseline (the worker's own copy timed like a request), and the server's submit phases (first_copy among them).
"""
import json
import os
import random
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import gpu_check  # noqa: E402
import deepseek_check  # noqa: E402
import hybrid_check  # noqa: E402
import inflight_floor  # noqa: E402
import kv_subscriber  # noqa: E402
import libzmq_dealer  # noqa: E402
from gpu_check import CHUNK, OP, Server, Worker, key, log, pack, raw_copy_gbps, script_args, unpack  # noqa: E402


def latency_totals(server):
    """(seconds, count) of the server's request-latency timer per op, summed over its series."""
    totals = {"store": [0.0, 0.0], "retrieve": [0.0, 0.0]}
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if not line.startswith("lmcache_mp_request_latency_seconds_"):
                continue
            name = line.split("{", 1)[0]
            low = line.lower()
            for op in totals:
                if f'"{op}"' in low:
                    if name.endswith("_sum"):
                        totals[op][0] += float(line.rsplit(" ", 1)[1])
                    elif name.endswith("_count"):
                        totals[op][1] += float(line.rsplit(" ", 1)[1])
    return totals


def submit_cpu(server):
    """The server's per-phase seconds of its handlers (/status transfer_handler_cpu: plan, objects, copy) and of the
    GPU submits within the copy (cuda.submit_cpu: open, enqueue, export), per op; under "memo", the decoder's and the hash
    chain's reuse counters (token_ids_reused, chunk_hashes_reused), from the same /status read."""
    status = server.status()
    phases = {"memo": {k: status.get(k, 0) for k in ("token_ids_reused", "chunk_hashes_reused")}}
    for op in ("store", "retrieve"):
        handler = status.get("transfer_handler_cpu", {}).get(op, {})
        submit = status.get("cuda", {}).get("submit_cpu", {}).get(op, {})
        path = status.get("request_path_cpu", {}).get(op, {})
        phases[op] = {"requests": handler.get("requests", 0), "submits": submit.get("submits", 0),
                      "path_requests": path.get("requests", 0),
                      **{k: v for k, v in handler.items() if k.endswith("_seconds")},
                      **{k: v for k, v in submit.items() if k.endswith("_seconds")},
                      **{k: v for k, v in path.items() if k.endswith("_seconds")}}
    return phases


# --events timeline (issue 47): the worker's events are LMCache's isolated-IPC timeline semaphores (81 bytes), made and
# waited for as its TimelineSemaphoreEventIPCBackend does (isolated_ipc_check.Timeline); empty: CUDA IPC events
TIMELINE = []


def request_frames(worker, op, tokens, blocks, rid, event=bytes(64)):
    """The frames one() sends: [uid, op, key, instance, block lists, event(, skip)], as the stock client frames them.
    blocks: one list of block ids (one kernel group) or one list per group (a hybrid worker)."""
    lists = [blocks] if blocks and isinstance(blocks[0], int) else blocks
    model = getattr(worker, "model", None)
    k = hybrid_check.hkey(model, tokens, 0, len(tokens), rid) if model else key(tokens, 0, len(tokens), rid)
    payloads = [k, worker.instance, [list(ids) for ids in lists], event] + ([0] if op == "retrieve" else [])
    uid = worker.client.uid
    worker.client.uid += 1
    return [pack(uid), pack(OP[op])] + [pack(p) for p in payloads]


def utc_now():
    """The wall clock, as nvidia-smi's samples print it (UTC, milliseconds)."""
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"


def one(worker, op, tokens, blocks, rid):
    """Seconds from sending one prebuilt request to its event being complete in the worker."""
    if TIMELINE:
        event = TIMELINE[0].record(torch.cuda.current_stream().cuda_stream)
    else:
        event = bytes(64) if os.environ.get("LMCACHE_BENCH_NO_WORKER_EVENT") == "1" else worker.event()
    frames = request_frames(worker, op, tokens, blocks, rid, event)
    torch.cuda.synchronize()
    t0_ns = time.monotonic_ns()  # the clock of the server's System.nanoTime: its request timeline lines up with these
    t0 = time.perf_counter()
    worker.client.dealer.send(frames)
    sent = time.perf_counter()
    reply = worker.client.dealer.recv()
    replied = time.perf_counter()
    replied_ns = time.monotonic_ns()
    handle, ok = unpack(reply[2])
    if TIMELINE:
        waiting = TIMELINE[0].import_event(bytes(handle))
        opened = time.perf_counter()
        TIMELINE[0].synchronize(waiting)
    else:
        ours = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(handle))
        opened = time.perf_counter()
        ours.synchronize()
    done = time.perf_counter()
    assert ok, f"{op} of {len(tokens)} tokens failed"
    # where the worker's clock went: sending, until the reply is in, opening the server's event, until it completes
    return {"total": done - t0, "send": sent - t0, "reply": replied - sent, "open": opened - replied, "wait": done - opened,
            "sent_ns": t0_ns, "replied_ns": replied_ns}


def raw_wall_ms(nbytes, repeats=30, idle_s=0.005):
    """The worker copying the same bytes itself, timed as one() times a request: the CPU clock from issuing the copy
    (after an idle gap like the one before each request) to its event complete in this process. Best and median, ms.
    The GPU-event raw of raw_copy_gbps leaves out what any copy a worker waits for costs around the link: the launch,
    the idle GPU starting, noticing completion."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out = {}
    for name, fn in (("d2h", lambda: host.copy_(dev, non_blocking=True)), ("h2d", lambda: dev.copy_(host, non_blocking=True))):
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            time.sleep(idle_s)
            done = torch.cuda.Event()
            t0 = time.perf_counter()
            fn()
            done.record()
            done.synchronize()
            times.append(time.perf_counter() - t0)
        times.sort()
        out[f"wall_{name}_ms_best"] = times[0] * 1e3
        out[f"wall_{name}_ms_median"] = times[len(times) // 2] * 1e3
    return out


def messaging_floor(server, repeats=200, chunk=CHUNK):
    """The worker's own share of a request that does no copy, measured like one(): a PING's round trip (frames out,
    reply in, this process's ZMTP client and msgpack) and opening an already complete server event and waiting on it
    (what the worker does with every STORE/RETRIEVE reply). Best and median, in microseconds: the floor under the
    server path that no server change removes (the real client's pyzmq is faster than this pure-Python ZMTP)."""
    per_chunk = chunk // 16
    w = Worker(server, "nhd", layers=1, blocks=per_chunk, seed=3)
    assert w.register() is None
    pings, opens, stored, fresh = [], [], [], []
    tokens = list(range(chunk))
    handle, ok = w.client.call("store", key(tokens, 0, chunk, "floor"), w.instance, [list(range(per_chunk))], w.event())
    torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(handle)).synchronize()
    for i in range(repeats):
        t0 = time.perf_counter()
        w.client.call("ping", w.instance)
        pings.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(handle)).synchronize()
        opens.append(time.perf_counter() - t0)
        # a STORE of a chunk stored already: no copy, the reply carries a new recorded event, as every transfer's does
        event = w.event()
        t0 = time.perf_counter()
        again, _ = w.client.call("store", key(tokens, 0, chunk, f"floor{i}"), w.instance, [list(range(per_chunk))], event)
        stored.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(again)).synchronize()
        fresh.append(time.perf_counter() - t0)
    w.client.call("unregister", w.instance)
    server.clear()
    out = {}
    for name, values in (("ping_round_trip", pings), ("event_open_and_wait", opens),
                         ("stored_already_round_trip", stored), ("fresh_event_open_and_wait", fresh)):
        values.sort()
        out[f"{name}_us_best"] = 1e6 * values[0]
        out[f"{name}_us_median"] = 1e6 * values[len(values) // 2]
    log(f"messaging floor: {json.dumps(out)}")
    return out


def warm_up(server, rounds, chunk=CHUNK):
    """A server that has served for a while: its request path compiled by the JIT's top tier (thousands of
    requests; a fresh JVM interprets the first ones), as in production. Rounds of 1-chunk STORE, LOOKUP, RETRIEVE
    of Llama-8B-shaped blocks of 16 tokens (chunk: the server's --chunk-size)."""
    if rounds <= 0:
        return
    per_chunk = chunk // 16
    w = Worker(server, "nhd", layers=32, blocks=3 * per_chunk, block=16, heads=8, head=128, seed=7)
    assert w.register() is None
    rng = random.Random(7)
    t0 = time.perf_counter()
    for i in range(rounds):
        tokens = [rng.randrange(150000) for _ in range(chunk)]
        one(w, "store", tokens, list(range(per_chunk)), f"w{i}")
        deadline = time.time() + 5
        while w.lookup(tokens, chunk, f"w{i}-l{time.time()}") != 1:
            assert time.time() < deadline
        one(w, "retrieve", tokens, list(range(per_chunk, 2 * per_chunk)), f"w{i}")
        if i % 50 == 49:
            server.clear()
    server.clear()
    w.client.call("unregister", w.instance)
    log(f"warm-up: {rounds} rounds in {time.perf_counter() - t0:.1f} s")


def plain_worker(server, chunks, scatter, rng, seed):
    """Llama-8B shapes: 32 layers, 8 KV heads x 128, bf16, block 16 (32 MiB a chunk); (worker, src, dst, bytes, lookup)."""
    block = 16
    needed = chunks * (CHUNK // block)
    w = Worker(server, "nhd", layers=32, blocks=3 * needed, block=block, heads=8, head=128, seed=seed)
    assert w.register() is None
    ids = list(range(3 * needed))
    if scatter:
        rng.shuffle(ids)
    nbytes = 2 * 32 * needed * block * 8 * 128 * 2
    return w, ids[:needed], ids[needed:2 * needed], {"store": nbytes, "retrieve": nbytes}, w.lookup


def gemma_worker(server, chunks, scatter, rng, seed, layers=8):
    """hybrid_check.bench_hybrid's Gemma-like layout (two kernel groups, two object groups, a 4-chunk window on the
    sliding group); block 0 (vLLM's null block) never used."""
    per_chunk = (CHUNK // 32, CHUNK // 16)
    needed = [chunks * p for p in per_chunk]
    sliding, full = tuple(range(0, 2 * layers, 2)), tuple(range(1, 2 * layers, 2))
    groups = [(sliding, (2, 3 * needed[0] + 1, 32, 4, 256), 1, 32, 4 * CHUNK, False),
              (full, (2, 3 * needed[1] + 1, 16, 4, 512), 1, 16, -1, False)]
    w = hybrid_check.HybridWorker(gpu_check, server, f"inflight/gemma-like-{seed}", groups, seed=seed)
    assert w.register() is None
    src, dst = [], []
    for n in needed:
        ids = list(range(1, 3 * n + 1))
        if scatter:
            rng.shuffle(ids)
        src.append(ids[:n])
        dst.append(ids[n:2 * n])
    # the window: a request of more than 4 chunks stores the sliding group's last 4 only (null ids before them)
    if chunks > 4:
        keep = 4 * per_chunk[0]
        src[0] = [hybrid_check.NULL] * (needed[0] - keep) + src[0][-keep:]
        dst[0] = [hybrid_check.NULL] * (needed[0] - keep) + dst[0][-keep:]
    stored = [len([b for b in src[0] if b != hybrid_check.NULL]), needed[1]]
    request_bytes = 2 * 32 * 4 * 256 * 2 * (len(sliding) * stored[0]) + 2 * 16 * 4 * 512 * 2 * (len(full) * stored[1])
    return w, src, dst, {"store": request_bytes, "retrieve": request_bytes}, w.lookup


QWEN_CHUNK = 544  # the unified block size N of Qwen3.5-0.8B: the server runs with --chunk-size N (hybrid-and-l2.md §A.3.5)


def qwen_layout(chunks, scatter, rng, mamba_layers=18, attention_layers=6):
    """hybrid_check.qwen_like's layout, at a model's depth: Mamba/GDN state pages re-viewed as [nb, 2, N, 1, 128] (one
    block id per chunk, recurrent, window N) and sub-paged full attention [nb, 2, N, 1, 256], N = 544, bf16; the layers
    interleaved 3:1 linear to full attention as in Qwen3-Next / Qwen3.5. Block 0 (vLLM's null block) never used.
    Returns (groups as HybridWorker takes them, src lists, dst lists, bytes per op); no torch, so a CPU test checks it.

    STORE: vLLM's align mode with --max-num-batched-tokens in [N, 2N) snapshots the state at every chunk boundary, so
    every chunk carries a real Mamba id and the server stores one snapshot per chunk. RETRIEVE: a recurrent group restores
    from its last chunk's snapshot only (the server reads [L-1, L) of a window of one chunk), so the worker sends null ids
    before it (as hybrid_check does) and the request moves 1 snapshot + every attention chunk."""
    n = QWEN_CHUNK
    total = mamba_layers + attention_layers
    full = tuple(i for i in range(total) if i % 4 == 3)[:attention_layers]
    mamba = tuple(i for i in range(total) if i not in full)
    blocks = 3 * chunks + 1
    groups = [(mamba, (blocks, 2, n, 1, 128), 0, n, n, True), (full, (blocks, 2, n, 1, 256), 0, n, -1, False)]
    src, dst = [], []
    for _ in groups:
        ids = list(range(1, blocks))
        if scatter:
            rng.shuffle(ids)
        src.append(ids[:chunks])
        dst.append(ids[chunks:2 * chunks])
    dst[0] = [hybrid_check.NULL] * (chunks - 1) + dst[0][-1:]
    state, attention = 2 * n * 128 * 2, 2 * n * 256 * 2  # one layer's page of one block id
    nbytes = {"store": chunks * (len(mamba) * state + len(full) * attention),
              "retrieve": len(mamba) * state + chunks * len(full) * attention}
    return groups, src, dst, nbytes


def qwen_worker(server, chunks, scatter, rng, seed):
    """qwen_layout's worker, registered (CUDA tensors)."""
    groups, src, dst, nbytes = qwen_layout(chunks, scatter, rng)
    w = hybrid_check.HybridWorker(gpu_check, server, f"inflight/qwen-like-{seed}", groups, seed=seed)
    assert w.register() is None
    return w, src, dst, nbytes, w.lookup


def deepseek_worker(server, chunks, scatter, rng, seed):
    """deepseek_check.bench_layout (issue 48): bench.ldqa's deepseek-v4-like model at depth 43, compressed groups, a
    float32 indexer and a sub-chunk window that moves the window group's last block only."""
    return deepseek_check.bench_worker(gpu_check, server, chunks, scatter, rng, seed)


MODELS = {"plain": (plain_worker, CHUNK), "gemma-like": (gemma_worker, CHUNK), "qwen-like": (qwen_worker, QWEN_CHUNK),
          "deepseek-v4-like": (deepseek_worker, CHUNK)}


class Subscribers:
    """The KV-event subscribers of a sweep (issue 28): kv_subscriber.ChildPool, a child process holding up to the largest
    count of --subscribers, each a DEALER on its own thread acking every batch; attached for a model only while a count
    above 0 is being measured."""

    def __init__(self, pool):
        self.pool, self.attached = pool, 0

    def set(self, count, model):
        if count == self.attached:
            return
        if self.pool is None:
            raise RuntimeError("subscribers asked for with no pool")
        if count:
            self.pool.attach(model, count)  # returns once every stream's first batch came: they are live
        else:
            self.pool.detach()  # cancelled, each final reply in: no stream work left over for the next requests
        self.attached = count


def request_figures(times, splits):
    """Best and median ms of one op's counted requests, and the worker's split of the best one."""
    best = min(times)
    out = {"ms_best": best * 1e3, "ms_median": sorted(times)[len(times) // 2] * 1e3, "requests": len(times)}
    fastest = min(splits, key=lambda t: t["total"])
    for part in ("send", "reply", "open", "wait"):
        out[f"worker_{part}_us_best_request"] = 1e6 * fastest[part]
        out[f"worker_{part}_us_median"] = 1e6 * sorted(t[part] for t in splits)[len(splits) // 2]
    return out


def subscriber_deltas(before, after):
    """Per subscriber, what it received during the cell (the pool's totals after minus before)."""
    keys = ("records", "stored", "removed", "batches", "lost", "pings")
    return [{"instance_id": a["instance_id"], **{k: a[k] - b[k] for k in keys}, "last_seq": a["last_seq"], "errors": a["errors"]}
            for b, a in zip(before, after)]


def wait_status(server, done, what, timeout_s=120):
    """Until done(/status) holds; the seconds waited. Raises when `what` has not ended in timeout_s."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if done(server.status()):
            return time.perf_counter() - t0
        time.sleep(0.05)
    raise RuntimeError("%s did not end in %d s" % (what, timeout_s))


def wait_pinned(server):
    """Until the pool's background pinning (started by the first REGISTER) has finished: a fresh server's first requests
    then run without the pin sweep beside them (the A/B of --fresh-after-pinned). Returns the seconds waited."""
    return wait_status(server, lambda s: s["cuda"]["pool_pinning"].get("state") == "done", "the pool's pinning")


def wait_prepared(server):
    """Until the L1 pool's preparation has ended (every region prefaulted and pinned): a warm server is one whose pool is
    ready, and the preparation may outlast the warm-up (a large pool). Returns the seconds waited."""
    def prepared(status):
        prep = gpu_check.pool_preparation(status)
        return prep["regions_prepared"] >= prep["regions_total"]
    return wait_status(server, prepared, "the pool's preparation")


FRESH_RATIO_REQUESTS = 20


def sweep(server, chunks, scatter, repeats, seed, model="plain", count_first=False, floor=None, counts=(0,), subscribers=None,
          after_pinned=False, lookup_first=False, keep_objects=False):
    """One cell: `repeats` rounds of STORE, LOOKUP until committed, RETRIEVE into other blocks; the first round is not
    counted unless count_first (a fresh server's first requests are what it measures).

    counts: KV-event subscriber counts; every round runs the STORE/LOOKUP/RETRIEVE once per count, in the order given on
    even rounds and reversed on odd ones (0,8 | 8,0 | 0,8 ...: both share the machine's state, and the subscribers
    attach and detach once every two rounds), each with that many subscribers attached (`subscribers`: a Subscribers).
    The row's plain figures are the first count's; row["subscribers"] has every count's and the ratios.
    lookup_first: before each STORE, one LOOKUP of its tokens (a miss, not timed), as vLLM's scheduler asks about every
    new request (maybe_submit_lookup_request) before its worker STOREs what the forward pass computed.
    keep_objects: the counted rounds leave their objects in L1 (no /cache/clear after each), so every STORE is copied into
    pool memory no earlier request used, as while a production pool fills, instead of the same slabs again."""
    rng = random.Random(seed)
    make, chunk = MODELS[model]
    w, src, dst, nbytes, lookup = make(server, chunks, scatter, rng, seed)
    if after_pinned:
        log(f"fresh server: waited {wait_pinned(server):.2f} s for the pool's pinning before its first request")
    counts = list(counts)
    # per count: request times, and the handler time from the server's totals read around every request pair (a /metrics
    # read before each STORE and after each RETRIEVE, outside the timed requests)
    split = len(counts) > 1 or subscribers is not None
    times = {c: {"store": [], "retrieve": []} for c in counts}
    splits = {c: {"store": [], "retrieve": []} for c in counts}
    handler = {c: {op: [0.0, 0.0] for op in ("store", "retrieve")} for c in counts}
    first = 0 if count_first else 1
    before = phases_before = gpu_before = subs_before = None  # set at the first counted round
    lookups = 0
    for rep in range(repeats + first):
        if rep == first:  # the first round warms the JIT and the driver: counted from the second on (unless count_first)
            before = latency_totals(server)
            phases_before = submit_cpu(server)
            gpu_before = {op: server.gpu_copy(op) for op in ("store", "retrieve")}
            subs_before = subscribers.pool.stats() if subscribers and subscribers.pool else None
        for count in (counts if rep % 2 == 0 else counts[::-1]):
            if subscribers is not None:
                subscribers.set(count, getattr(w, "model", gpu_check.MODEL))
            tokens = [rng.randrange(150000) for _ in range(chunks * chunk)]
            rid = f"f{seed}-{rep}-{count}"
            seg = latency_totals(server) if split else None
            if lookup_first:
                assert lookup(tokens, len(tokens), f"{rid}-first") == 0, "a new prompt's LOOKUP hit"
            s = one(w, "store", tokens, src, rid)
            # as vLLM's scheduler does before a RETRIEVE: LOOKUP until the stored chunks are committed (the
            # server commits a STORE when its copy completes, moments after the worker's event fired)
            deadline = time.time() + 5
            while lookup(tokens, len(tokens), f"{rid}-l{time.time()}") != chunks:  # QUERY counts chunks
                assert time.time() < deadline, "the stored chunks never became visible to LOOKUP"
                lookups += rep >= first
            lookups += (rep >= first) * (1 + lookup_first)
            r = one(w, "retrieve", tokens, dst, rid)
            if rep >= first:
                for op, t in (("store", s), ("retrieve", r)):
                    times[count][op].append(t["total"])
                    splits[count][op].append(t)
                if split:
                    now = latency_totals(server)
                    for op in ("store", "retrieve"):
                        handler[count][op][0] += now[op][0] - seg[op][0]
                        handler[count][op][1] += now[op][1] - seg[op][1]
            if not (keep_objects and rep >= first):
                server.clear()
    subs_after = subscribers.pool.stats() if subs_before is not None else None
    if subscribers is not None:
        subscribers.set(0, None)
    after = latency_totals(server)
    phases_after = submit_cpu(server)
    # token ids copied from a recently decoded key (the decoder's memo) over the counted rounds, per id sent: every key but
    # each round's first LOOKUP (lookup_first) or STORE (without) can be copied, so 1.0 is all of them
    reused, hashes_reused = (phases_after["memo"][k] - phases_before["memo"][k] for k in ("token_ids_reused", "chunk_hashes_reused"))
    keys_sent = (lookups + 2 * repeats * len(counts)) * chunks * chunk
    first_keys = repeats * len(counts) * chunks * chunk
    # each op's raw baseline of its own bytes (STORE: device to host, RETRIEVE: host to device), measured once when equal
    if nbytes["store"] == nbytes["retrieve"]:
        raw = raw_copy_gbps(nbytes["store"])
        raw.update(raw_wall_ms(nbytes["store"]))
    else:
        raw = {"d2h": raw_copy_gbps(nbytes["store"])["d2h"], "h2d": raw_copy_gbps(nbytes["retrieve"])["h2d"]}
        raw.update({k: v for k, v in raw_wall_ms(nbytes["store"]).items() if "d2h" in k})
        raw.update({k: v for k, v in raw_wall_ms(nbytes["retrieve"]).items() if "h2d" in k})
    row = {"chunks": chunks, "blocks": "scattered" if scatter else "consecutive", "model": model, "chunk_tokens": chunk,
           "lookup_first": lookup_first, "keep_objects": keep_objects,
           "request_bytes": nbytes["store"], "store_bytes": nbytes["store"], "retrieve_bytes": nbytes["retrieve"],
           "fresh_server_first_requests": repeats if count_first else None,
           "token_ids_reused": reused / (keys_sent - first_keys) if keys_sent > first_keys else None,
           # chunk hashes copied from a remembered chain per chunk of the counted STOREs and RETRIEVEs (LOOKUPs reuse too)
           "chunk_hashes_reused_per_transfer_chunk": hashes_reused / (2 * chunks * repeats * len(counts)),
           "raw_d2h_gbps": raw["d2h"], "raw_h2d_gbps": raw["h2d"],
           **{k: v for k, v in raw.items() if k.startswith("wall_")}}
    base = counts[0]
    # each op's handler p50 over this cell's last requests (issue 30: a fresh server's first 100 STOREs against warm ones),
    # from the server's ring of recent request times (/status request_path_cpu.<op>.recent_us), read once, after them:
    # reads between requests idle the transfer threads into parking and slow what they measure
    status = server.status()
    for op in ("store", "retrieve"):
        recent = status.get("request_path_cpu", {}).get(op, {}).get("recent_us", []) if len(counts) == 1 else []
        samples = recent[-min(repeats, 100):] if recent else []
        row[f"{op}_handler_p50_us"] = statistics.median(samples) if samples else None
        row[f"{op}_handler_samples"] = len(samples)
        if count_first:  # a fresh server's handler time per request, in order: how fast its first ones catch up
            row[f"{op}_handler_recent_us"] = samples
    # a fresh server's request figures are its first FRESH_RATIO_REQUESTS (the acceptance's "first 20 requests"), its
    # handler p50 of all it ran (run 100 for "the first 100 STOREs")
    first_n = FRESH_RATIO_REQUESTS if count_first else None
    # where the counted requests' wall time went: the server's timelines lined up with the worker's clock
    for op in ("store", "retrieve"):
        timeline = status.get("request_path_cpu", {}).get(op, {}).get("recent_timeline_ns", []) if len(counts) == 1 else []
        row.update(inflight_floor.path_split(op, splits[base][op][:first_n], timeline))
    for op, raw_rate in (("store", raw["d2h"]), ("retrieve", raw["h2d"])):
        figures = request_figures(times[base][op][:first_n], splits[base][op][:first_n])
        best = figures["ms_best"] / 1e3
        row[f"{op}_gbps"] = nbytes[op] / best / 1e9
        row[f"{op}_vs_raw"] = row[f"{op}_gbps"] / raw_rate
        # against the worker's own copy timed as a request is: issued after an idle gap, CPU clock to its event
        row[f"{op}_vs_raw_wall"] = raw[f"wall_{'d2h' if op == 'store' else 'h2d'}_ms_best"] / (best * 1e3)
        # the worker's side of the best request, and each part's median over the requests
        row.update({f"{op}_{k}": v for k, v in figures.items() if k != "requests"})
        # the server's GPU time per request (its DMA stream from the first copy to the last): what the pipeline's
        # fill and drain add to the raw copy, apart from the CPU before and the worker's messaging around it
        gpu_seconds, _ = (a - b for a, b in zip(server.gpu_copy(op), gpu_before[op]))
        row[f"{op}_gpu_ms_mean"] = 1e3 * gpu_seconds / (repeats * len(counts))
        seconds, count = (a - b for a, b in zip(after[op], before[op]))
        row[f"{op}_handler_us"] = 1e6 * seconds / count if count else None
        a, b = phases_after.get(op, {}), phases_before.get(op, {})
        for phase in ("queue", "decode", "handle", "reply", "send", "plan", "objects", "copy", "open", "enqueue", "export",
                      "first_copy"):
            count_key = ("requests" if phase in ("plan", "objects", "copy") else
                         "path_requests" if phase in ("queue", "decode", "handle", "reply", "send") else "submits")
            count_ = a.get(count_key, 0) - b.get(count_key, 0)
            key_ = f"{phase}_seconds"
            row[f"{op}_{phase}_us"] = 1e6 * (a.get(key_, 0) - b.get(key_, 0)) / count_ if count_ else None
        # the floor of this cell: the raw copy plus one bare round trip of this op's own frame sizes
        trip = floor.round_trips(request_frames(w, op, tokens, src if op == "store" else dst, rid)) if floor else None
        inflight_floor.floor_fields(row, op, raw["d2h" if op == "store" else "h2d"], trip)
    if split:
        per_count = {}
        for c in counts:
            per_count[c] = {}
            for op in ("store", "retrieve"):
                figures = request_figures(times[c][op], splits[c][op])
                per_count[c].update({f"{op}_{k}": v for k, v in figures.items() if k in ("ms_best", "ms_median", "requests")})
                seconds, n = handler[c][op]
                per_count[c][f"{op}_handler_us"] = 1e6 * seconds / n if n else None
        if subs_after is not None:
            deltas = subscriber_deltas(subs_before, subs_after)
            for c in counts:
                per_count[c]["per_subscriber"] = deltas[:c] if c else []
        inflight_floor.subscriber_fields(row, per_count, base)
    w.client.call("unregister", w.instance)
    del w
    torch.cuda.empty_cache()
    return row


def main():
    p = script_args()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--chunks", default="1,4,16,64")
    p.add_argument("--pattern", default="consecutive,scattered")
    p.add_argument("--warmup", type=int, default=1000, help="rounds of 1-chunk STORE/LOOKUP/RETRIEVE before measuring")
    p.add_argument("--fresh-requests", type=int, default=0,
                   help="per cell, the first N requests of a freshly started server, next to the same cell warm (0: none)")
    p.add_argument("--aot-cache", default="train",
                   help="train (default): train an ahead-of-time cache for this runtime and jars first, into --out, and start"
                        " every server with it, as bin/lmcache-server and the image do; none: start without one; or a cache file")
    p.add_argument("--fresh-after-pinned", action="store_true",
                   help="a fresh server's first requests wait until the pool's background pinning is done (an A/B: what the"
                        " pin sweep beside them costs)")
    p.add_argument("--scattered", action="store_true", help="measure scattered blocks too, whatever --pattern says")
    p.add_argument("--pool-gb", type=float, default=12,
                   help="every server's --l1-size-gb (12 GiB: ~2.4 s of prefault at 4 KiB pages on the H100 hosts)")
    p.add_argument("--fresh-connect", choices=("ready", "prepared"), default="ready",
                   help="when a fresh server's worker connects: ready (default, the acceptance's 'at once': GET /healthcheck"
                        " answers 200, and the rest of the pool is prefaulted beside the first requests) or prepared (every"
                        " region prefaulted first, as every fresh sweep did before 2026-12-07's fifteenth session)")
    p.add_argument("--cells-reversed", action="store_true",
                   help="run the cells in reverse order (with --chunks 1: scattered before consecutive): the first cell's fresh"
                        " server is the sweep's first, on a host that may have just booted")
    p.add_argument("--model", choices=tuple(MODELS), default="plain",
                   help="plain: Llama-8B shapes; gemma-like: hybrid_check's two-group hybrid layout; qwen-like: Mamba state pages"
                        " and full attention at --chunk-size 544 (qwen_worker)")
    p.add_argument("--subscribers", default="0",
                   help="KV-event subscriber counts, e.g. 0,8: every round of a cell runs once per count (alternating order),"
                        " with that many subscribe_kv_events streams attached, acking every batch (kv_subscriber.py)")
    p.add_argument("--fresh-idle-s", type=float, default=0,
                   help="seconds a fresh server idles after ready before its worker registers (vLLM loads its model meanwhile)")
    p.add_argument("--lookup-first", action="store_true",
                   help="one LOOKUP of each STORE's tokens before it (a miss, untimed), as vLLM's scheduler sends for a new request")
    p.add_argument("--also-keep-objects", action="store_true",
                   help="after each warm cell, the same cell again with its objects kept in L1 (each STORE into pool memory no"
                        " earlier request used; its row's blocks say 'kept')")
    p.add_argument("--no-floor", action="store_true", help="skip the echo floor (no libzmq staged)")
    p.add_argument("--events", choices=("cuda", "timeline"), default="cuda",
                   help="the worker's event format: CUDA IPC events (64 bytes) or isolated IPC's timeline semaphores (81 bytes)")
    args = p.parse_args()
    counts = [int(c) for c in args.subscribers.split(",")]
    if any(c < 0 for c in counts) or len(set(counts)) != len(counts):
        p.error("--subscribers: distinct counts >= 0")
    os.makedirs(args.out, exist_ok=True)
    if args.aot_cache == "train":
        log(f"trained the ahead-of-time cache in {gpu_check.train_aot_cache(args.java, args.classpath, os.path.join(args.out, 'server.aot')):.1f} s")
    elif args.aot_cache != "none":
        os.environ["LMCACHE_AOT_CACHE"] = args.aot_cache
    torch.cuda.init()
    if args.events == "timeline":
        import isolated_ipc_check
        torch.zeros(1, device="cuda")
        TIMELINE.append(isolated_ipc_check.Timeline())
    patterns = args.pattern.split(",")
    if args.scattered and "scattered" not in patterns:
        patterns.append("scattered")
    cells = [(int(c), pat == "scattered") for c in args.chunks.split(",") for pat in patterns]
    if args.cells_reversed:  # the last cell first: tells a cell's layout from its place in the sweep (the first fresh server)
        cells.reverse()
    echo = None if args.no_floor else inflight_floor.EchoFloor()
    chunk = MODELS[args.model][1]
    extra = ("--max-gpu-workers", "2") + (("--chunk-size", str(chunk)) if chunk != CHUNK else ())
    fresh = {}
    rows = []
    aot_used = []  # per fresh server: whether its JVM mapped the ahead-of-time cache (/status aot_cache.used)
    try:
        # a fresh server per cell first (its own JVM: what a pod roll-out gives), then one server warmed up for all cells
        for chunks, scatter in cells if args.fresh_requests > 0 else []:
            fresh_server = Server(args.java, args.classpath, args.out, args.pool_gb, extra=extra, until=args.fresh_connect)
            aot_used.append(fresh_server.status().get("aot_cache", {}).get("used"))
            if args.fresh_idle_s > 0:  # as a pod's vLLM loads its model before its workers REGISTER
                time.sleep(args.fresh_idle_s)
            try:
                began = utc_now()
                fresh[(chunks, scatter)] = sweep(fresh_server, chunks, scatter, args.fresh_requests, 100 + chunks, args.model,
                                                 count_first=True, floor=echo, after_pinned=args.fresh_after_pinned,
                                                 lookup_first=args.lookup_first)
                # how much of the pool was still to prefault when the worker connected (0 with --fresh-connect prepared)
                fresh[(chunks, scatter)]["regions_left_at_connect"] = fresh_server.regions_at_ready[1] - fresh_server.regions_at_ready[0]
                # wall-clock bounds of the cell's requests: run-on-device.sh fresh samples the GPU's clocks beside them
                log(f"fresh cell {chunks} {'scattered' if scatter else 'consecutive'}: {began} to {utc_now()} UTC,"
                    f" {fresh[(chunks, scatter)]['regions_left_at_connect']} of {fresh_server.regions_at_ready[1]} regions left to"
                    " prefault at connect")
                log("fresh: " + json.dumps(fresh[(chunks, scatter)]))
                log("fresh server's warm-ups: " + json.dumps(fresh_server.status().get("jit_warmup")))
            finally:
                fresh_server.stop()
        server = Server(args.java, args.classpath, args.out, args.pool_gb, extra=extra)
        pool = None
        try:
            warm_up(server, args.warmup, chunk)
            log(f"warm server: waited {wait_prepared(server):.2f} s for the pool's preparation after its warm-up")
            floor = messaging_floor(server, chunk=chunk)
            if max(counts) > 0:
                events = server.status().get("kv_events", {})
                if not events.get("enabled"):
                    raise RuntimeError("--subscribers needs the server's KV-event log (--kv-event-log-size > 0, the default):"
                                       f" /status kv_events = {events}")
                # from the log's end: the warm-up's records are not replayed into the first counted requests
                pool = kv_subscriber.ChildPool(server.port, max(counts), cursor=events["next_seq"] - 1, seed=28)
                subscriber_transport = pool.transport
            subscribers = Subscribers(pool) if pool else None
            for chunks, scatter in cells:
                row = sweep(server, chunks, scatter, args.repeats, 100 + chunks, args.model, floor=echo, counts=counts,
                            subscribers=subscribers, lookup_first=args.lookup_first)
                if (chunks, scatter) in fresh:
                    inflight_floor.fresh_fields(row, fresh[(chunks, scatter)])
                log(json.dumps(row))
                rows.append(row)
                if args.also_keep_objects:
                    kept = sweep(server, chunks, scatter, args.repeats, 200 + chunks, args.model, floor=echo,
                                 lookup_first=args.lookup_first, keep_objects=True)
                    kept["blocks"] += " kept"
                    log(json.dumps(kept))
                    rows.append(kept)
                    server.clear()
            if pool:
                subscriber_totals = pool.stats()
                log_status = server.status().get("kv_events")  # log depth, next seq, lost markers, subscribers now
        finally:
            if pool:
                pool.close()
            server.stop()
    finally:
        if echo:
            echo.close()
    props = torch.cuda.get_device_properties(0)
    report = {"machine": {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                          "java_opts": os.environ.get("LMCACHE_JAVA_OPTS", "")},
              "transport": libzmq_dealer.transport(), "command": " ".join(sys.argv), "messaging_floor": floor, "model": args.model,
              "fresh_requests": args.fresh_requests, "subscriber_counts": counts, "rows": rows,
              "aot_cache": {"file": os.environ.get("LMCACHE_AOT_CACHE", ""), "used_by_fresh_servers": aot_used}}
    if max(counts) > 0:
        report["subscriber_transport"] = subscriber_transport
        report["subscriber_totals"] = subscriber_totals  # per subscriber over the whole run
        report["kv_events_status"] = log_status
    with open(os.path.join(args.out, f"inflight-{os.environ.get('LMCACHE_BENCH_TAG', 'run')}.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"{'chunks':>6} {'blocks':>11} {'store/raw':>9} {'retr/raw':>9} {'st/wall':>7} {'rt/wall':>7} {'store ms':>9} {'retr ms':>9}"
          f" {'st hdl us':>9} {'rt hdl us':>9}"
          "  store queue/decode/[plan/obj/copy(open/enq/exp; first copy)]/reply/send us   retrieve (same)")
    for r in rows:
        def us(op, ph):
            return f"{r.get(f'{op}_{ph}_us') or 0:.0f}"
        phases = "  ".join(f"{us(op, 'queue')}/{us(op, 'decode')}/[{us(op, 'plan')}/{us(op, 'objects')}/{us(op, 'copy')}"
                           f"({us(op, 'open')}/{us(op, 'enqueue')}/{us(op, 'export')}; first {us(op, 'first_copy')})]/{us(op, 'reply')}/{us(op, 'send')}"
                           for op in ("store", "retrieve"))
        print(f"{r['chunks']:>6} {r['blocks']:>11} {r['store_vs_raw']:>9.2f} {r['retrieve_vs_raw']:>9.2f} {r['store_vs_raw_wall']:>7.2f}"
              f" {r['retrieve_vs_raw_wall']:>7.2f} {r['store_ms_best']:>9.2f}"
              f" {r['retrieve_ms_best']:>9.2f} {r['store_handler_us'] or 0:>9.0f} {r['retrieve_handler_us'] or 0:>9.0f}  {phases}")
    print()
    print(inflight_floor.table(rows))
    print(inflight_floor.path_table(rows))
    if len(counts) > 1 or max(counts) > 0:
        print()
        print(f"KV-event subscribers (ratio: request time with that many / with {counts[0]}, best/median; records per subscriber"
              " in the cell, min-max over the subscribers: each attach resumes from its cursor, so the records of the rounds"
              " without subscribers arrive too):")
        print(inflight_floor.subscriber_table(rows))
        if max(counts) > 0:
            print("per subscriber over the run: " + "; ".join(
                f"{s['records']} records ({s['stored']} stored, {s['removed']} removed) in {s['batches']} batches, {s['lost']} lost,"
                f" last seq {s['last_seq']}, {s['attaches']} attaches{', errors ' + str(s['errors']) if s['errors'] else ''}"
                for s in subscriber_totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
