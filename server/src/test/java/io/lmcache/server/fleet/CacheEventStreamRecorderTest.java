package io.lmcache.server.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.storage.ChunkHash;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The stream's second consumer (the events trace, §3.3): the same stamped batches, also without a coordinator. */
class CacheEventStreamRecorderTest {
    private static final long FLUSH_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final CacheEventSink.Place L1 = CacheEventSink.Place.L1_DRAM;

    /** Copies what it is handed (the stream's maps are its own). */
    private static final class Recorded implements BatchRecorder {
        final List<Map<String, Object>> batches = new ArrayList<>();

        @Override
        public void started(Emitter emitter) {
        }

        @Override
        public void recorded(List<Map<String, Object>> stamped) {
            stamped.forEach(b -> batches.add(new LinkedHashMap<>(b)));
        }
    }

    @Test
    void withoutACoordinatorTheStampedBatchesGoToTheRecorderAloneInSeqOrderAndNothingIsSpooled() throws Exception {
        Recorded recorded = new Recorded();
        CacheEventStream stream = new CacheEventStream(null, "solo", 9, FLUSH_NS, () -> List.of(new CacheEventStream.Capacity(L1, 1 << 20)),
                recorded);
        stream.stored(L1, new EncodedKey(new ChunkHash(1, 2, 3, 4), "m", 0, 0, ""), 64);
        stream.deleted(L1, new EncodedKey(new ChunkHash(1, 2, 3, 4), "m", 0, 0, ""));
        stream.turn(System.nanoTime() + FLUSH_NS);
        assertEquals(List.of("config", "store", "delete"), recorded.batches.stream().map(b -> b.get("event_type")).toList());
        assertEquals(List.of(1L, 2L, 3L), recorded.batches.stream().map(b -> b.get("seq")).toList());
        assertEquals(List.of("solo", "solo", "solo"), recorded.batches.stream().map(b -> b.get("instance_id")).toList());
        assertEquals(9L, recorded.batches.getFirst().get("incarnation"));
        assertEquals(0, stream.spoolDepth(), "no coordinator: nothing waits for delivery");
        stream.close();
        assertEquals(3, recorded.batches.size(), "the last flush had nothing new");
    }
}
