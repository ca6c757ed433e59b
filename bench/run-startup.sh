#!/usr/bin/env bash
# Start-up through bin/lmcache-server: launch to first answered request and to /healthcheck 200 (RESULTS.md).
# Usage: bench/run-startup.sh [--pools-gb 1,4] [--runs 5] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" @bench/target/classpath.args io.lmcache.bench.startup.StartupBench "$@"
