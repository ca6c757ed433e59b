"""Starts lmcache-server for a replay where no server runs yet (the GPU host has a JRE and the
jars, no bin/lmcache setup): ``--java J --classpath CP``. Waits until /status shows every pool
region prepared, and stops it by its PID."""

import json
import os
import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, java, classpath, out_dir, pool_gb, chunk, device, extra=(), policy="LRU"):
        self.port, self.http = free_port(), free_port()
        os.makedirs(out_dir, exist_ok=True)
        self.log_path = os.path.join(out_dir, f"server-{self.port}.log")
        cmd = [java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx2g",
               "-cp", classpath, "io.lmcache.server.Main", "--device", "cuda" if device == "cuda" else "host", "--host", "127.0.0.1",
               "--port", str(self.port), "--http-host", "127.0.0.1", "--http-port", str(self.http),
               "--l1-size-gb", str(pool_gb), "--chunk-size", str(chunk), "--eviction-policy", policy,
               "--eviction-trigger-watermark", "0.95", *extra]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 600    # pinning a pool of 100 GB takes a while
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited: {open(self.log_path).read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/status", timeout=5) as r:
                    prep = json.loads(r.read())["storage_manager"]["l1_manager"]["pool_preparation"]
                if prep["regions_prepared"] == prep["regions_total"]:
                    return
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.3)
        self.stop()
        raise SystemExit("server did not get ready: " + open(self.log_path).read()[-3000:])

    @property
    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
