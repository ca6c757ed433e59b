#!/usr/bin/env python3
"""Issue 32 on a GPU host: the server holds no device memory before a worker registers, and little after; the NUMA
placement of its pool. Per server variant (a plain server, and each --variant's Java options):

  1. start the server, wait until its pool is prepared; nvidia-smi's per-process memory of the server's PID on every GPU
     must be 0 (no row at all), /status must show no context and the pool's pinning waiting for a registration;
  2. register one worker (this process, torch tensors) on GPU --gpu; the server's memory on that GPU must be <= --limit-mib
     (64: the issue's figure) and 0 on every other GPU; the pool's pinning must finish through that GPU;
  3. one STORE and RETRIEVE round trip; the memory again (the copy engine's staging is made at REGISTER, so no growth);
  4. /status: cuda.device_memory per GPU next to nvidia-smi, and storage pool_preparation.numa against sysfs (one node:
     nothing placed; several: each region on a GPU's node).

  python3 device_memory_check.py --java J --classpath CP --out DIR [--gpu 0] [--limit-mib 64] \
      [--variant 'stack256=-Dlmcache.cuda.stackLimitBytes=256'] [--variant 'staging1=-Dlmcache.cuda.stagingMiB=1']

Writes DIR/device_memory.json (every figure, per variant) and exits 1 if a check failed. nvidia-smi inside a container
with its own PID namespace may list host PIDs: then the server's rows cannot be told apart and the check says so.
"""

import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import gpu_check as g  # noqa: E402

MIB = 1 << 20


def smi_rows():
    """nvidia-smi's compute processes: [(pid, gpu_uuid, used MiB)]; None when nvidia-smi fails."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        g.log(f"nvidia-smi failed: {e!r}")
        return None
    if out.returncode != 0:
        g.log(f"nvidia-smi exited {out.returncode}: {out.stderr.strip()[:300]}")
        return None
    rows = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            used = int(parts[2]) if parts[2].isdigit() else -1  # "[N/A]" in some containers
            rows.append((int(parts[0]), parts[1].lower().removeprefix("gpu-"), used))
    return rows


def gpu_uuids():
    return [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]


def server_mib(pid, uuids, settle_s=2.0):
    """{gpu uuid: MiB the server's PID holds there (0 without a row)}, after letting the driver's accounting settle."""
    time.sleep(settle_s)
    rows = smi_rows()
    if rows is None:
        return None
    held = {u: 0 for u in uuids}
    for row_pid, uuid, used in rows:
        if row_pid == pid and uuid in held:
            held[uuid] += used
    return {"held": held, "rows": rows}


def wait_for(predicate, timeout_s, what):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"{what} not within {timeout_s} s")


def attributable(smi, pid):
    """False when nvidia-smi lists processes but never PIDs of this namespace (a container): the check cannot attribute."""
    if smi is None:
        return False
    return not smi["rows"] or any(row_pid in (pid, os.getpid()) for row_pid, _, _ in smi["rows"])


def numa_check(status, label):
    numa = g.pool_preparation(status).get("numa", {})
    nodes = sorted(int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n.startswith("node") and n[4:].isdigit()) \
        if os.path.isdir("/sys/devices/system/node") else []
    g.log(f"[{label}] NUMA: host nodes {nodes}; server: {json.dumps({k: v for k, v in numa.items() if k != 'region_nodes'})}")
    region_nodes = numa.get("region_nodes", [])
    if len(nodes) <= 1:
        g.check(f"[{label}] one NUMA node: nothing placed (method none, every region -1)",
                numa.get("method") == "none" and all(n == -1 for n in region_nodes), str(numa.get("message")))
    else:
        gpu_nodes = set()
        for dev in status["cuda"]["device_memory"]:
            try:
                with open(f"/sys/bus/pci/devices/{dev['pci_bus_id'][-12:]}/numa_node") as f:
                    gpu_nodes.add(int(f.read().strip()))
            except (OSError, ValueError):
                pass
        g.check(f"[{label}] {len(nodes)} NUMA nodes: regions placed on the GPUs' nodes {sorted(gpu_nodes)}",
                numa.get("method") in ("mbind", "first_touch") and set(region_nodes) <= gpu_nodes, str(numa))
    return numa


def run_variant(args, label, java_opts, uuids):
    """One server: before REGISTER, after one REGISTER on args.gpu, after a round trip. Returns the variant's figures."""
    os.environ["LMCACHE_JAVA_OPTS"] = java_opts
    result = {"variant": label, "java_opts": java_opts}
    server = g.Server(args.java, args.classpath, args.out, args.pool_gb)
    pid = server.proc.pid
    try:
        status = server.status()
        before = server_mib(pid, uuids)
        result["before_register"] = {"nvidia_smi_mib": before and before["held"], "status": status["cuda"]["device_memory"],
                                     "pool_pinning": status["cuda"].get("pool_pinning")}
        if not attributable(before, pid):
            g.check(f"[{label}] nvidia-smi lists this namespace's PIDs", False, "cannot attribute device memory to the server")
        g.check(f"[{label}] before any REGISTER: the server holds 0 MiB on every GPU (nvidia-smi)",
                before is not None and all(v == 0 for v in before["held"].values()), json.dumps(before and before["held"]))
        g.check(f"[{label}] before any REGISTER: /status shows no context and 0 bytes on every GPU",
                all(not d["context"] and d["allocated_bytes"] == 0 and not d.get("driver_context_active", False)
                    for d in status["cuda"]["device_memory"]), json.dumps(status["cuda"]["device_memory"]))
        g.check(f"[{label}] before any REGISTER: the pool's pinning waits for a registration",
                status["cuda"]["pool_pinning"].get("state") == "waiting", json.dumps(status["cuda"].get("pool_pinning")))
        numa_check(status, label)

        torch.cuda.set_device(args.gpu)
        w = g.Worker(server, "nhd", seed=71)
        t0 = time.perf_counter()
        reply = w.register()
        result["register_ms"] = (time.perf_counter() - t0) * 1e3
        g.check(f"[{label}] REGISTER on GPU {args.gpu}", reply is None, repr(reply))
        after = server_mib(pid, uuids)
        status = server.status()
        result["after_register"] = {"nvidia_smi_mib": after and after["held"], "status": status["cuda"]["device_memory"]}
        mine = uuids[args.gpu]
        held = after["held"] if after else {}
        accounted = next(d["allocated_bytes"] for d in status["cuda"]["device_memory"] if d["ordinal"] == args.gpu) / MIB
        g.log(f"[{label}] after REGISTER: nvidia-smi {held.get(mine)} MiB on GPU {args.gpu}, of which the server's own"
              f" allocations (staging) {accounted:.0f} MiB, so the context ~{(held.get(mine) or 0) - accounted:.0f} MiB")
        g.check(f"[{label}] after one REGISTER: <= {args.limit_mib} MiB on GPU {args.gpu} (nvidia-smi)",
                after is not None and 0 < held.get(mine, 0) <= args.limit_mib, f"{held.get(mine)} MiB")
        g.check(f"[{label}] after one REGISTER: 0 MiB on every other GPU",
                after is not None and all(v == 0 for u, v in held.items() if u != mine), json.dumps(held))
        done = wait_for(lambda: (s := server.status()["cuda"]["pool_pinning"])["state"] == "done" and s, 300, "pool pinning")
        g.check(f"[{label}] the pool is pinned through GPU {args.gpu} after the REGISTER",
                done["through_gpu"] == args.gpu and done["regions_pinned"] == done["regions_total"] and not done["error"], json.dumps(done))

        tokens = [random.Random(72).randrange(150000) for _ in range(g.CHUNK)]
        blocks = list(range(g.CHUNK // w.block))
        stored = w.store(tokens, 0, g.CHUNK, blocks, "dm-s")
        got = w.retrieve(tokens, 0, g.CHUNK, [b + len(blocks) for b in blocks], "dm-r")
        g.check(f"[{label}] a STORE and RETRIEVE round trip after the lazy context", stored and got)
        after_copy = server_mib(pid, uuids)
        result["after_round_trip"] = {"nvidia_smi_mib": after_copy and after_copy["held"]}
        g.check(f"[{label}] a round trip adds no device memory (staging is made at REGISTER)",
                after_copy is not None and after is not None and after_copy["held"].get(mine) == held.get(mine),
                f"{held.get(mine)} -> {after_copy and after_copy['held'].get(mine)} MiB")
        w.client.call("unregister", w.instance)
    finally:
        server.stop()
    return result


def main():
    p = g.script_args()
    p.add_argument("--gpu", type=int, default=0, help="the GPU the one worker registers on")
    p.add_argument("--limit-mib", type=int, default=64, help="the most the server may hold there after one REGISTER")
    p.add_argument("--pool-gb", type=int, default=8)
    p.add_argument("--variant", action="append", default=[], help="label=java options, e.g. 'stack256=-Dlmcache.cuda.stackLimitBytes=256'")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    uuids = gpu_uuids()
    g.log(f"{len(uuids)} GPU(s): {uuids}; CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '(unset: lazy by default since CUDA 12.2)')}")
    variants = [("default", os.environ.get("LMCACHE_JAVA_OPTS", ""))]
    for spec in args.variant:
        label, _, opts = spec.partition("=")
        variants.append((label, opts))
    results = []
    for label, opts in variants:
        try:
            results.append(run_variant(args, label, opts, uuids))
        except Exception as e:  # noqa: BLE001 -- recorded as a failed check; the other variants still run
            g.check(f"[{label}] the variant ran", False, repr(e))
    failed = [r for r in g.RESULTS if not r["ok"]]
    g.log(f"{len(g.RESULTS) - len(failed)} passed, {len(failed)} failed")
    with open(os.path.join(args.out, "device_memory.json"), "w") as f:
        json.dump({"gpus": uuids, "variants": results, "checks": g.RESULTS}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
