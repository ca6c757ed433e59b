package io.lmcache.server;

import io.lmcache.server.config.ServerConfig;
import java.util.concurrent.TimeUnit;

/** What {@code --test-hooks} changes besides its HTTP routes (those are in {@code http.ServerHttp}): shorter timeouts for tests. */
final class TestHooks {
    private TestHooks() {}

    /** The release timeout; a test server may shorten it through LMCACHE_TEST_RELEASE_TIMEOUT_MS, a production one never. */
    static long releaseTimeoutNs(ServerConfig config, long defaultNs) {
        String override = config.testHooks() ? System.getenv("LMCACHE_TEST_RELEASE_TIMEOUT_MS") : null;
        return override == null ? defaultNs : TimeUnit.MILLISECONDS.toNanos(Long.parseLong(override));
    }
}
