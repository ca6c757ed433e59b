#!/usr/bin/env bash
# Start-up through bin/lmcache-server: launch to first answered request and to /healthcheck 200 (RESULTS.md#start-up).
# Usage: bench/run-startup.sh [--pools-gb 1,4] [--runs 5] [--results bench/RESULTS.md]
# The JIT's cold start with and without the ahead-of-time cache (issue 30): the first one-chunk STOREs of a fresh server
# against the same server warm; trains server/target/lmcache-server.aot first when it is missing or older than the jar.
# Usage: bench/run-startup.sh --cold-start [--compare aot|warmup|background [--idle-ms 10000] [--warmup-iterations N]] [--runs 3] [--requests 100] [--warmup 2000] [--results bench/RESULTS.md]
# (--warmup-iterations: the warm-up's rounds in every variant that runs it; a host of fewer than 4 cores skips the default
# count, and the bench refuses a launch whose warm-up did not run)
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
if [ "${1:-}" = --cold-start ]; then
  shift
  aot=server/target/lmcache-server.aot
  if [ ! -f "$aot" ] || [ "$aot" -ot server/target/lmcache-server.jar ]; then
    bin/lmcache-aot-train "$aot"
  fi
  exec "$JAVA" @bench/target/classpath.args io.lmcache.bench.startup.ColdStartBench "$@"
fi
exec "$JAVA" @bench/target/classpath.args io.lmcache.bench.startup.StartupBench "$@"
