package io.lmcache.server.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.testing.ReferenceCoordinator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The stream's batching, sequencing and delivery rules (fleet-and-operator-api.md §1.4.3-1.4.4), turn by turn against the reference coordinator. */
class CacheEventStreamTest {
    private static final long FLUSH_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final CacheEventSink.Place L1 = CacheEventSink.Place.L1_DRAM;
    private ReferenceCoordinator coordinator;
    private CoordinatorHttp http;
    private CacheEventStream stream;
    private long nowNs = System.nanoTime();

    @BeforeEach
    void open() {
        coordinator = ReferenceCoordinator.start("127.0.0.1");
        http = new CoordinatorHttp(coordinator.url());
        stream = new CacheEventStream(http, "unit", 7, FLUSH_NS, () -> List.of(new CacheEventStream.Capacity(L1, 1 << 30)));
    }

    @AfterEach
    void close() {
        http.close();
        coordinator.close();
    }

    private static EncodedKey key(int n) {
        return new EncodedKey(new ChunkHash(n, n, n, n), "m", 0, 0, "");
    }

    /** One turn after the flush interval; the clock is the test's, except the backoff, which counts from the failed post. */
    private void turn() throws InterruptedException {
        nowNs += FLUSH_NS;
        stream.turn(nowNs);
    }

    @Test
    void aStoreThenADeleteOfOneKeyStayInOrderAfterTheDeclarationEachBatchOneSeqMore() throws Exception {
        stream.stored(L1, key(1), 100);
        stream.stored(L1, key(2), 100);
        stream.deleted(L1, key(1));
        turn();
        List<JsonNode> admitted = coordinator.admitted();
        assertEquals(List.of("config", "store", "delete"), admitted.stream().map(b -> b.path("event_type").asText()).toList());
        assertEquals(List.of(1L, 2L, 3L), admitted.stream().map(b -> b.path("seq").asLong()).toList());
        assertEquals(2, admitted.get(1).path("entries").size(), "two stores in one batch");
        assertEquals(1L << 30, admitted.getFirst().path("capacity_bytes").asLong());
        assertEquals(7, admitted.getLast().path("incarnation").asLong());
        assertEquals(key(1).toJson().get("chunk_hash_hex"), admitted.getLast().path("entries").get(0).path("key").path("chunk_hash_hex").asText());
    }

    @Test
    void aRetryableFailureKeepsTheBatchesAndBacksOffThenDeliversThemWithTheirSeq() throws Exception {
        turn(); // the declaration, seq 1
        coordinator.failNext("/events", 503, 1);
        stream.stored(L1, key(3), 100);
        turn();
        assertEquals(1, stream.retries.sum());
        assertEquals(1, stream.spoolDepth(), "kept");
        stream.stored(L1, key(4), 100);
        stream.turn(nowNs); // backing off: nothing posted, the new batch waits behind the first
        assertEquals(1, coordinator.admitted().size());
        Thread.sleep(TimeUnit.NANOSECONDS.toMillis(CacheEventStream.BACKOFF_MIN_NS) + 50);
        stream.turn(System.nanoTime() + FLUSH_NS);
        assertEquals(List.of(1L, 2L, 3L), coordinator.admitted().stream().map(b -> b.path("seq").asLong()).toList());
        assertEquals(0, coordinator.gaps());
        assertEquals(0, stream.spoolDepth());
    }

    @Test
    void aRefusedSliceIsDroppedCountedAndItsSeqNeverReused() throws Exception {
        turn();
        coordinator.failNext("/events", 422, 1);
        stream.stored(L1, key(5), 100);
        stream.stored(L1, key(6), 100);
        turn();
        assertEquals(2, stream.rejected.sum());
        stream.deleted(L1, key(5));
        turn();
        JsonNode last = coordinator.admitted().getLast();
        assertEquals(3, last.path("seq").asLong(), "seq 2 was spent on the refused batch");
        assertEquals(2, last.path("dropped_events").asLong());
        assertEquals(1, coordinator.gaps());
    }

    @Test
    void aNewDeclarationAfterARegistrationHasTheNextRevision() throws Exception {
        turn();
        stream.declareCapacity();
        turn();
        List<JsonNode> configs = coordinator.admitted().stream().filter(b -> b.path("event_type").asText().equals("config")).toList();
        assertEquals(List.of(1L, 2L), configs.stream().map(b -> b.path("capacity_revision").asLong()).toList());
        assertTrue(configs.stream().allMatch(b -> b.path("tier").asText().equals("l1") && b.path("entries").isEmpty()));
    }
}
