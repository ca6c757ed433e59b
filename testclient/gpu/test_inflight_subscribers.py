"""inflight_bench.sweep with --subscribers 0,3 against a real CPU server (no GPU): the CUDA parts (the worker's copy and
event, the raw baselines) are replaced by the CPU Python test client's STORE/RETRIEVE over shared memory, everything else
is the benchmark's own code: alternating counts per round, the subscriber child process attached and detached, the handler
time per count, the ratios and the records each subscriber received.

    mvn -q -o -B -DskipTests -pl server -am package && bin/setup-testclient
    .venv/bin/python -m unittest testclient/gpu/test_inflight_subscribers.py
"""
import contextlib
import os
import random
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_kv_subscriber as local  # noqa: E402  (the CPU server and the CPU client's imports)
import gpu_check  # noqa: E402
import inflight_bench  # noqa: E402
import inflight_floor  # noqa: E402
import kv_subscriber  # noqa: E402
from lmcache_testclient import protocol  # noqa: E402
from lmcache_testclient.report import Report  # noqa: E402
from lmcache_testclient.shm_kv import LAYOUTS, Geometry, ShmKVCache  # noqa: E402
from lmcache_testclient.wire import Client  # noqa: E402
from lmcache_testclient.worker import Worker  # noqa: E402

CHUNK, BLOCKS = 256, 16


class CpuServer(local.LocalServer):
    """gpu_check.Server's helpers (metric, clear, gpu_copy) over the CPU server."""
    metric = gpu_check.Server.metric
    clear = gpu_check.Server.clear
    gpu_copy = gpu_check.Server.gpu_copy


class CpuServerStoppable(CpuServer):
    """A CpuServer that main() starts and stops itself."""
    status = local.LocalServer.status


class CpuWorker:
    """What sweep() needs of a worker (model, instance, client.call("unregister")), on the CPU client."""

    def __init__(self, stack, server, chunks, seed):
        self.model = f"inflight-test/cpu-{seed}"
        self.conn = stack.enter_context(Client(f"tcp://127.0.0.1:{server.port}"))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=2 * chunks * BLOCKS), seed=seed))
        self.worker = Worker(Report("inflight-test", out=stack.enter_context(open(os.devnull, "w"))), self.conn, kv, self.model,
                             random.Random(seed).getrandbits(63) or 1)
        self.instance = self.worker.instance_id
        self.worker.register()
        self.client = self

    def call(self, op, *_):
        assert op == "unregister"
        self.worker.unregister()

    def lookup(self, tokens, end, request):
        key = self.worker.key(tokens, request, end=end, worker_id=None)
        assert self.conn.call(protocol.lookup(key, tp_size=1)).value() is None
        deadline = time.time() + 5
        while time.time() < deadline:
            hits = self.conn.call(protocol.query_prefetch_status(request)).value()
            if hits is not None:
                return hits
        return None


def cpu_one(w, op, tokens, blocks, rid):
    """one()'s result for a CPU STORE/RETRIEVE: the round trip (the server finishes a CPU copy before it replies)."""
    key = w.worker.key(tokens, rid)
    t0 = time.perf_counter()
    reply = w.conn.call(protocol.store(key, w.instance, [list(blocks)]) if op == "store"
                        else protocol.retrieve(key, w.instance, [list(blocks)]))
    total = time.perf_counter() - t0
    assert reply.value()[1], f"{op} failed"
    return {"total": total, "send": 0.0, "reply": total, "open": 0.0, "wait": 0.0}


class SweepWithSubscribersTest(unittest.TestCase):
    def test_counts_alternate_and_the_subscribers_are_live(self):
        server = CpuServer()
        saved = (inflight_bench.one, inflight_bench.raw_copy_gbps, inflight_bench.raw_wall_ms, inflight_bench.torch.cuda.empty_cache)
        chunks = 2
        try:
            with contextlib.ExitStack() as stack:
                inflight_bench.MODELS["cpu"] = (lambda srv, c, scatter, rng, seed: self.make(stack, srv, c, seed), CHUNK)
                inflight_bench.one = cpu_one
                inflight_bench.raw_copy_gbps = lambda n: {"d2h": 10.0, "h2d": 10.0}
                inflight_bench.raw_wall_ms = lambda n: {"wall_d2h_ms_best": 1.0, "wall_d2h_ms_median": 1.0,
                                                        "wall_h2d_ms_best": 1.0, "wall_h2d_ms_median": 1.0}
                inflight_bench.torch.cuda.empty_cache = lambda: None
                pool = kv_subscriber.ChildPool(server.port, 3, cursor=server.status()["kv_events"]["next_seq"] - 1, seed=4)
                stack.callback(pool.close)
                subs = inflight_bench.Subscribers(pool)
                repeats = 4
                row = inflight_bench.sweep(server, chunks, False, repeats, 9, "cpu", counts=[0, 3], subscribers=subs)
                totals = pool.stats()
        finally:
            (inflight_bench.one, inflight_bench.raw_copy_gbps, inflight_bench.raw_wall_ms, inflight_bench.torch.cuda.empty_cache) = saved
            inflight_bench.MODELS.pop("cpu", None)
            server.stop()
        self.assertEqual(subs.attached, 0, "detached after the sweep")
        self.assertEqual(set(row["subscribers"]), {"0", "3"})
        for c in ("0", "3"):
            self.assertEqual(row["subscribers"][c]["store_requests"], repeats)
            self.assertIsNotNone(row["subscribers"][c]["store_handler_us"])
        self.assertEqual(row["store_ms_best"], row["subscribers"]["0"]["store_ms_best"], "the plain figures are the base count's")
        ratio = row["subscriber_ratios"]["3"]
        self.assertAlmostEqual(ratio["store_median"], row["subscribers"]["3"]["store_ms_median"] / row["subscribers"]["0"]["store_ms_median"])
        per = row["subscribers"]["3"]["per_subscriber"]
        self.assertEqual(len(per), 3)
        # the counted rounds with 3 attached: `repeats` STOREs of `chunks` chunks each (plus the uncounted first round's
        # when it ran with 3 attached: 0 first on even rounds, so round 0 had them too)
        for s in per:
            self.assertGreaterEqual(s["stored"], repeats * chunks)
            self.assertGreater(s["removed"], 0, "the CLEAR after each round announces removals")
            self.assertEqual(s["lost"], 0)
            self.assertEqual(s["errors"], [])
        self.assertTrue(all(t["attaches"] >= repeats // 2 for t in totals), totals)
        print("\n" + inflight_floor.subscriber_table([row]))

    def test_main_runs_both_counts_and_reports_the_subscribers(self):
        """main() with --subscribers 0,2 over two CPU cells: the JSON report and the printed tables."""
        import io
        import json
        import tempfile
        from contextlib import redirect_stdout
        out = tempfile.mkdtemp(prefix="inflight-test-")
        servers = []

        def server(java, classpath, out_dir, pool_gb, extra=()):
            servers.append(extra)
            return CpuServerStoppable()
        patches = {"Server": server, "messaging_floor": lambda srv, chunk=CHUNK: {}, "one": cpu_one,
                   "raw_copy_gbps": lambda n: {"d2h": 10.0, "h2d": 10.0},
                   "raw_wall_ms": lambda n: {"wall_d2h_ms_best": 1.0, "wall_d2h_ms_median": 1.0, "wall_h2d_ms_best": 1.0,
                                             "wall_h2d_ms_median": 1.0}}
        saved = {k: getattr(inflight_bench, k) for k in patches}
        cuda = inflight_bench.torch.cuda
        saved_cuda = (cuda.init, cuda.empty_cache, cuda.get_device_properties)
        argv = sys.argv
        try:
            with contextlib.ExitStack() as stack:
                for k, v in patches.items():
                    setattr(inflight_bench, k, v)
                cuda.init, cuda.empty_cache = (lambda: None), (lambda: None)
                cuda.get_device_properties = lambda i: type("P", (), {"name": "cpu"})()
                inflight_bench.MODELS["cpu"] = (lambda srv, c, scatter, rng, seed: self.make(stack, srv, c, seed), CHUNK)
                sys.argv = ["inflight_bench.py", "--java", "java", "--classpath", "cp", "--out", out, "--repeats", "2", "--chunks", "1,2",
                            "--pattern", "consecutive", "--warmup", "0", "--model", "cpu", "--no-floor", "--subscribers", "0,2",
                            "--aot-cache", "none"]
                printed = io.StringIO()
                with redirect_stdout(printed):
                    self.assertEqual(inflight_bench.main(), 0)
        finally:
            sys.argv = argv
            for k, v in saved.items():
                setattr(inflight_bench, k, v)
            cuda.init, cuda.empty_cache, cuda.get_device_properties = saved_cuda
            inflight_bench.MODELS.pop("cpu", None)
        with open(os.path.join(out, "inflight-run.json")) as f:
            report = json.load(f)
        self.assertEqual(report["subscriber_counts"], [0, 2])
        self.assertEqual(len(report["rows"]), 2)
        self.assertTrue(all("2" in r["subscriber_ratios"] for r in report["rows"]))
        self.assertEqual(len(report["subscriber_totals"]), 2)
        self.assertTrue(all(t["stored"] > 0 and not t["errors"] for t in report["subscriber_totals"]), report["subscriber_totals"])
        self.assertEqual(report["kv_events_status"]["subscribers"], 0, "detached at the end")
        self.assertIn("KV-event subscribers", printed.getvalue())
        print("\n" + printed.getvalue().split("KV-event subscribers", 1)[1])

    @staticmethod
    def make(stack, server, chunks, seed):
        w = CpuWorker(stack, server, chunks, seed)
        n = chunks * BLOCKS
        return w, list(range(n)), list(range(n, 2 * n)), {"store": n * 4096, "retrieve": n * 4096}, w.lookup


if __name__ == "__main__":
    unittest.main()
