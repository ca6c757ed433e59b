"""inflight_bench.qwen_layout against a real CPU server at --chunk-size 544 (no GPU): the same groups, block lists and
null ids through the CPU client's shared-memory tensors, so the server accepts the layout, LOOKUP counts every chunk,
RETRIEVE restores the last snapshot and the attention blocks, and the bytes the benchmark divides by are the bytes the
server moved (lmcache_mp_store_bytes / retrieve_bytes).

    mvn -q -o -B -DskipTests -pl server -am package && bin/setup-testclient
    .venv/bin/python -m unittest testclient/gpu/test_inflight_layouts.py
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
import torch  # noqa: E402

import gpu_check  # noqa: E402
import inflight_bench  # noqa: E402
from lmcache_testclient import protocol  # noqa: E402
from lmcache_testclient.hybrid_kv import GroupSpec, HybridKVCache  # noqa: E402
from lmcache_testclient.messages import IPCCacheServerKey  # noqa: E402
from lmcache_testclient.wire import Client  # noqa: E402

N = inflight_bench.QWEN_CHUNK


class CpuServer(local.LocalServer):
    metric = gpu_check.Server.metric


class QwenLayoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = CpuServer(extra=("--chunk-size", str(N)))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def key(self, tokens, rid, worker_id=0):
        return IPCCacheServerKey(model_name="inflight-test/qwen", world_size=1, worker_id=worker_id, token_ids=tuple(tokens), start=0,
                                 end=len(tokens), request_id=rid, num_kv_readers=1)

    def check(self, chunks, scatter):
        rng = random.Random(chunks)
        groups, src, dst, nbytes = inflight_bench.qwen_layout(chunks, scatter, rng)
        specs = [GroupSpec(layers, shape, torch.bfloat16, axis, tpb, window, recurrent, engine_group_id=i)
                 for i, (layers, shape, axis, tpb, window, recurrent) in enumerate(groups)]
        with contextlib.ExitStack() as stack:
            kv = stack.enter_context(HybridKVCache(specs, seed=chunks))
            client = stack.enter_context(Client(f"tcp://127.0.0.1:{self.server.port}"))
            instance = rng.getrandbits(63) or 1
            reply = client.call(protocol.register_kv_cache(instance, kv.wrappers(), "inflight-test/qwen", world_size=1, engine_type="vllm",
                                                           layout_hints={"kv_layout": "NHD"}, engine_group_infos=kv.infos()))
            self.assertIsNone(reply.value(), "REGISTER of the qwen-like layout")
            stored = [kv.snapshot(0, src[0][-1:]), kv.snapshot(1, src[1])]
            tokens = [rng.randrange(150000) for _ in range(chunks * N)]
            store_before = self.server.metric("lmcache_mp_store_bytes_total")
            _, ok = client.call(protocol.store(self.key(tokens, f"q{chunks}"), instance, src)).value()
            self.assertTrue(ok, "STORE")
            self.assertEqual(self.server.metric("lmcache_mp_store_bytes_total") - store_before, nbytes["store"],
                             "one snapshot per chunk and every attention chunk")
            self.assertIsNone(client.call(protocol.lookup(self.key(tokens, f"q{chunks}-l", worker_id=None))).value())
            deadline = time.time() + 5
            hits = None
            while hits is None and time.time() < deadline:
                hits = client.call(protocol.query_prefetch_status(f"q{chunks}-l")).value()
            self.assertEqual(hits, chunks)
            retrieve_before = self.server.metric("lmcache_mp_retrieve_bytes_total")
            _, ok = client.call(protocol.retrieve(self.key(tokens, f"q{chunks}"), instance, dst)).value()
            self.assertTrue(ok, "RETRIEVE")
            self.assertEqual(self.server.metric("lmcache_mp_retrieve_bytes_total") - retrieve_before, nbytes["retrieve"],
                             "the last snapshot and every attention chunk")
            self.assertEqual(kv.snapshot(0, dst[0][-1:]), stored[0], "the last chunk's state restored")
            self.assertEqual(kv.snapshot(1, dst[1]), stored[1], "attention blocks byte-equal")
            client.call(protocol.unregister_kv_cache(instance))
            client.call(protocol.clear(True))

    def test_one_chunk(self):
        self.check(1, False)

    def test_four_chunks_scattered(self):
        self.check(4, True)


if __name__ == "__main__":
    unittest.main()
