#!/usr/bin/env python3
"""Where pool preparation's time goes, below the server: prefault and cuMemHostRegister called directly (ctypes on
libcuda, no torch), so each variant the server could adopt is measured on its own before it is built.

Variants, each on fresh memory of --gb GiB in regions of --region-mb MiB, T threads taking regions in turn:
  populate   MADV_POPULATE_WRITE only (anonymous: after MADV_HUGEPAGE; shm: /dev/shm file, 4 KiB pages unless
             shmem huge pages are on)
  register   cuMemHostRegister of regions already populated (PORTABLE|DEVICEMAP, as the server)
  both       populate then register per region, as the server does now
  split      populate on T threads, register on --pin-threads threads as regions become ready (a pipeline)
  hostalloc  cuMemHostAlloc of each region (the driver allocates and pins; anonymous only)

  python3 pin_probe.py [--gb 16] [--region-mb 1024] [--threads 1,4,8,16] [--variants ...] > probe.json
"""

import argparse
import ctypes
import json
import mmap
import os
import queue
import threading
import time

MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23
PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_ANON = 0x01, 0x02, 0x20
GIB = 1 << 30

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
cu = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


class Cuda:
    def __init__(self):
        check(cu.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")

    def bind(self):
        check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")


def mapping(total, shm):
    if shm:
        path = f"/dev/shm/pin_probe_{os.getpid()}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.unlink(path)
        os.ftruncate(fd, total)
        addr = libc.mmap(None, total, PROT_RW, MAP_SHARED, fd, 0)
        os.close(fd)
    else:
        addr = libc.mmap(None, total, PROT_RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    return addr


def populate(addr, size):
    libc.madvise(addr, size, MADV_HUGEPAGE)
    if libc.madvise(addr, size, MADV_POPULATE_WRITE) != 0:
        raise OSError(ctypes.get_errno(), "MADV_POPULATE_WRITE")


def register(addr, size):
    check(cu.cuMemHostRegister_v2(ctypes.c_void_p(addr), ctypes.c_size_t(size), 3), "cuMemHostRegister")


def unregister(addr):
    check(cu.cuMemHostUnregister(ctypes.c_void_p(addr)), "cuMemHostUnregister")


def run_threads(n, fn):
    errors = []

    def wrap(i):
        try:
            fn(i)
        except Exception as e:  # noqa: BLE001 - reported in the row
            errors.append(repr(e))

    ts = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(errors[0])


def anon_huge_kib():
    for line in open("/proc/meminfo"):
        if line.startswith("AnonHugePages:") or line.startswith("ShmemHugePages:"):
            yield line.split()[0].rstrip(":"), int(line.split()[1])


def variant(cuda, name, gb, region_mb, threads, pin_threads, shm):
    total, region = gb * GIB, region_mb << 20
    regions = [i * region for i in range(total // region)]
    row = {"variant": name, "gb": gb, "region_mb": region_mb, "threads": threads, "memory": "shm" if shm else "anonymous"}
    base = None if name == "hostalloc" else mapping(total, shm)
    nxt = iter(range(len(regions)))
    lock = threading.Lock()
    pinned, allocs = [], []
    spans = {"populate": 0.0, "register": 0.0}

    def take():
        with lock:
            return next(nxt, None)

    def timed(kind, fn, *a):
        t = time.perf_counter()
        fn(*a)
        with lock:
            spans[kind] += time.perf_counter() - t

    try:
        if name == "register":          # populate first, untimed
            run_threads(threads, lambda i: [populate(base + off, region) for off in regions[i::threads]])
        t0 = time.perf_counter()
        if name in ("populate", "both", "register"):
            def work(_):
                cuda.bind()
                while (r := take()) is not None:
                    if name != "register":
                        timed("populate", populate, base + regions[r], region)
                    if name != "populate":
                        timed("register", register, base + regions[r], region)
                        with lock:
                            pinned.append(base + regions[r])
            run_threads(threads, work)
        elif name == "split":
            ready = queue.Queue()
            row["pin_threads"] = pin_threads

            def fill(_):
                while (r := take()) is not None:
                    timed("populate", populate, base + regions[r], region)
                    ready.put(r)

            def pin(_):
                cuda.bind()
                while (r := ready.get()) is not None:
                    timed("register", register, base + regions[r], region)
                    with lock:
                        pinned.append(base + regions[r])

            pinners = [threading.Thread(target=pin, args=(i,)) for i in range(pin_threads)]
            for t in pinners:
                t.start()
            run_threads(threads, fill)
            for _ in pinners:
                ready.put(None)
            for t in pinners:
                t.join()
        elif name == "hostalloc":
            def work(_):
                cuda.bind()
                while take() is not None:
                    p = ctypes.c_void_p()
                    timed("register", lambda: check(cu.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(region), 3), "cuMemHostAlloc"))
                    with lock:
                        allocs.append(p)
            run_threads(threads, work)
        wall = time.perf_counter() - t0
        row.update(wall_s=round(wall, 3), gib_s=round(gb / wall, 2), thread_s={k: round(v, 2) for k, v in spans.items()},
                   meminfo_kib=dict(anon_huge_kib()))
    except Exception as e:  # noqa: BLE001 - a variant the host refuses is a row, not the end of the probe
        row["error"] = repr(e)
    finally:
        for p in pinned:
            unregister(p)
        for p in allocs:
            check(cu.cuMemFreeHost(p), "cuMemFreeHost")
        if base is not None:
            libc.munmap(base, total)
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gb", type=int, default=16)
    p.add_argument("--region-mb", default="1024")
    p.add_argument("--threads", default="1,4,8,16")
    p.add_argument("--pin-threads", default="2,4")
    p.add_argument("--variants", default="populate,register,both,split,hostalloc")
    p.add_argument("--memory", default="anonymous,shm")
    a = p.parse_args()
    cuda = Cuda()
    cuda.bind()
    host = {k: open(f"/sys/kernel/mm/transparent_hugepage/{k}").read().strip()
            for k in ("enabled", "shmem_enabled", "defrag") if os.path.exists(f"/sys/kernel/mm/transparent_hugepage/{k}")}
    host["hugetlb"] = [l.strip() for l in open("/proc/meminfo") if l.startswith("Huge")]
    host["cpus"] = os.cpu_count()
    print(json.dumps({"host": host}), flush=True)
    for memory in a.memory.split(","):
        for name in a.variants.split(","):
            if name == "hostalloc" and memory == "shm":
                continue
            for region_mb in map(int, a.region_mb.split(",")):
                for threads in map(int, a.threads.split(",")):
                    for pin_threads in (map(int, a.pin_threads.split(",")) if name == "split" else [0]):
                        print(json.dumps(variant(cuda, name, a.gb, region_mb, threads, pin_threads, memory == "shm")), flush=True)


if __name__ == "__main__":
    main()
