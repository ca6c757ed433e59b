#!/usr/bin/env bash
# STORE round-trip latency with 0 and 8 subscribe_kv_events streams attached, alternating in every round (RESULTS.md#kv-event-subscribers).
# Usage: bench/run-kv-events.sh [--stores 2000] [--warmup 500] [--rounds 3] [--subscribers 8] [--python python3|none] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx1g @bench/target/classpath.args \
  io.lmcache.bench.events.KvEventStoreBench "$@"
