"""CLI: replays LMCache's ``lmcache bench engine --workload long-doc-qa`` as vLLM would drive the
server, for the ladder's configs C (GPU prefix caching only, no server) and D (+ the server).

  python3 -m bench.ldqa --mode C,D --runs 2 --model tiny --kv-cache-volume 0.05 \\
      --ldqa-document-length 2048 --gpu-pool-blocks 256 --endpoint tcp://127.0.0.1:5560 \\
      --http http://127.0.0.1:8090 --verify --out /tmp/ldqa
"""

import argparse
import json
import random
import sys

from . import report
from .engine import Engine
from .models import MODELS, resolve
from .workload import HotScanWorkload, Workload, num_documents


def parse(argv):
    p = argparse.ArgumentParser(prog="python3 -m bench.ldqa", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("workload (LMCache's flag names)")
    w.add_argument("--tokens-per-gb-kvcache", type=float, default=None,
                   help="default: 1024^3 / the server's cache_size_per_token (mode C alone: the model's bytes/token)")
    w.add_argument("--kv-cache-volume", type=float, default=1.0, help="GB of KV the documents make")
    w.add_argument("--ldqa-document-length", type=int, default=10000)
    w.add_argument("--ldqa-query-per-document", type=int, default=2)
    w.add_argument("--ldqa-num-inflight-requests", type=int, default=4)
    w.add_argument("--ldqa-shuffle-policy", choices=("random", "tile"), default="random")
    w.add_argument("--ldqa-output-length", type=int, default=16)
    w.add_argument("--ignore-eos", action="store_true", help="accepted; outputs are always full length here")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--ldqa-one-hit-share", type=float, default=0.0,
                   help="long-doc-qa: this share of each pass's prompts are documents asked once, never again (0 <= x < 1)")
    w.add_argument("--ldqa-workload", choices=("long-doc-qa", "hot-scan"), default="long-doc-qa",
                   help="hot-scan: --hot-documents revisited each of --rounds, between them --scan-documents one-off ones")
    w.add_argument("--hot-documents", type=int, default=8)
    w.add_argument("--scan-documents", type=int, default=48)
    w.add_argument("--rounds", type=int, default=4)
    m = p.add_argument_group("model")
    m.add_argument("--model", choices=sorted(MODELS), default="llama-8b")
    m.add_argument("--chunk-size", type=int, default=0, help="the server's chunk (Mamba models: the unified block N)")
    m.add_argument("--block-size", type=int, default=0)
    m.add_argument("--dtype", default="")
    m.add_argument("--layers", type=int, default=0)
    m.add_argument("--kv-heads", type=int, default=0)
    m.add_argument("--head-size", type=int, default=0)
    s = p.add_argument_group("simulation")
    s.add_argument("--mode", default="C,D", help="C, D or a ladder C,D (C runs without any server)")
    s.add_argument("--runs", type=int, default=2, help="passes per config: the first primes, the last measures")
    s.add_argument("--gpu-pool-blocks", type=int, default=2048, help="vLLM's GPU block pool (blocks of --block-size)")
    s.add_argument("--prefill-us-per-token", type=float, default=50.0, help="prefill cost that a hit saves")
    s.add_argument("--verify", action="store_true", help="byte-check every retrieved block")
    s.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    c = p.add_argument_group("server")
    c.add_argument("--endpoint", default="tcp://127.0.0.1:5560")
    c.add_argument("--http", default="http://127.0.0.1:8090", help="its HTTP port (/status, /metrics); '' for none")
    c.add_argument("--java", help="start a server here: the java binary (with --classpath)")
    c.add_argument("--classpath")
    c.add_argument("--l1-size-gb", type=float, default=4.0, help="pool of a server started with --java")
    c.add_argument("--eviction-policy", default="LRU", help="of a server started with --java (LRU, ARC, S3FIFO, IsolatedLRU, noop)")
    c.add_argument("--server-arg", action="append", default=[], help="extra flag for a started server (repeat)")
    p.add_argument("--out", default="ldqa-out")
    return p.parse_args(argv)


def working_set(workload, model) -> int:
    """Distinct full chunks the prompts make (a chunk is identified by its token prefix)."""
    chunks = set()
    for pr in workload.warmup() + workload.benchmark():
        doc_chunks = workload.doc_len // model.chunk
        for c in range(len(pr.tokens) // model.chunk):
            chunks.add((pr.doc, c) if c < doc_chunks else (pr.doc, pr.query, c))
    return len(chunks)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    model = resolve(args)
    modes = [x.strip().upper() for x in args.mode.split(",") if x.strip()]
    if not set(modes) <= {"C", "D"}:
        raise SystemExit("--mode: C, D or C,D")
    server = conn = kv = view = None
    instance = random.Random(args.seed).getrandbits(62)
    model_name = f"ldqa/{model.name}"
    doc = {"device": args.device, "transport": None, "rows": [], "args": vars(args)}
    try:
        if "D" in modes:
            from . import transport   # puts testclient/ on sys.path before anything imports lmcache
            from .kvcache import CudaKVCache, ShmKVCache
            if args.device == "cuda":
                import torch
                if not torch.cuda.is_available():
                    raise SystemExit("--device cuda: torch.cuda is not available on this host "
                                     "(use --device cpu, or run on a GPU host with CUDA torch)")
            if args.java:
                from .server import Server
                server = Server(args.java, args.classpath, args.out, args.l1_size_gb, model.chunk, args.device,
                                args.server_arg, args.eviction_policy)
                args.endpoint, args.http = server.endpoint, server.http_base
                print(f"# started lmcache-server pid {server.proc.pid} on {server.endpoint}", flush=True)
            conn = transport.connect(args.endpoint)
            doc["transport"] = conn.kind
            served = conn.call("chunk_size", timeout=30)
            if served != model.chunk:
                raise SystemExit(f"the server's chunk size is {served}, the model's {model.chunk}: "
                                 f"start the server with --chunk-size {model.chunk} or pass --chunk-size {served}")
            kv = (CudaKVCache if args.device == "cuda" else ShmKVCache)(model, args.gpu_pool_blocks + 1, args.seed)
            infos = [] if len(model.groups) == 1 else [
                {"engine_group_id": i, "layer_indices": list(range(first, first + count)),
                 "tokens_per_block": model.block, "sw_size_tokens": g.window, "extra_object_group_tag": 0,
                 "recurrent_state": g.recurrent,
                 # group_view.py's DeepSeek V4.1 fields, appended last with their defaults but for these
                 "tokens_per_state": 1, "cache_role": g.role, "state_content_bytes": None,
                 "block_stride_alignment": None, "is_index_group_leader": g.role == "indexer",
                 "prefix_cacheable": g.cacheable, "page_size_padded": None, "num_head_slots": None}
                for i, (g, (first, count)) in enumerate(zip(model.groups, model.layer_ranges()))]
            conn.call("register", instance, [conn.wrapper_ext(w) for w in kv.wrappers()], model_name, 1, "vllm",
                      {"kv_layout": "NHD"}, infos)
            view = report.ServerView(args.http) if args.http else None
        first = view.snapshot() if view else None
        per_token = (view.cache_size_per_token(first, instance) if first else None) or model.bytes_per_token()
        tpg = args.tokens_per_gb_kvcache or (1024 ** 3 / per_token)
        if args.ldqa_workload == "hot-scan":
            workload = HotScanWorkload(args.hot_documents, args.scan_documents, args.rounds, args.ldqa_document_length,
                                       args.seed)
            ndocs = workload.num_docs
        else:
            ndocs = num_documents(tpg, args.kv_cache_volume, args.ldqa_document_length)
            workload = Workload(ndocs, args.ldqa_document_length, args.ldqa_query_per_document,
                                args.ldqa_shuffle_policy, args.seed, args.ldqa_one_hit_share)
        ws_chunks = working_set(workload, model)
        ws_bytes = int(ws_chunks * model.chunk * per_token)
        pool_bytes = first["memory_total_bytes"] if first else None
        watermark = 0.95
        op = {"model": model.name, "documents": ndocs, "doc_len": args.ldqa_document_length, "tokens_per_gb": tpg,
              "bytes_per_token": per_token, "working_set_chunks": ws_chunks, "working_set_bytes": ws_bytes,
              "gpu_pool_blocks": args.gpu_pool_blocks,
              "gpu_pool_bytes": int(args.gpu_pool_blocks * model.block * model.bytes_per_token()),
              "server_pool_bytes": pool_bytes, "watermark": watermark,
              "overflows_gpu": ws_chunks * model.chunk > args.gpu_pool_blocks * model.block,
              "fits_server": None if pool_bytes is None else ws_bytes <= watermark * pool_bytes}
        doc["operating_point"] = op
        print(f"# {ndocs} documents x {args.ldqa_document_length} tokens, tokens_per_gb {tpg:.0f}, "
              f"working set {ws_bytes / 2**30:.3f} GiB, transport {doc['transport']}", flush=True)
        for mode in modes:
            d = mode == "D"
            engine = Engine(model, args.gpu_pool_blocks, args.ldqa_num_inflight_requests,
                            conn if d else None, kv if d else None, instance, model_name, args.verify and d, tag=mode)
            for run in range(1, args.runs + 1):
                rows = []
                for phase, prompts, out_len, inflight in (
                        ("warmup", workload.warmup(), 1, 1),
                        ("benchmark", workload.benchmark(), args.ldqa_output_length, args.ldqa_num_inflight_requests)):
                    engine.inflight = inflight
                    before = view.snapshot() if d and view else None
                    stats = engine.run(prompts, out_len)
                    after = view.snapshot() if d and view else None
                    rows.append(report.phase_row(mode, run, phase, stats, before, after, None, args.prefill_us_per_token))
                if d:   # the copy ceiling for the same bytes: one document's KV, in this run
                    raw = kv.raw_copy_gbps(max(1, (args.ldqa_document_length // model.chunk) * model.chunk
                                               * int(model.bytes_per_token())))
                    for r in rows:
                        r["raw"] = raw
                for r in rows:
                    print(json.dumps({k: r[k] for k in ("config", "run", "phase", "gpu_hit_rate", "external_hit_rate",
                                                          "hit_rate_of_cacheable", "retrieve_ms_p99", "store_gbps",
                                                          "server_evictions", "verify_mismatches")}), flush=True)
                doc["rows"] += rows
        doc["explanation"] = report.operating_point(op)
        report.write(args.out, doc)
        print(f"# wrote {args.out}/ldqa.json and {args.out}/report.md", flush=True)
        bad = sum(r["verify_mismatches"] for r in doc["rows"])
        return 1 if bad else 0
    finally:
        if conn:
            try:
                conn.call("unregister", instance, timeout=30)
            except Exception:  # noqa: BLE001 -- best effort on the way out; the server reaps us anyway
                pass
            conn.close()
        if kv:
            kv.close()
        if server:
            server.stop()
