#!/usr/bin/env bash
# Request-path latency: PING and LOOKUP against the real server vs a bare JeroMQ echo (RESULTS.md#request-path-latency); with --subscribers N,
# every server measurement also with N acking KV-event subscribers in another process (testclient/gpu/kv_subscriber.py serve)
# while a feeder STOREs at --feed-stores-per-s during both server variants.
# Usage: bench/run-latency.sh [--warmup-s 5] [--duration-s 10] [--clients 1,16] [--requests PING,LOOKUP] [--rounds 3]
#   [--subscribers 0] [--feed-stores-per-s 500] [--python .venv/bin/python|python3|none] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xms256m -Xmx1g @bench/target/classpath.args \
  io.lmcache.bench.latency.RequestLatencyBench "$@"
