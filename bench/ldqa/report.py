"""Figures per run and phase, the server's side (/status, /metrics), and the JSON + report.md.

Hit rates are in tokens of prompt tokens, as vLLM's prefix_cache_* / external_prefix_cache_*
counters count them, plus of "cacheable" tokens (the full chunks of each prompt before its last
token: what the chunk-granular server can serve at best; or the GPU's block-granular hit where that is longer).
"""

import json
import urllib.request

# counters whose change over a phase the report shows (names exactly as /metrics has them)
METRICS = ("lmcache_mp_l1_evicted_chunks_total", "lmcache_mp_l1_evicted_bytes_total",
           "lmcache_mp_l1_write_chunks_total", "lmcache_mp_l1_read_chunks_total",
           "lmcache_mp_store_bytes_total", "lmcache_mp_retrieve_bytes_total",
           "lmcache_mp_store_copy_seconds_total", "lmcache_mp_retrieve_copy_seconds_total",
           "lmcache_mp_l2_store_bytes_total", "lmcache_mp_l2_load_bytes_total")


class ServerView:
    """Reads one running server's /status and /metrics (the HTTP port)."""

    def __init__(self, http: str):
        self.base = http.rstrip("/") if "://" in http else f"http://{http}"

    def _get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return r.read().decode()

    def status(self) -> dict:
        return json.loads(self._get("/status"))

    def metrics(self) -> dict:
        """Unlabelled sum per metric name (every series also carries service_instance_id)."""
        out = {}
        for line in self._get("/metrics").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            series, value = line.rsplit(" ", 1)
            name = series.split("{", 1)[0]
            if name in METRICS:
                out[name] = out.get(name, 0.0) + float(value)
        return out

    def snapshot(self) -> dict:
        s = self.status()
        l1 = s["storage_manager"]["l1_manager"]
        return {"metrics": self.metrics(), "memory_used_bytes": l1["memory_used_bytes"],
                "memory_total_bytes": l1["memory_total_bytes"], "objects": l1["total_object_count"],
                "cache_context_meta": s.get("cache_context_meta", {})}

    @staticmethod
    def cache_size_per_token(snapshot: dict, instance: int):
        meta = snapshot["cache_context_meta"].get(str(instance))
        return meta["kv_cache_layout"]["cache_size_per_token"] if meta else None


def _pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def phase_row(config, run, phase, stats, before, after, raw, prefill_us):
    ms = lambda x: None if x is None else round(1e3 * x, 3)   # noqa: E731
    hits = stats.gpu_hit_tokens + stats.external_hit_tokens
    row = {
        "config": config, "run": run, "phase": phase, "requests": stats.requests,
        "prompt_tokens": stats.prompt_tokens, "cacheable_tokens": stats.cacheable_tokens,
        "gpu_hit_tokens": stats.gpu_hit_tokens, "external_hit_tokens": stats.external_hit_tokens,
        "gpu_hit_rate": stats.gpu_hit_tokens / max(1, stats.prompt_tokens),
        "external_hit_rate": stats.external_hit_tokens / max(1, stats.prompt_tokens),
        "hit_rate_of_cacheable": hits / max(1, stats.cacheable_tokens),
        "lookup_ms_p50": ms(_pct(stats.lookup_s, 50)), "lookup_ms_p99": ms(_pct(stats.lookup_s, 99)),
        "retrieve_ms_p50": ms(_pct(stats.retrieve_s, 50)), "retrieve_ms_p99": ms(_pct(stats.retrieve_s, 99)),
        "retrieves": len(stats.retrieve_s), "retrieves_failed": stats.retrieves_failed,
        "retrieve_bytes": stats.retrieve_bytes,
        "retrieve_gbps": stats.retrieve_bytes / stats.retrieve_wall_s / 1e9 if stats.retrieve_wall_s else None,
        "stores": stats.stores, "stores_failed": stats.stores_failed, "store_bytes": stats.store_bytes,
        "store_gbps": stats.store_bytes / stats.store_wall_s / 1e9 if stats.store_wall_s else None,
        "store_gbps_per_request_p50": _pct([b / s / 1e9 for b, s in zip(stats.store_request_bytes, stats.store_s) if s], 50),
        "verified_blocks": stats.verified_blocks, "verify_mismatches": stats.verify_mismatches,
        "gpu_pool_evictions": stats.gpu_pool_evictions,
        "recompute_saved_s": hits * prefill_us / 1e6,
        "recompute_saved_external_s": stats.external_hit_tokens * prefill_us / 1e6,
        "wall_s": stats.wall_s, "raw": raw,
    }
    if before and after:
        row["server"] = {
            "memory_used_bytes": after["memory_used_bytes"], "memory_total_bytes": after["memory_total_bytes"],
            "pool_use": after["memory_used_bytes"] / max(1, after["memory_total_bytes"]), "objects": after["objects"],
            **{k + "_delta": after["metrics"].get(k, 0.0) - before["metrics"].get(k, 0.0) for k in METRICS}}
        row["server_evictions"] = row["server"]["lmcache_mp_l1_evicted_chunks_total_delta"]
    else:
        row["server_evictions"] = None
    return row


def operating_point(op: dict) -> str:
    ws, pool, gpu = op["working_set_bytes"], op.get("server_pool_bytes"), op["gpu_pool_bytes"]
    gib = lambda b: f"{b / 2**30:.2f} GiB"   # noqa: E731
    text = (f"{op['documents']} documents of {op['doc_len']} tokens ({op['model']}, "
            f"{op['bytes_per_token']:.0f} B/token by the server's cache_size_per_token): working set {gib(ws)}; "
            f"the simulated GPU pool holds {op['gpu_pool_blocks']} blocks = {gib(gpu)} "
            f"({'overflowed' if op['overflows_gpu'] else 'NOT overflowed'} by the working set, so GPU-local reuse "
            f"{'decays before a document comes back' if op['overflows_gpu'] else 'survives'}). ")
    if pool:
        budget = pool * op["watermark"]
        text += (f"The server pool is {gib(pool)} (eviction at {op['watermark']:.2f}: {gib(budget)} usable); "
                 f"the working set {'fits' if op['fits_server'] else 'does NOT fit'} it, so the second pass "
                 f"{'finds every cacheable chunk on the server' if op['fits_server'] else 'finds only what LRU kept: chunks are evicted before their document comes back'}.")
    return text


def write(out_dir, doc: dict) -> None:
    import os
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "ldqa.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown(doc))


def markdown(doc: dict) -> str:
    f2 = lambda v, fmt: "–" if v is None else format(v, fmt)   # noqa: E731
    lines = [f"# long-doc-qa replay ({doc['operating_point']['model']}, device {doc['device']}, {doc['transport']})", "",
             "| config | run | phase | requests | GPU hit | external hit | hit of cacheable | LOOKUP p50/p99 ms "
             "| RETRIEVE p50/p99 ms (TTFT add) | RETRIEVE GB/s | STORE GB/s (agg / req p50) | raw copy GB/s (store/retrieve dir) "
             "| server pool use | evictions | recompute saved s | verify |",
             "|" + "---|" * 16]
    for r in doc["rows"]:
        raw = r.get("raw") or {}
        server = r.get("server") or {}
        lines.append(
            f"| {r['config']} | {r['run']} | {r['phase']} | {r['requests']} | {r['gpu_hit_rate']:.1%} "
            f"| {r['external_hit_rate']:.1%} | {r['hit_rate_of_cacheable']:.1%} "
            f"| {f2(r['lookup_ms_p50'], '.2f')} / {f2(r['lookup_ms_p99'], '.2f')} "
            f"| {f2(r['retrieve_ms_p50'], '.2f')} / {f2(r['retrieve_ms_p99'], '.2f')} | {f2(r['retrieve_gbps'], '.2f')} "
            f"| {f2(r['store_gbps'], '.2f')} / {f2(r['store_gbps_per_request_p50'], '.2f')} "
            f"| {f2(raw.get('raw_store_gbps'), '.1f')} / {f2(raw.get('raw_retrieve_gbps'), '.1f')} "
            f"| {f2(server.get('pool_use'), '.0%')} | {f2(r['server_evictions'], '.0f')} | {r['recompute_saved_s']:.2f} "
            f"| {'–' if not r['verified_blocks'] else ('ok' if not r['verify_mismatches'] else 'FAIL')} {r['verified_blocks'] or ''} |")
    lines += ["", "## Operating point", "", doc["explanation"], ""]
    return "\n".join(lines)
