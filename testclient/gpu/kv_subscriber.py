#!/usr/bin/env python3
"""KV-event subscribers for the GPU host (issue 28: a STORE with 8 subscribe_kv_events subscribers attached costs no more
than without). No torch, no pyzmq: the transport is the GPU worker's (libzmq_dealer.py where a libzmq is staged, zmtp.py
otherwise) and msgpack or msgspec encodes, so the same code runs on the CPU development machine.

Each Subscriber is its own DEALER on its own thread and consumes as LMCache's client does (../shared/docs/kv-events.md §2, §8;
LMCache transport/zmq_impl/mq.py@afa9e892; the server's KvEventsIT and KvEventStoreBench frame it the same way):

  request   [uid, "subscribe_kv_events", instance_id, model_name, cursor, max_events]   (each one msgpack value)
  replies   [uid, op, KVEventBatch] zero or more times, then [uid, op] once (the stream ended)
  credit    [uid, b"", b"ack"] after every batch taken (the first batch needs none), sent at once: the stream is as busy
            as the server makes it
  cancel    [uid, b"", b"cancel"], then the final reply is awaited

It PINGs its instance id every ping_interval_s (LMCache's reaper closes a subscription silent for longer than the worker reap
timeout), resumes from its last next_cursor when attached again (a reconnecting worker), and counts records, batches, lost
batches (lost=true: a loss marker or a trimmed log) and the last seq.

A SubscriberPool holds N of them (attach(model, n), detach(), stats()); ChildPool is the same interface over a child process
running `kv_subscriber.py serve`, so that the subscribers' Python threads never take the GIL from a benchmark's timed
requests. By hand, against a running server:

    python3 testclient/gpu/kv_subscriber.py watch --port 5555 --model gpu-check/model --subscribers 8 --seconds 30
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import libzmq_dealer  # noqa: E402

try:
    import msgpack

    def pack(value):
        return msgpack.packb(value, use_bin_type=True)

    def unpack(data):
        return msgpack.unpackb(data, raw=False)
except ImportError:  # the development machine has msgspec instead
    import msgspec

    def pack(value):
        return msgspec.msgpack.encode(value)

    def unpack(data):
        return msgspec.msgpack.decode(data)

OP_NAME = "subscribe_kv_events"
OP_PING = 22
ACK, CANCEL = b"ack", b"cancel"
MAX_EVENTS = 1024  # LMCache's kv_event_poll_max_events, and the server's upper bound
POLL_S = 0.05  # how soon the thread notices a stop or a due PING between messages (8 idle subscribers: ~2% of a core)
COUNTERS = ("records", "stored", "removed", "batches", "lost", "disabled", "pings")


class Subscriber:
    """One subscription on its own DEALER and thread; the thread alone touches the socket."""

    def __init__(self, host, port, model, instance_id, cursor=0, max_events=MAX_EVENTS, ping_interval_s=10.0):
        self.host, self.port, self.model, self.instance_id = host, port, model, instance_id
        self.cursor, self.max_events, self.ping_interval_s = cursor, max_events, ping_interval_s
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.last_seq = None
        self.incarnation = None
        self.ended = False  # the final reply [uid, op] came
        self.error = None
        self.first = threading.Event()  # the first batch (the initial status batch) came: the stream is live
        self.done = threading.Event()
        self._stop = threading.Event()
        self._uid = pack(0)
        self._thread = threading.Thread(target=self._run, name=f"kv-subscriber-{instance_id}", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        dealer = None
        try:
            dealer = libzmq_dealer.dealer(self.host, self.port, timeout=30.0)
            dealer.send([self._uid, pack(OP_NAME), pack(self.instance_id), pack(self.model), pack(self.cursor), pack(self.max_events)])
            self._loop(dealer)
        except Exception as e:  # noqa: BLE001 -- reported in stats(); the caller decides
            self.error = repr(e)
        finally:
            self.first.set()
            if dealer is not None:
                dealer.close()
            self.done.set()

    def _loop(self, dealer):
        next_ping = time.monotonic() + self.ping_interval_s
        ping_uid = 1
        cancel_deadline = None
        while True:
            now = time.monotonic()
            if self._stop.is_set() and cancel_deadline is None:
                dealer.send([self._uid, b"", CANCEL])
                cancel_deadline = now + 5.0
            if cancel_deadline is not None and now > cancel_deadline:
                raise TimeoutError("no final reply within 5 s of the cancel")
            if cancel_deadline is None and now >= next_ping:
                dealer.send([pack(ping_uid), pack(OP_PING), pack(self.instance_id)])
                ping_uid += 1
                next_ping = now + self.ping_interval_s
            frames = dealer.recv_within(POLL_S)
            if frames is None:
                continue
            if frames[0] != self._uid:  # a PING's reply
                self.counts["pings"] += 1
                continue
            if len(frames) < 3:  # the final reply: the stream ended (cancelled, replaced, reaped or server shutdown)
                self.ended = True
                return
            self._take(unpack(frames[2]))
            if cancel_deadline is None:
                dealer.send([self._uid, b"", ACK])  # one credit per batch consumed, as LMCache's read() sends it
            self.first.set()

    def _take(self, batch):
        c = self.counts
        c["batches"] += 1
        c["lost"] += bool(batch.get("lost"))
        c["disabled"] += not batch.get("enabled", True)
        self.incarnation = batch.get("incarnation")
        events = batch.get("events") or []
        c["records"] += len(events)
        for e in events:
            kind = e.get("kind")
            if kind in ("stored", "removed"):
                c[kind] += 1
        if events:
            self.last_seq = events[-1].get("seq")
        self.cursor = batch.get("next_cursor", self.cursor)

    def close(self, timeout_s=10.0):
        """Cancels, waits for the final reply and closes the socket."""
        self._stop.set()
        self.done.wait(timeout_s)

    def stats(self):
        return {"instance_id": self.instance_id, **self.counts, "last_seq": self.last_seq, "cursor": self.cursor,
                "ended": self.ended, "error": self.error}


class SubscriberPool:
    """N subscriber slots, each a fixed instance id that keeps its cursor and its totals over attach/detach cycles."""

    def __init__(self, host, port, n, cursor=0, seed=None, ping_interval_s=10.0):
        rng = random.Random(seed)
        self.host, self.port, self.ping_interval_s = host, port, ping_interval_s
        self.slots = [{"instance_id": rng.getrandbits(63) or 1, "cursor": cursor, "attaches": 0, "last_seq": None,
                       **dict.fromkeys(COUNTERS, 0), "errors": []} for _ in range(n)]
        self.live = []

    def attach(self, model, n=None, timeout_s=10.0):
        """Subscribes the first n slots (all by default) for model, from each slot's cursor; returns once every stream's
        first batch came."""
        self.detach()
        n = len(self.slots) if n is None else n
        self.live = [(slot, Subscriber(self.host, self.port, model, slot["instance_id"], slot["cursor"],
                                       ping_interval_s=self.ping_interval_s).start()) for slot in self.slots[:n]]
        deadline = time.monotonic() + timeout_s
        for slot, s in self.live:
            if not s.first.wait(max(0.0, deadline - time.monotonic())) or s.error:
                raise RuntimeError(f"subscriber {slot['instance_id']}: no first batch ({s.error or 'timeout'})")
        return len(self.live)

    def detach(self, timeout_s=10.0):
        """Cancels every live stream and waits for its final reply; adds its counts to its slot."""
        for _, s in self.live:
            s._stop.set()
        for slot, s in self.live:
            s.close(timeout_s)
            for k in COUNTERS:
                slot[k] += s.counts[k]
            slot["cursor"] = s.cursor
            slot["last_seq"] = s.last_seq if s.last_seq is not None else slot["last_seq"]
            slot["attaches"] += 1
            slot["ended"] = s.ended
            if s.error or not s.ended:
                slot["errors"].append(s.error or "no final reply")
        self.live = []

    def stats(self):
        """Per slot: instance id, attaches, records (stored, removed), batches, lost batches, last seq, cursor, errors; the
        live streams' counts so far included."""
        out = [dict(slot) for slot in self.slots]
        for (slot, s), row in zip(self.live, out):
            for k in COUNTERS:
                row[k] += s.counts[k]
            row["cursor"] = s.cursor
            row["last_seq"] = s.last_seq if s.last_seq is not None else row["last_seq"]
            row["live"] = True
        return out

    def close(self):
        self.detach()


class ChildPool:
    """SubscriberPool's interface over `kv_subscriber.py serve` in a child process (its own GIL), one JSON line a command."""

    def __init__(self, port, n, cursor=0, host="127.0.0.1", seed=None):
        cmd = [sys.executable, os.path.abspath(__file__), "serve", "--host", host, "--port", str(port), "--subscribers", str(n),
               "--cursor", str(cursor)] + (["--seed", str(seed)] if seed is not None else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.transport = self._answer()["transport"]

    def _answer(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the subscriber process exited ({self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"subscriber process: {answer['error']}")
        return answer

    def _command(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def attach(self, model, n=None):
        return self._command(op="attach", model=model, n=n)["attached"]

    def detach(self):
        self._command(op="detach")

    def stats(self):
        return self._command(op="stats")["stats"]

    def close(self):
        if self.proc.poll() is None:
            try:
                self._command(op="quit")
            finally:
                self.proc.stdin.close()
                self.proc.wait(30)
                self.proc.stdout.close()


def serve(args):
    """The child's side of ChildPool: commands on stdin, one JSON answer each on stdout."""
    pool = SubscriberPool(args.host, args.port, args.subscribers, cursor=args.cursor, seed=args.seed)
    print(json.dumps({"transport": libzmq_dealer.transport()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            op = command["op"]
            if op == "attach":
                answer = {"attached": pool.attach(command["model"], command.get("n"))}
            elif op == "detach":
                pool.detach()
                answer = {"detached": True}
            elif op == "stats":
                answer = {"stats": pool.stats()}
            elif op == "quit":
                pool.close()
                print(json.dumps({"quit": True}), flush=True)
                return 0
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as e:  # noqa: BLE001 -- the parent raises it
            answer = {"error": repr(e)}
        print(json.dumps(answer), flush=True)
    pool.close()
    return 0


def watch(args):
    """N subscribers for --seconds (or until Ctrl-C), then their counts."""
    pool = SubscriberPool(args.host, args.port, args.subscribers, cursor=args.cursor, seed=args.seed)
    pool.attach(args.model)
    try:
        time.sleep(args.seconds)
    except KeyboardInterrupt:
        pass
    pool.close()
    print(json.dumps({"transport": libzmq_dealer.transport(), "subscribers": pool.stats()}, indent=1))
    return 0 if all(not s["errors"] for s in pool.stats()) else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("serve", "watch"))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--subscribers", type=int, default=8)
    p.add_argument("--cursor", type=int, default=0, help="where each subscriber starts (0: replay the whole log)")
    p.add_argument("--seed", type=int, default=None, help="of the subscribers' instance ids")
    p.add_argument("--model", default="gpu-check/model", help="watch: the model_name subscribed to")
    p.add_argument("--seconds", type=float, default=30.0, help="watch: how long")
    args = p.parse_args(argv)
    return serve(args) if args.mode == "serve" else watch(args)


if __name__ == "__main__":
    sys.exit(main())
