package io.lmcache.server.liveness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The generic registry both transfer modules keep their instances in, with an injected clock. */
class InstanceRegistryTest {
    private static final long S = TimeUnit.SECONDS.toNanos(1);
    private static final long TIMEOUT = 120 * S;
    private static final long GRACE = 3600 * S;
    private static final PeerId PEER = new PeerId(new byte[] {0, 1, 2, 3, 4});
    private static final PeerId OTHER = new PeerId(new byte[] {0, 5, 6, 7, 8});

    private final AtomicLong nowNs = new AtomicLong(1_000 * S);
    private final PeerConnections connections = new PeerConnections(nowNs::get, GRACE);
    private final InstanceRegistry<String> registry = new InstanceRegistry<>(new Liveness(nowNs::get, connections, 60 * S));

    @Test
    void putReplacesAndRemoveHandsBack() {
        assertNull(registry.put(1, "a", PEER));
        assertEquals("a", registry.put(1, "b", PEER), "the replaced context goes back to the caller");
        assertEquals("b", registry.get(1));
        assertEquals(1, registry.count());
        assertEquals("b", registry.remove(1));
        assertNull(registry.remove(1));
        assertEquals(0, registry.count());
    }

    /** Issue 45: a peer may REGISTER under any number of ids, with megabyte model names, and never ping: both are capped. */
    @Test
    void registrationsAreCappedInCountAndBytes() {
        InstanceRegistry<String> bounded = new InstanceRegistry<>(new Liveness(nowNs::get, connections, 60 * S), String::length, 10_000);
        assertTrue(bounded.admits(1, "x".repeat(6_000)));
        bounded.put(1, "x".repeat(6_000), PEER);
        assertFalse(bounded.admits(2, "y".repeat(6_000)), "past the bytes");
        assertTrue(bounded.admits(1, "y".repeat(9_000)), "replacing its own registration frees its share");
        assertEquals("x".repeat(6_000), bounded.remove(1));
        assertTrue(bounded.admits(2, "y".repeat(9_000)), "removed: its bytes are free");
        for (int id = 0; id < InstanceRegistry.MAX_INSTANCES; id++) {
            assertTrue(registry.admits(id, "c"));
            registry.put(id, "c", PEER);
        }
        assertFalse(registry.admits(InstanceRegistry.MAX_INSTANCES, "c"), "past the count");
        assertTrue(registry.admits(7, "d"), "a live id may register again");
        assertEquals(InstanceRegistry.MAX_INSTANCES, registry.drainAll().size());
        assertTrue(registry.admits(InstanceRegistry.MAX_INSTANCES, "c"));
    }

    @Test
    void trafficFollowsTheWorkerToItsConnectionAndPingNeverInserts() {
        registry.put(1, "a", PEER);
        assertEquals("a", registry.traffic(1, OTHER));
        assertEquals(OTHER, registry.snapshot().getFirst().peer());
        assertNull(registry.traffic(2, PEER));
        assertFalse(registry.ping(2, PEER));
        assertEquals(1, registry.count());
    }

    @Test
    void aPingedSilentInstanceIsReapedOnceAndTakenOnce() {
        registry.put(1, "pinged", PEER);
        registry.put(2, "busy", PEER);
        assertTrue(registry.ping(1, PEER));
        nowNs.addAndGet(TIMEOUT - S);
        registry.traffic(2, PEER);
        nowNs.addAndGet(S);
        List<InstanceLivenessTarget.Reaped> reaped = registry.reapStale(TIMEOUT, GRACE);
        assertEquals(1, reaped.size());
        assertEquals(1, reaped.getFirst().instanceId());
        assertEquals(InstanceLivenessTarget.Reason.SILENCE, reaped.getFirst().reason());
        assertEquals(List.of(), registry.reapStale(TIMEOUT, GRACE), "gone from the live map");
        assertNull(registry.get(1));
        assertEquals("pinged", registry.takeReaped(1));
        assertNull(registry.takeReaped(1), "handed out once");
        assertNull(registry.takeReaped(2), "never reaped");
    }

    @Test
    void drainAllReturnsLiveAndReaped() {
        registry.put(1, "a", PEER);
        registry.put(2, "b", PEER);
        registry.ping(1, PEER);
        nowNs.addAndGet(TIMEOUT);
        registry.traffic(2, PEER);
        assertEquals(1, registry.reapStale(TIMEOUT, GRACE).size());
        List<String> all = registry.drainAll();
        assertEquals(2, all.size());
        assertTrue(all.containsAll(List.of("a", "b")));
        assertEquals(0, registry.count());
        assertNull(registry.takeReaped(1));
    }
}
