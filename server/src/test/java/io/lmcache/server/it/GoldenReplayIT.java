package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Replays what LMCache's own client sent (testdata/golden) to the real server, one DEALER per
 * captured connection, and compares every reply the client accepted byte for byte.
 */
class GoldenReplayIT {
    /** Operations whose replies need no stored data: they must match in every capture. */
    private static final Set<String> NO_STORAGE_OPS = Set.of("get_chunk_size", "get_experimental", "noop", "ping",
            "register_kv_cache", "unregister_kv_cache", "lookup", "end_session", "free_lookup_locks", "report_block_allocation", "clear");

    @RegisterExtension
    // the capture came from an LMCache server without the KV-event channel (GET_EXPERIMENTAL [])
    static final ServerExtension SERVER = ServerExtension.withFlags("--kv-event-log-size", "0");

    @ParameterizedTest
    @ValueSource(strings = {"handshake.jsonl", "extras.jsonl", "cpu_roundtrip.jsonl", "reregister.jsonl", "miss.jsonl",
        "skip_first_n.jsonl", "concurrent.jsonl"})
    void repliesMatchTheGoldenCapture(String file) {
        int compared = replay(SERVER.endpoint(), Golden.load(file), NO_STORAGE_OPS);
        assertTrue(compared > 0, "compared no replies in " + file);
    }

    /**
     * The data-path captures, replayed whole on a fresh server: the shared-memory segments the
     * captured REGISTERs name are recreated (with other contents), so every reply, STORE, QUERY
     * and RETRIEVE included, must equal what the real client accepted.
     */
    @ParameterizedTest
    @ValueSource(strings = {"cpu_roundtrip.jsonl", "reregister.jsonl", "miss.jsonl", "skip_first_n.jsonl", "concurrent.jsonl"})
    void dataPathCapturesReplayByteForByte(String file) throws Exception {
        List<Golden.Message> messages = Golden.load(file);
        List<Path> segments = createSegments(messages);
        try (ServerProcess fresh = ServerProcess.start("--kv-event-log-size", "0")) {
            Set<String> every = new HashSet<>();
            messages.forEach(m -> every.add(m.op()));
            int compared = replay(fresh.endpoint(), messages, every);
            assertTrue(compared >= messages.size() / 2, "compared " + compared + " replies of " + file);
        } finally {
            for (Path segment : segments) {
                Files.deleteIfExists(segment);
            }
        }
    }

    private static List<Path> createSegments(List<Golden.Message> messages) throws Exception {
        List<Path> created = new ArrayList<>();
        RequestDecoder decoder = new RequestDecoder();
        Random random = new Random(3);
        for (Golden.Message m : messages) {
            if (!m.clientToServer() || !m.op().equals("register_kv_cache")) {
                continue;
            }
            Request.RegisterKvCache register = decoder.registerKvCache(m.frames(), 2, m.frames().length);
            for (TensorWrapper wrapper : register.kvCaches()) {
                TensorWrapper.CpuShm shm = (TensorWrapper.CpuShm) wrapper;
                Path path = Path.of("/dev/shm", shm.shmName().substring(1));
                if (!created.contains(path)) {
                    writeRandom(path, shm.nbytes(), random);
                    created.add(path);
                }
            }
        }
        return created;
    }

    private static void writeRandom(Path path, long bytes, Random random) throws IOException {
        byte[] content = new byte[(int) bytes];
        random.nextBytes(content);
        try (RandomAccessFile file = new RandomAccessFile(path.toFile(), "rw")) {
            file.setLength(0);
            file.write(content);
        }
    }

    /** Sends every c2s message of {@code messages} to {@code endpoint}; checks each s2c reply whose op is in {@code ops}. Returns how many. */
    static int replay(String endpoint, List<Golden.Message> messages, Set<String> ops) {
        Map<String, TestClient> clients = new HashMap<>();
        Map<String, Map<String, TestClient.Reply>> early = new HashMap<>();
        int compared = 0;
        try {
            for (Golden.Message m : messages) {
                TestClient client = clients.computeIfAbsent(m.identityHex(), id -> new TestClient(endpoint));
                if (m.clientToServer()) {
                    client.sendRaw(m.frames());
                    continue;
                }
                String uid = HexFormat.of().formatHex(m.uid());
                Map<String, TestClient.Reply> buffered = early.computeIfAbsent(m.identityHex(), id -> new HashMap<>());
                TestClient.Reply reply = buffered.remove(uid);
                while (reply == null) {
                    TestClient.Reply next = client.receive(Duration.ofSeconds(10));
                    assertNotNull(next, "no reply for " + m);
                    String nextUid = HexFormat.of().formatHex(next.uid());
                    if (nextUid.equals(uid)) {
                        reply = next;
                    } else {
                        buffered.put(nextUid, next);
                    }
                }
                assertArrayEquals(m.frames()[1], reply.op(), "op echo for " + m);
                if (ops.contains(m.op())) {
                    assertEquals(m.frames().length, reply.frames(), "frame count of " + m);
                    if (m.frames().length > 2) {
                        assertEquals(HexFormat.of().formatHex(m.frames()[2]), reply.payloadHex(), "payload of " + m);
                    }
                    compared++;
                }
            }
        } finally {
            clients.values().forEach(TestClient::close);
        }
        return compared;
    }
}
