"""L2 admission side by side (issue 50, Build 4c): for each ``--admissions`` entry, start a server with an fs_native
L2 and that ``--l2-admission``, replay long-doc-qa with one-hit wonders mixed in (``--ldqa-one-hit-share``: that share
of each pass's prompts are documents asked once, never again) through an L1 smaller than the working set, and report
the L2 bytes written per L2 byte loaded (a hit) and the external hit rate, next to ``all``'s.

  python3 -m bench.ldqa.admission --java "$JAVA_HOME/bin/java" --classpath 'server/target/lmcache-server.jar:server/target/lib/*' \\
      --l2-dir /tmp/l2-admission --out /tmp/admission -- --model tiny ...      # the rest goes to every replay
"""

import argparse
import json
import os
import shutil
import sys

from . import replay


def l2_bytes(rows: list, phase_filter) -> tuple:
    """L2 bytes written and loaded over the rows the filter keeps (deltas of the server's counters)."""
    written = loaded = 0.0
    for r in rows:
        if r["config"] == "D" and phase_filter(r) and "server" in r:
            written += r["server"].get("lmcache_mp_l2_store_bytes_total_delta", 0.0)
            loaded += r["server"].get("lmcache_mp_l2_load_bytes_total_delta", 0.0)
    return written, loaded


def run(admission: str, flags: list, common: list, l2_dir: str, out: str) -> dict:
    base = os.path.join(l2_dir, admission.replace(":", "-"))
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    adapter = json.dumps({"type": "fs_native", "base_path": base})
    argv = common + flags + ["--mode", "D", "--out", out, "--server-arg=--l2-adapter", "--server-arg=" + adapter,
                             "--server-arg=--l2-admission", "--server-arg=" + admission]
    rc = replay.main(argv)
    with open(os.path.join(out, "ldqa.json")) as f:
        rows = json.load(f)["rows"]
    last_run = max(r["run"] for r in rows if r["config"] == "D")
    measured = [r for r in rows if r["config"] == "D" and r["phase"] == "benchmark" and r["run"] == last_run][-1]
    w_all, l_all = l2_bytes(rows, lambda r: True)
    w_last, l_last = l2_bytes(rows, lambda r: r["run"] == last_run)
    return {"admission": admission, "rc": rc, "external_hit_rate": measured["external_hit_rate"],
            "hit_rate_of_cacheable": measured["hit_rate_of_cacheable"],
            "l2_written_bytes": w_all, "l2_loaded_bytes": l_all, "written_per_hit_byte": w_all / l_all if l_all else None,
            "last_run_l2_written_bytes": w_last, "last_run_l2_loaded_bytes": l_last,
            "last_run_written_per_hit_byte": w_last / l_last if l_last else None,
            "server_evictions": measured["server_evictions"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.ldqa.admission", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--admissions", default="all,frequency:2")
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--l2-dir", required=True, help="fs_native's base path (a folder per admission, emptied first)")
    p.add_argument("--replay", default="--ldqa-workload long-doc-qa --ldqa-one-hit-share 0.5 --runs 2 --l1-size-gb 0.0625 "
                   "--kv-cache-volume 0.25", help="flags of the replay")
    p.add_argument("--out", default="ldqa-admission")
    p.add_argument("rest", nargs="*", help="after --: flags for every replay (model, document length, ...)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    common = ["--java", args.java, "--classpath", args.classpath] + args.rest
    results = {}
    for admission in [x.strip() for x in args.admissions.split(",") if x.strip()]:
        row = run(admission, args.replay.split(), common, args.l2_dir, os.path.join(args.out, admission.replace(":", "-")))
        results[admission] = row
        print(json.dumps(row), flush=True)
    base = results.get("all", {}).get("external_hit_rate")
    lines = ["| admission | external hit (last run) | vs all (points) | L2 written / L2 hit bytes (whole replay) | "
             "(last run) | L2 written GB | L2 loaded GB | rc |", "|---|---|---|---|---|---|---|---|"]
    fmt = lambda x: "–" if x is None else f"{x:.2f}"   # noqa: E731
    for name, r in results.items():
        delta = "–" if base is None else f"{100 * (r['external_hit_rate'] - base):+.1f}"
        lines.append(f"| {name} | {100 * r['external_hit_rate']:.1f} % | {delta} | {fmt(r['written_per_hit_byte'])} | "
                     f"{fmt(r['last_run_written_per_hit_byte'])} | {r['l2_written_bytes'] / 1e9:.3f} | "
                     f"{r['l2_loaded_bytes'] / 1e9:.3f} | {r['rc']} |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "admission.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, "admission.md"), "w") as f:
        f.write(table + "\n")
    return max((r["rc"] for r in results.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
