#!/usr/bin/env bash
# JMH: SlabAllocator allocate+free, ObjectStore reserve+commit into a full pool (RESULTS.md#jmh-micro-benchmarks).
# Usage: bench/run-jmh.sh [--attempts 3] [--max-foreign-cores 0.15] [--results bench/RESULTS.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --sun-misc-unsafe-memory-access=allow -Djmh.separateClasspathJAR=true @bench/target/classpath.args io.lmcache.bench.jmh.JmhMain "$@"
