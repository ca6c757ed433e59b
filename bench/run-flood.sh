#!/usr/bin/env bash
# Flood: 10^6 malformed messages (FuzzIT's mix) from 8 DEALERs while a real client checks its replies (RESULTS.md#flood-and-soak).
# Usage: bench/run-flood.sh [--messages 1000000] [--connections 8] [--window 64] [--seed 13] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx1g @bench/target/classpath.args \
  io.lmcache.bench.hardening.FloodBench "$@"
