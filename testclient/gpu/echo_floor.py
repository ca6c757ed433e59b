#!/usr/bin/env python3
"""The messaging floor on a host (issue 17): how long one request/reply takes with no server work at all.

A one-chunk request's time is its copy plus what it costs to reach the server. This times a round trip of the
same two small frames (uid, op) from a libzmq DEALER (the stock client's library) to four echo servers, each one
process and one thread, best and median of --rounds, back to back and after an idle gap (a prefix hit arrives after
the worker's own forward pass, so its server is idle):

  tcp      a plain TCP echo (Python, blocking recv/sendall, TCP_NODELAY): the kernel's loopback and two wake-ups
  libzmq   a ROUTER on libzmq itself (ctypes), one thread: what a server on libzmq could reach
  jeromq   the bench module's EchoServer, a JeroMQ ROUTER in one thread with a blocking receive (the latency
           benchmark's baseline)
  server   the lmcache server's PING (the whole request path, no copy)

    python3 testclient/gpu/echo_floor.py --java .device/jre/bin/java --classpath '.device/lib/*' \
        --bench-jar .device/bench/lmcache-bench.jar --out $OUT/floor.json
"""
import argparse
import ctypes
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import libzmq_dealer  # noqa: E402

ZMQ_ROUTER = 6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_echo(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    while True:  # one connection at a time: the readiness probe's, then the client's
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)
        conn.close()


def libzmq_echo(port):
    libzmq_router(port, lambda frames: frames)


def libzmq_router(port, answer):
    """A libzmq ROUTER, one thread: answers every message with answer(its frames) (the identity frame first)."""
    lib = libzmq_dealer.load()
    ctx = lib.zmq_ctx_new()
    sock = lib.zmq_socket(ctx, ZMQ_ROUTER)
    lib.zmq_bind.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.zmq_bind(sock, f"tcp://127.0.0.1:{port}".encode())
    msg = ctypes.create_string_buffer(libzmq_dealer.MSG_BYTES)
    while True:
        frames = []
        while True:
            lib.zmq_msg_init(msg)
            if lib.zmq_msg_recv(msg, sock, 0) < 0:
                return
            frames.append(ctypes.string_at(lib.zmq_msg_data(msg), lib.zmq_msg_size(msg)))
            more = lib.zmq_msg_more(msg)
            lib.zmq_msg_close(msg)
            if not more:
                break
        out = answer(frames)
        last = len(out) - 1
        for i, frame in enumerate(out):
            lib.zmq_send(sock, frame, len(frame), libzmq_dealer.ZMQ_SNDMORE if i < last else 0)


def in_child(echo, port):
    """Runs an echo in a child process (its own process, as a server is), once it listens."""
    proc = multiprocessing.Process(target=echo, args=(port,), daemon=True)
    proc.start()
    wait_port(port)
    return proc


def wait_port(port, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def time_rounds(round_trip, rounds, gap_s):
    for _ in range(200):
        round_trip()
    samples = []
    for _ in range(rounds):
        if gap_s:
            time.sleep(gap_s)
        t0 = time.perf_counter_ns()
        round_trip()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return {"best_us": min(samples), "median_us": statistics.median(samples), "p90_us": sorted(samples)[int(0.9 * len(samples))]}


def measure(round_trip, rounds):
    return {"back_to_back": time_rounds(round_trip, rounds, 0), "after_1ms_idle": time_rounds(round_trip, rounds, 0.001)}


def zmq_round_trip(port):
    d = libzmq_dealer.Dealer("127.0.0.1", port, timeout=10)
    frames = [b"\x01", b"\x00"]
    return (lambda: (d.send(frames), d.recv())), d


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--java", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--bench-jar", required=True)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if libzmq_dealer.load() is None:
        sys.exit("no libzmq staged (.device/zmq)")
    results = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "rounds": args.rounds}

    port = free_port()
    proc = in_child(tcp_echo, port)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = b"x" * 16

    def tcp_rt():
        s.sendall(payload)
        got = 0
        while got < len(payload):
            got += len(s.recv(65536))
    results["tcp"] = measure(tcp_rt, args.rounds)
    s.close()
    proc.terminate()

    port = free_port()
    proc = in_child(libzmq_echo, port)
    rt, d = zmq_round_trip(port)
    results["libzmq"] = measure(rt, args.rounds)
    d.close()
    proc.terminate()

    port = free_port()
    java = subprocess.Popen([args.java, "-cp", args.bench_jar + os.pathsep + args.classpath, "io.lmcache.bench.latency.EchoServer",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        rt, d = zmq_round_trip(port)
        results["jeromq"] = measure(rt, args.rounds)
        d.close()
    finally:
        java.terminate()
        java.wait()

    try:
        from gpu_check import Client, Server  # the real server (CUDA device, a 1 GiB pool) and the stock client's frames
        server = Server(args.java, args.classpath, os.path.dirname(os.path.abspath(args.out)), 1)
        try:
            client = Client(server.port)
            results["server"] = measure(lambda: client.call("ping", 0), args.rounds)
            client.dealer.close()
        finally:
            server.stop()
    except Exception as e:  # noqa: BLE001 (a host without torch or CUDA still gets the other three)
        results["server_error"] = repr(e)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    for name in ("tcp", "libzmq", "jeromq", "server"):
        r = results.get(name)
        if r is None:
            print(f"{name:8s} {results.get('server_error')}")
            continue
        print(f"{name:8s} back-to-back best/median {r['back_to_back']['best_us']:.1f}/{r['back_to_back']['median_us']:.1f} us"
              f"  after 1 ms idle {r['after_1ms_idle']['best_us']:.1f}/{r['after_1ms_idle']['median_us']:.1f} us")


if __name__ == "__main__":
    main()
