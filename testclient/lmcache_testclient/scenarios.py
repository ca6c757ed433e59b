"""Scenarios: each drives the real server through one behaviour and records exact-byte checks.

Add a scenario by writing ``def my_scenario(report, opts)`` and decorating it with
``@scenario("name", "one-line help")``; ``python -m lmcache_testclient list`` shows it at once.
Steps go through ``worker.Worker`` (one DEALER + shm KV tensors + instance id); tokens, instance
ids and tensor contents come from ``opts.rng(label)``, so a run is reproducible from its seed.
"""

import contextlib
import threading
import traceback

import zmq

from . import expect, protocol
from .registry import SCENARIOS, Options, Scenario, scenario  # noqa: F401  (re-exported for __main__)
from .report import Abort, Report, reply_problems
from .shm_kv import BLOCK_SIZE, LAYOUTS, SENTINEL, Geometry, ShmKVCache
from .wire import Client, WireError
from .worker import BlockAllocator, Worker, new_instance_id, random_tokens

def run(name: str, opts: Options) -> int:
    """Run one scenario, print its checks and JSON summary; returns the exit code (0/1)."""
    report = Report(name)
    report.note(f"{name} endpoint={opts.endpoint} chunk_size={opts.chunk_size} "
                f"seed={opts.seed} timeout={opts.timeout_s}s")
    try:
        SCENARIOS[name].run(report, opts)
    except Abort as abort:
        report.note(f"stopped after failed step: {abort}")
        _note_liveness(report, opts)
    except Exception as exc:  # a bug here or a server answer we could not even parse
        report.check("scenario ran to completion", False, f"{type(exc).__name__}: {exc}")
        report.note(traceback.format_exc().replace("\n", "\n# "))
        _note_liveness(report, opts)
    return report.finish()


def _note_liveness(report: Report, opts: Options) -> None:
    """After a failure, say whether the server still answers at all (context, not a check)."""
    with Client(opts.endpoint, timeout_s=min(opts.timeout_s, 3.0)) as probe:
        try:
            reply = probe.call(protocol.noop())
            report.note(f"server still answers NOOP on a new connection: {expect.describe(reply.payload)}")
        except WireError as exc:
            report.note(f"server does not answer NOOP on a new connection: {exc}")


# --- handshake ----------------------------------------------------------------------------------

@scenario("handshake", "GET_CHUNK_SIZE, PING(id), PING(None), NOOP, GET_EXPERIMENTAL; echo, pipelining")
def handshake(report: Report, opts: Options) -> None:
    rng = opts.rng("handshake")
    steps = [
        ("GET_CHUNK_SIZE", protocol.get_chunk_size(), expect.int_reply(opts.chunk_size)),
        ("PING(worker instance id)", protocol.ping(new_instance_id(rng)), expect.TRUE),
        ("PING(None)", protocol.ping(None), expect.TRUE),
        ("NOOP", protocol.noop(), expect.NOOP_OK),
        ("GET_EXPERIMENTAL", protocol.get_experimental(), expect.KV_EVENT_CAPABILITIES),
    ]
    with Client(opts.endpoint, timeout_s=opts.timeout_s) as client:
        worker = Worker(report, client, None, "testclient/handshake", 0)
        for name, request, expected in steps:
            worker.step(name, request, expected)
        # The real client keeps many requests in flight and matches replies by uid; uids past 127
        # and 255 take 2 and 3 bytes (cc xx, cd xx xx), which must still be echoed verbatim.
        batch = [client.submit(req) for _ in range(60) for _, req, _ in steps]
        replies = _wait_or_abort(report, client, "pipelined", batch, opts)
        expected_by_uid = {uid: steps[i % len(steps)][2] for i, uid in enumerate(batch)}
        problems = [f"uid {uid}: {p}" for uid, reply in replies.items()
                    for p in reply_problems(reply, expected_by_uid[uid])]
        report.check(f"pipelined: {len(batch)} requests in flight (uids {batch[0]}..{batch[-1]}), "
                     "each answered and echoed", not problems, "; ".join(problems[:5]) or "all exact")


def _wait_or_abort(report: Report, client: Client, name: str, uids: list, opts: Options) -> dict:
    try:
        return client.wait_all(uids, opts.timeout_s)
    except WireError as exc:
        report.require(name, False, str(exc))


# --- LMCache-driven round trip per vLLM layout --------------------------------------------------

def _roundtrip(report: Report, opts: Options, layout_name: str) -> None:
    chunk, per_chunk = opts.chunk_size, opts.blocks_per_chunk
    n_tokens, n_blocks = 2 * chunk, 2 * per_chunk              # 512 tokens, 32 blocks
    partial_tokens = 2 * chunk + (11 * chunk) // 32             # 600 for chunk 256
    partial_blocks = -(-partial_tokens // BLOCK_SIZE)           # 38
    rng = opts.rng(f"roundtrip-{layout_name}")
    alloc = BlockAllocator(7 * n_blocks + partial_blocks)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS[layout_name],
                                            Geometry(num_blocks=alloc.num_blocks),
                                            seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, f"testclient/{layout_name}", new_instance_id(rng))
        report.note(f"layout {kv.layout.description}, tensors {[tuple(t.shape) for t in kv.tensors]}, "
                    f"segments {kv.names}, instance_id {w.instance_id}")

        w.step("GET_CHUNK_SIZE", protocol.get_chunk_size(), expect.int_reply(chunk))
        w.register()

        # Store 2 chunks, wipe the source blocks, find them, read them back elsewhere.
        tokens = random_tokens(rng, n_tokens)
        key = w.key(tokens, f"req-{layout_name}-main")
        stored = alloc.take(n_blocks)
        original = kv.snapshot(stored)
        w.store(f"STORE {n_tokens} tokens from {n_blocks} blocks", key, stored, required=True)
        kv.zero_blocks(stored)
        w.lookup_hits("LOOKUP stored prefix", key, 2)
        w.query("second QUERY_PREFETCH_STATUS = 0 (count is returned once)", key.request_id, 0,
                poll=False)
        target = alloc.take(n_blocks)
        w.retrieve(f"RETRIEVE into {n_blocks} other blocks", key, target)
        w.verify_blocks("retrieved blocks equal the stored blocks", target, original)

        # A trailing partial chunk is not stored; the scheduler looks up floor(len/chunk)*chunk.
        ptokens = random_tokens(rng, partial_tokens)
        pkey = w.key(ptokens, f"req-{layout_name}-partial")
        pblocks = alloc.take(partial_blocks)
        pfull = kv.snapshot(pblocks[:n_blocks])
        w.store(f"partial: STORE {partial_tokens} tokens (end={partial_tokens}, "
                f"{partial_blocks} blocks)", pkey, pblocks)
        w.lookup_hits(f"partial: LOOKUP end={n_tokens} of {partial_tokens} tokens",
                      pkey.with_(end=n_tokens), 2)
        ptarget = alloc.take(n_blocks)
        w.retrieve(f"partial: RETRIEVE [0,{n_tokens})", pkey.with_(end=n_tokens), ptarget)
        w.verify_blocks("partial: retrieved chunks equal the stored blocks", ptarget, pfull)

        # skip_first_n_tokens: the first block is APC-shared in vLLM and must not be written.
        skip_target = alloc.take(n_blocks)
        kv.fill_blocks(skip_target, SENTINEL)
        w.retrieve(f"skip_first_n_tokens={BLOCK_SIZE}: RETRIEVE", key, skip_target,
                   skip_first_n_tokens=BLOCK_SIZE)
        untouched = kv.block_is_filled_with(skip_target[0], SENTINEL)
        report.check("skip: first target block untouched", untouched,
                     f"block {skip_target[0]} {'still holds' if untouched else 'lost'} "
                     f"the sentinel {SENTINEL}")
        w.verify_blocks("skip: remaining blocks equal the stored blocks", skip_target[1:],
                        original[1:])

        # A miss: nothing found, and RETRIEVE reports failure.
        mkey = w.key(random_tokens(rng, n_tokens), f"req-{layout_name}-miss")
        w.lookup_hits("miss", mkey, 0)
        w.retrieve("miss: RETRIEVE fails", mkey, alloc.take(n_blocks), ok=False)

        # A chunk is a hit only when every KV rank has it; rank 1 of world_size 2 never stored.
        w.lookup_hits("world_size=2 lookup, only rank 0 stored",
                      key.with_(world_size=2, request_id=f"req-{layout_name}-ws2"), 0)

        # Re-registration (heartbeat recovery) is idempotent and keeps the data path working.
        w.register("re-REGISTER_KV_CACHE (same instance id, same wrappers)", required=False)
        rkey = w.key(random_tokens(rng, n_tokens), f"req-{layout_name}-rereg")
        rsource, rtarget = alloc.take(n_blocks), alloc.take(n_blocks)
        rdata = kv.snapshot(rsource)
        w.store("after re-register: STORE", rkey, rsource)
        w.retrieve("after re-register: RETRIEVE", rkey, rtarget)
        w.verify_blocks("after re-register: retrieved blocks equal the stored blocks", rtarget, rdata)

        w.end_session("END_SESSION (request_id, nil end_info)", key.request_id)
        w.end_session("END_SESSION (request_id only, as the golden client)", pkey.request_id,
                      with_end_info=False)
        w.free_lookup_locks("FREE_LOOKUP_LOCKS", key)
        w.unregister()


for _name in LAYOUTS:
    scenario(f"roundtrip-{_name}",
             f"register/store/lookup/retrieve round trip, {LAYOUTS[_name].description}")(
        lambda report, opts, _layout=_name: _roundtrip(report, opts, _layout))


# --- tenant identity: cache_salt and lmcache.tag.* request configs ---------------------------------

@scenario("tenants", "cache_salt and lmcache.tag.* request tags separate tenants: STORE then LOOKUP "
                     "hits only with the same salt and the same tag set")
def tenants(report: Report, opts: Options) -> None:
    chunk, per_chunk = opts.chunk_size, opts.blocks_per_chunk
    n_tokens, n_blocks = 2 * chunk, 2 * per_chunk
    rng = opts.rng("tenants")
    alloc = BlockAllocator(4 * n_blocks)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=alloc.num_blocks),
                                            seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, "testclient/tenants", new_instance_id(rng))
        w.register()
        tokens = random_tokens(rng, n_tokens)
        tags = {"lmcache.tag.tenant": "a", "lmcache.tag.app_version": "v2", "lmcache.skip_save": False}
        key = w.key(tokens, "tenant-store").with_(cache_salt="salt-1", request_configs=tags)
        stored = alloc.take(n_blocks)
        original = kv.snapshot(stored)
        w.store(f"STORE {n_tokens} tokens under salt-1, tags tenant=a app_version=v2", key, stored,
                required=True)
        # the same tag set in another order, and a non-tag config changed: the same identity
        same = {"lmcache.tag.app_version": "v2", "lmcache.tag.tenant": "a", "lmcache.kv_ttl_s": 60}
        w.lookup_hits("same salt, same tags (other order)",
                      key.with_(request_id="t-same", request_configs=same), 2)
        w.lookup_hits("another salt", key.with_(request_id="t-salt", cache_salt="salt-2"), 0)
        w.lookup_hits("no salt", key.with_(request_id="t-nosalt", cache_salt=""), 0)
        w.lookup_hits("another tag value",
                      key.with_(request_id="t-value", request_configs={
                          "lmcache.tag.tenant": "b", "lmcache.tag.app_version": "v2"}), 0)
        w.lookup_hits("a tag fewer", key.with_(request_id="t-fewer",
                                               request_configs={"lmcache.tag.tenant": "a"}), 0)
        w.lookup_hits("no tags", key.with_(request_id="t-none", request_configs=None), 0)
        target = alloc.take(n_blocks)
        w.retrieve("RETRIEVE with the same salt and tags", key.with_(request_id="t-get"), target)
        w.verify_blocks("retrieved blocks equal the stored blocks", target, original)
        w.retrieve("RETRIEVE with another tag set fails", key.with_(
            request_id="t-get2", request_configs={"lmcache.tag.tenant": "b"}), alloc.take(n_blocks), ok=False)
        # a tag LMCache refuses ('/' in its value) fails the request, as LMCache's ObjectKey raises
        bad = key.with_(request_id="t-bad", request_configs={"lmcache.tag.tenant": "a/b"})
        w.store("STORE with an invalid tag fails", bad, alloc.take(n_blocks), ok=False)
        w.lookup_hits("LOOKUP with an invalid tag finds nothing", bad, 0)
        w.ping("PING after the refused requests")
        w.unregister()


# --- concurrency ----------------------------------------------------------------------------------

CONCURRENT_CLIENTS = 8


@scenario("concurrent", f"{CONCURRENT_CLIENTS} DEALERs at once, each a full store/retrieve cycle")
def concurrent(report: Report, opts: Options) -> None:
    context = zmq.Context.instance()
    start = threading.Barrier(CONCURRENT_CLIENTS)
    finished = [False] * CONCURRENT_CLIENTS

    def one_client(i: int) -> None:
        prefix = f"client {i}: "
        try:
            start.wait(opts.timeout_s)
            _client_cycle(report, opts, context, i, prefix)
            finished[i] = True
        except Abort:
            pass
        except Exception as exc:
            report.check(f"{prefix}ran to completion", False, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one_client, args=(i,), daemon=True)
               for i in range(CONCURRENT_CLIENTS)]
    for t in threads:
        t.start()
    # Each step has its own timeout; this only guards against a bug in the client itself.
    for t in threads:
        t.join(opts.timeout_s * 20)
    report.check(f"all {CONCURRENT_CLIENTS} clients completed their cycle", all(finished),
                 f"{sum(finished)}/{CONCURRENT_CLIENTS} completed")


def _client_cycle(report: Report, opts: Options, context, i: int, prefix: str) -> None:
    rng = opts.rng(f"concurrent-{i}")
    n_tokens, n_blocks = 2 * opts.chunk_size, 2 * opts.blocks_per_chunk
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, context, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=2 * n_blocks),
                                            seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, "testclient/concurrent", new_instance_id(rng), prefix)
        w.register()
        # Distinct prefixes: the first token is the client's index, the rest random.
        key = w.key([i] + random_tokens(rng, n_tokens - 1), f"req-concurrent-{i}")
        source, target = list(range(n_blocks)), list(range(n_blocks, 2 * n_blocks))
        original = kv.snapshot(source)
        w.store("STORE", key, source, required=True)
        kv.zero_blocks(source)
        w.lookup_hits("lookup", key, 2)
        w.retrieve("RETRIEVE", key, target, required=True)
        w.verify_blocks("retrieved blocks equal the stored blocks", target, original, required=True)
        w.end_session("END_SESSION", key.request_id)
        w.unregister()


# --- bad input on the data path ---------------------------------------------------------------------

@scenario("badinput-datapath", "bad STORE/RETRIEVE get (event, False) and the server keeps serving")
def badinput_datapath(report: Report, opts: Options) -> None:
    rng = opts.rng("badinput-datapath")
    n_tokens, n_blocks = 2 * opts.chunk_size, 2 * opts.blocks_per_chunk
    num_blocks = 2 * n_blocks
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(Client(opts.endpoint, timeout_s=opts.timeout_s))
        kv = stack.enter_context(ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=num_blocks),
                                            seed=rng.getrandbits(32)))
        w = Worker(report, client, kv, "testclient/badinput", new_instance_id(rng))
        w.register()

        def then_ping(case: str) -> None:
            w.ping(f"{case}: then PING")

        def fresh_key(label: str, **changes):
            return w.key(random_tokens(rng, n_tokens), f"req-bad-{label}").with_(**changes)

        case = f"block id {num_blocks} out of range (num_blocks {num_blocks})"
        w.store(f"{case}: STORE fails", fresh_key("range"),
                list(range(n_blocks - 1)) + [num_blocks], ok=False)
        then_ping(case)

        case = "shm segment unlinked after REGISTER"
        with ShmKVCache(LAYOUTS["nhd"], Geometry(num_blocks=num_blocks), rng.getrandbits(32)) as vkv:
            victim = Worker(report, client, vkv, w.model_name, new_instance_id(rng))
            victim.register(f"{case}: REGISTER victim instance")
            report.note(f"{case}: unlinked {vkv.unlink(0)}")
            victim.store(f"{case}: STORE fails", fresh_key("unlinked"), list(range(n_blocks)),
                         ok=False)
            then_ping(case)
            victim.unregister(f"{case}: UNREGISTER victim instance")

        case = "token range not chunk-aligned (start 100)"
        w.store(f"{case}: STORE fails", fresh_key("unaligned", start=100), list(range(n_blocks)),
                ok=False)
        then_ping(case)

        case = "unknown instance id"
        w.store(f"{case}: STORE fails", fresh_key("unknown"), list(range(n_blocks)), ok=False,
                instance_id=new_instance_id(rng))
        then_ping(case)

        case = f"too few block ids ({n_blocks - 1} for {n_blocks})"
        key = fresh_key("few")
        w.store(f"{case}: precondition STORE of the full range", key, list(range(n_blocks)))
        w.retrieve(f"{case}: RETRIEVE fails", key, list(range(n_blocks, 2 * n_blocks - 1)),
                   ok=False)
        then_ping(case)

        w.unregister()


# --- hybrid models: registered by importing their module (it uses the decorator above) ------------

