"""gpu_check.Server's two waits against a real server on this machine's CPU (--device host): "prepared" returns once every
region of the pool is prefaulted (what every fresh sweep waited for before --fresh-connect), "ready" once GET /healthcheck
answers 200, which is what a worker that connects at the server's ready meets (inflight_bench --fresh-connect ready).

    mvn -q -o -B -DskipTests -pl server -am package && bin/setup-testclient
    .venv/bin/python -m unittest testclient/gpu/test_server_wait.py
"""
import os
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpu_check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
JAVA = os.path.join(os.environ.get("JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64"), "bin", "java")
JAR = os.environ.get("LMCACHE_SERVER_JAR", os.path.join(ROOT, "server", "target", "lmcache-server.jar"))


class ServerWaitTest(unittest.TestCase):
    def start(self, until, pool_gb=1):
        server = gpu_check.Server(JAVA, JAR, tempfile.mkdtemp(prefix="server-wait-"), pool_gb, device="host", until=until)
        self.addCleanup(server.stop)
        return server

    def test_prepared_returns_with_every_region_prefaulted(self):
        server = self.start("prepared")
        prepared, total = server.regions_at_ready
        self.assertGreater(total, 1)
        self.assertEqual(prepared, total)
        prep = gpu_check.pool_preparation(server.status())
        self.assertEqual(prep["regions_prepared"], prep["regions_total"])

    def test_ready_returns_once_the_server_is_healthy_before_the_pool_is_prefaulted(self):
        # one preparation thread on a 2 GiB pool: 0.4 s or more of prefault, against about a second to be healthy (1 of 16
        # regions done on the VM; 8 threads had done 1–7 of a 12 GiB pool's 16 at ready on the H100 hosts)
        with mock.patch.dict(os.environ, {"LMCACHE_JAVA_OPTS": "-Dlmcache.l1.prepareThreads=1"}):
            server = self.start("ready", pool_gb=2)
        prepared, total = server.regions_at_ready
        self.assertTrue(server.healthy(), "ready means /healthcheck 200")
        # host memory is usable before its prefault (a GPU pool only once pinned): healthy may come with none prefaulted
        self.assertLess(prepared, total, "the worker connects while the rest is prefaulted")

    def test_an_unknown_wait_is_refused_before_anything_starts(self):
        with self.assertRaises(ValueError):
            gpu_check.Server(JAVA, JAR, tempfile.mkdtemp(), 1, device="host", until="soon")


if __name__ == "__main__":
    unittest.main()
