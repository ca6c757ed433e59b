#!/usr/bin/env bash
# The CPU (shared-memory) path against plain copies of the same bytes (issue 52): one worker against one thread's copy,
# N workers at once against the host's multi-threaded copy. Starts its own server (--device host).
# Usage: bench/run-cpu-copy.sh [--rounds 10] [--warmup 3] [--workers 4] [--chunks 4] [--baseline-threads <cores>]
#        [--copy-threads auto|N] [--l1-size-gb 3] [--patterns consecutive,scattered] [--requests 1]
#        [--server-args --flag=value,...] [--server-java-opts -Dname=value,...] --out DIR
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g @bench/target/classpath.args \
  -Dlmcache.server.jar=server/target/lmcache-server.jar io.lmcache.bench.copy.CpuCopyBench "$@"
