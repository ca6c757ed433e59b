package io.lmcache.server.liveness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.loop.PeerId;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
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

    private Reaper reaper(InstanceLivenessTarget... targets) {
        return new Reaper(List.of(targets), TIMEOUT, GRACE, 60 * S, 200_000_000L, connections);
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
    void timeoutZeroStartsNoThread() {
        Reaper disabled = new Reaper(List.of(new FakeTarget()), 0, GRACE, 0, S, connections);
        assertFalse(disabled.start());
        assertFalse(disabled.isRunning());
        Reaper noTargets = new Reaper(List.of(), TIMEOUT, GRACE, 0, S, connections);
        assertFalse(noTargets.start());
    }

    @Test
    void thePeriodIsAQuarterOfTheTimeoutOrAThirdOfTheDisconnectGrace() {
        assertEquals(30 * S, new Reaper(List.of(), TIMEOUT, GRACE, 0, S, connections).periodNs());
        assertEquals(10 * S, new Reaper(List.of(), TIMEOUT, GRACE, 30 * S, S, connections).periodNs());
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
    void aHangingReleaseTimesOutAndTheReaperGoesOn() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        FakeTarget hanging = new FakeTarget() {
            @Override
            public void dropInstanceState(long instanceId) {
                try {
                    never.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        hanging.register(3, null);
        liveness.ping(hanging.entries.get(3L), null);
        nowNs.addAndGet(TIMEOUT);
        Reaper reaper = reaper(hanging);
        // the scan returns (bounded by @Timeout, not measured) and counts the release that timed out
        assertEquals(1, reaper.scan().size());
        assertEquals(1, reaper.releaseTimeouts());
        hanging.register(4, null);
        liveness.ping(hanging.entries.get(4L), null);
        nowNs.addAndGet(TIMEOUT);
        assertEquals(1, reaper.scan().size(), "the next scan still reaps");
        never.countDown();
        reaper.close();
    }
}
