package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * LMCache's HTTP KV bytes API, framed stream v1 (issue 49, fleet-and-operator-api.md §2.7 B; LMCache {@code kv_api.py@772fdcda},
 * {@code kv_protocol.py@9b3f101e}): a stream store (also chunked) then a stream retrieve round-trips byte-exact, raw v1 reads
 * what the stream stored, a miss is a 200 manifest of shape {@code [0,0,0,0]}, a salted store reaches only its salt, and a stream
 * that breaks the framing (order, truncation, an oversized header, a wrong version, dtype or shape) is a 400.
 */
@ExtendWith(ServerLogOnFailure.class)
class KvBytesStreamIT {
    private static final int CHUNK = 256;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 4 * CHUNK / 16, 16, 2, 64);
    private static final int PLANE_LAYERS = 2 * 2;
    private static final int ROW_BYTES = 2 * 64 * 2;
    private static final String MODEL = "kv/stream-model";
    private static final String TOKEN = "kv-admin-token";
    private static final String STREAM = "application/x-lmcache-kv-stream; v=1";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private record Frame(JsonNode header, byte[] payload) {}

    @Test
    void streamStoreAndRetrieveRoundTripByteExactWithinTheTenantBoundaryAndTheFraming() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--http-admin-token", TOKEN, "--chunk-size", Integer.toString(CHUNK));
             JavaWorker worker = new JavaWorker(server.endpoint(), 43, MODEL, GEOMETRY)) {
            worker.register();
            byte[] full = new byte[PLANE_LAYERS * 2 * CHUNK * ROW_BYTES];
            new Random(11).nextBytes(full);
            int[] tokens = JavaWorker.tokens(4343, 2 * CHUNK + 5);

            HttpResponse<byte[]> stored = store(server, manifest(tokens, "", 2 * CHUNK), chunks(full, 2), false, TOKEN);
            assertEquals(200, stored.statusCode(), text(stored));
            JsonNode reply = JSON.readTree(stored.body());
            assertEquals("ok", reply.path("status").asText());
            assertEquals(2 * CHUNK, reply.path("total_tokens").asInt(), "LMCache's stream counts whole-chunk tokens");
            assertEquals(2, reply.path("total_chunks").asInt());
            assertEquals(2, reply.path("stored_chunks").asInt(), text(stored));
            assertEquals(2 * CHUNK, reply.path("stored_tokens").asInt());
            assertEquals(2, Http.metric(server, "lmcache_mp_kv_events_records_total", "kind", "stored"),
                    "the store listeners heard each chunk's commit as a STORE: one KV-event record per chunk");
            assertEquals(2, worker.lookup(tokens, 2 * CHUNK, "zmq-lookup", 1, 1), "vLLM's LOOKUP hits the chunks stored by stream");
            worker.freeLookupLocks(tokens, 0, 2 * CHUNK, "zmq-lookup");

            for (boolean byAccept : new boolean[] {false, true}) {
                HttpResponse<byte[]> back = retrieve(server, tokens, "", byAccept ? null : 1, byAccept, TOKEN);
                assertEquals(200, back.statusCode(), text(back));
                assertEquals(STREAM, back.headers().firstValue("Content-Type").orElse(""));
                List<Frame> frames = frames(back.body());
                JsonNode manifest = frames.getFirst().header();
                assertEquals("retrieve_manifest", manifest.path("type").asText());
                assertEquals(2, manifest.path("hit_chunks").asInt());
                assertEquals(2 * CHUNK, manifest.path("hit_tokens").asInt());
                assertEquals(2 * CHUNK, manifest.path("total_tokens").asInt());
                assertEquals(1, manifest.path("world_size").asInt());
                assertEquals("[2,2,512,128]", manifest.path("shape").toString());
                assertEquals("[2,2,256,128]", manifest.path("shard_shape").toString());
                assertEquals("torch.bfloat16", manifest.path("dtype").asText());
                assertEquals(3, frames.size(), "one shard frame per chunk and worker");
                assertArrayEquals(full, assemble(frames.subList(1, 3), 2), "the stream is byte-exact");
            }
            HttpResponse<byte[]> raw = rawRetrieve(server, tokens);
            assertEquals(200, raw.statusCode());
            assertArrayEquals(full, raw.body(), "raw v1 reads what the stream stored");

            HttpResponse<byte[]> miss = retrieve(server, JavaWorker.tokens(1, CHUNK), "", 1, false, TOKEN);
            assertEquals(200, miss.statusCode(), "a miss is a 200 stream, not raw's 404");
            List<Frame> missed = frames(miss.body());
            assertEquals(1, missed.size(), "the manifest alone");
            assertEquals("[0,0,0,0]", missed.getFirst().header().path("shape").toString());
            assertEquals(0, missed.getFirst().header().path("hit_chunks").asInt());

            chunkedStoreAndSalts(server, full);
            framingViolations(server, full);
        }
    }

    /** A chunked (no declared length) salted stream store: reachable with its salt only. */
    private static void chunkedStoreAndSalts(ServerProcess server, byte[] full) throws Exception {
        int[] tokens = JavaWorker.tokens(888, 2 * CHUNK);
        HttpResponse<byte[]> stored = store(server, manifest(tokens, "tenant-a", 2 * CHUNK), chunks(full, 2), true, TOKEN);
        assertEquals(2, JSON.readTree(stored.body()).path("stored_chunks").asInt(), text(stored));
        for (String other : new String[] {"", "tenant-b"}) {
            HttpResponse<byte[]> foreign = retrieve(server, tokens, other, 1, false, TOKEN);
            assertEquals(200, foreign.statusCode());
            assertEquals(0, frames(foreign.body()).getFirst().header().path("hit_chunks").asInt(), "salt '" + other + "' misses");
        }
        List<Frame> own = frames(retrieve(server, tokens, "tenant-a", 1, false, TOKEN).body());
        assertArrayEquals(full, assemble(own.subList(1, own.size()), 2), "its own salt reaches it");
    }

    private static void framingViolations(ServerProcess server, byte[] full) throws Exception {
        int[] tokens = JavaWorker.tokens(999, 2 * CHUNK);
        byte[] manifest = manifest(tokens, "", 2 * CHUNK);
        byte[][] chunks = chunks(full, 2);
        assertEquals(401, store(server, manifest, chunks, false, null).statusCode(), "without the admin token");
        assertEquals(401, retrieve(server, tokens, "", 1, false, null).statusCode());

        byte[] swapped = concat(manifest, chunkFrame(1, payload(chunks[1])), chunkFrame(0, payload(chunks[0])));
        assertStatus(400, send(storeRequest(server, swapped, false, TOKEN)), "chunk_index 1 first");
        assertEquals(0, lookup(server, tokens), "nothing of an out-of-order stream lands");

        byte[] whole = concat(manifest, chunks[0], chunks[1]);
        assertStatus(400, send(storeRequest(server, Arrays.copyOf(whole, manifest.length + chunks[0].length / 2), false, TOKEN)), "cut in chunk 0");
        assertEquals(0, lookup(server, tokens), "a chunk cut short is given back");
        assertStatus(400, send(storeRequest(server, concat(manifest, chunks[0]), false, TOKEN)), "one of two chunks");
        assertEquals(1, lookup(server, tokens), "the chunk that landed stays (LMCache's chunk-scoped reservations)");

        byte[] oversized = ByteBuffer.allocate(12).putInt((1 << 20) + 1).putLong(0).array();
        assertStatus(400, send(storeRequest(server, oversized, false, TOKEN)), "a header over 1 MiB, refused from its length");
        String wrongVersion = "{\"version\":2,\"type\":\"store_manifest\",\"payload_length\":0,\"model_name\":\"" + MODEL + "\"}";
        assertStatus(400, send(storeRequest(server, frame(wrongVersion.getBytes(StandardCharsets.UTF_8), new byte[0]), false, TOKEN)), "version 2");
        assertStatus(400, retrieve(server, tokens, "", 2, false, TOKEN), "protocol_version 2");
        Map<String, Object> fields = manifestFields(tokens, "", 2 * CHUNK);
        fields.put("dtype", "torch.float16");
        assertStatus(400, store(server, head("store_manifest", fields, 0), chunks, false, TOKEN), "another dtype");
        fields = manifestFields(tokens, "", 2 * CHUNK + 1);
        assertStatus(400, store(server, head("store_manifest", fields, 0), chunks, false, TOKEN), "a shape of partial chunks");
        assertStatus(400, send(storeRequest(server, concat(chunks[0], chunks[1]), false, TOKEN)), "no manifest first");
        assertStatus(400, send(storeRequest(server, concat(manifest, chunks[0], chunks[1], chunkFrame(2, payload(chunks[0]))), false, TOKEN)),
                "a chunk more than the tokens have");
        assertEquals(10, Http.metric(server, "lmcache_mp_kv_api_refused_total", "status", "400"), "each 400 counted once");
    }

    /** A full tensor's chunk frames: chunk c is {@code [planes x layers][chunk][D]} of tokens c*CHUNK.. of each row. */
    private static byte[][] chunks(byte[] full, int count) {
        byte[][] frames = new byte[count][];
        for (int c = 0; c < count; c++) {
            ByteArrayOutputStream payload = new ByteArrayOutputStream();
            for (int pl = 0; pl < PLANE_LAYERS; pl++) {
                payload.write(full, (pl * count * CHUNK + c * CHUNK) * ROW_BYTES, CHUNK * ROW_BYTES);
            }
            frames[c] = chunkFrame(c, payload.toByteArray());
        }
        return frames;
    }

    /** The shards (one worker) back into {@code [planes x layers][tokens][D]}. */
    private static byte[] assemble(List<Frame> shards, int count) {
        byte[] full = new byte[PLANE_LAYERS * count * CHUNK * ROW_BYTES];
        for (Frame shard : shards) {
            assertEquals("retrieve_shard", shard.header().path("type").asText());
            assertEquals(0, shard.header().path("worker_id").asInt());
            int c = shard.header().path("chunk_index").asInt();
            for (int pl = 0; pl < PLANE_LAYERS; pl++) {
                System.arraycopy(shard.payload(), pl * CHUNK * ROW_BYTES, full, (pl * count * CHUNK + c * CHUNK) * ROW_BYTES, CHUNK * ROW_BYTES);
            }
        }
        return full;
    }

    private static Map<String, Object> manifestFields(int[] tokens, String salt, int shapeTokens) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("model_name", MODEL);
        fields.put("tokens", tokens);
        fields.put("cache_salt", salt);
        fields.put("shape", new int[] {2, 2, shapeTokens, 128});
        fields.put("dtype", "torch.bfloat16");
        return fields;
    }

    private static byte[] manifest(int[] tokens, String salt, int shapeTokens) throws IOException {
        return head("store_manifest", manifestFields(tokens, salt, shapeTokens), 0);
    }

    private static byte[] chunkFrame(int index, byte[] payload) {
        try {
            return concat(head("store_chunk", Map.of("chunk_index", index), payload.length), payload);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    /** The payload of a frame this test encoded. */
    private static byte[] payload(byte[] frame) {
        int headerLength = ByteBuffer.wrap(frame).getInt();
        return Arrays.copyOfRange(frame, 12 + headerLength, frame.length);
    }

    /** A frame's prefix and header as LMCache's {@code encode_frame} writes them (the test's own encoder, not the server's). */
    private static byte[] head(String type, Map<String, Object> fields, long payloadLength) throws IOException {
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("version", 1);
        header.put("type", type);
        header.put("payload_length", payloadLength);
        header.putAll(fields);
        byte[] json = JSON.writeValueAsBytes(header);
        return ByteBuffer.allocate(12 + json.length).putInt(json.length).putLong(payloadLength).put(json).array();
    }

    private static byte[] frame(byte[] json, byte[] payload) {
        return concat(ByteBuffer.allocate(12).putInt(json.length).putLong(payload.length).array(), json, payload);
    }

    private static List<Frame> frames(byte[] body) throws IOException {
        List<Frame> frames = new ArrayList<>();
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(body));
        while (in.available() > 0) {
            byte[] header = new byte[in.readInt()];
            byte[] payload = new byte[Math.toIntExact(in.readLong())];
            in.readFully(header);
            in.readFully(payload);
            JsonNode node = JSON.readTree(header);
            assertEquals(1, node.path("version").asInt());
            assertEquals(payload.length, node.path("payload_length").asLong());
            frames.add(new Frame(node, payload));
        }
        return frames;
    }

    private static HttpResponse<byte[]> store(ServerProcess server, byte[] manifest, byte[][] chunks, boolean chunked, String token) {
        byte[][] all = new byte[chunks.length + 1][];
        all[0] = manifest;
        System.arraycopy(chunks, 0, all, 1, chunks.length);
        return send(storeRequest(server, concat(all), chunked, token));
    }

    private static HttpRequest storeRequest(ServerProcess server, byte[] body, boolean chunked, String token) {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(server.httpBase() + "/api/kv/store")).timeout(Duration.ofSeconds(20))
                .header("Content-Type", STREAM)
                .POST(chunked ? HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(body))
                        : HttpRequest.BodyPublishers.ofByteArray(body));
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return request.build();
    }

    private static HttpResponse<byte[]> retrieve(ServerProcess server, int[] tokens, String salt, Integer version, boolean accept,
            String token) throws IOException {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("model_name", MODEL);
        body.put("tokens", tokens);
        body.put("cache_salt", salt);
        if (version != null) {
            body.put("protocol_version", version);
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(server.httpBase() + "/api/kv/retrieve")).timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
        if (accept) {
            request.header("Accept", "application/json, " + STREAM);
        }
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return send(request.build());
    }

    private static HttpResponse<byte[]> rawRetrieve(ServerProcess server, int[] tokens) throws IOException {
        return retrieve(server, tokens, "", null, false, TOKEN);
    }

    private static int lookup(ServerProcess server, int[] tokens) throws IOException {
        byte[] body = JSON.writeValueAsBytes(Map.of("model_name", MODEL, "tokens", tokens));
        HttpResponse<byte[]> looked = send(HttpRequest.newBuilder(URI.create(server.httpBase() + "/api/kv/lookup"))
                .header("Authorization", "Bearer " + TOKEN).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build());
        assertEquals(200, looked.statusCode(), text(looked));
        return JSON.readTree(looked.body()).path("hit_chunks").asInt();
    }

    private static void assertStatus(int status, HttpResponse<byte[]> response, String what) throws IOException {
        assertEquals(status, response.statusCode(), what + ": " + text(response));
        assertTrue(status < 400 || JSON.readTree(response.body()).has("detail"), what + ": FastAPI's {\"detail\": ...}");
    }

    private static HttpResponse<byte[]> send(HttpRequest request) {
        try {
            return CLIENT.send(request, HttpResponse.BodyHandlers.ofByteArray());
        } catch (Exception e) {
            throw new AssertionError("HTTP " + request.uri() + " failed", e);
        }
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] part : parts) {
            out.writeBytes(part);
        }
        return out.toByteArray();
    }

    private static String text(HttpResponse<byte[]> response) {
        return new String(response.body(), StandardCharsets.UTF_8);
    }
}
