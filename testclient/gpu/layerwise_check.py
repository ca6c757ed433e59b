#!/usr/bin/env python3
"""LMCache's layer-wise mode on a CUDA host (issue 47 item 4): a server with --layerwise-batch N and a worker that does what
vLLM's LMCacheLayerwiseMPConnector does (lmcache/v1/multiprocess/transfer_context/worker_transfer_layerwise.py@1565d9a3,
lmcache/v1/multiprocess/futures_layerwise.py@3ed3c8ba):

* after REGISTER, register_layerwise_ipc_event_pool -> (N, 256 handles); every handle imported (torch's
  Event.from_ipc_handle, LMCache's EventPool.import_pool);
* retrieve_layerwise (the five RETRIEVE payloads, sent by name) -> one frame per layer batch ``(<3i first, count, pool index>,
  False, False)`` then ``(b"", True, ok)``; for each layer, as wait_for_layer does, the current stream waits on the layer's
  pool event and then reads that layer's blocks, which must be the stored bytes, while later batches may still be copying;
* the per-chunk RETRIEVE is refused with (b"", False); a skip leaves its blocks alone; a malformed event handle and an
  unknown instance get the closing frame alone.

  python3 layerwise_check.py --java J --classpath CP --out DIR [--batch 3] [--layers 8]
"""

import argparse
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import gpu_check as g  # noqa: E402  (Server, Worker, key, check, RESULTS, pack/unpack)


def by_name(client, op, *payloads):
    """Sends an op by its name (the layer-wise ops have no frozen id); returns the uid."""
    uid = client.uid
    client.uid += 1
    client.dealer.send([g.pack(uid), g.pack(op)] + [g.pack(p) for p in payloads])
    return uid


def frames_until_final(client, uid, timeout=30.0):
    """Every reply of uid up to the closing frame, with the time each arrived."""
    out = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        got, value = client.recv()
        assert got == uid, f"a reply for uid {got} while waiting for {uid}"
        out.append((time.perf_counter(), value))
        if not (isinstance(value, list) and len(value) == 3 and value[1] is False):
            return out
    raise TimeoutError("no closing frame")


def layer_events(payload):
    first, count, pool = struct.unpack_from("<3i", payload)
    if first >= 0:
        assert len(payload) == 12, f"a <3i frame of {len(payload)} bytes"
        return {layer: pool for layer in range(first, first + count)}
    return {layer: pool for layer in struct.unpack_from(f"<{count}i", payload, 12)}


def wait_all(events, frames):
    """The current stream waits on every announced batch's pool event (the server's copies run in its own process: a
    synchronize here would not wait for them)."""
    for _, value in frames[:-1]:
        for pool in set(layer_events(value[0]).values()):
            torch.cuda.current_stream().wait_event(events[pool])
    torch.cuda.current_stream().synchronize()


def layer_bytes(w, layer, blocks):
    return torch.cat([w.tensors[layer][:, b].reshape(-1) for b in blocks])


def run(args):
    server = g.Server(args.java, args.classpath, args.out, 2, extra=("--layerwise-batch", str(args.batch)))
    try:
        w = g.Worker(server, "nhd", layers=args.layers, blocks=96, seed=47)
        g.check("layerwise: REGISTER", w.register() is None)
        uid = by_name(w.client, "register_layerwise_ipc_event_pool", w.instance)
        got, pool = w.client.recv()
        batch, handles = pool
        g.check("layerwise: event pool = (N, 256 handles of 64 bytes)",
                got == uid and batch == args.batch and len(handles) == 256 and all(len(h) == 64 for h in handles),
                f"batch {batch}, {len(handles)} handles")
        device = torch.cuda.current_device()
        events = [torch.cuda.Event.from_ipc_handle(device, bytes(h)) for h in handles]  # EventPool.import_pool
        g.check("layerwise: all 256 pool handles import", len(events) == 256)

        tokens = list(range(1000, 1000 + 2 * g.CHUNK))
        per_chunk = g.CHUNK // w.block
        src, dst = list(range(0, 2 * per_chunk)), list(range(2 * per_chunk, 4 * per_chunk))
        before = {layer: layer_bytes(w, layer, src).clone() for layer in range(args.layers)}
        g.check("layerwise: STORE 2 chunks", w.store(tokens, 0, 2 * g.CHUNK, src, "lw-1"))
        w.set_blocks(dst, 0.0)
        torch.cuda.synchronize()

        uid = by_name(w.client, "retrieve_layerwise", g.key(tokens, 0, 2 * g.CHUNK, "lw-1"), w.instance, [dst], w.event(), 0)
        sent = time.perf_counter()
        frames = frames_until_final(w.client, uid)
        *partials, (closed_at, final) = frames
        mapping, batches = {}, []
        for _, (payload, is_final, ok) in partials:
            layers = layer_events(payload)
            batches.append(sorted(layers))
            mapping.update(layers)
        want = [list(range(i, min(i + args.batch, args.layers))) for i in range(0, args.layers, args.batch)]
        g.check("layerwise: one frame per batch of N layers, in order", batches == want, f"{batches}")
        g.check("layerwise: each batch's event is its first layer's", all(mapping[l] == b[0] for b in batches for l in b))
        g.check("layerwise: closing frame (b'', True, True)", final == [b"", True, True], repr(final))
        equal = []
        for layer in range(args.layers):  # wait_for_layer: the stream waits on the layer's event, then attention reads it
            stream = torch.cuda.current_stream()
            stream.wait_event(events[mapping[layer]])
            equal.append(torch.equal(layer_bytes(w, layer, dst), before[layer]))
        g.check("layerwise: every layer's bytes equal after its own event", all(equal), f"{equal}")
        g.log(f"layerwise: first frame {1e3 * (partials[0][0] - sent):.2f} ms after the request, closing frame "
              f"{1e3 * (closed_at - sent):.2f} ms")

        # the first block of a skip keeps its sentinel, every layer of the rest is filled
        fresh = list(range(4 * per_chunk, 6 * per_chunk))
        w.set_blocks(fresh, 7.0)
        torch.cuda.synchronize()
        uid = by_name(w.client, "retrieve_layerwise", g.key(tokens, 0, 2 * g.CHUNK, "lw-2"), w.instance, [fresh], w.event(), w.block)
        frames = frames_until_final(w.client, uid)
        wait_all(events, frames)
        kept = bool((w.block_bytes(fresh[0]) == 7.0).all())
        rest = all(torch.equal(layer_bytes(w, layer, fresh[1:]), before[layer][before[layer].numel() // len(src):])
                   for layer in range(args.layers))
        g.check("layerwise: skip 16 leaves the first block alone and fills the rest", frames[-1][1] == [b"", True, True] and kept and rest)

        # the per-chunk RETRIEVE is refused, as LMCache's layer-wise module refuses it
        w.set_blocks(dst, 0.0)
        torch.cuda.synchronize()
        reply = w.client.call("retrieve", g.key(tokens, 0, 2 * g.CHUNK, "lw-3"), w.instance, [dst], w.event(), 0)
        torch.cuda.synchronize()
        g.check("layerwise: per-chunk RETRIEVE refused with (b'', False), nothing written",
                reply == [b"", False] and bool((w.block_bytes(dst[0]) == 0).all()), repr(reply)[:80])

        # a malformed event handle and an unknown instance: the closing frame alone
        uid = by_name(w.client, "retrieve_layerwise", g.key(tokens, 0, 2 * g.CHUNK, "lw-4"), w.instance, [dst], b"\x01" * 10, 0)
        frames = frames_until_final(w.client, uid)
        g.check("layerwise: a 10-byte event handle gets the closing frame alone", [v for _, v in frames] == [[b"", True, False]])
        uid = by_name(w.client, "retrieve_layerwise", g.key(tokens, 0, 2 * g.CHUNK, "lw-5"), w.instance ^ 1, [dst], w.event(), 0)
        frames = frames_until_final(w.client, uid)
        g.check("layerwise: an unknown instance gets the closing frame alone", [v for _, v in frames] == [[b"", True, False]])
        # a miss (tokens never stored): the closing frame, false
        uid = by_name(w.client, "retrieve_layerwise", g.key([7] * g.CHUNK, 0, g.CHUNK, "lw-6"), w.instance, [dst[:per_chunk]],
                      w.event(), 0)
        frames = frames_until_final(w.client, uid)
        g.check("layerwise: a miss gets the closing frame alone", [v for _, v in frames] == [[b"", True, False]])
        batches_metric = server.metric("lmcache_mp_layerwise_batches_total")
        g.check("layerwise: batches counted", batches_metric == 2 * len(want), f"{batches_metric}")
        g.check("layerwise: UNREGISTER", w.client.call("unregister", w.instance) is None)
        time.sleep(0.5)
        status = server.status()
        g.check("layerwise: UNREGISTER released the mappings", status["cuda"]["open_ipc_mappings"] == 0, f"{status['cuda']}")
    finally:
        server.stop()
    failed = [r for r in g.RESULTS if not r["ok"]]
    g.log(f"layerwise: {len(g.RESULTS) - len(failed)} passed, {len(failed)} failed")
    with open(os.path.join(args.out, "layerwise_tests.json"), "w") as f:
        json.dump(g.RESULTS, f, indent=1)
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    args = p.parse_args()
    torch.cuda.init()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
