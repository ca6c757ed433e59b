#!/usr/bin/env bash
# fs_native write-through and prefetch rates next to raw file I/O of the same bytes, and the LOOKUP latency an L2 hit adds (RESULTS.md#l2-tiers).
# Usage: bench/run-l2.sh [--chunks 64] [--iterations 100] [--dir /var/tmp] [--results bench/RESULTS.md]
# Drops the page cache before each read figure (root only; said in the results when it could not).
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g @bench/target/classpath.args \
  io.lmcache.bench.l2.L2Bench "$@"
