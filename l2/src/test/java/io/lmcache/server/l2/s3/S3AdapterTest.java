package io.lmcache.server.l2.s3;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.lmcache.server.l2.AsyncL2Adapter;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.KeyPage;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.redis.NodeBreakers;
import io.lmcache.server.l2.testing.S3ProxyServer;
import io.lmcache.server.l2.testing.SilentProxy;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * The s3 adapter against a real S3 server (S3Proxy, SigV4 checked) and LMCache's object layout on it: objects written as Python
 * LMCache writes them (its names, raw bytes) are found and served byte-exact, ours land under the same names with the same bytes
 * and come back after a restart, an object of another size is a counted miss, salts stay apart, reads write nothing, and an outage
 * opens the breaker so that lookups answer without a request, logging a bounded number of lines.
 */
class S3AdapterTest {
    private static final Duration ANSWER = Duration.ofSeconds(20);
    private static final int BYTES = 48 * 1024;
    private static final String MODEL = "meta-llama/Llama-3.1-8B";
    private final Arena arena = Arena.ofShared();
    private final List<L2Adapter> adapters = new ArrayList<>();
    /** One server for the class (each test uses keys of its own); a test's outage is ended after it. */
    private static S3ProxyServer server;

    @BeforeAll
    static void startServer() {
        server = S3ProxyServer.start();
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    @AfterEach
    void close() {
        adapters.forEach(L2Adapter::close);
        server.ensureRunning();
        arena.close();
    }

    @Test
    void objectsPlantedAsPythonLmcacheWritesThemAreServedByteExact() throws Exception {
        L2Key key = key(1, "");
        L2Key salted = key(2, "user-42");
        byte[] bytes = random(1, BYTES);
        byte[] saltedBytes = random(2, BYTES);
        // LMCache's _object_key_to_string: model (its '/' kept), kv rank as 8 hex digits, group in hex, hash hex, salt after a 5th '@'
        String name = MODEL + "@01000100@0@" + HexFormat.of().formatHex(hashBytes(1));
        assertEquals(name, key.wireKey());
        String saltedName = MODEL + "@01000100@0@" + HexFormat.of().formatHex(hashBytes(2)) + "@user-42";
        assertEquals(saltedName, salted.wireKey());
        plant(name, bytes);
        plant(saltedName, saltedBytes);
        L2Adapter adapter = open();

        assertEquals("11", lookup(adapter, List.of(key, salted)).toString());
        adapter.submitUnlock(List.of(key, salted));
        List<MemorySegment> buffers = List.of(blank(BYTES), blank(BYTES));
        assertEquals("11", load(adapter, List.of(key, salted), buffers).toString());
        assertArrayEquals(bytes, buffers.get(0).toArray(ValueLayout.JAVA_BYTE));
        assertArrayEquals(saltedBytes, buffers.get(1).toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void storedObjectsLandUnderLmcacheNamesAsRawBytesAndComeBackAfterARestart() {
        L2Key key = key(3, "");
        MemorySegment object = filled(3, BYTES);
        L2Adapter first = open();
        assertEquals(new StoreResult(true, BYTES), store(first, List.of(key), List.of(object)));
        Path file = server.objectFile(MODEL + "@01000100@0@" + HexFormat.of().formatHex(hashBytes(3)));
        assertArrayEquals(object.toArray(ValueLayout.JAVA_BYTE), read(file), "no header, no checksum, no compression");
        first.close();

        L2Adapter restarted = open(); // an empty L1 and a new process: only the bucket knows the key
        assertEquals("1", lookup(restarted, List.of(key)).toString());
        restarted.submitUnlock(List.of(key));
        MemorySegment buffer = blank(BYTES);
        assertEquals("1", load(restarted, List.of(key), List.of(buffer)).toString());
        assertArrayEquals(object.toArray(ValueLayout.JAVA_BYTE), buffer.toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void aHalfSizeObjectIsACountedMissAtLookupAndAtLoad() {
        L2Key key = key(4, "");
        plant(key.wireKey(), random(4, BYTES / 2));
        L2Adapter adapter = open();
        assertEquals("0", lookup(adapter, List.of(key)).toString(), "HEAD answers half the size: a miss");
        assertEquals(1L, events(adapter).get("format_mismatch_size"));
        MemorySegment buffer = blank(BYTES).fill((byte) 0x5a);
        assertEquals("0", load(adapter, List.of(key), List.of(buffer)).toString(), "GET answers half the size: a miss");
        assertEquals(2L, events(adapter).get("format_mismatch_size"));
        for (byte b : buffer.toArray(ValueLayout.JAVA_BYTE)) {
            assertEquals((byte) 0x5a, b, "nothing of a wrong-size object is copied");
        }
    }

    @Test
    void saltsStayApart() {
        L2Key salted = key(5, "tenant-a");
        L2Adapter adapter = open();
        assertTrue(store(adapter, List.of(salted), List.of(filled(5, BYTES))).ok());
        assertTrue(Files.exists(server.objectFile(key(5, "").wireKey() + "@tenant-a")));
        assertEquals("0", lookup(adapter, List.of(key(5, ""))).toString(), "no salt: another name");
        assertEquals("0", lookup(adapter, List.of(key(5, "tenant-b"))).toString(), "another salt: another name");
        assertEquals("1", lookup(adapter, List.of(salted)).toString());
        adapter.submitUnlock(List.of(salted));
    }

    @Test
    void readsWriteNothing() {
        List<L2Key> keys = List.of(key(6, ""), key(7, ""));
        L2Adapter adapter = open();
        assertTrue(store(adapter, keys, List.of(filled(6, BYTES), filled(7, BYTES))).ok());
        long puts = server.puts();
        assertEquals(2, puts);
        for (int round = 0; round < 3; round++) {
            assertEquals("11", lookup(adapter, keys).toString());
            adapter.submitUnlock(keys);
            assertEquals("11", load(adapter, keys, List.of(blank(BYTES), blank(BYTES))).toString());
            assertEquals("0", lookup(adapter, List.of(key(8, ""))).toString());
        }
        assertEquals(puts, server.puts(), "lookups and loads send no PUT");
        assertEquals(2L, events(adapter).get("put_requests"));
    }

    @Test
    void anOutageOpensTheBreakerSoLookupsAnswerWithoutARequestAndLogsABoundedNumberOfLines() {
        ListAppender<ILoggingEvent> lines = new ListAppender<>();
        Logger log = (Logger) LoggerFactory.getLogger("io.lmcache.server.l2");
        lines.start();
        log.addAppender(lines);
        try {
            List<L2Key> keys = List.of(key(9, ""), key(10, ""));
            L2Adapter adapter = open("{\"s3_breaker_initial_cooldown_s\":30}");
            assertTrue(store(adapter, keys, List.of(filled(9, BYTES), filled(10, BYTES))).ok());
            server.stop();
            // refused connections: the first lookups fail their HEADs, the third failure in a row opens the breaker
            await().atMost(ANSWER).until(() -> {
                assertEquals("00", lookup(adapter, keys).toString());
                return io(adapter).breakerState() == NodeBreakers.State.OPEN;
            });
            long heads = events(adapter).get("head_requests");
            long refused = events(adapter).get("breaker_refused_keys");
            for (int i = 0; i < 200; i++) {
                assertEquals("00", lookup(adapter, keys).toString());
                assertEquals("00", load(adapter, keys, List.of(blank(BYTES), blank(BYTES))).toString());
            }
            assertFalse(store(adapter, keys, List.of(filled(9, BYTES), filled(10, BYTES))).ok(), "a store fails while open");
            assertEquals(heads, events(adapter).get("head_requests"), "no request is sent while the breaker is open");
            assertEquals(refused + 802, events(adapter).get("breaker_refused_keys"));
            assertEquals(1L, events(adapter).get("breaker_opened"));
            assertFalse((Boolean) adapter.status().get("is_healthy"));
            long warnings = lines.list.stream().filter(e -> e.getLevel().isGreaterOrEqual(Level.WARN)).count();
            assertTrue(warnings <= 6, "one line per failure reason and one for the breaker, not one per request: " + warnings);
        } finally {
            log.detachAppender(lines);
        }
    }

    @Test
    void whenTheServerIsBackAProbeClosesTheBreakerAndTheObjectsAreServedAgain() {
        List<L2Key> keys = List.of(key(11, ""));
        L2Adapter adapter = open("{\"s3_breaker_initial_cooldown_s\":0.1,\"s3_breaker_max_cooldown_s\":0.2}");
        assertTrue(store(adapter, keys, List.of(filled(11, BYTES))).ok());
        server.stop();
        await().atMost(ANSWER).until(() -> {
            assertEquals("0", lookup(adapter, keys).toString());
            return io(adapter).breakerState() != NodeBreakers.State.CLOSED;
        });
        server.restart();
        await().atMost(ANSWER).until(() -> io(adapter).breakerState() == NodeBreakers.State.CLOSED);
        assertTrue(events(adapter).get("breaker_probes") >= 1);
        assertEquals("1", lookup(adapter, keys).toString());
        adapter.submitUnlock(keys);
        MemorySegment buffer = blank(BYTES);
        assertEquals("1", load(adapter, keys, List.of(buffer)).toString());
        assertArrayEquals(random(11, BYTES), buffer.toArray(ValueLayout.JAVA_BYTE));
        assertTrue((Boolean) adapter.status().get("is_healthy"));
    }

    @Test
    void aStalledServerOpensTheBreakerAfterItsTimeoutsSoLookupsThenAnswerWithoutARequest() throws IOException {
        try (SilentProxy stall = new SilentProxy(server.port())) {
            List<L2Key> keys = List.of(key(12, ""), key(13, ""), key(14, ""));
            L2Adapter adapter = openSpec(server.adapterJson(",\"s3_breaker_initial_cooldown_s\":30").replace(":" + server.port() + "\"",
                    ":" + stall.port() + "\""));
            assertTrue(store(adapter, keys, List.of(filled(12, BYTES), filled(13, BYTES), filled(14, BYTES))).ok());
            stall.silence();
            // accepted and never answered: the three HEADs time out together, the third failure in a row opens the breaker
            assertEquals("000", lookup(adapter, keys).toString());
            await().atMost(ANSWER).until(() -> io(adapter).breakerState() == NodeBreakers.State.OPEN);
            long heads = events(adapter).get("head_requests");
            for (int i = 0; i < 100; i++) {
                assertEquals("000", lookup(adapter, keys).toString());
            }
            assertEquals(heads, events(adapter).get("head_requests"), "nothing more is sent to a stalled server while the breaker is open");
            assertFalse((Boolean) adapter.status().get("is_healthy"));
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private L2Adapter open() {
        return open("{}");
    }

    /** An adapter on the test server; {@code extra} is a JSON object whose fields are added. */
    private L2Adapter open(String extra) {
        String fields = extra.substring(1, extra.length() - 1);
        return openSpec(server.adapterJson(fields.isEmpty() ? "" : "," + fields));
    }

    /** An adapter of this whole JSON spec. */
    private L2Adapter openSpec(String json) {
        try {
            L2Adapter adapter = L2Adapters.create(L2AdapterSpecs.parse(json, Map.of()),
                    Thread.ofPlatform().daemon().name("test-s3-", 0).factory());
            adapters.add(adapter);
            return adapter;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static S3Io io(L2Adapter adapter) {
        return (S3Io) ((AsyncL2Adapter) adapter).io();
    }

    private static Map<String, Long> events(L2Adapter adapter) {
        return adapter.eventCounts();
    }

    private static byte[] hashBytes(int i) {
        byte[] hash = new byte[32];
        new Random(1000 + i).nextBytes(hash);
        return hash;
    }

    private static L2Key key(int i, String salt) {
        L2Hash hash = L2Hash.parse(HexFormat.of().formatHex(hashBytes(i)));
        return L2Key.of(MODEL, L2Key.packKvRank(1, 0), 0, hash, salt);
    }

    private void plant(String name, byte[] bytes) {
        try {
            Path file = server.objectFile(name);
            Files.createDirectories(file.getParent());
            Files.write(file, bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static byte[] read(Path file) {
        try {
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static byte[] random(long seed, int bytes) {
        byte[] data = new byte[bytes];
        new Random(seed).nextBytes(data);
        return data;
    }

    private MemorySegment filled(long seed, int bytes) {
        MemorySegment segment = arena.allocate(bytes, 64);
        MemorySegment.copy(random(seed, bytes), 0, segment, ValueLayout.JAVA_BYTE, 0, bytes);
        return segment;
    }

    private MemorySegment blank(int bytes) {
        return arena.allocate(bytes, 64);
    }

    private static StoreResult store(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> objects) {
        long task = adapter.submitStore(keys, objects);
        StoreResult[] result = new StoreResult[1];
        await().atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> (result[0] = adapter.popCompletedStores().get(task)) != null);
        return result[0];
    }

    private static Bitmap lookup(L2Adapter adapter, List<L2Key> keys) {
        long task = adapter.submitLookupAndLock(keys, Map.of(0, (long) BYTES));
        Bitmap[] result = new Bitmap[1];
        await().atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> (result[0] = adapter.queryLookupAndLock(task)) != null);
        return result[0];
    }

    private static Bitmap load(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> buffers) {
        long task = adapter.submitLoad(keys, buffers);
        Bitmap[] result = new Bitmap[1];
        await().atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> (result[0] = adapter.queryLoad(task)) != null);
        return result[0];
    }

    /** ListObjectsV2 pages through one model's LMCache-named objects (a stranger's name left out), each once, with its size. */
    @Test
    void listingPagesThroughOneModelsObjectsByContinuationToken() {
        String model = "list/model";
        List<L2Key> keys = new ArrayList<>();
        for (int i = 1; i <= 5; i++) {
            keys.add(L2Key.of(model, L2Key.packKvRank(1, 0), 0, new L2Hash(i, i, i, i), i == 5 ? "tenant-a" : ""));
            plant(keys.getLast().wireKey(), random(i, 10 + i));
        }
        plant(model + "@not-a-key", random(9, 9));
        L2Adapter adapter = open();
        List<L2Key> listed = new ArrayList<>();
        String cursor = null;
        int pages = 0;
        do {
            KeyPage page = adapter.listKeys(model, 2, cursor);
            for (KeyPage.Entry entry : page.entries()) {
                listed.add(entry.key());
                assertEquals(10 + keys.indexOf(entry.key()) + 1, entry.sizeBytes(), entry.toString());
            }
            cursor = page.nextCursor();
            pages++;
        } while (cursor != null && pages < 10);
        assertEquals(keys.size(), listed.size(), "each once: " + listed);
        assertTrue(listed.containsAll(keys), listed.toString());
        assertTrue(pages >= 3, "pages of two: " + pages);
    }
}
