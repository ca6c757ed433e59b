package io.lmcache.server.l2.redis;

import static io.lmcache.server.l2.redis.AdapterDriver.awaitConnected;
import static io.lmcache.server.l2.redis.AdapterDriver.keys;
import static io.lmcache.server.l2.redis.AdapterDriver.load;
import static io.lmcache.server.l2.redis.AdapterDriver.lookup;
import static io.lmcache.server.l2.redis.AdapterDriver.redis;
import static io.lmcache.server.l2.redis.AdapterDriver.store;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.testing.RedisClusterExtension;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A master of a 3-master cluster killed under the adapter (its own cluster: the others' tests never
 * see it): its keys fail within request_timeout, the other masters' keys still hit and load
 * byte-exact, a store fails as a task but counts the keys written; restarted, it is used again.
 */
class RedisNodeFailureTest {
    private static final int BYTES = 32 * 1024;
    private static final int KEYS = 30;
    private static final long REQUEST_TIMEOUT_MS = 1000;
    /** Lettuce's timeout, then our backstop one second later: the bound on any answer. */
    private static final long ANSWER_BOUND_MS = REQUEST_TIMEOUT_MS + 1000;
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension(3);
    private final AdapterDriver driver = new AdapterDriver();

    @AfterEach
    void closeAdapters() {
        driver.close();
    }

    @Test
    void aKilledMasterFailsOnlyItsKeysFastAndIsUsedAgainOnceRestarted() throws Exception {
        L2Adapter adapter = driver.adapter("{\"type\":\"valkey\",\"startup_nodes\":\"" + CLUSTER.nodes().startupNodes() + "\",\"cluster_mode\":true,"
                + "\"request_timeout\":1.0,\"connection_timeout\":1.0}");
        awaitConnected(adapter);
        List<L2Key> keys = keys(0, KEYS);
        List<MemorySegment> objects = driver.filled(0, KEYS, BYTES);
        assertTrue(store(adapter, keys, objects).ok());
        boolean[] onVictim = new boolean[KEYS];
        int survivors = 0;
        for (int i = 0; i < KEYS; i++) {
            onVictim[i] = CLUSTER.nodes().nodeOf(redis(adapter).wireKey(keys.get(i))) == 0;
            survivors += onVictim[i] ? 0 : 1;
        }
        assertTrue(survivors > 0 && survivors < KEYS, "keys on the victim and on the others");

        CLUSTER.nodes().kill(0);
        long t0 = System.nanoTime();
        Bitmap found = lookup(adapter, keys);
        long lookupMs = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(lookupMs < ANSWER_BOUND_MS, "the lookup answered in " + lookupMs + " ms");
        for (int i = 0; i < KEYS; i++) {
            assertEquals(!onVictim[i], found.get(i), "key " + i + (onVictim[i] ? " is on the killed master" : " is on a live master"));
        }
        List<MemorySegment> buffers = driver.blank(KEYS, BYTES, (byte) 0x11);
        Bitmap loaded = load(adapter, keys, buffers);
        for (int i = 0; i < KEYS; i++) {
            assertEquals(!onVictim[i], loaded.get(i), "load of key " + i);
            byte[] expected = onVictim[i] ? new byte[BYTES] : objects.get(i).toArray(ValueLayout.JAVA_BYTE);
            if (onVictim[i]) {
                Arrays.fill(expected, (byte) 0x11);
            }
            assertArrayEquals(expected, buffers.get(i).toArray(ValueLayout.JAVA_BYTE), "a failed key's buffer is untouched, key " + i);
        }
        adapter.submitUnlock(keys);
        assertEquals(0, adapter.status().get("locked_keys"));

        long before = adapter.usage().totalBytesUsed();
        List<L2Key> more = keys(100, KEYS);
        int written = 0;
        for (L2Key key : more) {
            written += CLUSTER.nodes().nodeOf(redis(adapter).wireKey(key)) == 0 ? 0 : 1;
        }
        t0 = System.nanoTime();
        StoreResult result = store(adapter, more, driver.filled(100, KEYS, BYTES));
        assertTrue((System.nanoTime() - t0) / 1_000_000 < ANSWER_BOUND_MS, "the store answered within the bound");
        assertEquals(new StoreResult(false, 0), result, "a task fails when any key fails");
        assertEquals(before + (long) written * BYTES, adapter.usage().totalBytesUsed(), "only the keys written are counted");
        await("the victim shows as unreachable").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100)).until(() ->
                !(Boolean) adapter.status().get("is_healthy") && nodes(adapter).stream().anyMatch(n -> !(Boolean) n.get("reachable")));
        assertTrue(((Map<?, ?>) adapter.status().get("failures_by_reason")).size() > 0);

        CLUSTER.nodes().start(0);
        // the restarted master is empty: what it held is a miss now, and new stores to it succeed once Lettuce has reconnected
        await("stores to the restarted master succeed").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200))
                .until(() -> store(adapter, keys, objects).ok());
        Bitmap again = lookup(adapter, keys);
        assertEquals(KEYS, again.popcount(), "every key is found again");
        List<MemorySegment> reloaded = driver.blank(KEYS, BYTES, (byte) 0);
        assertEquals(KEYS, load(adapter, keys, reloaded).popcount());
        for (int i = 0; i < KEYS; i++) {
            assertArrayEquals(objects.get(i).toArray(ValueLayout.JAVA_BYTE), reloaded.get(i).toArray(ValueLayout.JAVA_BYTE), "key " + i);
        }
        adapter.submitUnlock(keys);
        await("healthy again").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100)).until(() ->
                (Boolean) adapter.status().get("is_healthy"));
        assertFalse(nodes(adapter).isEmpty());
    }

    @Test
    void aMasterThatStopsAnsweringTimesOutItsKeysAndTheirBuffersStayUntouched() throws Exception {
        L2Adapter adapter = driver.adapter("{\"type\":\"valkey\",\"startup_nodes\":\"" + CLUSTER.nodes().startupNodes() + "\",\"cluster_mode\":true,"
                + "\"key_prefix\":\"hung\",\"request_timeout\":1.0,\"connection_timeout\":1.0}");
        awaitConnected(adapter);
        List<L2Key> keys = keys(1000, KEYS);
        List<MemorySegment> objects = driver.filled(1000, KEYS, BYTES);
        assertTrue(store(adapter, keys, objects).ok());
        int victim = 1;
        List<MemorySegment> buffers = driver.blank(KEYS, BYTES, (byte) 0x22);
        Bitmap loaded;
        long t0 = System.nanoTime();
        CLUSTER.nodes().pause(victim);
        try {
            loaded = load(adapter, keys, buffers);
        } finally {
            CLUSTER.nodes().resume(victim);
        }
        long loadMs = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(loadMs >= REQUEST_TIMEOUT_MS / 2 && loadMs < ANSWER_BOUND_MS + 1000, "answered after the timeout: " + loadMs + " ms");
        byte[] untouched = new byte[BYTES];
        Arrays.fill(untouched, (byte) 0x22);
        for (int i = 0; i < KEYS; i++) {
            boolean hung = CLUSTER.nodes().nodeOf(redis(adapter).wireKey(keys.get(i))) == victim;
            assertEquals(!hung, loaded.get(i), "key " + i);
            assertArrayEquals(hung ? untouched : objects.get(i).toArray(ValueLayout.JAVA_BYTE), buffers.get(i).toArray(ValueLayout.JAVA_BYTE),
                    "key " + i + ": a late reply never lands in a buffer that was given back");
        }
        assertTrue(((Map<?, ?>) adapter.status().get("failures_by_reason")).containsKey("timeout"), String.valueOf(adapter.status()));
        // resumed: its late replies are discarded, and the next requests work
        await("the resumed master answers again").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200))
                .until(() -> load(adapter, keys, driver.blank(KEYS, BYTES, (byte) 0)).popcount() == KEYS);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> nodes(L2Adapter adapter) {
        return (List<Map<String, Object>>) adapter.status().get("nodes");
    }
}
