#!/usr/bin/env bash
# Soak: 16 worker processes x 10^4 STORE/LOOKUP/RETRIEVE round trips, checksummed, through a pool that evicts all the time,
# 8 workers SIGKILLed and replaced along the way, the reaper freeing them (RESULTS.md#flood-and-soak).
# Usage: bench/run-soak.sh [--clients 16] [--round-trips 10000] [--kills 8] [--pool-gb 0.0625] [--reply-timeout-ms 10000]
#                          [--max-minutes 20] [--seed 7] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx512m @bench/target/classpath.args \
  io.lmcache.bench.hardening.SoakBench "$@"
