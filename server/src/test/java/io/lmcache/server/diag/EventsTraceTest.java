package io.lmcache.server.diag;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.fleet.BatchRecorder;
import io.lmcache.server.testing.TraceFile;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The events trace in LMCache's .lct format (trace/format.py@7f2a2f42, cache_events.py's TraceCacheEventSink), read back by a msgpack reader. */
class EventsTraceTest {

    private static Map<String, Object> batch(long seq) {
        Map<String, Object> key = new LinkedHashMap<>();
        key.put("chunk_hash_hex", "ab".repeat(32));
        key.put("model_name", "m");
        key.put("kv_rank", 1 << 24);
        key.put("object_group_id", 0);
        key.put("cache_salt", "");
        Map<String, Object> entry = new LinkedHashMap<>();
        entry.put("key", key);
        entry.put("size_bytes", 4096L);
        entry.put("token_ids", List.of());
        entry.put("token_offset", -1);
        Map<String, Object> batch = new LinkedHashMap<>();
        batch.put("instance_id", "pod-1");
        batch.put("incarnation", 77L);
        batch.put("seq", seq);
        batch.put("event_type", "store");
        batch.put("tier", "l1");
        batch.put("backend", "dram");
        batch.put("entries", List.of(entry));
        batch.put("shared", false);
        batch.put("ts", 1.5);
        batch.put("dropped_events", 0L);
        return batch;
    }

    @Test
    void theHeaderThenTheStartMarkTheBatchesAsPostedAndTheStopMark(@TempDir Path dir) throws IOException {
        Path path = dir.resolve("t.lct");
        try (EventsTrace trace = EventsTrace.open(path, "pod-1", "lmcache-server 1.0", EventsTrace.MAX_BYTES)) {
            trace.started(new BatchRecorder.Emitter("pod-1", 77, "", 8080, 0));
            trace.recorded(List.of(batch(1), batch(2)));
        }
        TraceFile file = TraceFile.read(path);
        Map<String, Object> header = file.header();
        assertArrayEquals("LMCT".getBytes(StandardCharsets.US_ASCII), (byte[]) header.get("magic"));
        assertEquals(List.of("type", "magic", "format_version", "level", "trace_schema_version", "t_mono_start", "t_wall_start",
                "sm_config_json", "sm_config_digest", "level_meta"), List.copyOf(header.keySet()), "msgspec's tag first, then declaration order");
        assertEquals("events", header.get("level"));
        assertEquals(2L, header.get("trace_schema_version"));
        assertEquals(Map.of("instance_id", "pod-1", "lmcache_version", "lmcache-server 1.0"), header.get("level_meta"));
        assertEquals(List.of("events.lifecycle", "events.batch", "events.batch", "events.lifecycle"),
                file.records().stream().map(r -> r.get("qualname")).toList());
        assertEquals(List.of("type", "t_mono", "t_wall", "qualname", "args"), List.copyOf(file.records().getFirst().keySet()));
        assertEquals(Map.of("phase", "start", "instance_id", "pod-1", "incarnation", 77L, "ip", "", "http_port", 8080L, "mq_port", 0L),
                TraceFile.args(file.records().getFirst()));
        Map<String, Object> second = file.args("events.batch").get(1);
        assertEquals(2L, second.get("seq"));
        assertEquals(1.5, second.get("ts"));
        assertEquals(false, second.get("shared"));
        @SuppressWarnings("unchecked")
        Map<String, Object> entry = ((List<Map<String, Object>>) second.get("entries")).getFirst();
        assertEquals(-1L, entry.get("token_offset"));
        assertEquals(List.of(), entry.get("token_ids"));
        assertEquals(Map.of("phase", "stop", "instance_id", "pod-1"), TraceFile.args(file.records().getLast()));
        double tMono = (Double) file.records().getLast().get("t_mono");
        assertTrue(tMono >= 0 && tMono < 60, "seconds since the header's t_mono_start: " + tMono);
    }

    @Test
    void pastTheSizeCapRecordsAreDroppedAndCountedTheStopMarkStillWritten(@TempDir Path dir) throws IOException {
        Path path = dir.resolve("capped.lct");
        long cap = 4096 + 2048;
        EventsTrace trace = EventsTrace.open(path, "pod-1", "v", cap);
        trace.started(new BatchRecorder.Emitter("pod-1", 1, "", 0, 0));
        for (int i = 1; i <= 200; i++) {
            trace.recorded(List.of(batch(i)));
        }
        trace.close();
        assertTrue(trace.sizeCapped.sum() > 0, "some dropped");
        assertTrue(Files.size(path) <= cap, "bounded: " + Files.size(path));
        TraceFile file = TraceFile.read(path);
        assertEquals(trace.records.sum(), file.records().size());
        assertEquals("stop", TraceFile.args(file.records().getLast()).get("phase"));
    }

    @Test
    void aLinkAtTheOutputIsNotFollowed(@TempDir Path dir) throws IOException {
        Path victim = Files.writeString(dir.resolve("victim"), "precious");
        Path link = Files.createSymbolicLink(dir.resolve("trace.lct"), victim);
        assertThrows(IOException.class, () -> EventsTrace.open(link, "pod-1", "v", EventsTrace.MAX_BYTES));
        assertEquals("precious", Files.readString(victim));
    }

    @Test
    void theDefaultPathIsLmcachesInTheTemporaryDirectory() {
        String name = EventsTrace.defaultPath().getFileName().toString();
        assertTrue(name.matches("lmcache-trace-" + ProcessHandle.current().pid() + "-\\d{8}-\\d{6}\\.lct"), name);
    }
}
