#!/usr/bin/env bash
# The GPU scripts' server command (gpu_check.Server: its runtime, classpath and JVM flags) as a launcher that
# io.lmcache.server.testing.AotTraining can drive, so the ahead-of-time cache it records matches the servers those scripts
# start, as bin/lmcache-aot-train's cache matches bin/lmcache-server's. Used by gpu_check.train_aot_cache; takes the
# runtime and the classpath from LMCACHE_AOT_JAVA and LMCACHE_AOT_CLASSPATH, the cache file from LMCACHE_AOT_TRAINING, the
# heap and GC flags from LMCACHE_AOT_JVM_FLAGS (gpu_check.LAUNCHER_JVM_FLAGS: a cache is used only under the flags it was
# trained with).
# shellcheck disable=SC2086  # the flags are words
exec "$LMCACHE_AOT_JAVA" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow ${LMCACHE_AOT_JVM_FLAGS:--Xmx2g} \
  "-XX:AOTCacheOutput=$LMCACHE_AOT_TRAINING" -cp "$LMCACHE_AOT_CLASSPATH" io.lmcache.server.Main "$@"
