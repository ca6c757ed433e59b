package io.lmcache.server.liveness;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every liveness rule with an injected clock. */
class LivenessRulesTest {
    private static final long S = TimeUnit.SECONDS.toNanos(1);
    private static final long TIMEOUT = 120 * S;
    private static final long GRACE = 3600 * S;
    private static final PeerId PEER = new PeerId(new byte[] {0, 1, 2, 3, 4});

    private final AtomicLong nowNs = new AtomicLong(1_000 * S);
    private final PeerConnections connections = new PeerConnections(nowNs::get, GRACE);
    private final Liveness liveness = new Liveness(nowNs::get, connections, 60 * S);

    /** A target whose state is just its liveness entries, as the modules keep them. */
    class FakeTarget implements InstanceLivenessTarget {
        final Map<Long, Liveness.Entry> entries = new HashMap<>();
        final List<Long> dropped = Collections.synchronizedList(new ArrayList<>());

        void register(long id, PeerId peer) {
            entries.put(id, liveness.newEntry(peer));
        }

        @Override
        public String livenessName() {
            return "fake";
        }

        @Override
        public synchronized void touchInstance(long instanceId, PeerId peer) {
            Liveness.Entry entry = entries.get(instanceId);
            if (entry != null) {
                liveness.ping(entry, peer);
            }
        }

        @Override
        public synchronized List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
            List<Reaped> out = new ArrayList<>();
            entries.entrySet().removeIf(e -> {
                Reason reason = liveness.staleReason(e.getValue(), timeoutNs, graceNs);
                if (reason != null) {
                    out.add(new Reaped(e.getKey(), reason, nowNs.get() - e.getValue().lastSeenNs()));
                }
                return reason != null;
            });
            return out;
        }

        @Override
        public synchronized int trackedInstanceCount() {
            return entries.size();
        }

        @Override
        public void dropInstanceState(long instanceId) {
            dropped.add(instanceId);
        }
    }

    private final ReleaseThread releases = new ReleaseThread(200_000_000L, 16, 3, 1_000_000L, 4);

    @AfterEach
    void stopReleases() {
        releases.close();
    }

    private Reaper reaper(InstanceLivenessTarget... targets) {
        return new Reaper(List.of(targets), TIMEOUT, GRACE, 60 * S, releases, connections, nowNs::get);
    }

    private Reaper reaper(List<InstanceLivenessTarget> targets, long timeoutNs, long disconnectGraceNs) {
        return new Reaper(targets, timeoutNs, GRACE, disconnectGraceNs, releases, connections, nowNs::get);
    }

    @Test
    void aPingRefreshesAndMarks() {
        Liveness.Entry entry = liveness.newEntry(PEER);
        nowNs.addAndGet(100 * S);
        liveness.ping(entry, PEER);
        assertTrue(entry.pinged());
        nowNs.addAndGet(119 * S);
        assertNull(liveness.staleReason(entry, TIMEOUT, GRACE), "119 s after the ping");
        nowNs.addAndGet(S);
        assertEquals(InstanceLivenessTarget.Reason.SILENCE, liveness.staleReason(entry, TIMEOUT, GRACE));
    }

    @Test
    void trafficRefreshesWithoutMarking() {
        Liveness.Entry entry = liveness.newEntry(null);
        nowNs.addAndGet(3000 * S);
        liveness.traffic(entry, null);
        assertFalse(entry.pinged(), "only PING sets the flag");
        nowNs.addAndGet(3599 * S);
        assertNull(liveness.staleReason(entry, TIMEOUT, GRACE), "a never-pinged worker has the grace, counted from its last traffic");
        nowNs.addAndGet(S);
        assertEquals(InstanceLivenessTarget.Reason.NEVER_PINGED, liveness.staleReason(entry, TIMEOUT, GRACE));
    }

    @Test
    void anOpenConnectionKeepsANeverPingedWorker() {
        connections.seen(PEER, "10.0.0.1:5000");
        Liveness.Entry entry = liveness.newEntry(PEER);
        nowNs.addAndGet(10 * GRACE);
        assertNull(liveness.staleReason(entry, TIMEOUT, GRACE), "idle but connected: alive (#4715)");
        connections.closed("10.0.0.1:5000");
        nowNs.addAndGet(59 * S);
        assertNull(liveness.staleReason(entry, TIMEOUT, GRACE), "the disconnect grace runs");
        nowNs.addAndGet(S);
        assertEquals(InstanceLivenessTarget.Reason.DISCONNECT, liveness.staleReason(entry, TIMEOUT, GRACE));
    }

    @Test
    void aRequestOverANewConnectionCancelsTheCountdown() {
        connections.seen(PEER, "10.0.0.1:5000");
        Liveness.Entry entry = liveness.newEntry(PEER);
        liveness.ping(entry, PEER);
        connections.closed("10.0.0.1:5000");
        nowNs.addAndGet(30 * S);
        PeerId reconnected = new PeerId(new byte[] {0, 9, 9, 9, 9});
        connections.seen(reconnected, "10.0.0.1:5001");
        liveness.ping(entry, reconnected);
        nowNs.addAndGet(100 * S);
        assertNull(liveness.staleReason(entry, TIMEOUT, GRACE), "the worker lives on its new connection");
    }

    @Test
    void timeoutZeroDisablesReaping() {
        Reaper disabled = reaper(List.of(new FakeTarget()), 0, 0);
        assertFalse(disabled.enabled());
        nowNs.addAndGet(10 * TIMEOUT);
        assertEquals(0, disabled.doWork(), "a disabled reaper never scans");
        assertEquals(0, disabled.scans());
        assertFalse(reaper(List.of(), TIMEOUT, 0).enabled(), "nothing to reap from");
    }

    @Test
    void thePeriodIsAQuarterOfTheTimeoutOrAThirdOfTheDisconnectGrace() {
        assertEquals(30 * S, reaper(List.of(), TIMEOUT, 0).periodNs());
        assertEquals(10 * S, reaper(List.of(), TIMEOUT, 30 * S).periodNs());
    }

    @Test
    void doWorkScansOnlyWhenThePeriodHasPassed() {
        Reaper reaper = reaper(new FakeTarget());
        assertEquals(0, reaper.doWork(), "not due yet");
        nowNs.addAndGet(reaper.periodNs() - 1);
        assertEquals(0, reaper.doWork());
        nowNs.addAndGet(2);
        assertEquals(1, reaper.doWork(), "one scan, nothing reaped");
        assertEquals(0, reaper.doWork(), "the next deadline is a period away");
        nowNs.addAndGet(reaper.periodNs() + 1);
        assertEquals(1, reaper.doWork());
        assertEquals(2, reaper.scans());
    }

    @Test
    void dropFansOutToEveryTarget() {
        FakeTarget owner = new FakeTarget();
        FakeTarget other = new FakeTarget();
        owner.register(7, null);
        liveness.ping(owner.entries.get(7L), null);
        nowNs.addAndGet(TIMEOUT);
        Reaper reaper = reaper(owner, other);
        assertEquals(1, reaper.scan().size());
        assertEquals(List.of(7L), owner.dropped);
        assertEquals(List.of(7L), other.dropped, "every target drops the reaped id");
        assertEquals(1, reaper.reaped(InstanceLivenessTarget.Reason.SILENCE));
        assertEquals(0, owner.trackedInstanceCount());
    }

    @Test
    void aTargetThatThrowsDoesNotStopTheOthers() {
        FakeTarget good = new FakeTarget();
        good.register(1, null);
        liveness.ping(good.entries.get(1L), null);
        InstanceLivenessTarget broken = new InstanceLivenessTarget() {
            @Override
            public String livenessName() {
                return "broken";
            }

            @Override
            public List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
                throw new IllegalStateException("boom");
            }

            @Override
            public void dropInstanceState(long instanceId) {
                throw new IllegalStateException("boom");
            }
        };
        nowNs.addAndGet(TIMEOUT);
        Reaper reaper = reaper(broken, good);
        assertEquals(1, reaper.scan().size());
        assertEquals(List.of(1L), good.dropped);
        assertEquals(1, reaper.releaseFailures());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aHangingReleaseNeverStallsTheReaper() {
        CountDownLatch never = new CountDownLatch(1);
        List<Long> released = Collections.synchronizedList(new ArrayList<>());
        FakeTarget hanging = new FakeTarget() {
            @Override
            public void dropInstanceState(long instanceId) {
                // as the transfer modules do: only enqueue; the release thread frees
                releases.enqueue("instance " + instanceId, () -> {
                    if (instanceId == 3) {
                        never.await();
                    }
                    released.add(instanceId);
                });
            }
        };
        hanging.register(3, null);
        liveness.ping(hanging.entries.get(3L), null);
        nowNs.addAndGet(TIMEOUT);
        Reaper reaper = reaper(hanging);
        assertEquals(1, reaper.scan().size(), "the scan returns at once: the release hangs on the release thread");
        await().atMost(Duration.ofSeconds(10)).until(() -> {
            releases.doWork();
            return reaper.releaseTimeouts() == 1;
        });
        hanging.register(4, null);
        liveness.ping(hanging.entries.get(4L), null);
        nowNs.addAndGet(TIMEOUT);
        assertEquals(1, reaper.scan().size(), "the next scan still reaps");
        await().atMost(Duration.ofSeconds(10)).until(() -> released.contains(4L));
        assertEquals(2, reaper.scans());
        never.countDown();
    }
}
