"""kv_subscriber.py against a real CPU server (no GPU): STOREs from the CPU Python test client reach every subscriber, which
acks (more than the first batch arrives), detaches cleanly (final reply) and resumes from its cursor without a replay.

    mvn -q -o -B -DskipTests -pl server -am package && bin/setup-testclient
    .venv/bin/python -m unittest testclient/gpu/test_kv_subscriber.py

The server is server/target/lmcache-server.jar (LMCACHE_SERVER_JAR overrides), started with JAVA_HOME's java on free ports.
"""
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "testclient"))
sys.path.insert(0, os.path.join(ROOT, "testclient", "stubs"))

import echo_floor  # noqa: E402
import kv_subscriber  # noqa: E402
from lmcache_testclient import protocol  # noqa: E402
from lmcache_testclient.report import Report  # noqa: E402
from lmcache_testclient.shm_kv import LAYOUTS, Geometry, ShmKVCache  # noqa: E402
from lmcache_testclient.wire import Client  # noqa: E402
from lmcache_testclient.worker import Worker, random_tokens  # noqa: E402

MODEL = "subscriber-test/model"
CHUNK = 256
BLOCKS = CHUNK // 16


class LocalServer:
    def __init__(self, extra=()):
        self.port, self.http = echo_floor.free_port(), echo_floor.free_port()
        java = os.path.join(os.environ.get("JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64"), "bin", "java")
        jar = os.environ.get("LMCACHE_SERVER_JAR", os.path.join(ROOT, "server", "target", "lmcache-server.jar"))
        self.log = tempfile.NamedTemporaryFile(prefix="kv-subscriber-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx512m",
                                      "-jar", jar, "--host", "127.0.0.1", "--port", str(self.port), "--http-host", "127.0.0.1",
                                      "--http-port", str(self.http), "--l1-size-gb", "0.25", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            assert self.proc.poll() is None, "the server exited: " + open(self.log.name).read()[-2000:]
            try:
                self.status()
                return
            except OSError:
                assert time.time() < deadline, "the server never answered /status"
                time.sleep(0.2)

    def status(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/status", timeout=5) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def wait_until(predicate, timeout_s=10.0):
    deadline = time.time() + timeout_s
    while not predicate():
        if time.time() > deadline:
            return False
        time.sleep(0.02)
    return True


class KvSubscriberTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def store(self, worker, rng, prefixes, chunks=2):
        for i in range(prefixes):
            tokens = random_tokens(rng, chunks * CHUNK)
            worker.store(f"STORE {i}", worker.key(tokens, f"sub-{rng.random()}"), list(range(chunks * BLOCKS)), required=True)

    def test_subscribers_receive_ack_detach_and_resume(self):
        rng = random.Random(5)
        with contextlib.ExitStack() as stack:
            report = Report("kv-subscriber", out=stack.enter_context(open(os.devnull, "w")))
            client = stack.enter_context(Client(f"tcp://127.0.0.1:{self.server.port}"))
            kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=4 * BLOCKS), seed=7))
            worker = Worker(report, client, kv, MODEL, rng.getrandbits(63) or 1)
            worker.register()
            cursor = self.server.status()["kv_events"]["next_seq"] - 1
            in_process = kv_subscriber.SubscriberPool("127.0.0.1", self.server.port, 3, cursor=cursor, seed=1)
            child = kv_subscriber.ChildPool(self.server.port, 2, cursor=cursor, seed=2)
            stack.callback(child.close)
            self.assertEqual(in_process.attach(MODEL), 3)
            self.assertEqual(child.attach(MODEL), 2)
            self.assertEqual(self.server.status()["kv_events"]["subscribers"], 5)

            self.store(worker, rng, 4)  # 4 prefixes of 2 chunks: 8 stored records
            def stored(pool, want):
                return all(s["stored"] == want for s in pool.stats())
            self.assertTrue(wait_until(lambda: stored(in_process, 8) and stored(child, 8)), in_process.stats() + child.stats())
            for s in in_process.stats() + child.stats():
                self.assertGreater(s["batches"], 1, "batches after the first need the subscriber's acks")
                self.assertEqual(s["lost"], 0)
            client.call(protocol.clear(True))  # a CLEAR removes the 8 chunks: "removed" records
            self.assertTrue(wait_until(lambda: all(s["removed"] >= 1 for s in in_process.stats() + child.stats())))

            in_process.detach()
            child.detach()
            self.assertTrue(wait_until(lambda: self.server.status()["kv_events"]["subscribers"] == 0))
            for s in in_process.stats() + child.stats():
                self.assertTrue(s["ended"], "the cancel got the stream's final reply")
                self.assertEqual(s["errors"], [])
            # detached: these records wait in the log; attached again from the cursor, each arrives once, nothing replayed
            self.store(worker, rng, 1)
            in_process.attach(MODEL)
            child.attach(MODEL)
            self.store(worker, rng, 1)
            self.assertTrue(wait_until(lambda: stored(in_process, 12) and stored(child, 12)), in_process.stats() + child.stats())
            time.sleep(0.3)
            self.assertTrue(stored(in_process, 12) and stored(child, 12), "no record counted twice")
            last = self.server.status()["kv_events"]["next_seq"] - 1
            self.assertTrue(all(s["last_seq"] == last for s in in_process.stats() + child.stats()), (last, in_process.stats()))
            in_process.close()
            child.detach()
            self.assertTrue(all(s["attaches"] == 2 and not s["errors"] for s in in_process.stats() + child.stats()))
            print(f"\n{kv_subscriber.libzmq_dealer.transport()} / child {child.transport}: "
                  + "; ".join(f"{s['records']} records ({s['stored']} stored, {s['removed']} removed) in {s['batches']} batches,"
                              f" {s['lost']} lost, last seq {s['last_seq']}" for s in in_process.stats() + child.stats()))


if __name__ == "__main__":
    unittest.main()
