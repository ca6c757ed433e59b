# Sourced by bench/run-*.sh: builds the project (tests skipped; nothing installed into ~/.m2) and
# sets CP to the bench module's classes plus its runtime dependencies (the other modules resolve
# to their target/ folders), JAVA to Java 25, and SOURCE to the commit measured.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JAVA="$JAVA_HOME/bin/java"
mvn -q -B -DskipTests -pl bench -am package dependency:build-classpath \
  -Dmdep.outputFile=target/classpath.txt -Dmdep.includeScope=runtime >&2
# the jar was just built from these sources, but Maven leaves an unchanged jar's old mtime, and
# bin/lmcache-server would then rebuild before starting: mark it current, only when it looks older (its
# mtime is part of what the ahead-of-time cache matches: a needless touch makes the cache stale)
if [ -n "$(find protocol/src/main config/src/main l2/src/main cuda/src/main server/src/main pom.xml ./*/pom.xml \
    -newer server/target/lmcache-server.jar -print -quit 2>/dev/null)" ]; then
  touch server/target/lmcache-server.jar
fi
CP="bench/target/classes:$(cat bench/target/classpath.txt)"
# the JVMs get the classpath from this file, not the command line: it names lmcache-server.jar, and
# tools that find servers by command line (pkill -f lmcache-server) must not take a benchmark for one
echo "-cp \"$CP\"" > bench/target/classpath.args
# results name the server sources they measured: the commit, and whether they had local changes
SOURCE="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain -- protocol config cuda server 2>/dev/null)" ]; then
  SOURCE="$SOURCE + uncommitted changes in protocol/config/cuda/server"
fi
export LMCACHE_BENCH_SOURCE="$SOURCE"
