"""Runs visibility_check.py's tests alone, outside gpu_check.py's full run: `python3 run_visibility.py --java J
--classpath CP --out DIR` (LMCACHE_VISIBILITY_REPEATS lookups per size, default 1000). A file of its own so that
visibility_check and gpu_check do not import each other."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check as g  # noqa: E402
import visibility_check  # noqa: E402

if __name__ == "__main__":
    args = g.script_args().parse_args()
    server = g.Server(args.java, args.classpath, args.out, 8)
    try:
        visibility_check.run_tests(g, server, args, int(os.environ.get("LMCACHE_VISIBILITY_REPEATS", "1000")))
    finally:
        server.stop()
    failed = [r for r in g.RESULTS if not r["ok"]]
    g.log(f"{len(g.RESULTS) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)
