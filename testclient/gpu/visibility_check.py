"""A STORE is visible to every request the server receives after its reply (issue 26), on the GPU, with the timing of
LMCache's adapter: the worker's STORE is answered before its copy has run (the copy waits on the GPU for the worker's
event, recorded here behind a busy kernel as a forward pass would be), and the scheduler's LOOKUP for the next request
with the same prefix follows at once on its own connection, with no host wait on the server's event. The LOOKUP must hit
every chunk every time (the server answers QUERY_PREFETCH_STATUS None until the writes commit); a RETRIEVE sent before
the commit must return the stored bytes. Also reads the commit delay (copy end on the GPU to commit) from /status.

Run from gpu_check.py's tests (`g` is that module, passed in, so this file imports nothing of gpu_check's);
`python3 run_visibility.py --java J --classpath CP --out DIR` runs it alone (LMCACHE_VISIBILITY_REPEATS, default 1000,
for the issue's figure)."""
import json
import os
import random

import torch

REPEATS = int(os.environ.get("LMCACHE_VISIBILITY_REPEATS", "1000"))
#: GPU cycles of the busy kernel before the worker's event (~1 ms at the H200's clock): the copy starts after the reply
BUSY_CYCLES = 2_000_000
#: ~10 ms: long enough that a RETRIEVE sent after the STORE's reply surely arrives before the STORE's copy has run
RETRIEVE_BUSY_CYCLES = 10 * BUSY_CYCLES


def busy_cycles(chunks):
    """The busy kernel before a STORE of `chunks`: it must outlast the server's emission of the STORE's pieces (its reply
    comes after the last one, ~1 ms at 64 chunks on an H100 host just booted), or the copy ends before the LOOKUP that
    follows the reply arrives and the test meets no write in flight (0 of 1 000 at 64 chunks on 2026-12-06; 1–996 before,
    host by host). ~1 ms up to 16 chunks, ~4 ms at 64."""
    return BUSY_CYCLES * max(1, chunks // 16)


def store_no_wait(g, w, tokens, start, end, blocks, request, busy, cycles=BUSY_CYCLES):
    """STORE as the adapter sends it: the worker's event recorded after queued work; returns (server event, ok)."""
    if busy:
        torch.cuda._sleep(cycles)
    return w.client.call("store", g.key(tokens, start, end, request), w.instance, [blocks], w.event())


def lookups_right_after_stores(g, server, chunks, repeats):
    per_chunk = g.CHUNK // 16
    w = g.Worker(server, "nhd", blocks=chunks * per_chunk + per_chunk, seed=300 + chunks)
    scheduler = g.Worker(server, "nhd", blocks=1, seed=400 + chunks)  # only its connection is used (the scheduler's)
    name = f"visibility {chunks} chunk(s)"
    g.check(f"{name}: register", w.register() is None)
    rng = random.Random(chunks)
    blocks = list(range(chunks * per_chunk))
    before = g.Server.metric(server, "lmcache_mp_l1_lookups_after_writes_total")
    misses, pending_handles = [], []
    for i in range(repeats):
        tokens = [rng.randrange(150000) for _ in range(chunks * g.CHUNK)]
        handle, ok = store_no_wait(g, w, tokens, 0, chunks * g.CHUNK, blocks, f"v{chunks}-{i}", busy=(i % 2 == 0),
                                   cycles=busy_cycles(chunks))
        hits = scheduler.lookup(tokens, chunks * g.CHUNK, f"v{chunks}-{i}-next") if ok else None
        scheduler.client.call("end_session", f"v{chunks}-{i}-next", None)  # the request ends: its read locks go
        if not ok or hits != chunks:
            misses.append((i, ok, hits))
        pending_handles.append(handle)
        if len(pending_handles) >= 8:  # the worker waits for its events later, as get_finished does
            for h in pending_handles:
                g.Worker.wait(h)
            pending_handles.clear()
    for h in pending_handles:
        g.Worker.wait(h)
    waited = g.Server.metric(server, "lmcache_mp_l1_lookups_after_writes_total") - before
    g.check(f"{name}: a LOOKUP right after each STORE reply hits every chunk, {repeats} times", not misses,
            f"misses {misses[:5]} ({len(misses)}); {waited:.0f} lookups met writes in flight")
    g.check(f"{name}: the test met writes in flight (the STORE replies came before their copies)", waited > 0, f"{waited:.0f}")
    w.client.call("unregister", w.instance)


def retrieve_before_commit(g, server):
    per_chunk = g.CHUNK // 16
    w = g.Worker(server, "nhd", blocks=4 * per_chunk, seed=500)
    name = "visibility: RETRIEVE right after the STORE reply"
    g.check(f"{name}: register", w.register() is None)
    rng, tokens, per_chunk, src, dst, before = g.two_chunks(w, 500)
    w.set_blocks(dst, 0.0)
    torch.cuda.synchronize()
    reads = g.Server.metric(server, "lmcache_mp_l1_reads_after_writes_total")
    handle, ok = store_no_wait(g, w, tokens, 0, 2 * g.CHUNK, src, "vr", busy=True, cycles=RETRIEVE_BUSY_CYCLES)
    got, ok2 = w.client.call("retrieve", g.key(tokens, 0, 2 * g.CHUNK, "vr"), w.instance, [dst], w.event(), 0)
    g.Worker.wait(handle)
    g.Worker.wait(got)
    g.check(f"{name}: STORE and RETRIEVE accepted", ok and ok2, f"{ok} {ok2}")
    g.check(f"{name}: the bytes stored come back", all(torch.equal(w.block_bytes(d), b) for d, b in zip(dst, before)))
    g.check(f"{name}: it met the write in flight", g.Server.metric(server, "lmcache_mp_l1_reads_after_writes_total") > reads)
    w.client.call("unregister", w.instance)


def commit_delay(g, server):
    delays = server.status().get("store_commit_delay", {})
    ok = bool(delays) and all(d.get("p99_seconds", 1) <= 0.001 for d in delays.values())
    g.check("visibility: commit delay p99 <= 1 ms (copy end on the GPU to commit)", ok, str(delays))
    return delays


def run_tests(g, server, args, repeats=REPEATS):
    try:
        retrieve_before_commit(g, server)
        for chunks in (1, 4, 16, 64):
            lookups_right_after_stores(g, server, chunks, repeats)
        delays = commit_delay(g, server)
        with open(os.path.join(args.out, "commit_delay.json"), "w") as f:
            json.dump(delays, f, indent=1)
    except Exception as e:  # noqa: BLE001 -- recorded as a failed check, the other results are still written
        g.check("visibility: ran to completion", False, repr(e))

