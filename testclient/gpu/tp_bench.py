#!/usr/bin/env python3
"""Tensor parallelism N (2, 4, 8) on an N-GPU host: one server, N worker processes (one per GPU, the N ranks of one
TP=N engine as vLLM runs them: world_size N, worker_id = rank, the same prompts), every rank registering, then STOREing
and RETRIEVEing the same requests with 4 in flight, all ranks started together; aggregate GB/s = all ranks' bytes over
the longest rank's span. Raw = each process copies the same number of bytes between its GPU and pinned host memory at
the same moment (one contiguous torch copy per request), so all links and the host's memory are loaded as in the server
run. With --host-membw the report also carries the host's memory bandwidth (one big memcpy per rank-count of threads,
torch on the CPU), as issue 32 asks next to TP=8.

  python3 tp_bench.py --java J --classpath CP --out DIR [--tp 2|4|8] [--chunks 4] [--requests 24] [--repeats 3]
      [--max-gpu-workers N] [--host-membw]
"""

import json
import multiprocessing as mp
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import gpu_check as g  # noqa: E402

LAYERS, HEADS, HEAD, BLOCK = 32, 8, 128, 16


def tp_key(tokens, rid, rank, tp):
    return g.key(tokens, 0, len(tokens), rid, worker_id=rank, world_size=tp)


def lookup(w, tokens, rid, tp):
    """LOOKUP as the TP=N engine's scheduler sends it (world_size N: a chunk hits only when every rank stored it)."""
    assert w.client.call("lookup", g.key(tokens, 0, len(tokens), rid, worker_id=None, world_size=tp), 1) is None
    return w.client.call("query", rid)


def pipelined(w, rank, tp, reqs, op, depth=4):
    pending = []
    t0 = time.perf_counter()
    for tokens, blocks, rid in reqs:
        extra = [0] if op == "retrieve" else []
        pending.append(w.client.send(op, tp_key(tokens, rid, rank, tp), w.instance, [blocks], w.event(), *extra))
        if len(pending) >= depth:
            _, (handle, ok) = w.client.recv()
            assert ok, f"rank {rank}: {op} failed"
            g.Worker.wait(handle)
            pending.pop(0)
    while pending:
        _, (handle, ok) = w.client.recv()
        assert ok, f"rank {rank}: {op} failed"
        g.Worker.wait(handle)
        pending.pop(0)
    return time.perf_counter() - t0


def rank_main(rank, tp, port, http, shape, barrier, queue):
    chunks, requests, repeats = shape
    torch.cuda.set_device(rank)
    server = type("S", (), {"port": port, "http": http})()
    per_chunk = g.CHUNK // BLOCK
    needed = chunks * per_chunk
    w = g.Worker(server, "nhd", layers=LAYERS, blocks=4 * needed, block=BLOCK, heads=HEADS, head=HEAD, seed=50 + rank)
    reply = w.client.call("register", w.instance, w.wrappers(), g.MODEL, tp, "vllm", w.hints, [])
    assert reply is None, f"rank {rank}: register answered {reply!r}"
    request_bytes = 2 * LAYERS * needed * BLOCK * HEADS * HEAD * 2
    ids = list(range(4 * needed))
    random.Random(rank).shuffle(ids)  # scattered blocks, as in a long-running vLLM
    src, dst = ids[:needed], ids[2 * needed:3 * needed]
    out = {"rank": rank, "request_bytes": request_bytes, "store_s": [], "retrieve_s": [], "raw_d2h_s": [], "raw_h2d_s": []}
    host = torch.empty(request_bytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(request_bytes, dtype=torch.uint8, device="cuda")
    for rep in range(repeats + 1):
        rng = random.Random(1000 + rep)  # the same prompts on every rank, as TP ranks see them
        reqs = [([rng.randrange(150000) for _ in range(chunks * g.CHUNK)], src, f"tp-{rep}-{i}") for i in range(requests)]
        barrier.wait()
        s = pipelined(w, rank, tp, reqs, "store")
        barrier.wait()
        # every rank's STOREs must be committed before a RETRIEVE finds them (a TP hit needs every rank)
        deadline = time.time() + 10
        while lookup(w, reqs[-1][0], f"tp-{rep}-l{rank}-{time.time()}", tp) != chunks:
            assert time.time() < deadline, "stored chunks never became visible"
        barrier.wait()
        r = pipelined(w, rank, tp, [(t, dst, rid) for t, _, rid in reqs], "retrieve")
        for name, fn in (("raw_d2h_s", lambda: host.copy_(dev, non_blocking=True)), ("raw_h2d_s", lambda: dev.copy_(host, non_blocking=True))):
            torch.cuda.synchronize()
            barrier.wait()
            t0 = time.perf_counter()
            for _ in range(requests):
                fn()
            torch.cuda.synchronize()
            if rep > 0:
                out[name].append(time.perf_counter() - t0)
        if rep > 0:
            out["store_s"].append(s)
            out["retrieve_s"].append(r)
        barrier.wait()
        if rank == 0:
            g.Server.clear(server)
        barrier.wait()
    w.client.call("unregister", w.instance)
    queue.put(out)


def host_memory_gbps(threads, nbytes=1 << 30):
    """The host's memory bandwidth as a copy moves it (read + write counted once, as a memcpy's GB/s): `threads` torch CPU
    copies of nbytes each at once, best of 3."""
    torch.set_num_threads(threads)
    src = torch.empty(threads * nbytes, dtype=torch.uint8).fill_(1)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return src.numel() / best / 1e9


def main():
    p = g.script_args()
    p.add_argument("--tp", type=int, default=2, help="ranks (GPUs), one process each")
    p.add_argument("--host-membw", action="store_true", help="also measure the host's memory bandwidth (a CPU copy)")
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-gpu-workers", type=int, default=0, help="the server's transfer threads (0: 2 per rank; its default is 1)")
    args = p.parse_args()
    tp = args.tp
    workers = args.max_gpu_workers or 2 * tp
    os.makedirs(args.out, exist_ok=True)
    assert tp >= 2, "--tp must be 2 or more"
    assert torch.cuda.device_count() >= tp, f"needs {tp} GPUs (device kind nvidia-h200-x{tp}); this host has {torch.cuda.device_count()}"
    # the pool holds one repetition of every rank's requests below the eviction watermark (0.8), so no RETRIEVE misses
    request_bytes = 2 * LAYERS * args.chunks * (g.CHUNK // BLOCK) * BLOCK * HEADS * HEAD * 2
    pool_gb = max(24, -(-tp * args.requests * request_bytes * 10 // 7 // (1 << 30)))
    server = g.Server(args.java, args.classpath, args.out, pool_gb, extra=("--max-gpu-workers", str(workers)))
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(tp), ctx.Queue()
    procs = []
    try:
        shape = (args.chunks, args.requests, args.repeats)
        procs = [ctx.Process(target=rank_main, args=(r, tp, server.port, server.http, shape, barrier, queue)) for r in range(tp)]
        for proc in procs:
            proc.start()
        ranks = sorted((queue.get(timeout=600) for _ in procs), key=lambda o: o["rank"])
        for proc in procs:
            proc.join(60)
        status = server.status()
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()  # a rank stuck at a barrier after another failed
        server.stop()
    total = tp * args.requests * ranks[0]["request_bytes"]
    row = {"tp": tp, "chunks_per_request": args.chunks, "requests_per_rank": args.requests, "request_bytes": ranks[0]["request_bytes"],
           "max_gpu_workers": workers}
    for name in ("store_s", "retrieve_s", "raw_d2h_s", "raw_h2d_s"):
        # each repetition's aggregate is set by the slowest rank; best of the repetitions
        spans = [max(per_rank) for per_rank in zip(*(r[name] for r in ranks))]
        row[name.replace("_s", "_gbps")] = total / min(spans) / 1e9
        row[name.replace("_s", "_per_rank_gbps")] = [total / tp / min(r[name]) / 1e9 for r in ranks]
    row["store_vs_raw"] = row["store_gbps"] / row["raw_d2h_gbps"]
    row["retrieve_vs_raw"] = row["retrieve_gbps"] / row["raw_h2d_gbps"]
    if args.host_membw:
        row["host_memcpy_gbps"] = host_memory_gbps(min(os.cpu_count() or 1, 4 * tp))
    report = {"gpus": [torch.cuda.get_device_name(i) for i in range(tp)], "command": " ".join(sys.argv),
              "java_opts": os.environ.get("LMCACHE_JAVA_OPTS", ""), "row": row, "ranks": ranks,
              "device_memory": status["cuda"].get("device_memory"),
              "numa": g.pool_preparation(status).get("numa")}
    with open(os.path.join(args.out, f"tp{tp}-{os.environ.get('LMCACHE_BENCH_TAG', 'run')}.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
