#!/usr/bin/env python3
"""Issue 47 on the GPU host: isolated IPC (timeline-semaphore events) and VMM (cuMem) registration.

This process is the worker (a second process: the server is the Java process it starts, so the PIDs differ, as isolated
IPC requires). It talks to libcuda.so.1 through ctypes for what torch does not expose:

* isolated IPC, as LMCache's ``TimelineSemaphoreEventIPCBackend`` does it (``lmcache/v1/platform/devices/cuda/
  timeline_semaphore_event_ipc.py@bee9b57d``): a 32 KiB ``cuMemAlloc``'d slot buffer exported once with
  ``cuIpcGetMemHandle``; record = ``cuStreamWriteValue64`` of the stream's slot, export = ``struct.pack("!B64sQQ", 1,
  handle, slot*8, seq)``; the server's reply opened with ``cuIpcOpenMemHandle`` and waited with ``cuStreamWaitValue64``
  (GEQ). KV tensors registered as ``RawCudaIPCWrapper`` (a raw ``cudaIpcMemHandle_t`` of a ``cuMemAlloc``'d pool).
* the ordering test of newest-clients.md §2.6: the worker's slot write is gated behind a wait on another slot that the
  host releases later; the blocks are rewritten behind the gate, so a server that copied before the slot reached its
  value would store the old bytes. Also: the server's completion must not be reached while the gate is closed.
* VMM: a pool made as vLLM's cumem allocator makes it (``csrc/cumem_allocator.cpp``: ``cuMemCreate`` with FABRIC when the
  device supports it, granularity-rounded, reserve/map/set access), exported as a fabric handle inside a
  ``VmmCudaIPCWrapper``; where the host has no IMEX channel (``cuMemCreate(FABRIC)`` fails) the test says so and checks
  the POSIX-fd kind instead: REGISTER answered, transfers ``(valid event, false)``, never a hang.
* release: GPU memory returns after UNREGISTER once the producer frees its allocation (an import the server kept would
  pin it).

  python3 isolated_ipc_check.py --java J --classpath CP --out DIR
"""

import ctypes
import json
import os
import pickle
import random
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "stubs"))

import torch  # noqa: E402

import gpu_check as g  # noqa: E402
from lmcache.v1.platform.devices.cuda.ipc_wrapper import RawCudaIPCWrapper, VmmCudaIPCWrapper  # noqa: E402

cuda = ctypes.CDLL("libcuda.so.1")
SLOTS, SLOT_BYTES = 4096, 8
GEQ = 0


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def ck(result, what):
    if result != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else result}")


def mem_alloc(nbytes):
    ptr = ctypes.c_uint64()
    ck(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    return ptr.value


def ipc_handle(ptr):
    h = IpcHandle()
    ck(cuda.cuIpcGetMemHandle(ctypes.byref(h), ctypes.c_uint64(ptr)), "cuIpcGetMemHandle")
    return ctypes.string_at(ctypes.addressof(h), 64)  # not h.reserved: a c_char array's value stops at the first NUL


def write_value(stream, addr, value):
    ck(cuda.cuStreamWriteValue64_v2(ctypes.c_void_p(stream), ctypes.c_uint64(addr), ctypes.c_uint64(value), 0),
       "cuStreamWriteValue64")


def wait_value(stream, addr, value):
    ck(cuda.cuStreamWaitValue64_v2(ctypes.c_void_p(stream), ctypes.c_uint64(addr), ctypes.c_uint64(value), GEQ),
       "cuStreamWaitValue64")


_READ_STREAM = []


def read_u64(addr):
    """The slot's value through a non-blocking stream of its own (as LMCache's buffer_ops_stream): a read on the legacy
    stream would wait for a stream held at a gate."""
    if not _READ_STREAM:
        stream = ctypes.c_void_p()
        ck(cuda.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate(NON_BLOCKING)")
        _READ_STREAM.append(stream)
    out = ctypes.c_uint64()
    ck(cuda.cuMemcpyDtoHAsync_v2(ctypes.byref(out), ctypes.c_uint64(addr), ctypes.c_size_t(8), _READ_STREAM[0]), "cuMemcpyDtoHAsync")
    ck(cuda.cuStreamSynchronize(_READ_STREAM[0]), "cuStreamSynchronize")
    return out.value


class Timeline:
    """The worker's side of LMCache's timeline-semaphore backend (one recording stream: slot 1; slot 2 is the test's gate)."""

    def __init__(self):
        self.base = mem_alloc(SLOTS * SLOT_BYTES)
        ck(cuda.cuMemsetD8_v2(ctypes.c_uint64(self.base), 0, ctypes.c_size_t(SLOTS * SLOT_BYTES)), "cuMemsetD8")
        self.handle = ipc_handle(self.base)
        self.seq = 0
        self.opened = {}
        self.gate = 0

    def record(self, stream, gated=False):
        """Records on `stream`; `gated`: behind a wait on the gate slot, which release() opens."""
        if gated:
            self.gate += 1
            wait_value(stream, self.base + 2 * SLOT_BYTES, self.gate)
        self.seq += 1
        write_value(stream, self.base + SLOT_BYTES, self.seq)
        return struct.pack("!B64sQQ", 1, self.handle, SLOT_BYTES, self.seq)

    def release(self, stream):
        write_value(stream, self.base + 2 * SLOT_BYTES, self.gate)

    def peer(self, handle):
        if handle not in self.opened:
            ptr = ctypes.c_uint64()
            h = IpcHandle()
            ctypes.memmove(ctypes.addressof(h), handle, 64)
            ck(cuda.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle(server's semaphores)")
            self.opened[handle] = ptr.value
        return self.opened[handle]

    def reached(self, payload):
        version, handle, offset, seq = struct.unpack("!B64sQQ", payload)
        assert version == 1 and offset % 8 == 0 and offset < SLOTS * SLOT_BYTES, (version, offset)
        base = self.peer(handle)  # opened even for sequence 0, as LMCache's import_event does: the handle must be real
        return seq == 0 or read_u64(base + offset) >= seq

    def import_event(self, payload):
        """LMCache's import_event: validate, open the exporter's buffer (cached); returns (address of the slot, seq)."""
        version, handle, offset, seq = struct.unpack("!B64sQQ", payload)
        assert version == 1 and offset % 8 == 0 and offset < SLOTS * SLOT_BYTES, (version, offset)
        return self.peer(handle) + offset, seq

    def synchronize(self, imported):
        """LMCache's synchronize_event: done if the slot is there already, else a GEQ wait on a dedicated stream, synced."""
        addr, seq = imported
        if seq == 0 or read_u64(addr) >= seq:
            return
        if not hasattr(self, "sync_stream"):
            self.sync_stream = torch.cuda.Stream()
        wait_value(self.sync_stream.cuda_stream, addr, seq)
        self.sync_stream.synchronize()

    def wait(self, payload, timeout=30.0):
        """What the client's synchronize_event does, bounded: the server's slot must reach the payload's sequence."""
        assert isinstance(payload, (bytes, bytearray)) and len(payload) == 81, f"reply event {payload!r}"
        deadline = time.time() + timeout
        while not self.reached(bytes(payload)):
            if time.time() > deadline:
                raise TimeoutError("the server's timeline event did not complete")
            time.sleep(0.0005)


class RawPool:
    """KV tensors (FlashInfer layout: a block is contiguous) carved out of one cuMemAlloc'd pool, as RawCudaIPCWrapper shares."""

    def __init__(self, layers=4, blocks=64, block=16, heads=4, head=64, seed=0):
        self.layers, self.blocks, self.block = layers, blocks, block
        self.shape = (blocks, 2, block, heads, head)
        self.layer_bytes = blocks * 2 * block * heads * head * 2
        self.nbytes = layers * self.layer_bytes
        self.base = mem_alloc(self.nbytes)
        self.handle = ipc_handle(self.base)
        self.tensors = [tensor_at(self.base + i * self.layer_bytes, self.shape, torch.bfloat16) for i in range(layers)]
        gen = torch.Generator(device="cuda").manual_seed(seed)
        for t in self.tensors:
            t.copy_(torch.randn(self.shape, device="cuda", dtype=torch.bfloat16, generator=gen))
        torch.cuda.synchronize()

    def wrappers(self, uuid):
        return [g.ext(1, pickle.dumps(RawCudaIPCWrapper(ipc_handle_reserved=self.handle, alloc_offset=i * self.layer_bytes,
                                                        nbytes=self.layer_bytes, dtype=torch.bfloat16, shape=self.shape,
                                                        stride=self.tensors[i].stride(), device_uuid=uuid), protocol=4))
                for i in range(self.layers)]

    def block_bytes(self, b):
        return torch.cat([t[b].reshape(-1) for t in self.tensors])

    def free(self):
        self.tensors = []
        ck(cuda.cuMemFree_v2(ctypes.c_uint64(self.base)), "cuMemFree")


class CudaArray:
    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None}


def tensor_at(ptr, shape, dtype):
    """A torch tensor over device memory torch did not allocate (as LMCache wraps a VMM mapping through DLPack)."""
    raw = torch.as_tensor(CudaArray(ptr, (int(torch.Size(shape).numel()) * 2,), "|u1"), device="cuda")
    return raw.view(dtype).view(shape)


def uuid():
    return str(torch.cuda.get_device_properties(0).uuid)


def free_bytes():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    ck(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    return free.value


class IsolatedWorker:
    def __init__(self, server, pool, seed):
        self.server, self.pool = server, pool
        self.client = g.Client(server.port)
        self.instance = random.Random(seed).getrandbits(63)
        self.timeline = Timeline()
        self.stream = torch.cuda.Stream()  # non-blocking w.r.t. the legacy stream, as vLLM's
        self.gate_stream = torch.cuda.Stream()

    def register(self, wrappers=None):
        return self.client.call("register", self.instance, wrappers or self.pool.wrappers(uuid()), g.MODEL, 1, "vllm",
                                {"kv_layout": "NHD"}, [])

    def transfer(self, op, tokens, blocks, request, gated=False, event=None):
        if event is None:
            event = self.timeline.record(self.stream.cuda_stream, gated)
        args = [g.key(tokens, 0, len(tokens), request), self.instance, [blocks], event]
        if op == "retrieve":
            args.append(0)
        return self.client.call(op, *args)


def tokens_for(seed, chunks=1):
    rng = random.Random(seed)
    return [rng.randrange(150000) for _ in range(chunks * g.CHUNK)]


def isolated_tests(args):
    server = g.Server(args.java, args.classpath, args.out, 2, extra=("--isolated-ipc",))
    try:
        pool = RawPool(seed=3)
        w = IsolatedWorker(server, pool, seed=3)
        g.check("isolated: REGISTER of RawCudaIPCWrapper (devices module path)", w.register() is None)
        per_chunk = g.CHUNK // pool.block
        src, dst = list(range(per_chunk)), list(range(per_chunk, 2 * per_chunk))
        tokens = tokens_for(11)
        before = [pool.block_bytes(b).clone() for b in src]
        handle, ok = w.transfer("store", tokens, src, "iso-1")
        g.check("isolated: STORE answered with an 81-byte timeline event", ok and len(handle) == 81, f"{len(handle)} bytes")
        w.timeline.wait(handle)
        hits = w.client.call("lookup", g.key(tokens, 0, g.CHUNK, "iso-1", worker_id=None), 1) is None and \
            g.query_until_answered(w.client, "iso-1", 5)
        for b in dst:
            pool.tensors[0][b].zero_()
        torch.cuda.synchronize()
        handle, ok = w.transfer("retrieve", tokens, dst, "iso-1")
        w.timeline.wait(handle)
        torch.cuda.synchronize()
        same = all(torch.equal(pool.block_bytes(d), x) for d, x in zip(dst, before))
        g.check("isolated: STORE -> RETRIEVE round-trips byte-exact", ok and len(handle) == 81 and same, f"hits={hits}")

        # §2.6 ordering: rewrite the source blocks behind a closed gate, and the slot write behind them
        tokens2 = tokens_for(12)
        pattern = [torch.full_like(pool.tensors[0][0], float(7 + i)) for i in range(len(src))]
        torch.cuda.synchronize()  # the patterns are made on the legacy stream; the worker's stream does not wait for it
        with torch.cuda.stream(w.stream):
            wait_value(w.stream.cuda_stream, w.timeline.base + 2 * SLOT_BYTES, w.timeline.gate + 1)
            for i, b in enumerate(src):
                for t in pool.tensors:
                    t[b].copy_(pattern[i])
        w.timeline.gate += 1
        w.timeline.seq += 1
        write_value(w.stream.cuda_stream, w.timeline.base + SLOT_BYTES, w.timeline.seq)
        event = struct.pack("!B64sQQ", 1, w.timeline.handle, SLOT_BYTES, w.timeline.seq)
        handle, ok = w.transfer("store", tokens2, src, "iso-2", event=event)
        time.sleep(0.5)
        early = w.timeline.reached(bytes(handle))
        w.timeline.release(w.gate_stream.cuda_stream)
        w.timeline.wait(handle)
        g.check("isolated ordering: the server's completion is not reached while the worker's slot is gated", ok and not early)
        w.client.call("lookup", g.key(tokens2, 0, g.CHUNK, "iso-2", worker_id=None), 1)
        g.query_until_answered(w.client, "iso-2", 5)
        for b in dst:
            for t in pool.tensors:
                t[b].zero_()
        torch.cuda.synchronize()
        handle, ok = w.transfer("retrieve", tokens2, dst, "iso-2")
        w.timeline.wait(handle)
        torch.cuda.synchronize()
        stored_after_gate = all(torch.equal(pool.tensors[0][d], pattern[i]) for i, d in enumerate(dst))
        g.check("isolated ordering: the server copied the bytes written behind the gate, not the earlier ones",
                ok and stored_after_gate)

        # negative cases: each answered (the client's recv times out after 60 s), in the request's format
        bad_version = struct.pack("!B64sQQ", 2, w.timeline.handle, 8, 1)
        bad_slot = struct.pack("!B64sQQ", 1, w.timeline.handle, 32768, 1)
        odd_slot = struct.pack("!B64sQQ", 1, w.timeline.handle, 12, 1)
        for name, event in (("version 2", bad_version), ("slot offset 32768", bad_slot), ("slot offset 12", odd_slot)):
            handle, ok = w.transfer("store", tokens_for(13), src, "iso-bad", event=event)
            g.check(f"isolated negative: {name} answered (81 bytes, false) and completes", not ok and len(handle) == 81
                    and w.timeline.reached(bytes(handle)))
        cuda_event = g.Worker.event(type("E", (), {"keep": []})())
        handle, ok = w.transfer("store", tokens_for(14), src, "iso-64", event=cuda_event)
        g.Worker.wait(handle)
        g.check("isolated: a CUDA event on an --isolated-ipc server is served in kind (64 bytes)", ok and len(handle) == 64)
        handle, ok = w.transfer("store", tokens_for(15), src, "iso-70", event=bytes(70))
        g.check("isolated negative: a 70-byte event answered (64 bytes, false)", not ok and len(handle) == 64)
        g.check("isolated: malformed handles counted", server.metric("lmcache_mp_malformed_event_handles_total") >= 4,
                str(server.metric("lmcache_mp_malformed_event_handles_total")))
        g.check("isolated: the kind mismatch counted", server.metric("lmcache_mp_event_kind_mismatches_total") >= 1)
        # unknown instance: a timeline failure event the worker can open
        w2 = g.Client(server.port)
        handle, ok = w2.call("store", g.key(tokens_for(16), 0, g.CHUNK, "iso-u"), 424242, [src],
                             w.timeline.record(w.stream.cuda_stream))
        g.check("isolated: an unknown instance's STORE gets a timeline failure event that opens and is complete",
                not ok and len(handle) == 81 and w.timeline.reached(bytes(handle)))

        # release: UNREGISTER, then the producer frees: the memory must come back (an import kept by the server pins it)
        torch.cuda.synchronize()
        baseline = free_bytes()
        big = RawPool(layers=2, blocks=4096, seed=5)  # 2 x 4096 x 2 x 16 x 4 x 64 x 2 B = 512 MiB
        wb = IsolatedWorker(server, big, seed=5)
        wb.register()
        wb.client.call("unregister", wb.instance)
        time.sleep(1.0)
        big.free()
        torch.cuda.synchronize()
        recovered = None
        deadline = time.time() + 10
        while time.time() < deadline:
            recovered = free_bytes()
            if recovered >= baseline - (64 << 20):
                break
            time.sleep(0.2)
        g.check("release: after UNREGISTER and the producer's free, the GPU memory returns (raw IPC, 512 MiB)",
                recovered >= baseline - (64 << 20), f"free before {baseline >> 20} MiB, after {recovered >> 20} MiB")
    finally:
        server.stop()


# --- VMM -----------------------------------------------------------------------------------------

class AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int),
                ("win32", ctypes.c_void_p), ("compression", ctypes.c_ubyte), ("rdma", ctypes.c_ubyte), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 4)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int), ("flags", ctypes.c_int)]


FABRIC, POSIX_FD = 0x8, 0x1


class VmmPool:
    """One allocation as vLLM's cumem allocator makes it: cuMemCreate (PINNED, on this device, the handle type asked for),
    size rounded up to the MINIMUM granularity, reserved, mapped, read/write for this device."""

    def __init__(self, nbytes, handle_type):
        prop = AllocProp(type=1, requestedHandleTypes=handle_type, loc_type=1, loc_id=0)
        gran = ctypes.c_size_t()
        ck(cuda.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "cuMemGetAllocationGranularity")
        self.size = (nbytes + gran.value - 1) // gran.value * gran.value
        self.handle = ctypes.c_uint64()
        ck(cuda.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(self.size), ctypes.byref(prop), ctypes.c_uint64(0)), "cuMemCreate")
        va = ctypes.c_uint64()
        ck(cuda.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(self.size), ctypes.c_size_t(0), ctypes.c_uint64(0),
                                    ctypes.c_uint64(0)), "cuMemAddressReserve")
        self.va = va.value
        ck(cuda.cuMemMap(ctypes.c_uint64(self.va), ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle, ctypes.c_uint64(0)),
           "cuMemMap")
        access = AccessDesc(loc_type=1, loc_id=0, flags=3)
        ck(cuda.cuMemSetAccess(ctypes.c_uint64(self.va), ctypes.c_size_t(self.size), ctypes.byref(access), ctypes.c_size_t(1)),
           "cuMemSetAccess")

    def fabric_handle(self):
        blob = (ctypes.c_ubyte * 64)()
        ck(cuda.cuMemExportToShareableHandle(ctypes.byref(blob), self.handle, FABRIC, ctypes.c_uint64(0)),
           "cuMemExportToShareableHandle(FABRIC)")
        return bytes(blob)

    def free(self):
        cuda.cuMemUnmap(ctypes.c_uint64(self.va), ctypes.c_size_t(self.size))
        cuda.cuMemAddressFree(ctypes.c_uint64(self.va), ctypes.c_size_t(self.size))
        cuda.cuMemRelease(self.handle)


def vmm_wrappers(pool, kind, layers, shape):
    layer_bytes = int(torch.Size(shape).numel()) * 2
    blob = pool.fabric_handle() if kind == "fabric" else None
    stride = torch.empty(shape, device="meta").stride()
    return [g.ext(1, pickle.dumps(VmmCudaIPCWrapper(export_id=os.urandom(16), kind=kind, fabric_blob=blob, alloc_size=pool.size,
                                                    alloc_offset=i * layer_bytes, nbytes=layer_bytes, dtype=torch.bfloat16,
                                                    shape=shape, stride=stride, device_uuid=uuid()), protocol=4))
            for i in range(layers)]


def vmm_tests(args):
    imex = os.path.isdir("/dev/nvidia-caps-imex-channels") and os.listdir("/dev/nvidia-caps-imex-channels")
    fabric_pool = None
    try:
        fabric_pool = VmmPool(64 << 20, FABRIC)
        fabric_pool.fabric_handle()
    except RuntimeError as e:
        g.log(f"VMM fabric: not on this host ({e}; IMEX channel present: {bool(imex)}): the fabric round trip and its release"
              " test are skipped; vLLM's allocator would make a POSIX-fd pool here")
        RESULTS_NOTES.append(f"no IMEX channel / fabric handles on this host: {e}")
        if fabric_pool is not None:
            fabric_pool.free()
        fabric_pool = None
    server = g.Server(args.java, args.classpath, args.out, 2)
    try:
        layers, shape = 4, (64, 2, 16, 4, 64)
        fd_pool = VmmPool(layers * int(torch.Size(shape).numel()) * 2, POSIX_FD)
        client = g.Client(server.port)
        instance = 777001
        reply = client.call("register", instance, vmm_wrappers(fd_pool, "posix_fd", layers, shape), g.MODEL, 1, "vllm",
                            {"kv_layout": "NHD"}, [])
        g.check("VMM posix_fd: REGISTER answered", reply is None)
        handle, ok = client.call("store", g.key(tokens_for(21), 0, g.CHUNK, "vmm-fd"), instance, [list(range(16))],
                                 g.Worker.event(type("E", (), {"keep": []})()))
        g.Worker.wait(handle)
        g.check("VMM posix_fd: STORE answered (valid event, false), never a hang", not ok and len(handle) == 64)
        log_text = open(server.log_path).read()
        g.check("VMM posix_fd: one clear log line", "VMM wrapper kind=posix_fd not supported" in log_text)
        fd_pool.free()
        if fabric_pool is not None:
            fabric_pool.free()
            torch.cuda.synchronize()
            baseline = free_bytes()
            pool = VmmPool(layers * int(torch.Size(shape).numel()) * 2, FABRIC)
            tensors = [tensor_at(pool.va + i * int(torch.Size(shape).numel()) * 2, shape, torch.bfloat16) for i in range(layers)]
            gen = torch.Generator(device="cuda").manual_seed(9)
            for t in tensors:
                t.copy_(torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen))
            torch.cuda.synchronize()
            instance = 777002
            g.check("VMM fabric: REGISTER", client.call("register", instance, vmm_wrappers(pool, "fabric", layers, shape), g.MODEL, 1,
                                                        "vllm", {"kv_layout": "NHD"}, []) is None)
            src, dst = list(range(16)), list(range(16, 32))
            before = [torch.cat([t[b].reshape(-1) for t in tensors]).clone() for b in src]
            toks = tokens_for(22)
            ev = type("E", (), {"keep": []})()
            handle, ok = client.call("store", g.key(toks, 0, g.CHUNK, "vmm-f"), instance, [src], g.Worker.event(ev))
            g.Worker.wait(handle)
            client.call("lookup", g.key(toks, 0, g.CHUNK, "vmm-f", worker_id=None), 1)
            g.query_until_answered(client, "vmm-f", 5)
            for t in tensors:
                t[16:32].zero_()
            torch.cuda.synchronize()
            handle, ok2 = client.call("retrieve", g.key(toks, 0, g.CHUNK, "vmm-f"), instance, [dst], g.Worker.event(ev), 0)
            g.Worker.wait(handle)
            same = all(torch.equal(torch.cat([t[d].reshape(-1) for t in tensors]), x) for d, x in zip(dst, before))
            g.check("VMM fabric: STORE -> RETRIEVE round-trips byte-exact", ok and ok2 and same)
            client.call("unregister", instance)
            time.sleep(1.0)
            tensors = []
            pool.free()
            torch.cuda.synchronize()
            deadline, recovered = time.time() + 10, 0
            while time.time() < deadline:
                recovered = free_bytes()
                if recovered >= baseline - (16 << 20):
                    break
                time.sleep(0.2)
            g.check("VMM fabric release: GPU memory returns after UNREGISTER", recovered >= baseline - (16 << 20),
                    f"free before {baseline >> 20} MiB, after {recovered >> 20} MiB")
    finally:
        server.stop()


RESULTS_NOTES = []


def main():
    args = g.script_args().parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context current on this thread, for the driver calls
    for part in (isolated_tests, vmm_tests):
        try:
            part(args)
        except Exception as e:  # noqa: BLE001 - one part's failure must not hide the other's results
            import traceback
            traceback.print_exc()
            g.check(f"{part.__name__} ran to the end", False, repr(e))
    with open(os.path.join(args.out, "isolated_ipc_tests.json"), "w") as f:
        json.dump({"results": g.RESULTS, "notes": RESULTS_NOTES}, f, indent=1)
    failed = [r["name"] for r in g.RESULTS if not r["ok"]]
    g.log(f"{len(g.RESULTS) - len(failed)}/{len(g.RESULTS)} passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
