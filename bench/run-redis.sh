#!/usr/bin/env bash
# The valkey adapter on a local 3-master Redis cluster: write-through and load of 32 MiB objects through the server, next to a
# plain Lettuce SET/GET loop of the same bytes in alternating rounds, and redis-benchmark's own figure (RESULTS.md#l2-tiers).
# Usage: bench/run-redis.sh [--chunks 16] [--rounds 6] [--completion notify|dbsize] [--results bench/RESULTS.md]   (needs redis-server, redis-cli, redis-benchmark)
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx3g @bench/target/classpath.args \
  io.lmcache.bench.l2.RedisBench "$@"
