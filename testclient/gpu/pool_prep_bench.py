#!/usr/bin/env python3
"""Pool preparation on a GPU host (issue 17): start the server with a pool of --gb GiB and time how long
until its first region is ready (it serves from then on) and until every region is prefaulted and pinned,
for each thread count given (-Dlmcache.l1.prepareThreads; 0: the server's own choice). Also records the host's transparent-huge-page
settings, which decide whether the pool gets huge pages.

    python3 testclient/gpu/pool_prep_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --out $OUT/prep --gb 64 --threads 1,8
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_check import free_port, log, script_args  # noqa: E402


def status(http):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/status", timeout=5) as r:
        return json.loads(r.read())


def one(args, threads):
    port, http = free_port(), free_port()
    path = os.path.join(args.out, f"server-prep-{threads}{'-anon' if args.anonymous else ''}{args.tag}.log")
    cmd = [args.java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx2g",
           f"-Dlmcache.l1.prepareThreads={threads}", *os.environ.get("LMCACHE_JAVA_OPTS", "").split(), "-cp", args.classpath, "io.lmcache.server.Main", "--device", "cuda",
           "--host", "127.0.0.1", "--port", str(port), "--http-host", "127.0.0.1", "--http-port", str(http),
           "--l1-size-gb", str(args.gb)] + (["--shm-name", ""] if args.anonymous else []) + args.server_arg
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=open(path, "w"), stderr=subprocess.STDOUT)
    first, prep = None, {}
    try:
        while time.perf_counter() - t0 < 600:
            if proc.poll() is not None:
                raise RuntimeError(open(path).read()[-3000:])
            try:
                prep = status(http)["storage_manager"]["l1_manager"]["pool_preparation"]
            except OSError:
                time.sleep(0.05)
                continue
            if first is None and prep["regions_prepared"] >= 1:
                first = time.perf_counter() - t0
            if prep["regions_prepared"] == prep["regions_total"]:
                break
            if prep.get("error"):
                raise RuntimeError(prep["error"])
            time.sleep(0.05)
        total = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(60)
    text = open(path).read()
    rates = re.findall(r"L1 pool preparation: 100% .* in (\d+) ms \(([\d.]+) GiB/s", text)
    split = re.findall(r"100% .*thread time: ([^)]*)\)", text)
    row = {"threads": threads, "gib": args.gb, "server_args": args.server_arg, "pool": "anonymous" if args.anonymous else "shm", "thread_time": split[-1] if split else None, "first_region_ready_s": first, "all_ready_s_from_launch": total,
           "server_prepare_ms": int(rates[-1][0]) if rates else None,
           "server_threads": prep.get("threads"), "huge_pages": prep.get("huge_pages"), "server_gib_per_s": float(rates[-1][1]) if rates else None}
    log(json.dumps(row))
    return row


def main():
    p = script_args()
    p.add_argument("--gb", type=int, default=64)
    p.add_argument("--threads", default="1,8", help="preparation threads per run; 0 = the server's own choice")
    p.add_argument("--anonymous", action="store_true", help="--shm-name '': anonymous memory (transparent huge pages where enabled)")
    p.add_argument("--tag", default="")
    p.add_argument("--server-arg", action="append", default=[], help="a server flag, e.g. --server-arg=--l1-region-size-mb=4096 "
                   "(region size: how much one pinning call covers)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    thp = {}
    for name in ("enabled", "shmem_enabled", "defrag"):
        try:
            thp[name] = open(f"/sys/kernel/mm/transparent_hugepage/{name}").read().strip()
        except OSError as e:
            thp[name] = str(e)
    rows = [one(args, int(t)) for t in args.threads.split(",")]
    report = {"thp": thp, "cpus": os.cpu_count(), "command": " ".join(sys.argv), "java_opts": os.environ.get("LMCACHE_JAVA_OPTS", ""),
              "rows": rows}
    with open(os.path.join(args.out, f"pool_prep{args.tag}.json"), "w") as f:
        json.dump(report, f, indent=1)
    log(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
