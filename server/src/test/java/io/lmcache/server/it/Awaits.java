package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.Callable;

/** Bounded waits for the integration tests (Awaitility, never bare sleeps). */
final class Awaits {
    private Awaits() {}

    static void until(Callable<Boolean> condition) {
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50)).until(condition);
    }
}
