#!/usr/bin/env bash
# The CPU side of hybrid STORE/RETRIEVE planning against plain layouts of the same bytes (issue 30; RESULTS.md#hybrid-planning-on-the-host-path).
# Usage: bench/run-hybrid-plan.sh [seconds per cell, default 2]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" @bench/target/classpath.args io.lmcache.server.transfer.HybridPlanBench "$@"
