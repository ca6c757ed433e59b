#!/usr/bin/env bash
# CPU STORE/RETRIEVE bandwidth of a Llama-8B KV layout vs a plain memory copy (RESULTS.md#cpu-copy-path).
# Starts the server (6 GiB pool, waits until it is fully prefaulted), runs the Python client's
# bench-copy, stops the server. Extra arguments go to bench-copy (--repetitions N, --blocks N, ...).
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp /tmp/lmcache-bench-copy-server-XXXXXX.log)
bin/lmcache-server --l1-size-gb 6 --port "$port" --http-port 0 --host 127.0.0.1 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
# timing starts only once every region is prefaulted: the preparation thread would compete for the CPU
for _ in $(seq 600); do
  grep -q 'L1 pool preparation: 100%' "$log" && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
grep -q 'L1 pool preparation: 100%' "$log" || { echo "server not ready after 120 s; log: $log" >&2; exit 1; }
status=0
PYTHONPATH=testclient .venv/bin/python -m lmcache_testclient bench-copy --endpoint "tcp://127.0.0.1:$port" \
  --server-pid "$server" --results bench/RESULTS.md --command-line "bench/run-copy.sh${*:+ $*}" "$@" || status=$?
if ! kill -0 "$server" 2>/dev/null; then
  echo "the server exited during the benchmark; its log: $log" >&2
  tail -5 "$log" >&2
  status=1
fi
exit $status
