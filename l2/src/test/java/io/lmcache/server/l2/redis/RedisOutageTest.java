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
import io.lmcache.server.l2.testing.RedisNodes;
import io.lmcache.server.l2.testing.SilentProxy;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * L2 outages cost little (issue 31, item 5), against real redis-server nodes: a node that accepts and never answers opens its
 * circuit breaker after the first timeouts, after which LOOKUPs and loads answer at once as misses, a background PING closes it
 * once the node answers again; a value far larger than the object planted under an adapter key is refused by its length without
 * being read, while another key's load on the same connection succeeds.
 */
class RedisOutageTest {
    private static final int BYTES = 64 * 1024;
    /** Long enough that an answer within {@link #FAST} cannot be a timeout. */
    private static final double REQUEST_TIMEOUT_S = 4.0;
    private static final Duration FAST = Duration.ofMillis(1500);
    private final AdapterDriver driver = new AdapterDriver();

    @AfterEach
    void closeAdapters() {
        driver.close();
    }

    @Test
    void aSilentNodeOpensItsBreakerThenLookupsAndLoadsAnswerAtOnceAndAPingClosesIt() throws Exception {
        try (RedisNodes node = RedisNodes.standalone(); SilentProxy proxy = new SilentProxy(node.port(0))) {
            L2Adapter adapter = driver.adapter("{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":" + proxy.port()
                    + ",\"request_timeout\":" + REQUEST_TIMEOUT_S + ",\"connection_timeout\":1.0}");
            awaitConnected(adapter);
            List<L2Key> keys = keys(0, 8);
            List<MemorySegment> objects = driver.filled(0, 8, BYTES);
            assertTrue(store(adapter, keys, objects).ok());
            String address = "127.0.0.1:" + proxy.port();

            proxy.silence();
            // the first lookup pays the timeout: its EXISTS all time out, which opens the breaker
            assertEquals(0, lookup(adapter, keys).popcount());
            assertEquals(NodeBreakers.State.OPEN, redis(adapter).breakers().state(address), String.valueOf(adapter.status()));
            assertEquals(1L, adapter.eventCounts().get("breaker_opened"));
            assertEquals(false, adapter.status().get("is_healthy"));
            assertEquals(List.of(address), adapter.status().get("open_nodes"));

            long refusedBefore = adapter.eventCounts().get("breaker_refused_keys");
            long lookupTask = adapter.submitLookupAndLock(keys, Map.of());
            Bitmap[] found = new Bitmap[1];
            await("a lookup while the breaker is open answers well within request_timeout").atMost(FAST).pollInterval(Duration.ofMillis(5))
                    .until(() -> (found[0] = adapter.queryLookupAndLock(lookupTask)) != null);
            assertEquals(0, found[0].popcount(), "the silent node's keys are misses");
            long loadTask = adapter.submitLoad(keys, driver.blank(8, BYTES, (byte) 0));
            Bitmap[] loaded = new Bitmap[1];
            await("a load too").atMost(FAST).pollInterval(Duration.ofMillis(5)).until(() -> (loaded[0] = adapter.queryLoad(loadTask)) != null);
            assertEquals(0, loaded[0].popcount());
            assertEquals(refusedBefore + 2L * keys.size(), adapter.eventCounts().get("breaker_refused_keys"), "every key refused, counted");
            await("probes keep failing while silent").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
                    .until(() -> adapter.eventCounts().get("breaker_probes_failed") >= 1);

            proxy.speak();
            await("a probe's PONG closes the breaker").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                    .until(() -> redis(adapter).breakers().state(address) == NodeBreakers.State.CLOSED);
            await("the node's keys are found again").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100))
                    .until(() -> lookup(adapter, keys).popcount() == keys.size());
            adapter.submitUnlock(keys);
            await("healthy again (the status probe answers too)").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100))
                    .until(() -> (Boolean) adapter.status().get("is_healthy"));
        }
    }

    @Test
    void aPlantedValueLargerThanTheObjectIsRefusedByLengthUnreadWhileAnotherKeyLoads() throws Exception {
        try (RedisNodes node = RedisNodes.standalone()) {
            L2Adapter adapter = driver.adapter("{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":" + node.port(0) + "}");
            awaitConnected(adapter);
            List<L2Key> keys = keys(100, 2);
            List<MemorySegment> objects = driver.filled(100, 2, BYTES);
            assertTrue(store(adapter, keys, objects).ok());
            // 64 MiB under the first key (SETRANGE pads with zeros: nothing that big crosses the test's own connection)
            String planted = redis(adapter).wireKey(keys.getFirst());
            assertEquals("67108864", node.cli(0, "SETRANGE", planted, Long.toString((64L << 20) - 1), "x").strip());
            long sentBefore = netOutputBytes(node);

            List<MemorySegment> buffers = driver.blank(2, BYTES, (byte) 0x33);
            Bitmap loaded = load(adapter, keys, buffers);
            assertFalse(loaded.get(0), "the planted value is a miss");
            assertTrue(loaded.get(1), "the other key, on the same connection, loads");
            assertArrayEquals(objects.get(1).toArray(ValueLayout.JAVA_BYTE), buffers.get(1).toArray(ValueLayout.JAVA_BYTE));
            byte[] untouched = new byte[BYTES];
            Arrays.fill(untouched, (byte) 0x33);
            assertArrayEquals(untouched, buffers.get(0).toArray(ValueLayout.JAVA_BYTE), "the refused key's buffer is untouched");
            assertEquals(1L, adapter.eventCounts().get("load_too_big"));
            assertEquals(1L, ((Map<?, ?>) adapter.status().get("failures_by_reason")).get("load_too_big"));
            long sent = netOutputBytes(node) - sentBefore;
            assertTrue(sent < 4L * BYTES, "the node sent " + sent + " bytes: the 64 MiB value was never read");
            adapter.submitUnlock(keys);
        }
    }

    /** The node's total_net_output_bytes (INFO stats). */
    private static long netOutputBytes(RedisNodes node) {
        for (String line : node.cli(0, "INFO", "stats").split("\r?\n")) {
            if (line.startsWith("total_net_output_bytes:")) {
                return Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
            }
        }
        throw new IllegalStateException("no total_net_output_bytes in INFO stats");
    }
}
