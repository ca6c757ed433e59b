#!/usr/bin/env bash
# Request-path latency: PING and LOOKUP against the real server vs a bare JeroMQ echo (RESULTS.md).
# Usage: bench/run-latency.sh [--warmup-s 5] [--duration-s 10] [--clients 1,16] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --sun-misc-unsafe-memory-access=allow -Xms256m -Xmx1g @bench/target/classpath.args io.lmcache.bench.latency.RequestLatencyBench "$@"
