"""Waits until lmcache-server's pool is fully prepared and an engine has registered, then prints
``tokens_per_gb = 1024^3 / cache_size_per_token`` (for ``lmcache bench engine
--tokens-per-gb-kvcache``). Standard library only, so it runs on any host:

  python3 bench/ldqa/wait_ready.py --http http://127.0.0.1:8090 [--timeout 1800]
"""

import argparse
import json
import sys
import time
import urllib.request


def status(http):
    with urllib.request.urlopen(http.rstrip("/") + "/status", timeout=10) as r:
        return json.loads(r.read())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--http", default="http://127.0.0.1:8090")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    deadline, said = time.time() + args.timeout, set()
    while time.time() < deadline:
        try:
            s = status(args.http)
        except OSError:
            time.sleep(1)
            continue
        l1 = s["storage_manager"]["l1_manager"]
        if l1["memory_ready_bytes"] < l1["memory_total_bytes"]:
            time.sleep(1)
            continue
        if "pool" not in said:
            print(f"pool ready: {l1['memory_total_bytes'] / 2**30:.2f} GiB prepared", flush=True)
            said.add("pool")
        meta = s.get("cache_context_meta") or {}
        if not meta:
            if "engine" not in said:
                print("waiting for an engine to register (cache_context_meta is empty)", flush=True)
                said.add("engine")
            time.sleep(1)
            continue
        for instance, ctx in meta.items():
            per_token = ctx["kv_cache_layout"]["cache_size_per_token"]
            print(f"instance {instance} ({ctx['model_name']}): cache_size_per_token {per_token} B, "
                  f"tokens_per_gb {1024 ** 3 / per_token:.0f}", flush=True)
        return 0
    print("timed out", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
