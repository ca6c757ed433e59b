"""CLI: ``python -m lmcache_testclient {list | selftest | run <scenario> | bench-copy} --endpoint URL ...``.

Exit codes: 0 every check passed, 1 a check failed, 2 usage or environment error (a missing
Python package, no /dev/shm, missing golden frames).
"""

import argparse
import os
import signal
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lmcache_testclient",
                                description="LMCache MP protocol test client")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the scenarios")
    sub.add_parser("selftest", help="compare our encodings with the golden frames "
                                    "(folder: $LMCACHE_GOLDEN_DIR, default testdata/golden)")
    run = sub.add_parser("run", help="run one scenario against a server")
    run.add_argument("scenario")
    run.add_argument("--endpoint", required=True, help="e.g. tcp://127.0.0.1:5555")
    run.add_argument("--chunk-size", type=int, default=256,
                     help="chunk size the server is expected to report (default 256)")
    run.add_argument("--seed", type=int, default=None,
                     help="seed for tokens, ids and tensor data (default: random, printed)")
    run.add_argument("--timeout", type=float, default=10.0,
                     help="seconds to wait for each reply (default 10)")
    run.add_argument("--out-dir", default="",
                     help="where a scenario writes what a test checks beside the server (deepseek-v4: LMCache's L2 objects)")
    bench = sub.add_parser("bench-copy", help="time STORE/RETRIEVE of a Llama-8B KV layout against a "
                                              "plain memory copy (bench/run-copy.sh starts the server)")
    bench.add_argument("--endpoint", required=True, help="e.g. tcp://127.0.0.1:5555")
    bench.add_argument("--blocks", type=int, default=256, help="vLLM blocks per layer tensor (default 256)")
    bench.add_argument("--repetitions", type=int, default=20, help="timed STOREs and RETRIEVEs (default 20)")
    bench.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    bench.add_argument("--server-pid", type=int, default=None,
                       help="the server's pid: its CPU is not counted as other processes' load")
    bench.add_argument("--results", default=None, help="write the section into this RESULTS.md")
    bench.add_argument("--command-line", default=None, help="the command line to record in RESULTS.md")
    bench.add_argument("--seed", type=int, default=1)
    bench.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each reply")
    return p


def _on_sigterm(signum, frame):
    # Turn SIGTERM into a normal exit so that atexit unlinks our shm segments.
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)   # exits 2 on usage errors
    try:
        from . import check_stubs
        check_stubs()
        from . import deepseek_scenarios, hybrid_scenarios, layerwise_scenarios, scenarios, selftest, sglang_scenarios  # noqa: F401  (importing registers the scenarios)
    except ImportError as exc:
        print(f"ERROR cannot import what the test client needs: {exc}\n"
              f"      install testclient/requirements.txt (pyzmq, msgspec, numpy, torch)",
              file=sys.stderr)
        return 2

    if args.command == "bench-copy":
        signal.signal(signal.SIGTERM, _on_sigterm)
        from . import bench_copy
        return bench_copy.main(args)
    if args.command == "list":
        for s in scenarios.SCENARIOS.values():
            print(f"{s.name:24} {s.help}")
        return 0
    if args.command == "selftest":
        return selftest.main()

    if args.scenario not in scenarios.SCENARIOS:
        print(f"ERROR unknown scenario {args.scenario!r}; see 'list'", file=sys.stderr)
        return 2
    if args.chunk_size <= 0 or args.chunk_size % scenarios.BLOCK_SIZE:
        print(f"ERROR --chunk-size must be a positive multiple of {scenarios.BLOCK_SIZE}",
              file=sys.stderr)
        return 2
    if not os.path.isdir("/dev/shm"):
        print("ERROR /dev/shm is missing: the KV tensors live in POSIX shared memory",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    signal.signal(signal.SIGTERM, _on_sigterm)
    opts = scenarios.Options(args.endpoint, args.chunk_size, seed, args.timeout, args.out_dir)
    return scenarios.run(args.scenario, opts)


if __name__ == "__main__":
    sys.exit(main())
