#!/usr/bin/env bash
# The s3 adapter against S3Proxy on loopback next to the AWS SDK alone moving the same objects (issue 50, Build 4a).
# Usage: bench/run-s3.sh [--objects 16] [--object-mib 16] [--rounds 5] [--out s3-bench.md]
source "$(dirname "${BASH_SOURCE[0]}")/classpath.sh"
exec "$JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx3g @bench/target/classpath.args \
  io.lmcache.bench.l2.S3Bench "$@"
