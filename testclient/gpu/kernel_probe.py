"""Measures the server's copy kernel alone (no server) moving pieces straight over PCIe, between
GPU memory and pinned host memory, one direction and both at once, against DMA; on cudaHostAlloc
memory and on a registered /dev/shm mapping like the L1 pool. Run on the GPU host:
    python3 testclient/gpu/kernel_probe.py  (prints one JSON object)
It is the evidence for the copy engine's design: SMs driving PCIe reach the line rate one way but
not both ways at once, so the server stages pieces in device memory and leaves PCIe to DMA."""
import json, mmap, os, random, time
import cupy as cp
import torch

PTX = os.path.join(os.path.dirname(__file__), "../../cuda/src/main/resources/io/lmcache/server/cuda/copy_pieces.ptx")
mod = cp.RawModule(path=PTX)
kernel = mod.get_function("copy_pieces")
TOTAL = 1 << 30  # bytes per direction per measurement
BLOCKS = int(os.environ.get("BLOCKS", "8"))


def host_alloc(nbytes):
    t = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    return t, t.data_ptr()


def host_shm(nbytes, name):
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, nbytes)
    m = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.unlink(f"/dev/shm/{name}")
    import ctypes
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    ctypes.memset(addr, 1, nbytes)
    cp.cuda.runtime.hostRegister(addr, nbytes, 1 | 2)  # portable | devicemap
    return m, addr


def descriptors(dev, host, piece, to_host, rng):
    n = TOTAL // piece
    slots = list(range(n))
    rng.shuffle(slots)
    d = []
    for i, s in enumerate(slots):
        g, h = dev + s * piece, host + i * piece
        d += [g, h, piece] if to_host else [h, g, piece]
    return cp.asarray(d, dtype=cp.uint64), n


def launch(stream, desc, n):
    kernel((BLOCKS,), (1024,), (desc, cp.int32(n)), stream=stream)


def timed(fns):
    """Runs each fn on its own stream, all at once; returns seconds per stream and the wall time."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in fns]
    best = None
    for _ in range(5):
        cp.cuda.Device().synchronize()
        ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in fns]
        t0 = time.perf_counter()
        for (a, b), s, fn in zip(ev, streams, fns):
            a.record(s)
            fn(s)
            b.record(s)
        for _, b in ev:
            b.synchronize()
        wall = time.perf_counter() - t0
        per = [cp.cuda.get_elapsed_time(a, b) / 1000 for a, b in ev]
        if best is None or wall < best[1]:
            best = (per, wall)
    return best


def main():
    rng = random.Random(1)
    dev_a = cp.cuda.alloc(TOTAL)
    dev_b = cp.cuda.alloc(TOTAL)
    out = {"gpu": torch.cuda.get_device_name(0), "blocks": BLOCKS, "bytes_per_direction": TOTAL}
    hosts = {"cudaHostAlloc": (host_alloc(TOTAL), host_alloc(TOTAL)),
             "registered /dev/shm": (host_shm(TOTAL, "probe_a"), host_shm(TOTAL, "probe_b"))}
    for hname, ((_, ha), (_, hb)) in hosts.items():
        for piece in (32 << 10, 512 << 10):
            d2h, n = descriptors(dev_a.ptr, ha, piece, True, rng)
            h2d, _ = descriptors(dev_b.ptr, hb, piece, False, rng)
            key = f"{hname}, {piece >> 10} KiB pieces"
            (t,), _ = timed([lambda s: launch(s, d2h, n)])
            r = {"kernel_d2h": TOTAL / t / 1e9}
            (t,), _ = timed([lambda s: launch(s, h2d, n)])
            r["kernel_h2d"] = TOTAL / t / 1e9
            per, wall = timed([lambda s: launch(s, d2h, n), lambda s: launch(s, h2d, n)])
            r["kernel_both_sum"] = 2 * TOTAL / wall / 1e9
            r["kernel_both_each"] = [TOTAL / p / 1e9 for p in per]
            per, wall = timed([lambda s: launch(s, d2h, n),
                               lambda s: cp.cuda.runtime.memcpyAsync(dev_b.ptr, hb, TOTAL, 1, s.ptr)])
            r["kernel_d2h_plus_dma_h2d_sum"] = 2 * TOTAL / wall / 1e9
            per, wall = timed([lambda s: cp.cuda.runtime.memcpyAsync(ha, dev_a.ptr, TOTAL, 2, s.ptr),
                               lambda s: launch(s, h2d, n)])
            r["dma_d2h_plus_kernel_h2d_sum"] = 2 * TOTAL / wall / 1e9
            out[key] = r
        per, wall = timed([lambda s: cp.cuda.runtime.memcpyAsync(ha, dev_a.ptr, TOTAL, 2, s.ptr),
                           lambda s: cp.cuda.runtime.memcpyAsync(dev_b.ptr, hb, TOTAL, 1, s.ptr)])
        out[f"{hname}, DMA contiguous"] = {"d2h_each": TOTAL / per[0] / 1e9, "h2d_each": TOTAL / per[1] / 1e9,
                                           "both_sum": 2 * TOTAL / wall / 1e9}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
