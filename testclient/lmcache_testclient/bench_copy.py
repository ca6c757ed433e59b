"""CPU STORE/RETRIEVE bandwidth: ``python -m lmcache_testclient bench-copy --endpoint URL ...``
(options in ``__main__.py``; bench/run-copy.sh starts a server and runs this).

A Llama-8B-shaped worker (32 layers, FlashAttention NHD ``[2, nb, 16, 8, 128]`` bf16, one shm
segment per layer: 32 KiB per block piece, 32 MiB per 256-token chunk object) registers, then
times STOREs of distinct 4-chunk prefixes (128 MiB each) and RETRIEVEs of them into other blocks,
end to end: request sent to reply received, as the worker waits for it; once with consecutive
block ids and once with scattered ones. The baseline is one numpy copy of a contiguous 128 MiB shm
buffer into another, timed in every round right before the STORE: on a shared VM other tenants'
memory traffic comes and goes, and interleaved it slows both alike. The first and last RETRIEVE of
each pattern are byte-compared with what was stored: a fast wrong copy is worthless.

Writes its section of bench/RESULTS.md (between the same markers the Java benchmarks use).
"""

import os
import re
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
        plain = _PlainCopy(request_bytes)
        load_before = _load_averages()
        cpu_before = _CpuSample.take([os.getpid()] + ([args.server_pid] if args.server_pid else []))
        # Two sources and two targets used in turn, first as consecutive block ids (the server merges a layer's
        # adjacent blocks into one 512 KiB run per chunk), then shuffled (every 32 KiB block piece on its own,
        # as in a long-running vLLM whose free block list is fragmented).
        blocks = list(range(4 * BLOCKS_PER_REQUEST))
        phases = {"consecutive block ids": blocks, "scattered block ids": rng.sample(blocks, len(blocks))}
        rows, baseline, verified, request_path = [], [], [], []
        for phase, order in phases.items():
            sets = [order[i * BLOCKS_PER_REQUEST:(i + 1) * BLOCKS_PER_REQUEST] for i in range(4)]
            timings = _phase(args, client, kv, instance, plain, rng, sets[:2], sets[2:], phase, verified)
            if timings is None:
                return 1
            baseline += timings[0]
            request_path += timings[3]
            rows += [(f"STORE (worker → pool), {phase}", timings[1]), (f"RETRIEVE (pool → worker), {phase}", timings[2])]
            # empty the pool, so the second phase has the same room as the first
            _expect(client.call(protocol.clear(False)), expect.NO_PAYLOAD, "CLEAR")
        rows.append(("STORE of a prefix already stored (no copy: the request path alone)", request_path))
        foreign = _CpuSample.take(cpu_before.pids).foreign_cores_since(cpu_before)
        plain.close()
        _expect(client.call(protocol.unregister_kv_cache(instance)), expect.NO_PAYLOAD, "UNREGISTER_KV_CACHE")

    print(f"# plain copy: median {_gbps(request_bytes, statistics.median(baseline)):.2f} GB/s, "
          f"best {_gbps(request_bytes, min(baseline)):.2f}; ms per copy: " + " ".join(f"{t * 1e3:.0f}" for t in baseline))
    for name, times in rows:
        print(f"# {name}: median {_gbps(request_bytes, statistics.median(times)):.2f} GB/s, "
              f"best {_gbps(request_bytes, min(times)):.2f}; ms per round: " + " ".join(f"{t * 1e3:.1f}" for t in times))
    print(f"# verified: {'; '.join(verified)}; other processes used {foreign:.2f} cores; load before {load_before}")
    if args.results:
        _write_section(args, rows, baseline, request_bytes, verified, foreign, load_before)
    return 0


def _phase(args, client, kv, instance, plain, rng, sources, targets, phase, verified):
    """Warm-up and timed rounds of one block-id pattern: seconds of (plain copy, STORE, RETRIEVE), warm-up dropped,
    and of STOREs repeated for the last prefix, which the server answers without copying."""
    baseline, store_s, retrieve_s = [], [], []
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
        baseline.append(plain.timed())
        store_s.append(_timed(client, protocol.store(key, instance, [src]), "STORE"))
        retrieve_s.append(_timed(client, protocol.retrieve(key, instance, [dst]), "RETRIEVE"))
        if check:
            equal = all(torch.equal(t[:, src], t[:, dst]) for t in kv.tensors)
            verified.append(f"{phase}, round {i}: {'byte-equal' if equal else 'DIFFERENT'}")
            if not equal:
                print(f"FAIL {phase}: the RETRIEVE of round {i} is not byte-equal to what was stored")
                return None
    again = [_timed(client, protocol.store(key, instance, [src]), "STORE") for _ in range(args.repetitions)]
    return [times[args.warmup:] for times in (baseline, store_s, retrieve_s)] + [again]


def _timed(client: Client, request, label: str) -> float:
    start = time.perf_counter()
    reply = client.call(request)
    took = time.perf_counter() - start
    _expect(reply, expect.transfer_reply(True), label)
    return took


def _expect(reply, want, label: str) -> None:
    if reply.payload != want or not reply.echo_ok:
        raise SystemExit(f"FAIL {label}: reply {expect.describe(reply.payload)}, expected {expect.describe(want)}")


class _PlainCopy:
    """Two contiguous shm buffers of one request's size; ``timed()`` copies one into the other."""

    def __init__(self, nbytes: int):
        self.names = [new_segment_name(), new_segment_name()]
        self.maps = [_create_segment(n, nbytes) for n in self.names]
        self.src, self.dst = (np.frombuffer(m, dtype=np.uint8) for m in self.maps)
        self.src[:] = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        np.copyto(self.dst, self.src)   # faults the destination in, as the server's pool is prefaulted

    def timed(self) -> float:
        start = time.perf_counter()
        np.copyto(self.dst, self.src)
        return time.perf_counter() - start

    def close(self) -> None:
        if not np.array_equal(self.src, self.dst):
            raise SystemExit("FAIL the baseline copy is not equal")
        del self.src, self.dst
        for m in self.maps:
            m.close()
        for n in self.names:
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
        "### CPU STORE/RETRIEVE bandwidth (Llama-8B layout, shm)",
        "",
        f"Command: `{args.command_line or 'python -m lmcache_testclient bench-copy'}`  ",
        f"Sources: commit {os.environ.get('LMCACHE_BENCH_SOURCE', 'unknown')}  ",
        f"Machine: {_machine()}  ",
        f"Load averages before: {load_before}; other processes used {foreign:.2f} cores while the server was timed.",
        "",
        f"32 layers of FlashAttention NHD `[2, {args.blocks}, 16, 8, 128]` bf16, one shm segment each; a request is "
        f"{CHUNKS_PER_REQUEST} chunks of 256 tokens = {BLOCKS_PER_REQUEST} blocks = {request_bytes >> 20} MiB "
        f"= 4096 block pieces of 32 KiB. Two patterns of block ids: consecutive (the server merges each layer's "
        f"adjacent blocks, so a request is 256 copies of 512 KiB) and scattered (a random permutation: 4096 "
        f"copies of 32 KiB, as in a long-running vLLM). Each: {args.warmup} untimed rounds, then {args.repetitions} "
        f"timed STOREs of distinct prefixes and RETRIEVEs of each into other blocks, end to end (request sent → "
        f"reply received, one DEALER); CLEAR in between. Baseline: `numpy.copyto` of one contiguous "
        f"{request_bytes >> 20} MiB shm buffer into another, timed in every round right before the STORE. "
        f"GB/s = 10^9 bytes per second. "
        f"Goal: ≥ 0.8 × the plain copy (median).",
        "",
        "| transfer | median GB/s | best GB/s | median ms | ratio to plain copy (median) | goal |",
        "|---|---:|---:|---:|---:|---|",
        f"| plain copy (baseline) | {base_median:.2f} | {base_best:.2f} | "
        f"{statistics.median(baseline) * 1e3:.1f} | 1 | |",
    ]
    for name, times in rows:
        if "no copy" in name:
            lines.append(f"| {name} | | | {statistics.median(times) * 1e3:.2f} | | |")
            continue
        median = _gbps(request_bytes, statistics.median(times))
        ratio = median / base_median
        lines.append(f"| {name} | {median:.2f} | {_gbps(request_bytes, min(times)):.2f} | "
                     f"{statistics.median(times) * 1e3:.1f} | {ratio:.3f} | {'met' if ratio >= 0.8 else 'missed'} |")
    lines += ["", DETAILS, "", f"Byte-compared RETRIEVE against the stored blocks: {'; '.join(verified)}.", "",
              "Caveats: both sides copy on one thread (the server's one transfer thread; numpy's memcpy). The server's "
              "time also holds the request's encoding and ZeroMQ round trip, its copy is many pieces gathered from 32 "
              "segments rather than one contiguous run, and each STORE writes to pool memory not touched since the "
              "pool was prefaulted. The client waits idle meanwhile, so the copy has a core to itself unless other "
              "processes run (see above); other tenants of the host are not visible from here."]
    _replace_section(args.results, "cpu-copy", "\n".join(lines))
    print(f"# written to {args.results}")


#: As ResultsFile.DETAILS: what follows goes only to results/current/NAME.md, the whole report.
DETAILS = "<!-- bench:details -->"


def _replace_section(path: str, name: str, markdown: str) -> None:
    """The section between ``<!-- bench:NAME begin/end -->``, replaced or appended (as ResultsFile.java)."""
    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    summary = markdown.strip()
    if DETAILS in markdown:
        details = f"results/current/{name}.md"
        summary = (markdown[:markdown.index(DETAILS)].strip()
                   + f"\n\nThe whole report of this run, every measurement included: [{details}]({details}).")
        whole = os.path.join(os.path.dirname(os.path.abspath(path)), details)
        os.makedirs(os.path.dirname(whole), exist_ok=True)
        with open(whole, "w") as f:
            f.write(f"<!-- The whole report of the run that wrote section `{name}` of RESULTS.md; replaced by its next run. -->"
                    "\n\n" + re.sub(r"\n{3,}", "\n\n", markdown.replace(DETAILS, "")).strip() + "\n")
    block = f"{begin}\n{summary}\n{end}"
    text = open(path).read() if os.path.exists(path) else (
        "# Benchmark results\n\nWritten by the benchmarks themselves (see README.md in this folder): a run replaces "
        "its own section, between its `bench:` markers, and keeps everything outside them.\n")
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
