#!/usr/bin/env python3
"""CPU cost of the driver's batched copy against one copy call per piece (issue 17), on a GPU host (torch only).

The server's DMA head (cuda/BatchCopy) issues cuMemcpyBatchAsync on the handler's thread; a profile of the server under
one request in flight put ~19 µs of CPU in each such call. This times, per call, how long the CPU is inside
cuMemcpyBatchAsync (12.8 ABI, as the server calls it) for 1 to 256 copies of 32 KiB and 512 KiB, D2H and H2D, against
cuMemcpyAsync once per piece and one cuMemcpyAsync of the same bytes; the GPU time of each batch comes from CUDA events.
Best and median of --repeats, microseconds.

    python3 testclient/gpu/batch_copy_probe.py --out $OUT/batch_copy_probe.json
"""
import argparse
import ctypes
import json
import statistics
import time

import torch

ABI = 12080


def driver():
    cuda = ctypes.CDLL("libcuda.so.1")
    get = cuda.cuGetProcAddress_v2
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
    fn, status = ctypes.c_void_p(), ctypes.c_int()
    assert get(b"cuMemcpyBatchAsync", ctypes.byref(fn), ABI, 0, ctypes.byref(status)) == 0 and status.value == 0
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
    batch = proto(fn.value)
    memcpy = cuda.cuMemcpyAsync
    memcpy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    return batch, memcpy


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    torch.cuda.init()
    batch, memcpy = driver()
    stream = torch.cuda.Stream()
    dev = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    host = torch.empty(512 << 20, dtype=torch.uint8, pin_memory=True)
    dev_base, host_base = dev.data_ptr(), host.data_ptr()
    ordinal = torch.cuda.current_device()
    results = []
    for direction in ("d2h", "h2d"):
        # {srcAccessOrder = stream; src {type, id}; dst {type, id}; flags = prefer overlap with compute}, as BatchCopy sets it
        src_loc, dst_loc = ((1, ordinal), (2, 0)) if direction == "d2h" else ((2, 0), (1, ordinal))
        attrs = (ctypes.c_int * 6)(1, src_loc[0], src_loc[1], dst_loc[0], dst_loc[1], 1)
        attr_idx = (ctypes.c_size_t * 1)(0)
        fail = ctypes.c_size_t()
        for piece in (32 << 10, 512 << 10):
            for n in (1, 4, 16, 64, 256):
                # pieces spread over the buffers (every other slot), as scattered blocks are
                offsets = [2 * i * piece for i in range(n)]
                dev_ptrs = [dev_base + o for o in offsets]
                host_ptrs = [host_base + o for o in offsets]
                src, dst = (dev_ptrs, host_ptrs) if direction == "d2h" else (host_ptrs, dev_ptrs)
                srcs = (ctypes.c_uint64 * n)(*src)
                dsts = (ctypes.c_uint64 * n)(*dst)
                sizes = (ctypes.c_size_t * n)(*([piece] * n))
                handle = ctypes.c_void_p(stream.cuda_stream)
                rows = {}
                for method in ("batch", "per_piece", "one_copy"):
                    cpu, gpu = [], []
                    for rep in range(args.repeats + 20):
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        start.record(stream)
                        t0 = time.perf_counter_ns()
                        if method == "batch":
                            rc = batch(dsts, srcs, sizes, n, attrs, attr_idx, 1, ctypes.byref(fail), handle)
                        elif method == "per_piece":
                            rc = 0
                            for i in range(n):
                                rc |= memcpy(dst[i], src[i], piece, handle)
                        else:
                            rc = memcpy(dst[0], src[0], piece * n, handle)
                        t1 = time.perf_counter_ns()
                        end.record(stream)
                        assert rc == 0, f"{method} returned {rc}"
                        end.synchronize()
                        if rep >= 20:
                            cpu.append((t1 - t0) / 1000)
                            gpu.append(start.elapsed_time(end) * 1000)
                    rows[method] = {"cpu_us_best": min(cpu), "cpu_us_median": statistics.median(cpu),
                                    "gpu_us_median": statistics.median(gpu),
                                    "gbps": n * piece / (statistics.median(gpu) * 1e3)}
                row = {"direction": direction, "piece_kib": piece >> 10, "copies": n, **rows}
                results.append(row)
                print(f"{direction} {piece >> 10:4d} KiB x {n:3d}: CPU per call median batch {rows['batch']['cpu_us_median']:7.1f} us, "
                      f"per piece {rows['per_piece']['cpu_us_median']:7.1f}, one copy {rows['one_copy']['cpu_us_median']:6.1f};"
                      f" GB/s batch {rows['batch']['gbps']:5.1f}, per piece {rows['per_piece']['gbps']:5.1f},"
                      f" one copy {rows['one_copy']['gbps']:5.1f}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
