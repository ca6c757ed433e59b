"""Self-test: rebuild every golden client frame from its decoded values and compare bytes.

The golden frames (``shared/protocol/golden/*.jsonl``) were sent by LMCache's own client. For
each request we decode the payloads to plain values, rebuild the request with *our* builders
(``protocol``), message types (``messages``) and stand-in wrappers (``stubs/lmcache``), encode
it, and compare every frame byte for byte: the uid, the op id, msgpack maps (field order and
defaults), and the ext-1 pickles inside REGISTER_KV_CACHE (globals, attribute order, opcodes).
Wrapper fields are read with a recording unpickler, so our classes never see the golden pickle.
Replies are checked against the exact payloads the scenarios expect (``expect``).
"""

import json
import os
import pickle
import pickletools
from pathlib import Path

import msgspec
import torch

from . import REPO_ROOT, expect, protocol
from .codec import decode, encode
from .messages import (
    BlockAllocationRecord,
    EngineGroupInfo,
    IPCCacheServerKey,
    RegisterEngineDrivenContextPayload,
)
from .ops import Op
from lmcache.v1.multiprocess.custom_types import CudaIPCWrapper as LegacyCudaIPCWrapper
from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper
from lmcache.v1.platform.cuda.ipc_wrapper import CudaIPCWrapper, RawCudaIPCWrapper

GOLDEN_ENV = "LMCACHE_GOLDEN_DIR"


class GoldenMissing(Exception):
    pass


def golden_dir() -> Path:
    path = Path(os.environ.get(GOLDEN_ENV) or Path(REPO_ROOT) / "testdata" / "golden")
    if not path.is_dir() or not list(path.glob("*.jsonl")):
        raise GoldenMissing(f"no golden frames (*.jsonl) in {path.resolve()}; set {GOLDEN_ENV} "
                            "to a folder of golden frames (the repository keeps them in testdata/golden)")
    return path.resolve()


# --- reading wrapper fields out of a golden pickle without using our classes ----------------------

class _Recorded:
    """Stands in for any lmcache class while unpickling: keeps the global name and the state."""

    golden_global = ("?", "?")

    def __setstate__(self, state):
        self.state = state


class _RecordingUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("lmcache."):
            return type(name, (_Recorded,), {"golden_global": (module, name)})
        if module == "torch":            # dtypes (torch.bfloat16) and torch.Size
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"unexpected global {module}.{name} in a wrapper pickle")


def _read_wrapper(data: bytes) -> _Recorded:
    import io
    return _RecordingUnpickler(io.BytesIO(data)).load()


def _rebuild_wrapper(ext: msgspec.msgpack.Ext):
    """Our stand-in wrapper, built through its constructor from the golden field values."""
    if ext.code != 1:
        raise ValueError(f"ext code {ext.code}, expected 1")
    rec = _read_wrapper(ext.data)
    s, (module, name) = rec.state, rec.golden_global
    if (module, name) == ("lmcache.v1.platform.cpu.shm", "CpuShmTensorWrapper"):
        return CpuShmTensorWrapper(shm_name=s["shm_name"], nbytes=s["nbytes"], dtype=s["dtype"],
                                   shape=s["shape"], stride=s["stride"],
                                   storage_offset=s["storage_offset"])
    if (module, name) == ("lmcache.v1.platform.cuda.ipc_wrapper", "CudaIPCWrapper"):
        return CudaIPCWrapper(handle=s["handle"], dtype=s["dtype"], shape=s["shape"],
                              stride=s["stride"], storage_offset=s["storage_offset"],
                              device_uuid=s["device_uuid"])
    if (module, name) == ("lmcache.v1.platform.cuda.ipc_wrapper", "RawCudaIPCWrapper"):
        return RawCudaIPCWrapper(ipc_handle_reserved=s["_ipc_handle_reserved"],
                                 alloc_offset=s["_alloc_offset"], nbytes=s["_nbytes"],
                                 dtype=s["dtype"], shape=s["shape"], stride=s["stride"],
                                 storage_offset=s["storage_offset"], device_uuid=s["device_uuid"])
    if (module, name) == ("lmcache.v1.multiprocess.custom_types", "CudaIPCWrapper"):
        return LegacyCudaIPCWrapper(handle=s["handle"], dtype=s["dtype"], shape=s["shape"],
                                    stride=s.get("stride"), storage_offset=s.get("storage_offset", 0),
                                    device_uuid=s["device_uuid"])
    raise ValueError(f"no stand-in for wrapper class {module}.{name}")


# --- rebuilding requests ------------------------------------------------------------------------------

def _key(d: dict) -> IPCCacheServerKey:
    return IPCCacheServerKey(**d)   # unknown or missing fields show up as an error or a byte diff


def rebuild_request(op: Op, p: list) -> protocol.Request:
    """Our builder call for a decoded golden request (payload values ``p``)."""
    if op == Op.REGISTER_KV_CACHE:
        iid, wrappers, model, world, engine, hints, groups = p
        return protocol.register_kv_cache(iid, [_rebuild_wrapper(e) for e in wrappers], model,
                                          world, engine, hints, [EngineGroupInfo(**g) for g in groups])
    builders = {
        Op.UNREGISTER_KV_CACHE: lambda: protocol.unregister_kv_cache(*p),
        Op.STORE: lambda: protocol.store(_key(p[0]), *p[1:]),
        Op.RETRIEVE: lambda: protocol.retrieve(_key(p[0]), *p[1:]),
        Op.LOOKUP: lambda: protocol.lookup(_key(p[0]), *p[1:]),
        Op.FREE_LOOKUP_LOCKS: lambda: protocol.free_lookup_locks(_key(p[0]), *p[1:]),
        Op.QUERY_PREFETCH_STATUS: lambda: protocol.query_prefetch_status(*p),
        Op.END_SESSION: lambda: protocol.end_session(p[0], with_end_info=len(p) == 2,
                                                     end_info=p[1] if len(p) == 2 else None),
        Op.GET_CHUNK_SIZE: protocol.get_chunk_size,
        Op.GET_EXPERIMENTAL: protocol.get_experimental,
        Op.NOOP: protocol.noop,
        Op.PING: lambda: protocol.ping(*p),
        Op.CLEAR: lambda: protocol.clear(*p),
        Op.REPORT_BLOCK_ALLOCATION: lambda: protocol.report_block_allocation(
            p[0], p[1], [BlockAllocationRecord(**r) for r in p[2]]),
        Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT: lambda: protocol.register_engine_driven_context(
            RegisterEngineDrivenContextPayload(**p[0])),
        Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT: lambda: protocol.unregister_engine_driven_context(*p),
        Op.PREPARE_STORE: lambda: protocol.prepare_store(_key(p[0]), *p[1:]),
        Op.COMMIT_STORE: lambda: protocol.commit_store(_key(p[0]), *p[1:]),
        Op.PREPARE_RETRIEVE: lambda: protocol.prepare_retrieve(_key(p[0]), *p[1:]),
        Op.COMMIT_RETRIEVE: lambda: protocol.commit_retrieve(_key(p[0]), *p[1:]),
    }
    if op not in builders:
        raise ValueError(f"selftest has no builder for {op.name}")
    return builders[op]()


def encode_request(uid: int, request: protocol.Request) -> list:
    return [encode(uid), encode(request.op)] + [encode(x) for x in request.payloads]


# --- the replies the scenarios expect ------------------------------------------------------------------

NONE_TYPED = {Op.REGISTER_KV_CACHE, Op.UNREGISTER_KV_CACHE, Op.LOOKUP, Op.END_SESSION,
              Op.FREE_LOOKUP_LOCKS, Op.REPORT_BLOCK_ALLOCATION, Op.CLEAR,
              Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT}


def expected_reply(op: Op, payload):
    """Our expectation for a golden reply, or ``...`` where the client builds none (yet)."""
    if op in NONE_TYPED:
        return expect.NO_PAYLOAD
    value = decode(payload) if payload is not None else None
    if op in (Op.STORE, Op.RETRIEVE):
        return expect.transfer_reply(value[1], value[0])
    if op in (Op.GET_CHUNK_SIZE, Op.QUERY_PREFETCH_STATUS) and type(value) is int:
        return expect.int_reply(value)
    return {Op.PING: expect.TRUE, Op.NOOP: expect.NOOP_OK,
            Op.GET_EXPERIMENTAL: expect.EMPTY_LIST}.get(op, ...)


# --- comparing ---------------------------------------------------------------------------------------------

def _diff(label: str, got: bytes, want: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    lo = max(0, at - 12)
    text = (f"{label}: differs at byte {at} (ours {len(got)} bytes, golden {len(want)})\n"
            f"      ours   …{got[lo:at + 12].hex(' ')}\n      golden …{want[lo:at + 12].hex(' ')}")
    if b"\x80\x04\x95" in want:   # a pickle inside: show where the opcode streams part ways
        text += "\n" + _pickle_diff(got, want)
    return text


def _pickle_diff(got: bytes, want: bytes) -> str:
    def ops(frame):
        pickles = [e.data for e in decode(frame) if isinstance(e, msgspec.msgpack.Ext)] \
            if frame[:1] != b"\x80" else [frame]
        return [[f"{o.name} {a!r}" for o, a, _ in pickletools.genops(p)] for p in pickles]
    for i, (a, b) in enumerate(zip(ops(got), ops(want))):
        for j, (x, y) in enumerate(zip(a + ["<end>"], b + ["<end>"])):
            if x != y:
                return f"      wrapper {i}, opcode {j}: ours {x} / golden {y}"
    return "      pickles: same opcodes (difference outside the pickles)"


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def result(self, ok: bool, line: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {line}")


def check_file(path: Path, tally: Tally) -> None:
    sent = {}     # (identity, uid bytes) -> request frames, to check the echo of replies
    ops_seen, frames_seen = set(), 0
    before = tally.failed
    for n, line in enumerate(path.read_text().splitlines(), 1):
        msg = json.loads(line)
        frames = [bytes.fromhex(h) for h in msg["frames_hex"]]
        op = Op[msg["op"].upper()]
        where = f"{path.name}:{n} {msg['dir']} {msg['op']}"
        ident = msg.get("identity_hex")
        if decode(frames[1]) != op.value:
            tally.result(False, f"{where}: op frame {frames[1].hex()} is not {op.name}={op.value}")
            continue
        if msg["dir"] == "c2s":
            sent[(ident, frames[0])] = frames
            try:
                ours = encode_request(decode(frames[0]), rebuild_request(op, [decode(f) for f in frames[2:]]))
            except Exception as exc:
                tally.result(False, f"{where}: cannot rebuild: {type(exc).__name__}: {exc}")
                continue
            problems = [_diff(f"frame {i}", a, b) for i, (a, b) in enumerate(zip(ours, frames)) if a != b]
            if len(ours) != len(frames):
                problems.append(f"{len(ours)} frames, golden has {len(frames)}")
            tally.result(not problems, f"{where}:\n    " + "\n    ".join(problems))
            ops_seen.add(msg["op"])
            frames_seen += len(frames)
        else:
            request = sent.get((ident, frames[0]))
            if request is not None and request[:2] != frames[:2]:
                tally.result(False, f"{where}: golden reply does not echo uid/op")
            want = expected_reply(op, frames[2] if len(frames) > 2 else None)
            if want is ...:
                tally.skipped += 1
                continue
            got = frames[2] if len(frames) > 2 else None
            ok = (len(frames) == 2) if want is expect.NO_PAYLOAD else (len(frames) == 3 and got == want)
            tally.result(ok, f"{where}: our expectation {expect.describe(want)}, golden reply "
                             f"{expect.describe(got)}")
    status = "OK  " if tally.failed == before else "FAIL"
    print(f"{status} {path.name}: requests rebuilt byte for byte ({frames_seen} frames; "
          f"{', '.join(sorted(ops_seen)) or 'none'})")


def check_legacy_wrapper(tally: Tally) -> None:
    """No golden frame holds the old custom_types wrapper: check its global and attribute order."""
    def strings(w):
        return [a for o, a, _ in pickletools.genops(pickle.dumps(w, protocol=4))
                if o.name == "SHORT_BINUNICODE"]
    newer = LegacyCudaIPCWrapper(handle=(0, b"h"), dtype=torch.float16, shape=(2, 3),
                                 stride=(3, 1), storage_offset=0, device_uuid="u")
    e1 = LegacyCudaIPCWrapper(handle=(0, b"h"), dtype=torch.float16, shape=torch.Size((2, 3)),
                              device_uuid="u")
    want = ["lmcache.v1.multiprocess.custom_types", "CudaIPCWrapper", "handle", "dtype", "torch",
            "float16", "shape"]
    tally.result(strings(newer) == want + ["stride", "storage_offset", "device_uuid", "u"],
                 f"legacy CudaIPCWrapper pickle strings {strings(newer)}")
    tally.result(strings(e1) == want + ["torch", "Size", "device_uuid", "u"],
                 f"E1 legacy CudaIPCWrapper pickle strings {strings(e1)}")
    print("OK   legacy custom_types.CudaIPCWrapper: global and attribute order (no golden frame)")


def main() -> int:
    try:
        folder = golden_dir()
    except GoldenMissing as exc:
        print(f"ERROR {exc}")
        return 2
    print(f"# golden frames from {folder}")
    tally = Tally()
    for path in sorted(folder.glob("*.jsonl")):
        check_file(path, tally)
    check_legacy_wrapper(tally)
    print(f"# {tally.skipped} golden replies not compared (engine-driven replies: this client "
          "builds no expectation for them yet)")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 else 1
