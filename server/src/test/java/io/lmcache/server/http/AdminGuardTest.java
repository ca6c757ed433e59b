package io.lmcache.server.http;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import org.junit.jupiter.api.Test;

/** The {@code Host} rule of the admin routes (DNS rebinding): this server's names and any address literal, nothing else. */
class AdminGuardTest {
    private final AdminGuard guard = new AdminGuard("token", "lmcache.cache.svc", new ServerMetrics());

    @Test
    void aHostNamingThisServerPasses() {
        for (String host : new String[] {"localhost", "localhost:8080", "LOCALHOST.:8080", "127.0.0.1:8080", "10.1.2.3", "[::1]:8080",
            "[::1]", "lmcache.cache.svc:8080"}) {
            assertTrue(guard.isOwnHost(host), host);
        }
    }

    @Test
    void anyOtherNameIsRefused() {
        for (String host : new String[] {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example",
            "127.0.0.1:8080:1", "[::1]evil", "[evil.example]:80", "", "lmcache.cache.svc.evil.example"}) {
            assertFalse(guard.isOwnHost(host), host);
        }
    }
}
