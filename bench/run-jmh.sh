#!/usr/bin/env bash
# JMH: SlabAllocator allocate+free, ObjectStore reserve+commit into a full pool (RESULTS.md).
# Usage: bench/run-jmh.sh [--attempts 3] [--max-foreign-cores 0.15] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" -cp "$CP" io.lmcache.bench.jmh.JmhMain "$@"
