"""The wire: LMCache's frames ``[msgpack(uid), msgpack(op), msgpack(payload)...]`` over a DEALER.

pyzmq + msgspec where they import (the dev machine, CI: the test client's ``wire.Client`` and
``codec``); otherwise the GPU host's stack, testclient/gpu/zmtp.py's ZMTP DEALER with msgpack.
Keys and group infos go out as maps whose keys are in the declaration order of LMCache's types:
msgspec writes a dataclass/Struct exactly so, hence the bytes are the same either way.
"""

import os
import pickle
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTCLIENT = os.path.normpath(os.path.join(HERE, "..", "..", "testclient"))
for path in (os.path.join(TESTCLIENT, "stubs"), TESTCLIENT, os.path.join(TESTCLIENT, "gpu")):
    if path not in sys.path:
        sys.path.insert(0, path)

OP = {"register": 1, "unregister": 2, "store": 6, "retrieve": 7, "lookup": 8, "query": 9,
      "free_lookup_locks": 12, "end_session": 13, "chunk_size": 21, "ping": 22}


def key(model, tokens, start, end, request_id, worker_id=0):
    """``IPCCacheServerKey`` field for field (worker_id None: the LOOKUP form)."""
    return {"model_name": model, "world_size": 1, "worker_id": worker_id, "token_ids": list(tokens),
            "start": start, "end": end, "request_id": request_id, "cache_salt": "",
            "request_configs": None, "num_kv_readers": 1}


class _Base:
    def __init__(self):
        self.times = {}

    def wrapper_ext(self, wrapper):
        return self._ext(1, pickle.dumps(wrapper, protocol=4))   # LMCache's ext type 1, pickle 4

    def call(self, op, *payloads, timeout=900.0):
        return self.wait([self.submit(op, *payloads)], timeout)[0][0]


class ZmqConn(_Base):
    kind = "pyzmq+msgspec"

    def __init__(self, host, port):
        super().__init__()
        import msgspec
        from lmcache_testclient.protocol import Request
        from lmcache_testclient.wire import Client
        self._Request, self._ext = Request, msgspec.msgpack.Ext
        self.client = Client(f"tcp://{host}:{port}", timeout_s=900)

    def submit(self, op, *payloads):
        return self.client.submit(self._Request(OP[op], tuple(payloads)))

    def wait(self, uids, timeout=900.0):
        """[(value, seconds from send to reply)] in the order of ``uids``."""
        got = self.client.wait_all(uids, timeout)
        return [(got[u].value(), got[u].elapsed_s) for u in uids]

    def close(self):
        self.client.close()


class ZmtpConn(_Base):
    kind = "zmtp+msgpack"

    def __init__(self, host, port):
        super().__init__()
        from zmtp import Dealer
        try:
            import msgpack
            self._pack = lambda v: msgpack.packb(v, use_bin_type=True)
            self._unpack = lambda d: msgpack.unpackb(d, raw=False)
            self._ext = msgpack.ExtType
        except ImportError:
            import msgspec
            self._pack, self._unpack, self._ext = msgspec.msgpack.encode, msgspec.msgpack.decode, msgspec.msgpack.Ext
        self.dealer = Dealer(host, port, timeout=900)
        self.uid, self.sent, self.arrived = 0, {}, {}

    def submit(self, op, *payloads):
        uid = self.uid
        self.uid += 1
        self.sent[uid] = time.perf_counter()
        self.dealer.send([self._pack(uid), self._pack(OP[op])] + [self._pack(p) for p in payloads])
        return uid

    def wait(self, uids, timeout=900.0):
        while any(u not in self.arrived for u in uids):
            frames = self.dealer.recv()
            uid = self._unpack(frames[0])
            value = self._unpack(frames[2]) if len(frames) > 2 else None
            self.arrived[uid] = (value, time.perf_counter() - self.sent.pop(uid))
        return [self.arrived.pop(u) for u in uids]

    def close(self):
        self.dealer.close()


def connect(endpoint: str):
    """``tcp://host:port``; pyzmq if it imports, else ZMTP."""
    host, port = endpoint.rsplit("//", 1)[-1].rsplit(":", 1)
    try:
        import msgspec  # noqa: F401
        import zmq  # noqa: F401
        return ZmqConn(host, int(port))
    except ImportError:
        return ZmtpConn(host, int(port))
