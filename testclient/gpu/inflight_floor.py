"""The floor under one request in flight (issue 30), and the arithmetic of inflight_bench.py's floor/fresh table.

No torch and no GPU here, so the logic is unit-tested anywhere (test_inflight_floor.py):

  floor = the raw copy of the request's bytes (the GPU-event rate of the same run) + one bare ZeroMQ round trip of the
          client's own frame sizes (its request frames out, a reply of the server's reply size back) to an echo ROUTER on
          libzmq in its own process, after the same idle gap a lone request has (echo_floor.py's method, sized per cell)

floor / request says how close a request comes to what no server can beat; raw / request (the older column) leaves the
messaging out. Fresh: the first --fresh-requests requests of a server just started (one fresh server per cell), against
the same cell warm.
"""
import bisect
import functools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import echo_floor  # noqa: E402
import libzmq_dealer  # noqa: E402

# a STORE/RETRIEVE reply's payload frame: msgpack [bin8(64 bytes), bool] = 92 c4 40 <64> c3 (protocol doc §9)
TRANSFER_REPLY_BYTES = 67


def frame_sizes(frames):
    """The sizes of a multipart message's frames (what the floor's round trip sends)."""
    return [len(f) for f in frames]


def reply_echo(port, reply_bytes):
    """A libzmq ROUTER, one thread: answers every message with [identity, uid, op, reply_bytes of payload], as the
    server answers a STORE or RETRIEVE (the uid and op frames echoed back)."""
    payload = b"\x92\xc4\x40" + bytes(64) + b"\xc3" if reply_bytes == TRANSFER_REPLY_BYTES else bytes(reply_bytes)
    echo_floor.libzmq_router(port, lambda frames: frames[:3] + [payload])


def summarize_us(samples_s):
    """Best and median of samples in seconds, in microseconds."""
    ordered = sorted(samples_s)
    return {"best_us": 1e6 * ordered[0], "median_us": 1e6 * statistics.median(ordered)}


class EchoFloor:
    """The echo ROUTER in a child process and a DEALER of the worker's transport (libzmq where staged)."""

    def __init__(self, reply_bytes=TRANSFER_REPLY_BYTES):
        if libzmq_dealer.load() is None:
            raise RuntimeError("no libzmq staged (.device/zmq): the floor's echo needs it")
        self.port = echo_floor.free_port()
        self.proc = echo_floor.in_child(functools.partial(reply_echo, reply_bytes=reply_bytes), self.port)
        self.dealer = libzmq_dealer.dealer("127.0.0.1", self.port, timeout=10)

    def round_trips(self, frames, rounds=200, gap_s=0.001, warm=200):
        """One message of these frames out and the reply in, `rounds` times after `gap_s` idle (a lone request's
        server is idle before it); best and median in microseconds."""
        for _ in range(warm):
            self.dealer.send(frames)
            self.dealer.recv()
        samples = []
        for _ in range(rounds):
            if gap_s:
                time.sleep(gap_s)
            t0 = time.perf_counter()
            self.dealer.send(frames)
            self.dealer.recv()
            samples.append(time.perf_counter() - t0)
        return summarize_us(samples)

    def close(self):
        self.dealer.close()
        self.proc.terminate()
        self.proc.join(5)


def floor_fields(row, op, raw_gbps, round_trip):
    """Adds {op}_floor_ms and {op}_floor_vs_request (best and median) to a row that has {op}_ms_best/_median and
    request_bytes (or {op}_bytes where the two ops move different bytes); round_trip: EchoFloor.round_trips' result for this op's frames (None: no floor measured)."""
    if round_trip is None or not raw_gbps:
        row[f"{op}_floor_ms"] = None
        row[f"{op}_floor_vs_request"] = None
        row[f"{op}_floor_vs_request_median"] = None
        return row
    # a hybrid layout can move other bytes one way than the other (qwen-like: a RETRIEVE reads the last Mamba snapshot only)
    raw_ms = row.get(f"{op}_bytes", row["request_bytes"]) / (raw_gbps * 1e9) * 1e3
    floor_ms = raw_ms + round_trip["median_us"] / 1e3
    row[f"{op}_raw_copy_ms"] = raw_ms
    row[f"{op}_round_trip_us_median"] = round_trip["median_us"]
    row[f"{op}_round_trip_us_best"] = round_trip["best_us"]
    row[f"{op}_floor_ms"] = floor_ms
    row[f"{op}_floor_vs_request"] = floor_ms / row[f"{op}_ms_best"]
    row[f"{op}_floor_vs_request_median"] = floor_ms / row[f"{op}_ms_median"]
    return row


def fresh_fields(warm, fresh, ops=("store", "retrieve")):
    """Copies a fresh server's figures of the same cell into the warm row: fresh_{op}_ms_median, fresh_{op}_vs_raw (median
    request against the raw copy) and fresh_{op}_vs_warm (warm median ÷ fresh median: 1.0 when the first requests are as fast
    as later ones; the acceptance asks ≥ 0.9), and the fresh handler time."""
    warm["fresh_regions_left_at_connect"] = fresh.get("regions_left_at_connect")
    for op in ops:
        f_med, w_med = fresh[f"{op}_ms_median"], warm[f"{op}_ms_median"]
        warm[f"fresh_{op}_ms_median"] = f_med
        warm[f"fresh_{op}_ms_best"] = fresh[f"{op}_ms_best"]
        warm[f"fresh_{op}_vs_warm"] = w_med / f_med if f_med else None
        warm[f"fresh_{op}_handler_us"] = fresh.get(f"{op}_handler_us")
        warm[f"fresh_{op}_handler_p50_us"] = fresh.get(f"{op}_handler_p50_us")
        warm[f"fresh_{op}_handler_samples"] = fresh.get(f"{op}_handler_samples")
        # the reply's wait for the socket thread (request_path_cpu send), the worker's send-to-reply and the path split:
        # where outside or inside the handler a fresh server's requests lose their time (the handler, at one chunk:
        # bench/journal/2026-12-07-request-timelines.md)
        warm[f"fresh_{op}_send_us"] = fresh.get(f"{op}_send_us")
        warm[f"fresh_{op}_worker_reply_us_median"] = fresh.get(f"{op}_worker_reply_us_median")
        for key in [k for k in fresh if k.startswith(f"{op}_path_")]:
            warm[f"fresh_{key}"] = fresh[key]
        w_p50 = warm.get(f"{op}_handler_p50_us")
        warm[f"fresh_{op}_handler_p50_vs_warm"] = fresh[f"{op}_handler_p50_us"] / w_p50 if w_p50 and fresh.get(f"{op}_handler_p50_us") else None
        if fresh.get(f"{op}_floor_ms"):
            warm[f"fresh_{op}_floor_vs_request_median"] = fresh[f"{op}_floor_ms"] / f_med
    return warm


def _fmt(value, spec=".2f"):
    return "-" if value is None else format(value, spec)


def table(rows):
    """The floor-relative table, one line per cell: raw/request and floor/request warm (best), the same fresh
    (median of the first requests) and fresh ÷ warm."""
    head = (f"{'chunks':>6} {'blocks':>11} | {'st raw/req':>10} {'st floor/req':>12} {'rt raw/req':>10} {'rt floor/req':>12} |"
            f" {'fresh st/warm':>13} {'fresh rt/warm':>13} {'fresh st floor/req':>18} {'fresh rt floor/req':>18} |"
            f" {'st hdl us':>9} {'rt hdl us':>9} {'fresh st hdl':>12} {'fresh rt hdl':>12} | {'st hdl p50':>10} {'fresh st p50':>12}"
            f" {'÷ warm':>6} {'(n)':>5} | {'st reply us':>11} {'fresh':>6} {'st send us':>10} {'fresh':>6}")
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['chunks']:>6} {r['blocks']:>11} | {_fmt(r.get('store_vs_raw')):>10} {_fmt(r.get('store_floor_vs_request')):>12}"
            f" {_fmt(r.get('retrieve_vs_raw')):>10} {_fmt(r.get('retrieve_floor_vs_request')):>12} |"
            f" {_fmt(r.get('fresh_store_vs_warm')):>13} {_fmt(r.get('fresh_retrieve_vs_warm')):>13}"
            f" {_fmt(r.get('fresh_store_floor_vs_request_median')):>18} {_fmt(r.get('fresh_retrieve_floor_vs_request_median')):>18} |"
            f" {_fmt(r.get('store_handler_us'), '.0f'):>9} {_fmt(r.get('retrieve_handler_us'), '.0f'):>9}"
            f" {_fmt(r.get('fresh_store_handler_us'), '.0f'):>12} {_fmt(r.get('fresh_retrieve_handler_us'), '.0f'):>12} |"
            f" {_fmt(r.get('store_handler_p50_us'), '.0f'):>10} {_fmt(r.get('fresh_store_handler_p50_us'), '.0f'):>12}"
            f" {_fmt(r.get('fresh_store_handler_p50_vs_warm')):>6} {_fmt(r.get('fresh_store_handler_samples'), 'd'):>5} |"
            f" {_fmt(r.get('store_worker_reply_us_median'), '.0f'):>11} {_fmt(r.get('fresh_store_worker_reply_us_median'), '.0f'):>6}"
            f" {_fmt(r.get('store_send_us'), '.0f'):>10} {_fmt(r.get('fresh_store_send_us'), '.0f'):>6}")
    return "\n".join(lines)


PATH_PARTS = ("in", "handler", "send", "out")


def path_split(op, splits, timeline):
    """Where one op's requests spent their wall time, from the worker's send (sent_ns) to its reply in (replied_ns), on the
    clock of the server's timelines (/status request_path_cpu.<op>.recent_timeline_ns: [received, queued, sent] per
    request, CLOCK_MONOTONIC on both sides of one host): in (worker send to the socket thread's receive: the worker's
    ZeroMQ, the wire, JeroMQ's I/O thread, the socket thread's wake-up), handler (receive to reply queued), send (the
    reply's wait for the socket thread) and out (the socket thread's send to the worker's receive). Medians in µs over the
    requests whose timeline was found (the server keeps the last 128 per op) and whose worker timed them; {op}_path_matched
    says how many."""
    entries = sorted(timeline)
    parts = {part: [] for part in PATH_PARTS}
    for t in splits:
        if "sent_ns" not in t:  # a worker that records no send and reply times (the CPU model's): nothing to line up
            continue
        i = bisect.bisect_left(entries, [t["sent_ns"]])
        if i == len(entries) or entries[i][0] > t["replied_ns"]:
            continue
        received, queued, sent = entries[i]
        for part, ns in zip(PATH_PARTS, (received - t["sent_ns"], queued - received, sent - queued, t["replied_ns"] - sent)):
            parts[part].append(ns / 1e3)
    out = {f"{op}_path_matched": len(parts["in"])}
    for part, values in parts.items():
        out[f"{op}_path_{part}_us_median"] = statistics.median(values) if values else None
    return out


def path_table(rows):
    """One line per cell: the medians of path_split, warm and fresh, per op."""
    cols = " ".join(f"{p:>7}" for p in PATH_PARTS)
    lines = [f"{'chunks':>6} {'blocks':>11} {'op':>8} | warm {cols} {'(n)':>4} | fresh {cols} {'(n)':>4}"]
    for r in rows:
        for op in ("store", "retrieve"):
            cells = []
            for prefix in ("", "fresh_"):
                values = " ".join(f"{_fmt(r.get(f'{prefix}{op}_path_{p}_us_median'), '.0f'):>7}" for p in PATH_PARTS)
                cells.append(f"{values} {_fmt(r.get(f'{prefix}{op}_path_matched'), 'd'):>4}")
            lines.append(f"{r['chunks']:>6} {r['blocks']:>11} {op:>8} |      {cells[0]} |       {cells[1]}")
    return "\n".join(lines)


def subscriber_fields(row, per_count, base):
    """KV-event subscribers (issue 28): per_count maps a subscriber count to its figures in this cell ({op}_ms_best,
    {op}_ms_median, {op}_handler_us, records per subscriber); adds them as row["subscribers"] and, for every other count,
    row["subscriber_ratios"][count] = request time with that many ÷ with `base` (best and median, STORE and RETRIEVE:
    1.0 means the subscribers cost nothing; above 1 they slow the request)."""
    row["subscribers"] = {str(c): figures for c, figures in per_count.items()}
    ratios = {}
    b = per_count[base]
    for c, figures in per_count.items():
        if c == base:
            continue
        ratios[str(c)] = {f"{op}_{stat}": (figures[f"{op}_ms_{stat}"] / b[f"{op}_ms_{stat}"] if b[f"{op}_ms_{stat}"] else None)
                          for op in ("store", "retrieve") for stat in ("best", "median")}
        for op in ("store", "retrieve"):
            h, hb = figures.get(f"{op}_handler_us"), b.get(f"{op}_handler_us")
            ratios[str(c)][f"{op}_handler"] = h / hb if h is not None and hb else None
    row["subscriber_base"] = base
    row["subscriber_ratios"] = ratios
    return row


def subscriber_table(rows):
    """One line per cell and subscriber count: request ms (best/median) and handler us per op, the ratios against the
    base count, and the records each subscriber received in the cell (min-max over the subscribers)."""
    head = (f"{'chunks':>6} {'blocks':>11} {'subs':>4} | {'st ms best':>10} {'st ms med':>9} {'st hdl us':>9} {'st ratio b/m':>12} |"
            f" {'rt ms best':>10} {'rt ms med':>9} {'rt hdl us':>9} {'rt ratio b/m':>12} | records/subscriber (batches, lost)")
    lines = [head]
    for r in rows:
        for c, f in r.get("subscribers", {}).items():
            ratio = r["subscriber_ratios"].get(c)
            cells = []
            for op in ("store", "retrieve"):
                rb = _fmt(ratio[f"{op}_best"]) + "/" + _fmt(ratio[f"{op}_median"]) if ratio else "base"
                cells.append(f"{f[f'{op}_ms_best']:>10.3f} {f[f'{op}_ms_median']:>9.3f} {_fmt(f.get(f'{op}_handler_us'), '.0f'):>9}"
                             f" {rb:>12}")
            subs = f.get("per_subscriber") or []
            live = "-" if not subs else (f"{min(s['records'] for s in subs)}-{max(s['records'] for s in subs)}"
                                         f" ({min(s['batches'] for s in subs)}-{max(s['batches'] for s in subs)},"
                                         f" {sum(s['lost'] for s in subs)})")
            lines.append(f"{r['chunks']:>6} {r['blocks']:>11} {c:>4} | {cells[0]} | {cells[1]} | {live}")
    return "\n".join(lines)
