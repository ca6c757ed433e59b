"""CPU STORE/RETRIEVE bandwidth: ``python -m lmcache_testclient bench-copy --endpoint URL ...``
(options in ``__main__.py``; bench/run-copy.sh starts a server and runs this).

A Llama-8B-shaped worker (32 layers, FlashAttention NHD ``[2, nb, 16, 8, 128]`` bf16, one shm
segment per layer: 32 KiB per block piece, 32 MiB per 256-token chunk object) registers, then
times STOREs of distinct 4-chunk prefixes (128 MiB each) and RETRIEVEs of them into other blocks,
end to end: request sent to reply received, as the worker waits for it. The baseline, measured in
the same run (before and after, to see drift), is one numpy copy of a contiguous 128 MiB shm
buffer into another. RETRIEVEs of the first and the last prefix are byte-compared with what was
stored: a fast wrong copy is worthless.

Writes its section of bench/RESULTS.md (between the same markers the Java benchmarks use).
"""

import os
import platform
import random
import statistics
import subprocess
import time

import numpy as np
import torch

from . import expect, protocol
from .messages import IPCCacheServerKey
from .shm_kv import LAYOUTS, Geometry, ShmKVCache, _create_segment, new_segment_name, unlink_segment
from .wire import Client
from .worker import new_instance_id, random_tokens

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHUNK_TOKENS = 256
CHUNKS_PER_REQUEST = 4
BLOCKS_PER_REQUEST = CHUNKS_PER_REQUEST * CHUNK_TOKENS // 16
GEOMETRY = dict(num_layers=32, num_heads=8, head_size=128, dtype=torch.bfloat16)


def main(args) -> int:
    rng = random.Random(args.seed)
    geometry = Geometry(num_blocks=args.blocks, **GEOMETRY)
    if 4 * BLOCKS_PER_REQUEST > args.blocks:
        print(f"ERROR --blocks must be at least {4 * BLOCKS_PER_REQUEST}")
        return 2
    print(f"# filling {args.blocks} blocks x 32 layers of bf16 KV in shm ...", flush=True)
    with ShmKVCache(LAYOUTS["nhd"], geometry, args.seed) as kv, \
            Client(args.endpoint, timeout_s=args.timeout) as client:
        request_bytes = BLOCKS_PER_REQUEST * sum(t[:, 0].numel() * t.element_size() for t in kv.tensors)
        print(f"# {len(kv.tensors)} tensors of shape {tuple(kv.tensors[0].shape)}; "
              f"{request_bytes >> 20} MiB per {CHUNKS_PER_REQUEST}-chunk request", flush=True)
        _expect(client.call(protocol.get_chunk_size()), expect.int_reply(CHUNK_TOKENS), "GET_CHUNK_SIZE")
        instance = new_instance_id(rng)
        _expect(client.call(protocol.register_kv_cache(instance, kv.wrappers(), MODEL, 1, "vllm", kv.layout_hints, [])),
                expect.NO_PAYLOAD, "REGISTER_KV_CACHE")

        # two source and two destination block ranges, used in turn
        sources = [list(range(i * BLOCKS_PER_REQUEST, (i + 1) * BLOCKS_PER_REQUEST)) for i in (0, 1)]
        targets = [list(range(i * BLOCKS_PER_REQUEST, (i + 1) * BLOCKS_PER_REQUEST)) for i in (2, 3)]
        baseline = _plain_copies(request_bytes, args.baseline_repetitions // 2)
        load_before = _load_averages()
        cpu_before = _CpuSample.take([os.getpid()] + ([args.server_pid] if args.server_pid else []))
        store_s, retrieve_s, verified = [], [], []
        rounds = args.warmup + args.repetitions
        for i in range(rounds):
            src, dst = sources[i % 2], targets[i % 2]
            # stamp the round into the source blocks, so each prefix's data differs from the others'
            for t in kv.tensors:
                t[:, src, 0, 0, 0] = float(i + 1)
            key = IPCCacheServerKey(model_name=MODEL, world_size=1, worker_id=0,
                                    token_ids=tuple(random_tokens(rng, CHUNKS_PER_REQUEST * CHUNK_TOKENS)),
                                    start=0, end=CHUNKS_PER_REQUEST * CHUNK_TOKENS, request_id=f"bench-{i}",
                                    num_kv_readers=1)
            check = i == 0 or i == rounds - 1
            if check:
                kv.fill_blocks(dst, -3.5)   # the sentinel: a RETRIEVE that writes nothing fails the compare
            took = _timed(client, protocol.store(key, instance, [src]), "STORE")
            if i >= args.warmup:
                store_s.append(took)
            took = _timed(client, protocol.retrieve(key, instance, [dst]), "RETRIEVE")
            if i >= args.warmup:
                retrieve_s.append(took)
            if check:
                equal = all(torch.equal(t[:, src], t[:, dst]) for t in kv.tensors)
                verified.append(f"round {i}: {'byte-equal' if equal else 'DIFFERENT'}")
                if not equal:
                    print(f"FAIL retrieve of round {i} is not byte-equal to what was stored")
                    return 1
        foreign = _CpuSample.take(cpu_before.pids).foreign_cores_since(cpu_before)
        baseline += _plain_copies(request_bytes, args.baseline_repetitions - args.baseline_repetitions // 2)
        _expect(client.call(protocol.unregister_kv_cache(instance)), expect.NO_PAYLOAD, "UNREGISTER_KV_CACHE")

    rows = [("STORE (worker → pool)", store_s), ("RETRIEVE (pool → worker)", retrieve_s)]
    base_median = statistics.median(baseline)
    print(f"# plain copy: median {_gbps(request_bytes, base_median):.2f} GB/s, best {_gbps(request_bytes, min(baseline)):.2f}"
          "; ms per copy: " + " ".join(f"{t * 1e3:.0f}" for t in baseline))
    for name, times in rows:
        print(f"# {name}: median {_gbps(request_bytes, statistics.median(times)):.2f} GB/s, "
              f"best {_gbps(request_bytes, min(times)):.2f}; ms per round: "
              + " ".join(f"{t * 1e3:.0f}" for t in times))
    print(f"# verified: {'; '.join(verified)}; other processes used {foreign:.2f} cores; load before {load_before}")
    if args.results:
        _write_section(args, rows, baseline, request_bytes, verified, foreign, load_before)
    return 0


def _timed(client: Client, request, label: str) -> float:
    start = time.perf_counter()
    reply = client.call(request)
    took = time.perf_counter() - start
    _expect(reply, expect.transfer_reply(True), label)
    return took


def _expect(reply, want, label: str) -> None:
    if reply.payload != want or not reply.echo_ok:
        raise SystemExit(f"FAIL {label}: reply {expect.describe(reply.payload)}, expected {expect.describe(want)}")


def _plain_copies(nbytes: int, repetitions: int) -> list:
    """Seconds per numpy copy of one contiguous shm buffer into another (a warm-up copy first)."""
    names = [new_segment_name(), new_segment_name()]
    maps = [_create_segment(n, nbytes) for n in names]
    try:
        src, dst = (np.frombuffer(m, dtype=np.uint8) for m in maps)
        src[:] = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        np.copyto(dst, src)   # faults the destination pages in, as the server's pool is prefaulted
        times = []
        for _ in range(repetitions):
            start = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - start)
        if not np.array_equal(src, dst):
            raise SystemExit("FAIL the baseline copy is not equal")
        del src, dst
        return times
    finally:
        for m in maps:
            m.close()
        for n in names:
            unlink_segment(n)


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


class _CpuSample:
    """Machine busy ticks minus those of our own processes: the CPU others used meanwhile."""

    def __init__(self, pids, busy, own, when):
        self.pids, self.busy, self.own, self.when = pids, busy, own, when

    @classmethod
    def take(cls, pids):
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        busy = sum(fields) - fields[3] - fields[4]   # everything but idle and iowait
        own = 0
        for pid in pids:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            own += sum(int(x) for x in rest[11:15])   # utime stime cutime cstime
        return cls(pids, busy, own, time.monotonic())

    def foreign_cores_since(self, before) -> float:
        ticks = (self.busy - before.busy) - (self.own - before.own)
        return max(0.0, ticks / os.sysconf("SC_CLK_TCK") / (self.when - before.when))


def _load_averages() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _machine() -> str:
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown CPU")
    with open("/proc/meminfo") as f:
        mem_kb = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
    java_home = os.environ.get("JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64")
    try:
        java = subprocess.run([os.path.join(java_home, "bin", "java"), "-version"], capture_output=True,
                              text=True).stderr.splitlines()[1].strip()
    except (OSError, IndexError):
        java = "unknown"
    return (f"{cpu}, {os.cpu_count()} cores, {mem_kb / 1048576:.1f} GiB RAM, Linux {platform.release()}, "
            f"Java of the server: {java}; Python {platform.python_version()}, numpy {np.__version__}, "
            f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")


def _write_section(args, rows, baseline, request_bytes, verified, foreign, load_before) -> None:
    base_median, base_best = _gbps(request_bytes, statistics.median(baseline)), _gbps(request_bytes, min(baseline))
    lines = [
        "## CPU STORE/RETRIEVE bandwidth (Llama-8B layout, shm)",
        "",
        f"Command: `{args.command_line or 'python -m lmcache_testclient bench-copy'}`  ",
        f"Sources: commit {os.environ.get('LMCACHE_BENCH_SOURCE', 'unknown')}  ",
        f"Machine: {_machine()}  ",
        f"Load averages before: {load_before}; other processes used {foreign:.2f} cores while the server was timed.",
        "",
        f"32 layers of FlashAttention NHD `[2, {args.blocks}, 16, 8, 128]` bf16, one shm segment each; a request is "
        f"{CHUNKS_PER_REQUEST} chunks of 256 tokens = {BLOCKS_PER_REQUEST} blocks = {request_bytes >> 20} MiB "
        f"(4096 pieces of 32 KiB). {args.warmup} untimed rounds, then {args.repetitions} timed STOREs of distinct "
        f"prefixes and RETRIEVEs of each into other blocks, end to end (request sent → reply received, one DEALER). "
        f"Baseline: `numpy.copyto` of one contiguous {request_bytes >> 20} MiB shm buffer into another, "
        f"{len(baseline)} times (half before, half after the server rounds). GB/s = 10^9 bytes per second. "
        f"Goal: ≥ 0.8 × the plain copy (median).",
        "",
        "| transfer | median GB/s | best GB/s | median ms | ratio to plain copy (median) | goal |",
        "|---|---:|---:|---:|---:|---|",
        f"| plain copy (baseline) | {base_median:.2f} | {base_best:.2f} | "
        f"{statistics.median(baseline) * 1e3:.1f} | 1.00 | |",
    ]
    for name, times in rows:
        median = _gbps(request_bytes, statistics.median(times))
        ratio = median / base_median
        lines.append(f"| {name} | {median:.2f} | {_gbps(request_bytes, min(times)):.2f} | "
                     f"{statistics.median(times) * 1e3:.1f} | {ratio:.2f} | {'met' if ratio >= 0.8 else 'missed'} |")
    lines += ["", f"Byte-compared RETRIEVE against the stored blocks: {'; '.join(verified)}."]
    _replace_section(args.results, "cpu-copy", "\n".join(lines))
    print(f"# written to {args.results}")


def _replace_section(path: str, name: str, markdown: str) -> None:
    """The section between ``<!-- bench:NAME begin/end -->``, replaced or appended (as ResultsFile.java)."""
    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = open(path).read() if os.path.exists(path) else (
        "# Benchmark results\n\nWritten by the benchmarks themselves (see README.md in this folder); "
        "each section is replaced when its benchmark runs again.\n")
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
