"""A simulated vLLM worker (plus its scheduler's calls) on one DEALER connection.

It owns a ``wire.Client``, the worker's shm KV tensors and its instance id, and turns each
protocol step into one recorded check. Scenarios read as a list of steps; a failed step that later
steps depend on raises ``report.Abort``.
"""

import random
import time
from typing import Optional, Sequence

from . import expect, protocol
from .messages import IPCCacheServerKey
from .report import Abort, Report, check_reply
from .shm_kv import ShmKVCache
from .wire import Client, Reply, WireError

QUERY_POLL_INTERVAL_S = 0.01


def new_instance_id(rng: random.Random) -> int:
    """Like the newest adapter: a positive 63-bit id (uuid4().int & (2**63 - 1))."""
    return rng.getrandbits(63) or 1


def random_tokens(rng: random.Random, n: int) -> list:
    return [rng.randrange(150000) for _ in range(n)]


class BlockAllocator:
    """Hands out fresh vLLM block ids, so every step writes blocks no other step touched."""

    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self._next = 0

    def take(self, n: int) -> list:
        if self._next + n > self.num_blocks:
            raise ValueError(f"scenario needs more than {self.num_blocks} blocks")
        ids = list(range(self._next, self._next + n))
        self._next += n
        return ids


class Worker:
    def __init__(self, report: Report, client: Client, kv: Optional[ShmKVCache], model_name: str,
                 instance_id: int, prefix: str = "", timeout_s: Optional[float] = None):
        self.report = report
        self.client = client
        self.kv = kv
        self.model_name = model_name
        self.instance_id = instance_id
        self.prefix = prefix
        self.timeout_s = timeout_s

    # --- generic step ---

    def step(self, name: str, request: protocol.Request, expected: Optional[bytes],
             required: bool = False) -> Reply:
        """Send, wait, compare the reply with ``expected`` exactly (``expect.NO_PAYLOAD``: none).

        A missing reply always aborts the scenario; a wrong one only when ``required``.
        """
        name = self.prefix + name
        try:
            reply = self.client.call(request, self.timeout_s)
        except WireError as exc:
            # No reply at all: whatever follows would only time out as well.
            self.report.require(name, False, str(exc))
        if not check_reply(self.report, name, reply, expected) and required:
            raise Abort(name)
        return reply

    def ping(self, name: str = "PING") -> None:
        self.step(name, protocol.ping(self.instance_id), expect.TRUE)

    # --- keys ---

    def key(self, tokens: Sequence[int], request_id: str, end: Optional[int] = None,
            start: int = 0, worker_id: Optional[int] = 0, world_size: int = 1) -> IPCCacheServerKey:
        """A STORE/RETRIEVE key by default; ``worker_id=None`` gives the LOOKUP form."""
        return IPCCacheServerKey(
            model_name=self.model_name, world_size=world_size, worker_id=worker_id,
            token_ids=tuple(tokens), start=start, end=len(tokens) if end is None else end,
            request_id=request_id, num_kv_readers=1)

    # --- worker ops ---

    def register(self, name: str = "REGISTER_KV_CACHE", required: bool = True) -> None:
        self.step(name, protocol.register_kv_cache(
            self.instance_id, self.kv.wrappers(), self.model_name, world_size=1,
            engine_type="vllm", layout_hints=self.kv.layout_hints, engine_group_infos=[]),
            expect.NO_PAYLOAD, required)

    def unregister(self, name: str = "UNREGISTER_KV_CACHE") -> None:
        self.step(name, protocol.unregister_kv_cache(self.instance_id), expect.NO_PAYLOAD)

    def store(self, name: str, key: IPCCacheServerKey, blocks: Sequence[int], ok: bool = True,
              instance_id: Optional[int] = None, required: bool = False) -> None:
        iid = self.instance_id if instance_id is None else instance_id
        self.step(name, protocol.store(key, iid, [list(blocks)]), expect.transfer_reply(ok),
                  required)

    def retrieve(self, name: str, key: IPCCacheServerKey, blocks: Sequence[int], ok: bool = True,
                 skip_first_n_tokens: int = 0, required: bool = False) -> None:
        self.step(name, protocol.retrieve(key, self.instance_id, [list(blocks)],
                                          skip_first_n_tokens=skip_first_n_tokens),
                  expect.transfer_reply(ok), required)

    # --- scheduler ops ---

    def lookup(self, name: str, key: IPCCacheServerKey) -> None:
        self.step(name, protocol.lookup(key.with_(worker_id=None), tp_size=1), expect.NO_PAYLOAD)

    def query(self, name: str, request_id: str, hits: int, poll: bool = True) -> None:
        """QUERY_PREFETCH_STATUS must end in exactly ``int_reply(hits)``. With ``poll``, no-payload
        replies (None = prefetch still running, which the protocol allows) are re-asked, as the
        real scheduler does, until the deadline."""
        name = self.prefix + name
        expected = expect.int_reply(hits)
        deadline = time.monotonic() + (self.timeout_s or self.client.timeout_s)
        polls = 0
        while True:
            polls += 1
            try:
                reply = self.client.call(protocol.query_prefetch_status(request_id), self.timeout_s)
            except WireError as exc:
                self.report.require(name, False, str(exc))
            if not (poll and reply.echo_ok and len(reply.frames) == 2
                    and time.monotonic() < deadline):
                break
            time.sleep(QUERY_POLL_INTERVAL_S)
        check_reply(self.report, name, reply, expected)
        if polls > 1:
            self.report.note(f"{name}: answered after {polls} polls (None while running)")

    def lookup_hits(self, name: str, key: IPCCacheServerKey, hits: int) -> None:
        """LOOKUP then QUERY: the scheduler's two-step prefix lookup."""
        self.lookup(f"{name}: LOOKUP", key)
        self.query(f"{name}: QUERY_PREFETCH_STATUS = {hits}", key.request_id, hits)

    def end_session(self, name: str, request_id: str, with_end_info: bool = True) -> None:
        self.step(name, protocol.end_session(request_id, with_end_info), expect.NO_PAYLOAD)

    def free_lookup_locks(self, name: str, key: IPCCacheServerKey) -> None:
        self.step(name, protocol.free_lookup_locks(key.with_(worker_id=None), tp_size=1),
                  expect.NO_PAYLOAD)

    # --- data checks ---

    def verify_blocks(self, name: str, blocks: Sequence[int], expected: Sequence[bytes],
                      required: bool = False) -> bool:
        """Blocks ``blocks`` of the shm tensors must hold exactly ``expected`` (per block)."""
        blocks = list(blocks)
        bad = [b for b, want in zip(blocks, expected) if self.kv.block_bytes(b) != want]
        detail = (f"{len(blocks)} blocks byte-equal" if not bad else
                  f"{len(bad)}/{len(blocks)} blocks differ, first block {bad[0]}: "
                  f"{_first_difference(self.kv.block_bytes(bad[0]), expected[blocks.index(bad[0])])}")
        name = self.prefix + name
        ok = self.report.check(name, not bad, detail)
        if not ok and required:
            raise Abort(name)
        return ok


def _first_difference(got: bytes, want: bytes) -> str:
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            zeros = " (block is all zero)" if not any(got) else ""
            return f"byte {i} is {a:02x}, expected {b:02x}{zeros}"
    return f"lengths {len(got)} vs {len(want)}"
