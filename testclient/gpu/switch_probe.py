#!/usr/bin/env python3
"""What a copy costs when another process used the GPU last (issue 17): the server's copies run in its own CUDA
context, right after the worker's context recorded its event, while the raw baseline copies in the worker's own.

Two processes, torch only, no server. The "server" process times one operation from issuing it to its event complete
(CPU clock, best and median of --repeats) after the "worker" process ran a tiny kernel and synchronized (other
context), and after the server process ran that kernel itself (same context), each after the same idle gap.
Operations: a 32 MiB copy D2H and H2D; a small kernel then the D2H copy on the same stream; a small kernel on one
stream and the copy on another waiting for it (the shape of the server's STORE batch).

    python3 testclient/gpu/switch_probe.py > $OUT/switch_probe.json
"""

import argparse
import json
import multiprocessing as mp
import time


def worker(conn):
    import torch
    x = torch.zeros(1024, device="cuda")
    while conn.recv() == "touch":
        x.add_(1)
        torch.cuda.synchronize()
        conn.send("touched")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--mib", type=int, default=32)
    p.add_argument("--idle-ms", type=float, default=2.0)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    other = ctx.Process(target=worker, args=(there,))
    other.start()
    import torch
    n = args.mib << 20
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    small = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
    staging = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
    mine = torch.zeros(1024, device="cuda")
    a, b = torch.cuda.Stream(), torch.cuda.Stream()

    def d2h():
        host.copy_(dev, non_blocking=True)

    def h2d():
        dev.copy_(host, non_blocking=True)

    def kernel_then_d2h():
        staging.copy_(small, non_blocking=True)  # a device-to-device copy runs as a kernel
        host.copy_(dev, non_blocking=True)

    def kernel_other_stream_then_d2h():
        with torch.cuda.stream(a):
            staging.copy_(small, non_blocking=True)
            filled = torch.cuda.Event()
            filled.record(a)
        with torch.cuda.stream(b):
            b.wait_event(filled)
            host.copy_(dev, non_blocking=True)
            done = torch.cuda.Event()
            done.record(b)
        return done

    ops = {"d2h": d2h, "h2d": h2d, "kernel_then_d2h": kernel_then_d2h, "kernel_other_stream_then_d2h": kernel_other_stream_then_d2h}
    out = {"mib": args.mib, "idle_ms": args.idle_ms, "repeats": args.repeats, "gpu": torch.cuda.get_device_name(0), "ops": {}}
    for name, op in ops.items():
        row = {}
        for who in ("same_context", "other_context", "same_context_again"):
            times = []
            for _ in range(args.repeats):
                if who == "other_context":
                    here.send("touch")
                    assert here.recv() == "touched"
                else:
                    mine.add_(1)
                    torch.cuda.synchronize()
                time.sleep(args.idle_ms / 1000)
                t0 = time.perf_counter()
                done = op()
                if done is None:
                    done = torch.cuda.Event()
                    done.record()
                done.synchronize()
                times.append(time.perf_counter() - t0)
            times.sort()
            row[f"{who}_us_best"] = round(times[0] * 1e6, 1)
            row[f"{who}_us_median"] = round(times[len(times) // 2] * 1e6, 1)
        row["other_minus_same_us_best"] = round(row["other_context_us_best"] - min(row["same_context_us_best"],
                                                                                  row["same_context_again_us_best"]), 1)
        out["ops"][name] = row
    here.send("stop")
    other.join()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
