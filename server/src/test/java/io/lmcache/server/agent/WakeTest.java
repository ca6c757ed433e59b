package io.lmcache.server.agent;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/** A wake handle made before its runner unparks the runner's thread once the runner is built, and serves one runner only. */
class WakeTest {
    private static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(5);

    /** Idles an hour a turn: only a wake brings the next turn within the test's bound. */
    private static final IdleStrategy PARK_AN_HOUR = workCount -> LockSupport.parkNanos(TimeUnit.HOURS.toNanos(1));

    private static final class Turns implements Agent {
        final AtomicInteger turns = new AtomicInteger();

        @Override
        public int doWork() {
            turns.incrementAndGet();
            return 0;
        }

        @Override
        public String roleName() {
            return "wake-probe";
        }
    }

    @Test
    void aWakeMadeBeforeTheRunnerUnparksItsThread() {
        Wake wake = new Wake();
        wake.run(); // no runner yet: nothing to unpark, and no failure
        Turns agent = new Turns();
        try (AgentRunner runner = new AgentRunner("wake-probe", agent, PARK_AN_HOUR, new AgentErrors(), CLOSE_TIMEOUT_NS, wake)) {
            runner.start();
            await().atMost(Duration.ofSeconds(10)).until(() -> agent.turns.get() >= 1);
            // the agent parks an hour after each turn; every wake must bring one more turn
            for (int i = 0; i < 3; i++) {
                int before = agent.turns.get();
                await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(5)).until(() -> {
                    wake.run();
                    return agent.turns.get() > before;
                });
            }
        }
    }

    @Test
    void oneWakeServesOneRunner() {
        Wake wake = new Wake();
        try (AgentRunner first = new AgentRunner("wake-first", new Turns(), PARK_AN_HOUR, new AgentErrors(), CLOSE_TIMEOUT_NS, wake)) {
            assertThrows(IllegalStateException.class,
                    () -> new AgentRunner("wake-second", new Turns(), PARK_AN_HOUR, new AgentErrors(), CLOSE_TIMEOUT_NS, wake));
        }
    }
}
