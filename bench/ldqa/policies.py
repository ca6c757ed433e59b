"""Eviction policies side by side (issue 29): for each ``--policies`` entry, start a server with that
``--eviction-policy`` and replay, in one run, (1) the hot-scan workload (a hot set revisited between one-off
scans larger than the pool), (2) the plain long-doc-qa replay, whose working set fits the pool, and (3) the same
replay over a pool smaller than its working set (``evicting``); report each policy's hit rates next to LRU's and
check what must hold (``checks``: the exit status is 1 when one fails): the workloads meant to evict do, under
every policy but noop, and noop never evicts; the scan-resistant policies (ARC, S3FIFO) hit at least as often as
LRU where the pool is too small; every replay's bytes come back exact (``--verify`` in the flags).

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


#: The workloads whose pool is smaller than their working set: each policy but noop must evict there.
EVICTING = ("hot-scan", "evicting")
#: Policies that keep a re-used set through a scan; on an evicting workload each hits at least as often as LRU.
SCAN_RESISTANT = ("ARC", "S3FIFO")


def run(policy: str, workload: list, common: list, out: str) -> dict:
    argv = common + workload + ["--mode", "D", "--eviction-policy", policy, "--out", out]
    rc = replay.main(argv)
    with open(os.path.join(out, "ldqa.json")) as f:
        doc = json.load(f)
    row = measured(doc)
    row["rc"] = rc
    # the measured row counts its own phase's evictions; the check reads the whole replay's
    row["evictions_total"] = sum(r["server_evictions"] or 0 for r in doc["rows"] if r["config"] == "D")
    row["fits_server"] = doc["operating_point"]["fits_server"]
    return row


def checks(results: dict) -> list:
    """What must hold, as (name, ok, detail) rows."""
    out = []
    for name, rows in results.items():
        for policy, r in rows.items():
            out.append((f"{name} / {policy}: replay exact (rc 0)", r["rc"] == 0, f"rc {r['rc']}"))
            if name not in EVICTING:
                continue
            out.append((f"{name} / {policy}: working set larger than the pool", r["fits_server"] is False,
                        f"fits_server {r['fits_server']}"))
            if policy == "noop":
                out.append((f"{name} / noop: no eviction", r["evictions_total"] == 0, f"{r['evictions_total']:.0f}"))
            else:
                out.append((f"{name} / {policy}: evicts", r["evictions_total"] > 0, f"{r['evictions_total']:.0f}"))
        lru = rows.get("LRU")
        if name in EVICTING and lru:
            for policy in SCAN_RESISTANT:
                if policy in rows:
                    mine, base = rows[policy]["external_hit_rate"], lru["external_hit_rate"]
                    out.append((f"{name} / {policy}: external hit >= LRU's", mine >= base,
                                f"{100 * mine:.1f} % against {100 * base:.1f} %"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.ldqa.policies", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", default="LRU,ARC,S3FIFO,IsolatedLRU,noop")
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--hot-scan", default="--ldqa-workload hot-scan --hot-documents 8 --scan-documents 40 --rounds 4 --runs 1 --l1-size-gb 0.0625",
                   help="flags of the hot-scan replay")
    p.add_argument("--plain", default="--ldqa-workload long-doc-qa --runs 2 --l1-size-gb 0.25 --kv-cache-volume 0.02",
                   help="flags of the plain long-doc-qa replay (its working set fits)")
    p.add_argument("--evicting", default="--ldqa-workload long-doc-qa --runs 2 --l1-size-gb 0.0625 --kv-cache-volume 0.1",
                   help="flags of the long-doc-qa replay over a pool smaller than its working set")
    p.add_argument("--workloads", default="hot-scan,long-doc-qa,evicting", help="which of the three to replay")
    p.add_argument("--out", default="ldqa-policies")
    p.add_argument("rest", nargs="*", help="after --: flags for every replay (model, document length, ...)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    common = ["--java", args.java, "--classpath", args.classpath] + args.rest
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    results = {}
    flags_of = {"hot-scan": args.hot_scan, "long-doc-qa": args.plain, "evicting": args.evicting}
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        flags = flags_of[name].split()
        for policy in policies:
            row = run(policy, flags, common, os.path.join(args.out, name, policy))
            results.setdefault(name, {})[policy] = row
            print(json.dumps({"workload": name, "policy": policy, "external_hit_rate": row["external_hit_rate"],
                              "hit_rate_of_cacheable": row["hit_rate_of_cacheable"],
                              "server_evictions": row["evictions_total"]}), flush=True)
    lines = ["| workload | policy | external hit | vs LRU (points) | hit of cacheable | server evictions (whole replay) | replay rc |",
             "|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        lru = rows.get("LRU", {}).get("external_hit_rate")
        for policy, r in rows.items():
            delta = "–" if lru is None else f"{100 * (r['external_hit_rate'] - lru):+.1f}"
            lines.append(f"| {name} | {policy} | {100 * r['external_hit_rate']:.1f} % | {delta} | "
                         f"{100 * r['hit_rate_of_cacheable']:.1f} % | {r['evictions_total']:.0f} | {r['rc']} |")
    verdicts = checks(results)
    lines += ["", "| check | holds | detail |", "|---|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**no**'} | {detail} |" for name, ok, detail in verdicts]
    table = "\n".join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "policies.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, "policies.md"), "w") as f:
        f.write(table + "\n")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
