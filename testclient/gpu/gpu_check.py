#!/usr/bin/env python3
"""GPU tests and benchmark of lmcache-server on a CUDA host (kept in the repo; run by
testclient/gpu/run-on-device.sh on the H200 host).

This process is the vLLM worker: it owns real CUDA KV tensors, shares them with real
``storage._share_cuda_()`` handles inside wrappers pickled from classes at LMCache's module paths
(testclient/stubs), records real interprocess events, and talks to the server (a separate Java
process it starts) over ZeroMQ with the frames LMCache's client sends. The GPU host has no pyzmq,
so the transport is libzmq itself through ctypes (libzmq_dealer.py, the library from the pyzmq wheel that
prepare.sh stages), or a small pure-Python ZMTP 3.0 DEALER (zmtp.py) where none is staged; msgpack encodes
the payloads.

  python3 gpu_check.py test  --java J --classpath CP --out DIR
  python3 gpu_check.py bench --java J --classpath CP --out DIR

Hybrid models (kernel and object groups, windows, Mamba snapshots): hybrid_check.py, run from both. A STORE visible to
the request after its reply, with the real client's timing: visibility_check.py, run from the tests.
"""

import argparse
import json
import os
import pickle
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "stubs"))

import torch  # noqa: E402

import libzmq_dealer  # noqa: E402
import hybrid_check  # noqa: E402  (hybrid models, issue 14: gets this module handed in)
import deepseek_check  # noqa: E402  (DeepSeek-V4-shaped registrations, issue 48: the same)
import visibility_check  # noqa: E402  (a STORE visible to the next request, issue 26)
from lmcache.v1.platform.cuda.ipc_wrapper import CudaIPCWrapper, RawCudaIPCWrapper  # noqa: E402

try:
    import msgpack

    def pack(value):
        return msgpack.packb(value, use_bin_type=True)

    def unpack(data):
        return msgpack.unpackb(data, raw=False)

    def ext(code, data):
        return msgpack.ExtType(code, data)
except ImportError:  # the development machine has msgspec instead
    import msgspec

    def pack(value):
        return msgspec.msgpack.encode(value)

    def unpack(data):
        return msgspec.msgpack.decode(data)

    def ext(code, data):
        return msgspec.msgpack.Ext(code, data)

OP = {"register": 1, "unregister": 2, "store": 6, "retrieve": 7, "lookup": 8, "query": 9, "end_session": 13,
      "chunk_size": 21, "ping": 22}
CHUNK = 256
MODEL = "gpu-check/model"
RESULTS = []


def log(message):
    print(message, flush=True)


def script_args():
    """The arguments every GPU script takes: the Java runtime and the jars to start the server with (.device/), and
    the folder its results go to."""
    p = argparse.ArgumentParser()
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--out", required=True)
    return p


# --- server process -----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_aot_cache(java, classpath, path):
    """Trains the ahead-of-time cache the Servers of this process then start with (LMCACHE_AOT_CACHE), as
    bin/lmcache-aot-train does for bin/lmcache-server: AotTraining drives a CPU worker's STORE/LOOKUP/RETRIEVE rounds
    through a server started with this runtime, classpath and flags (testclient/gpu/aot-launch.sh). Returns the seconds."""
    t0 = time.time()
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aot-launch.sh")
    env = dict(os.environ, LMCACHE_AOT_JAVA=java, LMCACHE_AOT_CLASSPATH=classpath, LMCACHE_AOT_JVM_FLAGS=" ".join(LAUNCHER_JVM_FLAGS))
    partial = path + ".partial"
    subprocess.run([java, "-Xmx256m", "-cp", classpath, "io.lmcache.server.testing.AotTraining", launcher, partial, "3000"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    os.replace(partial, path)
    os.environ["LMCACHE_AOT_CACHE"] = path
    return time.time() - t0


# bin/lmcache-server's heap, GC and direct-memory flags (its exec line), so these servers' JVMs (the fresh-server figures
# most of all) are the launcher's; LMCACHE_DEVICE_JVM_FLAGS replaces them for an A/B (e.g. "-Xmx2g": G1, as before)
LAUNCHER_JVM_FLAGS = os.environ.get(
    "LMCACHE_DEVICE_JVM_FLAGS", "-XX:+UseZGC -Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g -XX:CompileCommand=quiet"
    " -XX:CompileCommand=CompileThresholdScaling,io.lmcache.*::*,0.1"
    " -XX:CompileCommand=CompileThresholdScaling,zmq.*::*,0.1").split()


def pool_preparation(status):
    """The L1 pool's preparation in a /status document (regions_prepared, regions_total, threads, numa, ...)."""
    return status["storage_manager"]["l1_manager"]["pool_preparation"]


class Server:
    def __init__(self, java, classpath, out, pool_gb, extra=(), device="cuda", until="prepared"):
        """device: "host" serves CPU workers only (sglang_check.py's --dry-run-cpu, on a machine without a GPU). until: what
        the constructor waits for, "prepared" (every region of the pool prefaulted: no preparation beside the first
        requests) or "ready" (GET /healthcheck answers 200, the server's own ready: it serves, and some of its pool is
        ready; the rest is prefaulted beside whatever comes next, as for a worker that connects the moment it may)."""
        if until not in ("prepared", "ready"):
            raise ValueError(f"until: prepared or ready, not {until!r}")
        self.port, self.http = free_port(), free_port()
        self.log_path = os.path.join(out, f"server-{self.port}.log")
        blocks = os.environ.get("LMCACHE_COPY_BLOCKS")
        props = [f"-Dlmcache.cuda.copyBlocks={blocks}"] if blocks else []
        props += os.environ.get("LMCACHE_JAVA_OPTS", "").split()
        aot = os.environ.get("LMCACHE_AOT_CACHE", "")
        if aot and os.path.isfile(aot):  # as bin/lmcache-server starts the server (a cache that does not match is refused)
            props += ["-XX:AOTMode=auto", f"-XX:AOTCache={aot}"]
        extra = (*extra, *os.environ.get("LMCACHE_SERVER_ARGS", "").split())  # an A/B's server flags
        cmd = [java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", *LAUNCHER_JVM_FLAGS, *props, "-cp", classpath,
               "io.lmcache.server.Main", "--device", device, "--host", "127.0.0.1", "--port", str(self.port),
               "--http-host", "127.0.0.1", "--http-port", str(self.http), "--l1-size-gb", str(pool_gb), *extra]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {open(self.log_path).read()[-3000:]}")
            try:
                if until == "prepared" or self.healthy():
                    prep = pool_preparation(self.status())
                    self.regions_at_ready = (prep["regions_prepared"], prep["regions_total"])
                    if until == "ready" or prep["regions_prepared"] == prep["regions_total"]:
                        log(f"server ready on {self.port}: {prep['regions_prepared']} of {prep['regions_total']} regions prefaulted"
                            + (" (healthy: the rest beside the first requests)" if until == "ready" else " (pinned from the first REGISTER on)"))
                        return
            except OSError:
                pass
            time.sleep(0.02 if until == "ready" else 0.2)  # "ready": the worker connects at once
        raise RuntimeError("server did not get ready: " + open(self.log_path).read()[-3000:])

    def status(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/status", timeout=5) as r:
            return json.loads(r.read())

    def healthy(self):
        """Whether GET /healthcheck answers 200 (503 while, among others, no L1 memory is ready yet)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthcheck", timeout=5) as r:
                return r.status == 200
        except urllib.error.HTTPError:
            return False

    def metric(self, name, labels=""):
        """The value of one sample; labels are label pairs it must carry, e.g. 'op="store"'."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                # every series also carries service_instance_id: the given labels need only be among the line's
                series = line.split(" ", 1)[0]
                if series == name or (series.startswith(name + "{") and all(p in series for p in labels.split(",") if p)):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def clear(self):
        """Empties L1, so the next STOREs copy for real."""
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.http}/cache/clear", data=b"{}", method="POST",
                                                      headers={"Content-Type": "application/json"}), timeout=30)

    def gpu_copy(self, op):
        """(GPU seconds, bytes) of the server's completed copies for op."""
        return (self.metric("lmcache_mp_gpu_copy_seconds_total", f'op="{op}"'),
                self.metric("lmcache_mp_gpu_copy_bytes_total", f'op="{op}"'))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --- client -------------------------------------------------------------------------------------

class Client:
    def __init__(self, port):
        self.dealer = libzmq_dealer.dealer("127.0.0.1", port)
        self.uid = 0

    def send(self, op, *payloads):
        uid = self.uid
        self.uid += 1
        self.dealer.send([pack(uid), pack(OP[op])] + [pack(p) for p in payloads])
        return uid

    def recv(self):
        frames = self.dealer.recv()
        return unpack(frames[0]), (unpack(frames[2]) if len(frames) > 2 else None)

    def send_raw(self, op, *frames):
        """Sends payload frames as given (already encoded, or not msgpack at all)."""
        uid = self.uid
        self.uid += 1
        self.dealer.send([pack(uid), pack(OP[op])] + list(frames))
        return uid

    def call(self, op, *payloads):
        uid = self.send(op, *payloads)
        got, value = self.recv()
        assert got == uid, f"reply uid {got} for request {uid}"
        return value


def key(tokens, start, end, request_id, worker_id=0, world_size=1, readers=1):
    return {"model_name": MODEL, "world_size": world_size, "worker_id": worker_id, "token_ids": tokens, "start": start,
            "end": end, "request_id": request_id, "cache_salt": "", "request_configs": None, "num_kv_readers": readers}


def lookup_after_store(worker, tokens, end, request, want=None, timeout=5.0):
    """LOOKUP right after a STORE's reply, as LMCache's scheduler sends it (no wait for the copy), then QUERY_PREFETCH_STATUS
    until it answers a count: the server leaves the result pending (None) while the STORE's chunks are still being
    written, and counts them once they commit. One LOOKUP, no retries; `want` is kept for the callers' readability."""
    return worker.lookup(tokens, end, request, timeout)


# --- the worker's KV cache ----------------------------------------------------------------------

class Worker:
    """KV tensors of one layout on the GPU, registered with one server."""

    def __init__(self, server, layout, layers=4, blocks=96, block=16, heads=4, head=64, raw=False, seed=0):
        self.server, self.layout, self.layers, self.blocks, self.block = server, layout, layers, blocks, block
        self.client = Client(server.port)
        self.instance = random.Random(seed).getrandbits(63)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        dt = torch.bfloat16
        shapes = {
            "nhd": (2, blocks, block, heads, head), "hnd": (2, blocks, heads, block, head),
            "flashinfer": (blocks, 2, block, heads, head), "fused": (blocks, block, heads, 2 * head),
            "fused-hnd": (blocks, heads, block, 2 * head), "mla": (blocks, block, head),
        }
        if layout == "crosslayer":
            self.tensors = [torch.randn(blocks, layers, 2, block, heads, head, device="cuda", dtype=dt, generator=gen)]
        else:
            self.tensors = [torch.randn(*shapes[layout], device="cuda", dtype=dt, generator=gen) for _ in range(layers)]
        self.hints = {"kv_layout": "HND"} if layout in ("hnd", "fused-hnd") else ({} if layout == "mla" else {"kv_layout": "NHD"})
        self.raw = raw
        self.keep = []

    def uuid(self):
        return str(torch.cuda.get_device_properties(self.tensors[0].device).uuid)

    def wrappers(self):
        out = []
        for t in self.tensors:
            storage = t.untyped_storage()
            handle = storage._share_cuda_()
            if self.raw:
                import cupy
                base = storage.data_ptr() - handle[3]
                out.append(RawCudaIPCWrapper(ipc_handle_reserved=cupy.cuda.runtime.ipcGetMemHandle(base), alloc_offset=handle[3],
                                             nbytes=storage.nbytes(), dtype=t.dtype, shape=t.shape, stride=t.stride(),
                                             device_uuid=self.uuid()))
            else:
                out.append(CudaIPCWrapper(handle=handle, dtype=t.dtype, shape=t.shape, stride=t.stride(),
                                          storage_offset=t.storage_offset(), device_uuid=self.uuid()))
        return [ext(1, pickle.dumps(w, protocol=4)) for w in out]

    def register(self):
        return self.client.call("register", self.instance, self.wrappers(), MODEL, 1, "vllm", self.hints, [])

    def block_bytes(self, b):
        """Every byte of block b, all layers and planes, as one tensor (for comparisons)."""
        if self.layout == "crosslayer":
            return self.tensors[0][b].reshape(-1)
        if self.layout in ("nhd", "hnd"):
            return torch.cat([t[:, b].reshape(-1) for t in self.tensors])
        return torch.cat([t[b].reshape(-1) for t in self.tensors])

    def set_blocks(self, blocks, value):
        for b in blocks:
            if self.layout == "crosslayer":
                self.tensors[0][b].fill_(value)
            elif self.layout in ("nhd", "hnd"):
                for t in self.tensors:
                    t[:, b].fill_(value)
            else:
                for t in self.tensors:
                    t[b].fill_(value)

    def token_major(self, b):
        """Block b of every layer token-major, a view: [2, bs, nh, hs] (fused: [bs, nh, 2*hs]), whatever the block order."""
        views = {"nhd": lambda t: t[:, b], "hnd": lambda t: t[:, b].transpose(1, 2),
                 "fused": lambda t: t[b], "fused-hnd": lambda t: t[b].transpose(0, 1)}
        return [views[self.layout](t) for t in self.tensors]

    def object_layout(self):
        """What /status says of this worker's objects: "KV_2LTD" (LMCache's) or "block_order" (an older PTX's fallback)."""
        meta = self.server.status()["cache_context_meta"][str(self.instance)]
        return [g.get("object_layout") for g in meta["kv_cache_layout"]["kernel_groups"]]

    def event(self):
        ev = torch.cuda.Event(interprocess=True)
        ev.record()
        self.keep.append(ev)
        return bytes(ev.ipc_handle())

    @staticmethod
    def wait(handle):
        """Opens the server's event and waits for it: a garbage handle raises here, as in the client."""
        assert isinstance(handle, (bytes, bytearray)) and len(handle) == 64, f"event handle {handle!r}"
        ours = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(handle))
        ours.synchronize()
        # what vLLM's get_finished does with it
        assert ours.query(), "the server's event is complete after synchronize"

    def store(self, tokens, start, end, blocks, request):
        handle, ok = self.client.call("store", key(tokens, start, end, request), self.instance, [blocks], self.event())
        self.wait(handle)
        return ok

    def retrieve(self, tokens, start, end, blocks, request, skip=0):
        handle, ok = self.client.call("retrieve", key(tokens, start, end, request), self.instance, [blocks], self.event(), skip)
        self.wait(handle)
        return ok

    def lookup(self, tokens, end, request, timeout=5.0):
        """LOOKUP, then QUERY_PREFETCH_STATUS until it answers a count (None: writes in flight or an L2 prefetch)."""
        assert self.client.call("lookup", key(tokens, 0, end, request, worker_id=None), 1) is None
        return query_until_answered(self.client, request, timeout)


def query_until_answered(client, request, timeout):
    """QUERY_PREFETCH_STATUS as the scheduler polls it: None while the LOOKUP waits for writes in flight or an L2 prefetch;
    the count, or None after `timeout` seconds."""
    deadline = time.time() + timeout
    while True:
        hits = client.call("query", request)
        if hits is not None or time.time() > deadline:
            return hits
        time.sleep(0.0002)


def check(name, ok, detail=""):
    RESULTS.append({"name": name, "ok": bool(ok), "detail": detail})
    log(f"{'PASS' if ok else 'FAIL'} {name} {detail}")


# --- tests --------------------------------------------------------------------------------------

def two_chunks(w, seed):
    """Two chunks of random tokens, their source blocks (consecutive, from 0), the next as targets, the sources' bytes."""
    rng = random.Random(seed)
    tokens = [rng.randrange(150000) for _ in range(2 * CHUNK)]
    per_chunk = CHUNK // w.block
    src = list(range(0, 2 * per_chunk))
    dst = list(range(2 * per_chunk, 4 * per_chunk))
    return rng, tokens, per_chunk, src, dst, [w.block_bytes(b).clone() for b in src]


def roundtrip(server, layout, raw=False, seed=1):
    w = Worker(server, layout, raw=raw, seed=seed)
    name = f"{layout}{'-raw' if raw else ''}"
    check(f"{name}: register", w.register() is None)
    check(f"{name}: re-register is a no-op", w.register() is None)
    rng, tokens, per_chunk, src, dst, before = two_chunks(w, seed)
    check(f"{name}: STORE 2 chunks", w.store(tokens, 0, 2 * CHUNK, src, f"{name}-r"))
    check(f"{name}: LOOKUP+QUERY = 2", lookup_after_store(w, tokens, 2 * CHUNK, f"{name}-r", 2) == 2)
    w.set_blocks(src, 0.0)
    w.set_blocks(dst, 0.0)
    torch.cuda.synchronize()
    check(f"{name}: RETRIEVE into other blocks", w.retrieve(tokens, 0, 2 * CHUNK, dst, f"{name}-r"))
    equal = all(torch.equal(w.block_bytes(d), b) for d, b in zip(dst, before))
    check(f"{name}: bytes equal after the round trip", equal)
    # skip_first_n_tokens: the first target block keeps its sentinel
    fresh = list(range(4 * per_chunk, 6 * per_chunk))
    w.set_blocks(fresh, 7.0)
    torch.cuda.synchronize()
    check(f"{name}: RETRIEVE with skip 16", w.retrieve(tokens, 0, 2 * CHUNK, fresh, f"{name}-s", skip=w.block))
    first_kept = bool((w.block_bytes(fresh[0]) == 7.0).all())
    rest = all(torch.equal(w.block_bytes(d), b) for d, b in zip(fresh[1:], before[1:]))
    check(f"{name}: skip left the first block alone, filled the rest", first_kept and rest)
    # a miss still replies with a valid event, and false
    other = [rng.randrange(150000) for _ in range(CHUNK)]
    check(f"{name}: a miss answers false (with a valid event)", not w.retrieve(other, 0, CHUNK, dst[:per_chunk], f"{name}-m"))
    check(f"{name}: UNREGISTER", w.client.call("unregister", w.instance) is None)
    check(f"{name}: after UNREGISTER a STORE answers false (with a valid event)", not w.store(tokens, 0, CHUNK, src[:per_chunk], "x"))
    return w


def submit_counter(server, name):
    """A counter of the GPU submits so far, (store, retrieve), from /status cuda.submit_cpu."""
    submit = server.status().get("cuda", {}).get("submit_cpu", {})
    return tuple(submit.get(op, {}).get(name, 0) for op in ("store", "retrieve"))


def head_bytes(server):
    """Bytes the batched-copy head moved so far, (store, retrieve)."""
    return submit_counter(server, "dma_head_bytes")


def small_pieces_warm_the_context(server, seed=62):
    """Llama-wide blocks in reverse order: each first piece is one 32 KiB block, too small for the DMA head, so a transfer
    on an idle lane launches the empty kernel that starts the GPU's switch to the server's context before it plans.
    Bytes must come back exact. Runs first: both lanes idle, and leaves the RETRIEVE lane idle for the head test."""
    w = Worker(server, "nhd", layers=4, blocks=64, heads=8, head=128, seed=seed)
    name = "nhd-wide-reversed"
    check(f"{name}: register", w.register() is None)
    per_chunk = CHUNK // w.block
    tokens = [random.Random(seed).randrange(150000) for _ in range(CHUNK)]
    src = list(range(per_chunk - 1, -1, -1))
    dst = list(range(2 * per_chunk - 1, per_chunk - 1, -1))
    before = [w.block_bytes(b).clone() for b in src]
    warm0 = submit_counter(server, "warm_launches")
    check(f"{name}: STORE a chunk of single blocks", w.store(tokens, 0, CHUNK, src, f"{name}-r"))
    check(f"{name}: LOOKUP+QUERY = 1", lookup_after_store(w, tokens, CHUNK, f"{name}-r", 1) == 1)
    w.set_blocks(dst, 0.0)
    torch.cuda.synchronize()
    check(f"{name}: RETRIEVE into other single blocks", w.retrieve(tokens, 0, CHUNK, dst, f"{name}-r"))
    check(f"{name}: bytes equal after the round trip", all(torch.equal(w.block_bytes(d), b) for d, b in zip(dst, before)))
    warm1 = submit_counter(server, "warm_launches")
    check(f"{name}: both transfers warmed the context first", warm1[0] - warm0[0] == 1 and warm1[1] - warm0[1] == 1,
          f"store {warm1[0] - warm0[0]}, retrieve {warm1[1] - warm0[1]} launches")
    check(f"{name}: UNREGISTER", w.client.call("unregister", w.instance) is None)
    # the next test wants an idle RETRIEVE lane: this one's completion has run once its bytes are counted
    deadline = time.time() + 5
    while server.gpu_copy("retrieve")[1] < 4 << 20:  # 2 planes x 4 layers x 16 blocks x 32 KiB
        assert time.time() < deadline, "the RETRIEVE never completed on the server"
        time.sleep(0.001)


def large_pieces_take_the_dma_head(server, seed=61):
    """Llama-8B-wide blocks (32 KiB a block and layer): runs of consecutive blocks are 256 KiB and more, so a transfer
    that finds its lane idle moves them with batched copies straight between the blocks and the pool (the DMA head);
    single scattered blocks go through staging. Bytes must come back exact either way, skip included."""
    w = Worker(server, "nhd", layers=4, blocks=96, heads=8, head=128, seed=seed)
    name = "nhd-wide"
    check(f"{name}: register", w.register() is None)
    _, tokens, per_chunk, src, dst, before = two_chunks(w, seed)
    store0, retrieve0 = head_bytes(server)
    warm0 = submit_counter(server, "warm_launches")
    copied0 = server.gpu_copy("retrieve")[1]
    check(f"{name}: STORE 2 chunks of consecutive blocks", w.store(tokens, 0, 2 * CHUNK, src, f"{name}-r"))
    check(f"{name}: LOOKUP+QUERY = 2", lookup_after_store(w, tokens, 2 * CHUNK, f"{name}-r", 2) == 2)
    w.set_blocks(dst, 0.0)
    torch.cuda.synchronize()
    check(f"{name}: RETRIEVE into other consecutive blocks", w.retrieve(tokens, 0, 2 * CHUNK, dst, f"{name}-r"))
    check(f"{name}: bytes equal after the round trip", all(torch.equal(w.block_bytes(d), b) for d, b in zip(dst, before)))
    store1, retrieve1 = head_bytes(server)
    # 2 chunks x 2 planes x 4 layers, each a 512 KiB run: all 8 MiB within the 16 MiB head
    check(f"{name}: the DMA head moved both transfers", store1 - store0 == 8 << 20 and retrieve1 - retrieve0 == 8 << 20,
          f"store {store1 - store0}, retrieve {retrieve1 - retrieve0} bytes")
    warm1 = submit_counter(server, "warm_launches")
    check(f"{name}: transfers the head starts launch no warm-up kernel", warm1 == warm0, f"{warm0} -> {warm1}")
    # the first chunk into consecutive blocks (a 15-block run after the skip: head), the second into single blocks in
    # reverse order (32 KiB pieces: staged)
    mixed = list(range(4 * per_chunk, 5 * per_chunk)) + list(range(6 * per_chunk - 1, 5 * per_chunk - 1, -1))
    w.set_blocks(mixed, 7.0)
    torch.cuda.synchronize()
    # the head is for a lane with nothing in flight: wait for the server to complete the previous RETRIEVE
    deadline = time.time() + 5
    while server.gpu_copy("retrieve")[1] < copied0 + (8 << 20):
        assert time.time() < deadline, "the first RETRIEVE never completed on the server"
        time.sleep(0.001)
    check(f"{name}: RETRIEVE with skip 16 into mixed blocks", w.retrieve(tokens, 0, 2 * CHUNK, mixed, f"{name}-s", skip=w.block))
    first_kept = bool((w.block_bytes(mixed[0]) == 7.0).all())
    rest = all(torch.equal(w.block_bytes(d), b) for d, b in zip(mixed[1:], before[1:]))
    check(f"{name}: skip left the first block alone, the head and the staged batches filled the rest", first_kept and rest)
    _, retrieve2 = head_bytes(server)
    check(f"{name}: only the consecutive run took the head", retrieve2 - retrieve1 == 2 * 4 * 15 * (32 << 10),
          f"{retrieve2 - retrieve1} bytes")
    check(f"{name}: UNREGISTER", w.client.call("unregister", w.instance) is None)


def two_workers_on_one_gpu(server):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(_worker_main, [(server.port, server.http, 101), (server.port, server.http, 202)])
    check("two worker processes on one GPU, concurrently", all(results), str(results))


def _worker_main(port, http, seed):
    server = type("S", (), {"port": port, "http": http})()
    w = Worker(server, "nhd", seed=seed)
    w.register()
    rng = random.Random(seed)
    per_chunk = CHUNK // w.block
    ok = True
    for round_ in range(10):
        tokens = [rng.randrange(150000) for _ in range(2 * CHUNK)]
        src, dst = list(range(0, 2 * per_chunk)), list(range(2 * per_chunk, 4 * per_chunk))
        w.set_blocks(src, float(round_ + seed))
        torch.cuda.synchronize()
        before = [w.block_bytes(b).clone() for b in src]
        ok &= w.store(tokens, 0, 2 * CHUNK, src, f"{seed}-{round_}")
        # as vLLM does, LOOKUP before the RETRIEVE (both see the STORE: its chunks count as pending until they commit)
        ok &= lookup_after_store(w, tokens, 2 * CHUNK, f"{seed}-{round_}-l", 2) == 2
        ok &= w.retrieve(tokens, 0, 2 * CHUNK, dst, f"{seed}-{round_}")
        ok &= all(torch.equal(w.block_bytes(d), b) for d, b in zip(dst, before))
    w.client.call("unregister", w.instance)
    return bool(ok)


def unknown_instance_gets_a_valid_event(server):
    client = Client(server.port)
    tokens = list(range(CHUNK))
    handle, ok = client.call("store", key(tokens, 0, CHUNK, "u"), 12345, [[0] * 16], bytes(64))
    Worker.wait(handle)
    check("STORE for an unknown instance: false, and its event opens and completes", not ok)


def failure_reply(name, client, op, *frames):
    """Sends op with raw payload frames; passes when the reply is (event, false) and the event opens and
    completes here, as vLLM's worker opens it. Returns the handle (None when the check failed)."""
    uid = client.send_raw(op, *frames)
    got, value = client.recv()
    try:
        assert got == uid, f"reply uid {got} for request {uid}"
        handle, ok = value
        Worker.wait(handle)
        check(name, not ok, f"handle {bytes(handle)[:8].hex()}...")
        return bytes(handle)
    except Exception as e:  # noqa: BLE001 -- the failure is the test's result
        check(name, False, repr(e))
        return None


def transfer_frames(op, tokens, instance=12345, blocks=(0,)):
    frames = [pack(key(tokens, 0, len(tokens), "f")), pack(instance), pack([list(blocks)]), pack(bytes(64))]
    return frames + [pack(0)] if op == "retrieve" else frames


def failure_paths_answer_with_events_a_worker_can_open(server):
    """Issue 13, item 5: every STORE/RETRIEVE failure reply carries a valid recorded event (protocol doc
    section 9), not 64 zero bytes, which make Event.from_ipc_handle raise and take vLLM down. Covered here:
    undecodable requests (a token id >= 2^32, which msgpack sends as uint64; a key that is no msgpack),
    an unknown instance, and (in disabled_mode_answers_with_events) a disabled transfer mode. Not covered
    on the GPU: a handler exception (no request makes a handler throw; the unit test
    TransferFailureEventsTest covers it with a throwing handler) and a request rejected during shutdown
    (it cannot be timed from outside; same unit test)."""
    w = Worker(server, "nhd", seed=41)
    check("failure paths: register", w.register() is None)
    client = Client(server.port)
    tokens = [random.Random(42).randrange(150000) for _ in range(CHUNK)]
    handles = []
    for op in ("store", "retrieve"):
        wide = [2 ** 32] + tokens[1:]
        handles.append(failure_reply(f"{op.upper()} with a token id >= 2^32 (decode failure): false, and its event opens and completes",
                                     client, op, *transfer_frames(op, wide, instance=w.instance)))
        garbage = [b"\xc1"] + transfer_frames(op, tokens, instance=w.instance)[1:]
        handles.append(failure_reply(f"{op.upper()} with a key that is no msgpack (decode failure): false, and its event opens and completes",
                                     client, op, *garbage))
        for i in range(3):
            handles.append(failure_reply(f"{op.upper()} #{i} for an unknown instance: false, and its event opens and completes",
                                         client, op, *transfer_frames(op, tokens, instance=987654321)))
    opened = [h for h in handles if h is not None]
    check("failure replies share one cached, complete event per GPU (opened many times)", len(set(opened)) == 1,
          f"{len(set(opened))} distinct handles over {len(opened)} replies")
    check("failure paths: the registered worker still works afterwards", w.store(tokens, 0, CHUNK, list(range(CHUNK // w.block)), "f-ok"))
    w.client.call("unregister", w.instance)


def disabled_mode_answers_with_events(args):
    """--supported-transfer-mode engine_driven: STORE and RETRIEVE are answered by the disabled
    lmcache-driven module's null object, with the GPU's complete event."""
    try:
        server = Server(args.java, args.classpath, args.out, 1, extra=("--supported-transfer-mode", "engine_driven"))
    except Exception as e:  # noqa: BLE001 -- recorded as a failed check, the other results are still written
        check("a server with --supported-transfer-mode engine_driven starts", False, repr(e))
        return
    try:
        client = Client(server.port)
        tokens = list(range(CHUNK))
        for op in ("store", "retrieve"):
            failure_reply(f"{op.upper()} with lmcache_driven disabled: false, and its event opens and completes", client, op,
                          *transfer_frames(op, tokens))
    finally:
        server.stop()


def _same_bits(x, y):
    return torch.equal(x.contiguous().view(torch.int16), y.contiguous().view(torch.int16))


def layouts_share_objects(server):
    """Every layout's objects are LMCache's KV_2LTD (issue 27): an NHD and an HND worker of one model (several heads) hold
    the same KV each in its own block order; each RETRIEVEs the chunk the other stored into its own blocks bit for bit, also
    from a token inside a block (the transposing kernel's partial block); the same for fused K/V and its HND form. Needs the
    PTX with copy_pieces_kv2ltd: with an older one /status says block_order and the HND worker's chunks are a miss."""
    for seed, (nhd_name, hnd_name) in enumerate((("nhd", "hnd"), ("fused", "fused-hnd")), start=31):
        nhd, hnd = Worker(server, nhd_name, seed=seed), Worker(server, hnd_name, seed=seed + 100)
        nhd.register()
        hnd.register()
        check(f"{hnd_name}: /status says its objects are LMCache's KV_2LTD (the PTX has copy_pieces_kv2ltd)",
              hnd.object_layout() == ["KV_2LTD"], f"{hnd.object_layout()}")
        per = CHUNK // nhd.block
        own, mirror = list(range(per)), list(range(per, 2 * per))
        for a, b in zip(own, mirror):  # the HND worker holds the NHD worker's KV, in its own block order
            for dst, src in zip(hnd.token_major(b), nhd.token_major(a)):
                dst.copy_(src)
        torch.cuda.synchronize()
        rng = random.Random(f"share-{seed}")  # tokens no other check stores
        tokens_a = [rng.randrange(150000) for _ in range(CHUNK)]
        tokens_b = [rng.randrange(150000) for _ in range(CHUNK)]
        stored = nhd.store(tokens_a, 0, CHUNK, own, f"share-{seed}-a") and hnd.store(tokens_b, 0, CHUNK, mirror, f"share-{seed}-b")
        into_hnd, into_nhd, skipped = list(range(2 * per, 3 * per)), list(range(per, 2 * per)), list(range(3 * per, 4 * per))
        hnd.set_blocks(into_hnd + skipped, 5.0)
        nhd.set_blocks(into_nhd, 5.0)
        torch.cuda.synchronize()
        got = (hnd.retrieve(tokens_a, 0, CHUNK, into_hnd, f"share-{seed}-ra") and nhd.retrieve(tokens_b, 0, CHUNK, into_nhd, f"share-{seed}-rb")
               and hnd.retrieve(tokens_a, 0, CHUNK, skipped, f"share-{seed}-rs", skip=20))
        torch.cuda.synchronize()
        same = all(_same_bits(x, y) for t, s in zip(into_hnd, own) for x, y in zip(hnd.token_major(t), nhd.token_major(s)))
        back = all(_same_bits(x, y) for t, s in zip(into_nhd, own) for x, y in zip(nhd.token_major(t), nhd.token_major(s)))
        partial = True
        for k, (t, s) in enumerate(zip(skipped, own)):
            for x, y in zip(hnd.token_major(t), nhd.token_major(s)):
                rows = x.shape[-3]  # tokens of the block: [.., bs, nh, hs]
                first = min(max(20 - k * rows, 0), rows)
                head, tail = (x[:, :first], x[:, first:]) if x.dim() == 4 else (x[:first], x[first:])
                ref = y[:, first:] if y.dim() == 4 else y[first:]
                partial = partial and bool((head == 5.0).all()) and _same_bits(tail, ref)
        check(f"{nhd_name} and {hnd_name} workers share one chunk object each way, bit for bit, and a skip of 20 tokens",
              stored and got and same and back and partial, f"stored {stored} retrieved {got} same {same} back {back} skip {partial}")
        for w in (nhd, hnd):
            w.client.call("unregister", w.instance)


def warm_up_at_register_yields_and_writes_nothing(args, seed=63):
    """Issue 52, with the defaults: a GPU's first REGISTER replies at once while its warm-up reads the worker's KV into
    scratch memory beside it. A STORE and a RETRIEVE sent right after the reply come back exact, the warm-up ends yielded
    (or done, had it ended first) without a failure, and no byte of the worker's tensors outside the RETRIEVE's blocks
    changed: the warm-up only reads the worker's memory."""
    server = Server(args.java, args.classpath, args.out, 4)
    name = "GPU warm-up at REGISTER"
    try:
        w = Worker(server, "nhd", layers=4, blocks=64, heads=8, head=128, seed=seed)
        per_chunk = CHUNK // w.block
        tokens = [random.Random(seed).randrange(150000) for _ in range(CHUNK)]
        src, dst = list(range(per_chunk)), list(range(per_chunk, 2 * per_chunk))
        torch.cuda.synchronize()
        before = {b: w.block_bytes(b).clone() for b in range(w.blocks) if b not in dst}  # before the warm-up starts
        check(f"{name}: register", w.register() is None)
        check(f"{name}: STORE right after the reply", w.store(tokens, 0, CHUNK, src, f"{name}-r"))
        check(f"{name}: LOOKUP+QUERY = 1", lookup_after_store(w, tokens, CHUNK, f"{name}-r", 1) == 1)
        w.set_blocks(dst, 0.0)
        torch.cuda.synchronize()
        check(f"{name}: RETRIEVE", w.retrieve(tokens, 0, CHUNK, dst, f"{name}-r"))
        check(f"{name}: bytes equal after the round trip", all(torch.equal(w.block_bytes(d), before[b]) for d, b in zip(dst, src)))
        deadline, gpu = time.time() + 10, {}
        while time.time() < deadline:
            gpu = server.status().get("jit_warmup", {}).get("gpu", {})
            if gpu.get("state") not in (None, "idle", "running"):
                break
            time.sleep(0.05)
        check(f"{name}: ran once and ended yielded or done, no failure", gpu.get("state") in ("yielded", "done")
              and gpu.get("count") == 1 and gpu.get("failures") == 0, json.dumps(gpu))
        torch.cuda.synchronize()
        changed = [b for b, bytes_ in before.items() if not torch.equal(w.block_bytes(b), bytes_)]
        check(f"{name}: no block of the worker outside the RETRIEVE's changed", not changed, f"changed blocks {changed}")
        check(f"{name}: UNREGISTER", w.client.call("unregister", w.instance) is None)
    finally:
        server.stop()


def run_tests(args):
    # the engine counter checks below want quiet lanes: this server's REGISTERs wait for the GPU warm-up, as before issue 52
    # (warm_up_at_register_yields_and_writes_nothing runs the default, a warm-up beside the reply, on a server of its own)
    server = Server(args.java, args.classpath, args.out, 4, extra=("--gpu-warmup-register-wait-ms", "5000"))
    try:
        # first, while both lanes are idle (the warm-up and the DMA head are for an idle lane)
        small_pieces_warm_the_context(server)
        large_pieces_take_the_dma_head(server)
        # each layout gets its own tokens: the same key stored by two layouts is one object (their bytes
        # are KV_2LTD whatever the block order; layouts_share_objects checks that it is shared)
        for seed, layout in enumerate(("nhd", "hnd", "flashinfer", "fused", "fused-hnd", "mla", "crosslayer"), start=1):
            roundtrip(server, layout, seed=seed)
        try:
            import cupy  # noqa: F401
            roundtrip(server, "nhd", raw=True, seed=8)
        except ImportError:
            check("RawCudaIPCWrapper round trip", False, "cupy is missing")
        layouts_share_objects(server)
        two_workers_on_one_gpu(server)
        unknown_instance_gets_a_valid_event(server)
        failure_paths_answer_with_events_a_worker_can_open(server)
        hybrid_check.run_tests(sys.modules[__name__], server, args)
        deepseek_check.run_tests(sys.modules[__name__], server, args)
        visibility_check.run_tests(sys.modules[__name__], server, args)
        status = server.status()
        check("UNREGISTER closed every mapping (no registered GPU ids, no IPC mapping open)",
              status.get("registered_gpu_ids") == [] and status["cuda"]["open_ipc_mappings"] == 0,
              f"{status.get('registered_gpu_ids')} / {status['cuda']}")
    finally:
        server.stop()
    disabled_mode_answers_with_events(args)
    warm_up_at_register_yields_and_writes_nothing(args)
    failed = [r for r in RESULTS if not r["ok"]]
    log(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    with open(os.path.join(args.out, "gpu_tests.json"), "w") as f:
        json.dump(RESULTS, f, indent=1)
    return 1 if failed else 0


# --- benchmark ----------------------------------------------------------------------------------

def raw_copy_gbps(nbytes, repeats=5):
    """torch copies of one contiguous buffer: D2H, H2D, and both at once on two streams (GB/s, best
    of 5, as the server figures are best of 3)."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host2 = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dev2 = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out = {}
    for name, fn in (("d2h", lambda: host.copy_(dev, non_blocking=True)), ("h2d", lambda: dev.copy_(host, non_blocking=True))):
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        out[name] = nbytes / min(times) / 1e9
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.stream(s1):
            host.copy_(dev, non_blocking=True)
        with torch.cuda.stream(s2):
            dev2.copy_(host2, non_blocking=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    out["bidirectional"] = 2 * nbytes / min(times) / 1e9
    return out


def pipelined(worker, requests, op, depth=4):
    """Sends the requests `depth` at a time; returns seconds from the first send to the last event done."""
    pending = []
    t0 = time.perf_counter()
    for req in requests:
        if op == "store":
            tokens, blocks, rid = req
            uid = worker.client.send("store", key(tokens, 0, len(tokens), rid), worker.instance, [blocks], worker.event())
        else:
            tokens, blocks, rid = req
            uid = worker.client.send("retrieve", key(tokens, 0, len(tokens), rid), worker.instance, [blocks], worker.event(), 0)
        pending.append(uid)
        if len(pending) >= depth:
            _, (handle, ok) = worker.client.recv()
            assert ok, f"{op} failed"
            Worker.wait(handle)
            pending.pop(0)
    while pending:
        _, (handle, ok) = worker.client.recv()
        assert ok, f"{op} failed"
        Worker.wait(handle)
        pending.pop(0)
    return time.perf_counter() - t0


def bench_layout(server, label, heads, head, block, chunks_per_request, requests, seed, scatter=True, layout="nhd"):
    layers = 32
    per_chunk = CHUNK // block
    blocks_needed = chunks_per_request * per_chunk
    w = Worker(server, layout, layers=layers, blocks=4 * blocks_needed, block=block, heads=heads, head=head, seed=seed)
    assert w.register() is None
    piece = block * heads * head * 2
    request_bytes = 2 * layers * blocks_needed * piece
    rng = random.Random(seed)
    # blocks scattered at random, as in a long-running vLLM: few neighbours end up adjacent, so
    # nearly every piece is one block of one layer (the small-piece case)
    ids = list(range(4 * blocks_needed))
    if scatter:
        rng.shuffle(ids)
    src = ids[:blocks_needed]
    dst = ids[2 * blocks_needed:3 * blocks_needed]
    results = {"layout": label, "piece_bytes": piece, "request_bytes": request_bytes}
    store_s, retrieve_s = [], []
    gpu_before = {op: server.gpu_copy(op) for op in ("store", "retrieve")}
    for rep in range(3):
        reqs = [([rng.randrange(150000) for _ in range(chunks_per_request * CHUNK)], src, f"b{seed}-{rep}-{i}") for i in range(requests)]
        store_s.append(pipelined(w, reqs, "store"))
        retrieve_s.append(pipelined(w, [(t, dst, rid) for t, _, rid in reqs], "retrieve"))
        # the chunks just stored go, so each repetition copies for real
        server.clear()
    total = requests * request_bytes
    for op in ("store", "retrieve"):
        seconds, copied = (a - b for a, b in zip(server.gpu_copy(op), gpu_before[op]))
        # the rate on the GPU: copy time only, without the request, the event waits and the reply
        results[f"{op}_gpu_gbps"] = copied / seconds / 1e9 if seconds else 0.0
        results[f"{op}_gpu_ms_per_request"] = 1e3 * seconds / (3 * requests)
    results["store_gbps"] = total / min(store_s) / 1e9
    results["retrieve_gbps"] = total / min(retrieve_s) / 1e9
    # both directions at once: one connection stores new prefixes while another retrieves stored
    # ones; best of 3 like the single directions (one transient stall should not be the figure)
    import threading
    w2 = Worker(server, layout, layers=layers, blocks=4 * blocks_needed, block=block, heads=heads, head=head, seed=seed + 1)
    w2.tensors, w2.instance, w2.client = w.tensors, w.instance, Client(server.port)
    best = None
    for rep in range(3):
        reqs = [([rng.randrange(150000) for _ in range(chunks_per_request * CHUNK)], src, f"c{seed}-{rep}-{i}") for i in range(requests)]
        pipelined(w, reqs, "store")
        new = [([rng.randrange(150000) for _ in range(chunks_per_request * CHUNK)], src, f"d{seed}-{rep}-{i}") for i in range(requests)]
        spans = {}

        def run(name, worker, batch, op):
            spans[name] = pipelined(worker, batch, op)

        t0 = time.perf_counter()
        a = threading.Thread(target=run, args=("store", w, new, "store"))
        b = threading.Thread(target=run, args=("retrieve", w2, [(t, dst, rid) for t, _, rid in reqs], "retrieve"))
        a.start(), b.start(), a.join(), b.join()
        both = time.perf_counter() - t0
        if best is None or both < best[0]:
            best = (both, dict(spans))
        server.clear()
    both, spans = best
    results["concurrent_gbps"] = 2 * total / both / 1e9
    results["concurrent_store_gbps"] = total / spans["store"] / 1e9
    results["concurrent_retrieve_gbps"] = total / spans["retrieve"] / 1e9
    raw = raw_copy_gbps(request_bytes)
    results.update({"raw_d2h_gbps": raw["d2h"], "raw_h2d_gbps": raw["h2d"], "raw_bidirectional_gbps": raw["bidirectional"]})
    results["store_vs_raw"] = results["store_gbps"] / raw["d2h"]
    results["retrieve_vs_raw"] = results["retrieve_gbps"] / raw["h2d"]
    results["concurrent_vs_raw"] = results["concurrent_gbps"] / raw["bidirectional"]
    w.client.call("unregister", w.instance)
    return results


def run_bench(args):
    server = Server(args.java, args.classpath, args.out, 12, extra=("--max-gpu-workers", "2"))
    rows = []
    try:
        rows.append(bench_layout(server, "Llama-8B (8 KV heads x 128, bf16, block 16: 32 KiB pieces)", 8, 128, 16, 4, 24, 11))
        # the same HND: every piece is transposed into token-major KV_2LTD by copy_pieces_kv2ltd (no DMA head)
        rows.append(bench_layout(server, "Llama-8B HND (8 KV heads x 128, bf16, block 16: transposed 32 KiB pieces)", 8, 128, 16, 4, 24,
                                 13, layout="hnd"))
        if os.environ.get("LMCACHE_BENCH_ROWS") != "small":
            rows.append(bench_layout(server, "large blocks (32 heads x 128, bf16, block 256: 2 MiB pieces)", 32, 128, 256, 1, 24, 12))
        rows.append(hybrid_check.bench_hybrid(sys.modules[__name__], server))
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/metrics", timeout=5) as r:
            # time from receiving a STORE/RETRIEVE to queueing its reply: the server's CPU share per request
            handler = [line for line in r.read().decode().splitlines()
                       if line.startswith("lmcache_mp_request_latency") and ('"store"' in line.lower() or '"retrieve"' in line.lower())]
    finally:
        server.stop()
    props = torch.cuda.get_device_properties(0)
    machine = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
               "cuda": torch.version.cuda, "kernel_blocks": int(os.environ.get("LMCACHE_COPY_BLOCKS", "8")),
               "java_opts": os.environ.get("LMCACHE_JAVA_OPTS", "")}
    report = {"machine": machine, "rows": rows, "handler_latency": handler}
    with open(os.path.join(args.out, f"gpu_bench-{os.environ.get('LMCACHE_BENCH_TAG', machine['kernel_blocks'])}.json"), "w") as f:
        json.dump(report, f, indent=1)
    log(json.dumps(report, indent=1))
    return 0


def main():
    p = script_args()
    p.add_argument("mode", choices=["test", "bench"])
    args = p.parse_args()
    torch.cuda.init()
    return run_tests(args) if args.mode == "test" else run_bench(args)


if __name__ == "__main__":
    sys.exit(main())
