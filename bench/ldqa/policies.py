"""Eviction policies side by side (issue 29): for each ``--policies`` entry, start a server with that
``--eviction-policy`` and replay, in one run, (1) the hot-scan workload (a hot set revisited between one-off
scans larger than the pool), and (2) the plain long-doc-qa replay; report each policy's hit rates next to LRU's.

  python3 -m bench.ldqa.policies --java "$JAVA_HOME/bin/java" --classpath 'server/target/lib/*:server/target/classes' \\
      --out /tmp/policies -- --model tiny --ldqa-document-length 2048 ...     # the rest goes to every replay
"""

import argparse
import json
import os
import sys

from . import replay


def measured(doc: dict) -> dict:
    """The last run's benchmark row: what the replay measures (earlier runs prime)."""
    return [r for r in doc["rows"] if r["config"] == "D" and r["phase"] == "benchmark"][-1]


def run(policy: str, workload: list, common: list, out: str) -> dict:
    argv = common + workload + ["--mode", "D", "--eviction-policy", policy, "--out", out]
    rc = replay.main(argv)
    with open(os.path.join(out, "ldqa.json")) as f:
        row = measured(json.load(f))
    row["rc"] = rc
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.ldqa.policies", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", default="LRU,ARC,S3FIFO,IsolatedLRU,noop")
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--hot-scan", default="--ldqa-workload hot-scan --hot-documents 8 --scan-documents 40 --rounds 4 --runs 1 --l1-size-gb 0.0625",
                   help="flags of the hot-scan replay")
    p.add_argument("--plain", default="--ldqa-workload long-doc-qa --runs 2 --l1-size-gb 0.25 --kv-cache-volume 0.02",
                   help="flags of the plain long-doc-qa replay")
    p.add_argument("--out", default="ldqa-policies")
    p.add_argument("rest", nargs="*", help="after --: flags for every replay (model, document length, ...)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    common = ["--java", args.java, "--classpath", args.classpath] + args.rest
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    results = {}
    for name, flags in (("hot-scan", args.hot_scan.split()), ("long-doc-qa", args.plain.split())):
        for policy in policies:
            row = run(policy, flags, common, os.path.join(args.out, name, policy))
            results.setdefault(name, {})[policy] = row
            print(json.dumps({"workload": name, "policy": policy, "external_hit_rate": row["external_hit_rate"],
                              "hit_rate_of_cacheable": row["hit_rate_of_cacheable"],
                              "server_evictions": row["server_evictions"]}), flush=True)
    lines = ["| workload | policy | external hit | vs LRU (points) | hit of cacheable | server evictions | replay rc |",
             "|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        lru = rows.get("LRU", {}).get("external_hit_rate")
        for policy, r in rows.items():
            delta = "–" if lru is None else f"{100 * (r['external_hit_rate'] - lru):+.1f}"
            lines.append(f"| {name} | {policy} | {100 * r['external_hit_rate']:.1f} % | {delta} | "
                         f"{100 * r['hit_rate_of_cacheable']:.1f} % | {r['server_evictions']} | {r['rc']} |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "policies.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, "policies.md"), "w") as f:
        f.write(table + "\n")
    return max((r["rc"] for rows in results.values() for r in rows.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
