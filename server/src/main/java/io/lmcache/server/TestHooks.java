package io.lmcache.server;

import io.lmcache.server.config.ServerConfig;
import java.util.concurrent.TimeUnit;

/** What {@code --test-hooks} changes besides its HTTP routes (those are in {@code http.ServerHttp}): shorter timeouts for tests. */
final class TestHooks {
    private TestHooks() {}

    /** The release timeout; a test server may shorten it through LMCACHE_TEST_RELEASE_TIMEOUT_MS, a production one never. */
    static long releaseTimeoutNs(ServerConfig config, long defaultNs) {
        return shortened(config, "LMCACHE_TEST_RELEASE_TIMEOUT_MS", defaultNs);
    }

    /** The transfer lanes' deadline; a test server may shorten it through LMCACHE_TEST_LANE_DEADLINE_MS, a production one never. */
    static long laneDeadlineNs(ServerConfig config, long defaultNs) {
        return shortened(config, "LMCACHE_TEST_LANE_DEADLINE_MS", defaultNs);
    }

    private static long shortened(ServerConfig config, String variable, long defaultNs) {
        String override = config.testHooks() ? System.getenv(variable) : null;
        return override == null ? defaultNs : TimeUnit.MILLISECONDS.toNanos(Long.parseLong(override));
    }
}
