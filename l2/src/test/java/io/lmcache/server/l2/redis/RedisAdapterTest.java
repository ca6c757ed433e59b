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
import io.lmcache.server.l2.KeyPage;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.testing.RedisClusterExtension;
import io.lmcache.server.l2.testing.RedisNodes;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** resp and valkey against real redis-server processes: one 3-master cluster for the class, standalone nodes where needed. */
class RedisAdapterTest {
    private static final int BYTES = 64 * 1024;
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension(3);
    private final AdapterDriver driver = new AdapterDriver();

    @AfterEach
    void closeAdapters() {
        driver.close();
    }

    private String valkey(String extra) {
        return "{\"type\":\"valkey\",\"startup_nodes\":\"" + CLUSTER.nodes().startupNodes() + "\",\"cluster_mode\":true,\"request_timeout\":2"
                + extra + "}";
    }

    private static byte[] bytes(MemorySegment segment) {
        return segment.toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void storesLooksUpAndLoadsByteExactOverEveryMaster() throws Exception {
        L2Adapter adapter = driver.adapter(valkey(",\"key_prefix\":\"t1\""));
        awaitConnected(adapter);
        List<L2Key> keys = keys(0, 24);
        List<MemorySegment> objects = driver.filled(0, 24, BYTES);
        assertEquals(new StoreResult(true, 24L * BYTES), store(adapter, keys, objects));
        for (int node = 0; node < 3; node++) {
            assertTrue(CLUSTER.nodes().keyCount(node) > 0, "no hash tag: keys spread over every master, node " + node + " has none");
        }
        // LMCache's key under the prefix: the packed kv rank of rank 0 of 1, object group 0, the hash
        String wire = "t1@org/model@01000100@0@" + keys.get(5).hashHex();
        assertEquals(wire, redis(adapter).wireKey(keys.get(5)));
        assertEquals("1", CLUSTER.nodes().cli(CLUSTER.nodes().nodeOf(wire), "EXISTS", wire).strip(), "LMCache's key form on its slot's node");
        assertEquals(String.valueOf(BYTES), CLUSTER.nodes().cli(CLUSTER.nodes().nodeOf(wire), "STRLEN", wire).strip(), "the raw object bytes, no header");

        List<L2Key> asked = keys(0, 26); // the last two were never stored
        Bitmap found = lookup(adapter, asked);
        assertEquals(24, found.popcount());
        assertEquals(24, found.countLeadingOnes());
        assertEquals(24, adapter.status().get("locked_keys"));
        List<MemorySegment> buffers = driver.blank(24, BYTES, (byte) 0);
        assertEquals(24, load(adapter, keys, buffers).popcount());
        for (int i = 0; i < 24; i++) {
            assertArrayEquals(bytes(objects.get(i)), bytes(buffers.get(i)), "key " + i);
        }
        adapter.submitUnlock(keys);
        assertEquals(0, adapter.status().get("locked_keys"));
        assertEquals(new StoreResult(true, 2L * BYTES), store(adapter, keys.subList(0, 2), objects.subList(0, 2)));
        assertEquals(24L * BYTES, adapter.usage().totalBytesUsed(), "a re-store is counted once");
        Map<String, Object> status = adapter.status();
        assertEquals("ValkeyL2Adapter", status.get("type"));
        assertEquals(0L, status.get("failures"), String.valueOf(status));
        await().atMost(Duration.ofSeconds(10)).until(() -> ((List<?>) adapter.status().get("nodes")).size() == 3
                && (Boolean) adapter.status().get("is_healthy"));
        assertTrue(((Map<?, ?>) adapter.status().get("node_memory")).values().stream().allMatch(m -> ((Map<?, ?>) m).containsKey(
                "used_memory")), "INFO memory per node: " + adapter.status().get("node_memory"));
    }

    /**
     * Values of chunk-object size pass through kept Netty buffers (ValueBuffers): the second round's SETs and GETs reuse the
     * first round's memory, and every byte still arrives where it belongs.
     */
    @Test
    @SuppressWarnings("unchecked")
    void largeValuesReuseKeptBuffersAndStayByteExact() throws Exception {
        int large = 9 << 20;
        L2Adapter adapter = driver.adapter(valkey(",\"key_prefix\":\"big\",\"num_workers\":2"));
        awaitConnected(adapter);
        for (int round = 0; round < 2; round++) {
            List<L2Key> keys = keys(100 + 4 * round, 4);
            List<MemorySegment> objects = driver.filled(100 + 4 * round, 4, large);
            assertEquals(new StoreResult(true, 4L * large), store(adapter, keys, objects));
            assertEquals(4, lookup(adapter, keys).popcount());
            List<MemorySegment> buffers = driver.blank(4, large, (byte) 0);
            assertEquals(4, load(adapter, keys, buffers).popcount());
            for (int i = 0; i < 4; i++) {
                assertArrayEquals(bytes(objects.get(i)), bytes(buffers.get(i)), "round " + round + ", key " + i);
            }
        }
        Map<String, Object> kept = (Map<String, Object>) adapter.status().get("value_buffers");
        assertTrue((Long) kept.get("reused_total") >= 4, "the second round's values took kept buffers: " + kept);
        assertTrue((Integer) kept.get("kept") <= 2, "at most num_workers kept: " + kept);
    }

    @Test
    void aValueOfAnotherSizeIsAMissAndItsBufferIsNeverWritten() throws Exception {
        L2Adapter adapter = driver.adapter(valkey(",\"key_prefix\":\"t2\""));
        awaitConnected(adapter);
        List<L2Key> keys = keys(100, 1);
        assertTrue(store(adapter, keys, driver.filled(100, 1, BYTES)).ok());
        assertEquals(1, lookup(adapter, keys).popcount(), "EXISTS does not know the size: found");
        List<MemorySegment> small = driver.blank(1, BYTES / 2, (byte) 0x5a);
        assertFalse(load(adapter, keys, small).get(0), "a stored value larger than the object is a miss");
        assertTrue(bytes(small.getFirst()).length == BYTES / 2 && allEqual(bytes(small.getFirst()), (byte) 0x5a), "untouched");
        List<MemorySegment> large = driver.blank(1, BYTES * 2, (byte) 0x5b);
        assertFalse(load(adapter, keys, large).get(0), "a shorter one too");
        assertTrue(allEqual(bytes(large.getFirst()), (byte) 0x5b), "untouched");
        assertFalse(load(adapter, keys(101, 1), driver.blank(1, BYTES, (byte) 0)).get(0), "a nil is a miss");
        adapter.submitUnlock(keys);
        Map<?, ?> reasons = (Map<?, ?>) adapter.status().get("failures_by_reason");
        assertEquals(1L, reasons.get("load_too_big"), String.valueOf(reasons));
        assertEquals(1L, reasons.get("load_wrong_size"), String.valueOf(reasons));
        assertEquals(1L, adapter.status().get("load_misses"));
    }

    private static boolean allEqual(byte[] data, byte value) {
        for (byte b : data) {
            if (b != value) {
                return false;
            }
        }
        return true;
    }

    @Test
    void ttlSecondsGivesEveryKeyAnExpiry() throws Exception {
        L2Adapter adapter = driver.adapter(valkey(",\"key_prefix\":\"t4\",\"ttl_seconds\":30"));
        awaitConnected(adapter);
        List<L2Key> keys = keys(300, 1);
        assertTrue(store(adapter, keys, driver.filled(300, 1, 1024)).ok());
        String wire = redis(adapter).wireKey(keys.getFirst());
        long pttl = Long.parseLong(CLUSTER.nodes().cli(CLUSTER.nodes().nodeOf(wire), "PTTL", wire).strip());
        assertTrue(pttl > 0 && pttl <= 30_000, "PTTL " + pttl);
    }

    @Test
    void respOnOneNodeWithAPasswordAndAWrongPasswordThatNeverConnects() throws Exception {
        try (RedisNodes node = RedisNodes.standalone("--requirepass", "s3cret")) {
            L2Adapter adapter = driver.adapter("{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":" + node.port(0)
                    + ",\"password\":\"s3cret\"}");
            awaitConnected(adapter);
            List<L2Key> keys = keys(400, 4);
            List<MemorySegment> objects = driver.filled(400, 4, BYTES);
            assertTrue(store(adapter, keys, objects).ok());
            assertEquals(4, lookup(adapter, keys).popcount());
            List<MemorySegment> buffers = driver.blank(4, BYTES, (byte) 0);
            assertEquals(4, load(adapter, keys, buffers).popcount());
            assertArrayEquals(bytes(objects.get(3)), bytes(buffers.get(3)));
            assertEquals("RESPL2Adapter", adapter.status().get("type"));
            assertFalse(adapter.status().toString().contains("s3cret"), "the password is never shown");

            L2Adapter wrong = driver.adapter("{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":" + node.port(0)
                    + ",\"password\":\"nope\",\"request_timeout\":0.5,\"connection_timeout\":0.5}");
            await().atMost(Duration.ofSeconds(10)).until(() -> ((Map<?, ?>) wrong.status().get("failures_by_reason")).containsKey("connect"));
            assertEquals(0, lookup(wrong, keys).popcount(), "answered at once, all misses");
            assertFalse(store(wrong, keys, objects).ok());
            assertEquals(false, wrong.status().get("is_healthy"));
        }
    }

    @Test
    void aNodeThatIsNotUpYetIsUsedOnceItStarts() throws Exception {
        try (RedisNodes node = RedisNodes.standaloneNotStarted()) {
            L2Adapter adapter = driver.adapter("{\"type\":\"valkey\",\"host\":\"127.0.0.1\",\"port\":" + node.port(0)
                    + ",\"request_timeout\":0.5,\"connection_timeout\":0.5}");
            List<L2Key> keys = keys(500, 2);
            List<MemorySegment> objects = driver.filled(500, 2, BYTES);
            assertFalse(store(adapter, keys, objects).ok(), "not connected: the task fails at once");
            assertEquals(false, adapter.status().get("connected"));
            node.start(0);
            awaitConnected(adapter);
            assertTrue(store(adapter, keys, objects).ok());
            assertEquals(2, lookup(adapter, keys).popcount());
            adapter.submitUnlock(keys);
        }
    }

    /**
     * SCAN pages through the keys under the adapter's prefix on every master, each key once with its size; another prefix's keys and a
     * stranger's name are not listed; a cursor the adapter never gave is refused.
     */
    @Test
    void listingScansEveryMasterUnderTheKeyPrefix() throws Exception {
        L2Adapter adapter = driver.adapter(valkey(",\"key_prefix\":\"list\""));
        L2Adapter other = driver.adapter(valkey(",\"key_prefix\":\"elsewhere\""));
        awaitConnected(adapter);
        awaitConnected(other);
        List<L2Key> keys = keys(100, 30);
        assertEquals(new StoreResult(true, 30L * BYTES), store(adapter, keys, driver.filled(100, 30, BYTES)));
        assertEquals(new StoreResult(true, 3L * BYTES), store(other, keys(200, 3), driver.filled(200, 3, BYTES)));
        String stranger = "list@not-a-key";
        CLUSTER.nodes().cli(CLUSTER.nodes().nodeOf(stranger), "SET", stranger, "x");
        Set<L2Key> listed = new HashSet<>();
        String cursor = null;
        int pages = 0;
        do {
            KeyPage page = adapter.listKeys(null, 4, cursor);
            for (KeyPage.Entry entry : page.entries()) {
                assertTrue(listed.add(entry.key()), "once: " + entry);
                assertEquals(BYTES, entry.sizeBytes());
            }
            cursor = page.nextCursor();
            pages++;
        } while (cursor != null && pages < 200);
        assertEquals(Set.copyOf(keys), listed, "every key under the prefix, nothing else");
        assertTrue(pages >= 3, "at least one page per master: " + pages);
        assertEquals(Set.copyOf(keys), Set.copyOf(allOf(adapter, "org/model")), "the model filter keeps them");
        assertTrue(allOf(adapter, "other/model").isEmpty());
        for (String bad : List.of("x", "9:0", "0:abc")) {
            try {
                adapter.listKeys(null, 4, bad);
                throw new AssertionError("a cursor the adapter never gave: " + bad);
            } catch (IllegalArgumentException expected) {
                // the route's 400
            }
        }
    }

    private static List<L2Key> allOf(L2Adapter adapter, String model) {
        List<L2Key> out = new ArrayList<>();
        String cursor = null;
        int pages = 0;
        do {
            KeyPage page = adapter.listKeys(model, 1000, cursor);
            page.entries().forEach(e -> out.add(e.key()));
            cursor = page.nextCursor();
        } while (cursor != null && ++pages < 100);
        return out;
    }
}
