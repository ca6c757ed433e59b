#!/usr/bin/env bash
# Stages what a GPU run needs into <repo>/.device/ (git ignores it), to be carried to a CUDA host that
# has no Java: a small jlinked Java 25 runtime and the server's jars with their runtime dependencies.
# Usage, from the repository root:
#   testclient/gpu/prepare.sh            (builds first: mvn -pl server -am package)
# then on the GPU host:  bash testclient/gpu/run-on-device.sh [test|bench|memory|kvevents|all]
#                        or .device/java -cp '.device/lib/*' <main class> <args>
# .device/lib also holds the bench module's classes (lmcache-bench.jar) and the two runtime jars its KV-event and
# request-latency benchmarks need beyond the server's (awaitility, hamcrest: ServerProcess waits with Awaitility), so
# KvEventStoreBench and RequestLatencyBench run there too (run-on-device.sh kvevents). The L2 clients' jars (Lettuce,
# Reactor, Netty, redis-authx, the AWS SDK) are left out to stay under the 64 MiB that travel: no GPU run configures a Redis L2, and
# the JVM skips a missing Class-Path entry (LMCACHE_DEVICE_L2_JARS=1 keeps them).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f -- "${BASH_SOURCE[0]}")")/../.." && pwd)
cd "$root"
jdk=${JDK_HOME:-${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}}
export JAVA_HOME=$jdk
if [ -d .git ] || [ -f .git ]; then
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
fi
# the bench module too (its -am builds the server); its runtime classpath names the jars copied below
mvn -q -B -DskipTests -pl server,bench -am package dependency:build-classpath \
  -Dmdep.outputFile=target/classpath.txt -Dmdep.includeScope=runtime
mkdir -p .device/lib
if [ ! -x .device/jre/bin/java ]; then
  # the image's module set (see the Dockerfile)
  "$jdk/bin/jlink" --add-modules java.base,java.logging,java.management,java.naming,java.net.http,java.xml,jdk.httpserver,jdk.management,jdk.unsupported \
    --strip-debug --no-header-files --no-man-pages --compress=zip-9 --output .device/jre
  command -v strip >/dev/null && strip --strip-unneeded .device/jre/lib/server/libjvm.so || true
fi
rm -f .device/lib/*.jar
# the server jar with its runtime dependencies (as the package build copied them), and the other modules' jars
cp server/target/lmcache-server.jar server/target/lib/*.jar .device/lib/
for module in protocol config cuda server; do
  cp "$module"/target/*-tests.jar .device/lib/ 2>/dev/null || true
done
if [ "${LMCACHE_DEVICE_L2_JARS:-0}" != 1 ]; then
  rm -f .device/lib/lettuce-core-*.jar .device/lib/reactor-core-*.jar .device/lib/reactive-streams-*.jar \
    .device/lib/netty-*.jar .device/lib/redis-authx-*.jar
  # the s3 adapter's AWS SDK (software.amazon.*: its jars have generic names such as utils-*.jar, so they go by group)
  tr ':' '\n' < bench/target/classpath.txt | grep '/software/amazon/' | xargs -r -n1 basename | sed 's|^|.device/lib/|' | xargs -r rm -f
  # Prometheus's protobuf exposition (2 MiB): the text format, which every scrape here asks for, is in exposition-textformats
  rm -f .device/lib/prometheus-metrics-exposition-formats-*.jar
fi
# a stale server/target/lib may still hold BouncyCastle (7 MiB; only the hash benchmark and the tests use it)
if [ "${LMCACHE_DEVICE_BCPROV:-0}" != 1 ]; then
  rm -f .device/lib/bcprov-*.jar
fi
# the benchmarks' classes (io.lmcache.bench.*) and what KvEventStoreBench / RequestLatencyBench load beyond the server's
# jars and its test jar: Awaitility (ServerProcess.awaitReady) and its Hamcrest
"$jdk/bin/jar" cf .device/lib/lmcache-bench.jar -C bench/target/classes .
tr ':' '\n' < bench/target/classpath.txt | grep -E '/(awaitility|hamcrest)-[^/]*\.jar$' | xargs -r cp -t .device/lib/
rm -f .device/lmcache-server.jar  # an earlier version staged it here; run-on-device.sh kvevents lays it out on the device
# keep under the 64 MiB that travel: JCuda's PTX-compiler binding (24 MiB) is not needed there
for j in .device/lib/jcuda-natives-*.jar; do
  [ -f "$j" ] && command -v zip >/dev/null && zip -q -d "$j" 'lib/libJNvPTXCompiler*' >/dev/null 2>&1 || true
done
# libzmq for the Python worker (the GPU host has no pyzmq): pyzmq's wheel bundles it; libzmq_dealer.py loads only its
# shared libraries, so the wheel's Python version does not matter (under 1 MiB; without it the pure-Python ZMTP client)
mkdir -p .device/zmq
if ! ls .device/zmq/pyzmq-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 -d .device/zmq pyzmq 2>/dev/null ||
    echo "no pyzmq wheel found: the GPU worker will use the pure-Python ZMTP client" >&2
fi
cat > .device/java <<'EOS'
#!/usr/bin/env bash
# java on the GPU machine, with native access allowed for JCuda and FFM
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/jre/bin/java" --enable-native-access=ALL-UNNAMED "$@"
EOS
chmod +x .device/java
du -sh .device | awk '{print "staged .device: " $1 " (at most 64 MiB travel, checkout included)"}'
