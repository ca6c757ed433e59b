package io.lmcache.server.agent;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/** The runner's contract: errors are counted and the loop goes on; close is bounded and never interrupts; onClose runs once. */
class AgentRunnerTest {
    private static final Duration BOUND = Duration.ofSeconds(10);
    private static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(5);

    /** Counts its calls and the threads they ran on; optionally throws on every turn. */
    private static final class Probe implements Agent {
        final String role;
        final boolean throwing;
        final AtomicInteger turns = new AtomicInteger();
        final AtomicInteger starts = new AtomicInteger();
        final AtomicInteger closes = new AtomicInteger();
        final List<String> threads = new CopyOnWriteArrayList<>();

        Probe(String role, boolean throwing) {
            this.role = role;
            this.throwing = throwing;
        }

        @Override
        public int doWork() {
            turns.incrementAndGet();
            if (throwing) {
                throw new IllegalStateException("boom");
            }
            return 0;
        }

        @Override
        public String roleName() {
            return role;
        }

        @Override
        public void onStart() {
            starts.incrementAndGet();
            threads.add(Thread.currentThread().getName());
        }

        @Override
        public void onClose() {
            closes.incrementAndGet();
            threads.add(Thread.currentThread().getName());
        }
    }

    private static AgentRunner runner(String name, Agent agent, AgentErrors errors, long closeTimeoutNs) {
        return new AgentRunner(name, agent, IdleStrategy.backoff(TimeUnit.MILLISECONDS.toNanos(1)), errors, closeTimeoutNs);
    }

    @Test
    void aFailingAgentIsCountedAndKeepsRunning() {
        AgentErrors errors = new AgentErrors();
        Probe probe = new Probe("failing", true);
        AgentRunner runner = runner("test-failing", probe, errors, CLOSE_TIMEOUT_NS);
        runner.start();
        await().atMost(BOUND).until(() -> errors.count("failing") >= 3);
        assertTrue(runner.isRunning(), "an exception never ends the loop");
        runner.close();
        assertFalse(runner.isRunning());
        assertEquals(probe.turns.get(), errors.count("failing"), "every failed turn is counted under the agent's role");
    }

    @Test
    void anExceptionLeavesTheServerHealthyAndAnErrorMakesItUnhealthyWithTheAgentNamed() {
        AgentErrors errors = new AgentErrors();
        AgentRunner failing = runner("test-exception", new Probe("failing", true), errors, CLOSE_TIMEOUT_NS);
        failing.start();
        await().atMost(BOUND).until(() -> errors.count("failing") >= 2);
        failing.close();
        assertNull(errors.fatalReason(), "an exception is a failed turn, not a broken server");
        AtomicInteger turns = new AtomicInteger();
        LinkageError error = new LinkageError("test class");
        Agent erring = new Agent() {
            @Override
            public int doWork() {
                if (turns.incrementAndGet() == 1) {
                    throw error;
                }
                return 0;
            }

            @Override
            public String roleName() {
                return "erring";
            }
        };
        AgentRunner runner = runner("test-error", erring, errors, CLOSE_TIMEOUT_NS);
        runner.start();
        await().atMost(BOUND).until(() -> turns.get() >= 3);
        assertTrue(runner.isRunning(), "the agent keeps running after its Error");
        runner.close();
        assertEquals(1, errors.count("erring"));
        assertEquals("agent erring hit " + error, errors.fatalReason());
    }

    @Test
    void anOutOfMemoryErrorInAnAgentEndsTheProcessInsteadOfCountingATurn() {
        List<Integer> exits = new CopyOnWriteArrayList<>();
        AgentErrors errors = new AgentErrors(exits::add);
        // thrown by Java code, as a direct-memory allocation throws it: -XX:+ExitOnOutOfMemoryError does not see these
        errors.record("pool", new OutOfMemoryError("Direct buffer memory"));
        assertEquals(List.of(FatalErrors.EXIT_CODE), exits, "halted once, with the transport's exit code");
        assertEquals(0, errors.count("pool"), "nothing allocated for it: not counted as a failed turn");
        errors.record("pool", new IllegalStateException("a bug"));
        assertEquals(List.of(FatalErrors.EXIT_CODE), exits, "an exception is a failed turn, never an exit");
        assertEquals(1, errors.count("pool"));
    }

    @Test
    void startAndCloseRunOnTheRunnerThreadOnce() {
        Probe probe = new Probe("probe", false);
        AgentRunner runner = runner("test-probe", probe, new AgentErrors(), CLOSE_TIMEOUT_NS);
        runner.start();
        await().atMost(BOUND).until(() -> probe.turns.get() > 0);
        runner.close();
        runner.close();
        assertEquals(1, probe.starts.get());
        assertEquals(1, probe.closes.get());
        assertEquals(List.of("test-probe", "test-probe"), probe.threads);
    }

    @Test
    void aRunnerClosedBeforeStartClosesItsAgentOnceAndNeverStarts() {
        Probe probe = new Probe("probe", false);
        AgentRunner runner = runner("test-unstarted", probe, new AgentErrors(), CLOSE_TIMEOUT_NS);
        runner.close();
        runner.start();
        runner.close();
        assertEquals(0, probe.starts.get());
        assertEquals(0, probe.turns.get());
        assertEquals(1, probe.closes.get());
        assertFalse(runner.isRunning());
    }

    @Test
    void closeIsBoundedWhenATurnHangsAndNeverInterrupts() throws InterruptedException {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch inTurn = new CountDownLatch(1);
        AtomicInteger interrupted = new AtomicInteger();
        AtomicInteger closes = new AtomicInteger();
        Agent stuck = new Agent() {
            @Override
            public int doWork() {
                inTurn.countDown();
                // a turn that overruns: waits uninterruptibly, so an interrupt would be seen afterwards
                while (release.getCount() > 0) {
                    Thread.onSpinWait();
                }
                if (Thread.currentThread().isInterrupted()) {
                    interrupted.incrementAndGet();
                }
                return 0;
            }

            @Override
            public String roleName() {
                return "stuck";
            }

            @Override
            public void onClose() {
                closes.incrementAndGet();
            }
        };
        AgentRunner runner = runner("test-stuck", stuck, new AgentErrors(), TimeUnit.MILLISECONDS.toNanos(50));
        runner.start();
        assertTrue(inTurn.await(10, TimeUnit.SECONDS));
        assertTimeoutPreemptively(BOUND, runner::close, "close returns although the turn in hand never ends");
        assertEquals(0, closes.get(), "onClose waits for the turn to end, on the runner's thread");
        release.countDown();
        await().atMost(BOUND).until(() -> closes.get() == 1);
        await().atMost(BOUND).until(() -> !runner.isRunning());
        assertEquals(0, interrupted.get());
    }

    @Test
    void wakeEndsAParkEarly() {
        AtomicInteger turns = new AtomicInteger();
        Agent agent = new Agent() {
            @Override
            public int doWork() {
                turns.incrementAndGet();
                return 0;
            }

            @Override
            public String roleName() {
                return "sleepy";
            }
        };
        // parks of an hour: only wake() (or close) can start the next turn
        IdleStrategy parkLong = workCount -> LockSupport.parkNanos(TimeUnit.HOURS.toNanos(1));
        AgentRunner parked = new AgentRunner("test-parked", agent, parkLong, new AgentErrors(), CLOSE_TIMEOUT_NS);
        parked.start();
        await().atMost(BOUND).until(() -> turns.get() == 1);
        parked.wake();
        await().atMost(BOUND).until(() -> turns.get() >= 2);
        assertTimeoutPreemptively(BOUND, parked::close, "close unparks the thread");
        assertFalse(parked.isRunning());
    }
}
