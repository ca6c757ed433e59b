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
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * LMCache's HTTP KV bytes API, raw v1 (issue 49, fleet-and-operator-api.md §2.7): a store lands in L1 as vLLM's STORE would (a
 * KV-event record per chunk, a LOOKUP over ZeroMQ hits it, and a chunk stored by the worker comes back over HTTP and round-trips into the worker's blocks
 * byte-exact), retrieve and lookup answer the longest prefix, a salted chunk is a 404 without its salt and with another, a body
 * over the limit is refused with 413 from its declared length alone, and without the admin token every route answers 401.
 */
@ExtendWith(ServerLogOnFailure.class)
class KvBytesApiIT {
    private static final int CHUNK = 256;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 4 * CHUNK / 16, 16, 2, 64);
    private static final String MODEL = "kv/model";
    private static final String TOKEN = "kv-admin-token";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @Test
    void storeRetrieveLookupRoundTripByteExactWithinTheTenantBoundaryAndTheLimits() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--http-admin-token", TOKEN, "--chunk-size", Integer.toString(CHUNK));
             JavaWorker worker = new JavaWorker(server.endpoint(), 41, MODEL, GEOMETRY)) {
            worker.register();
            long objectBytes = GEOMETRY.chunkObjectBytes(CHUNK);
            byte[] payload = new byte[(int) (2 * objectBytes)];
            new Random(7).nextBytes(payload);
            int[] tokens = JavaWorker.tokens(4242, 2 * CHUNK + 5);

            HttpResponse<byte[]> stored = store(server, tokens, payload, "", TOKEN);
            assertEquals(200, stored.statusCode(), text(stored));
            JsonNode reply = JSON.readTree(stored.body());
            assertEquals("ok", reply.path("status").asText());
            assertEquals(2 * CHUNK + 5, reply.path("total_tokens").asInt());
            assertEquals(2, reply.path("total_chunks").asInt());
            assertEquals(2, reply.path("stored_chunks").asInt(), text(stored));
            assertEquals(2 * CHUNK, reply.path("stored_tokens").asInt());

            assertEquals(2, Http.metric(server, "lmcache_mp_kv_events_records_total", "kind", "stored"),
                    "the store listeners heard it as a STORE: one KV-event record per chunk");
            assertEquals(2, worker.lookup(tokens, 2 * CHUNK, "zmq-lookup", 1, 1), "vLLM's LOOKUP hits the chunks stored over HTTP");
            worker.freeLookupLocks(tokens, 0, 2 * CHUNK, "zmq-lookup");

            HttpResponse<byte[]> back = query(server, "/api/kv/retrieve", tokens, "", TOKEN);
            assertEquals(200, back.statusCode(), text(back));
            assertArrayEquals(payload, back.body(), "retrieve is byte-exact");
            assertEquals("application/x-lmcache-kv; v=1", back.headers().firstValue("Content-Type").orElse(""));
            assertEquals("512", back.headers().firstValue("X-LMCache-Hit-Tokens").orElse(""));
            assertEquals("2", back.headers().firstValue("X-LMCache-Hit-Chunks").orElse(""));
            assertEquals("517", back.headers().firstValue("X-LMCache-Total-Tokens").orElse(""));
            assertEquals("2", back.headers().firstValue("X-LMCache-Total-Chunks").orElse(""));
            JsonNode looked = JSON.readTree(query(server, "/api/kv/lookup", tokens, "", TOKEN).body());
            assertEquals(2, looked.path("hit_chunks").asInt(), looked.toString());
            assertEquals(2 * CHUNK, looked.path("hit_tokens").asInt());
            assertEquals(2 * CHUNK + 5, looked.path("total_tokens").asInt());

            // a prefix of another prompt: the first chunk only
            int[] diverging = tokens.clone();
            diverging[CHUNK + 3] ^= 1;
            assertEquals(1, JSON.readTree(query(server, "/api/kv/lookup", diverging, "", TOKEN).body()).path("hit_chunks").asInt());
            HttpResponse<byte[]> prefix = query(server, "/api/kv/retrieve", diverging, "", TOKEN);
            assertEquals(200, prefix.statusCode());
            assertEquals(objectBytes, prefix.body().length, "one chunk's bytes");
            HttpResponse<byte[]> miss = query(server, "/api/kv/retrieve", JavaWorker.tokens(1, CHUNK), "", TOKEN);
            assertEquals(404, miss.statusCode());
            assertEquals(0, miss.body().length, "a miss is an empty 404");
            assertEquals("0", miss.headers().firstValue("X-LMCache-Hit-Chunks").orElse(""));

            workerChunkRoundTripsOverHttp(server, worker);
            saltedChunksStayWithTheirSalt(server, payload);
            limitsAndTokens(server, tokens, payload);
        }
    }

    /** The worker's STORE comes back over HTTP, is stored again under other tokens and RETRIEVEd into other blocks, byte-exact. */
    private static void workerChunkRoundTripsOverHttp(ServerProcess server, JavaWorker worker) throws Exception {
        int[] blocks = JavaWorker.range(0, CHUNK / 16);
        worker.fill(blocks, 11);
        int[] original = JavaWorker.tokens(500, CHUNK);
        assertTrue(worker.store(original, 0, CHUNK, blocks, "zmq-store"));
        HttpResponse<byte[]> fromWorker = query(server, "/api/kv/retrieve", original, "", TOKEN);
        assertEquals(200, fromWorker.statusCode(), text(fromWorker));
        int[] copy = JavaWorker.tokens(501, CHUNK);
        assertEquals(1, JSON.readTree(store(server, copy, fromWorker.body(), "", TOKEN).body()).path("stored_chunks").asInt());
        int[] target = JavaWorker.range(CHUNK / 16, CHUNK / 16);
        worker.zero(target);
        assertEquals(1, worker.lookup(copy, CHUNK, "zmq-lookup-copy", 1, 1));
        assertTrue(worker.retrieve(copy, 0, CHUNK, target, 0, "zmq-lookup-copy"));
        assertArrayEquals(worker.read(blocks), worker.read(target), "the worker's KV, through HTTP and back, is what it stored");
    }

    private static void saltedChunksStayWithTheirSalt(ServerProcess server, byte[] payload) throws Exception {
        int[] tokens = JavaWorker.tokens(777, 2 * CHUNK);
        assertEquals(200, store(server, tokens, payload, "tenant-a", TOKEN).statusCode());
        assertEquals(404, query(server, "/api/kv/retrieve", tokens, "", TOKEN).statusCode(), "no salt: another tenant's chunk");
        assertEquals(404, query(server, "/api/kv/retrieve", tokens, "tenant-b", TOKEN).statusCode(), "another salt");
        assertEquals(0, JSON.readTree(query(server, "/api/kv/lookup", tokens, "", TOKEN).body()).path("hit_chunks").asInt());
        assertEquals(0, JSON.readTree(query(server, "/api/kv/lookup", tokens, "tenant-b", TOKEN).body()).path("hit_chunks").asInt());
        HttpResponse<byte[]> own = query(server, "/api/kv/retrieve", tokens, "tenant-a", TOKEN);
        assertEquals(200, own.statusCode());
        assertArrayEquals(payload, own.body(), "its own salt reaches it");
    }

    private static void limitsAndTokens(ServerProcess server, int[] tokens, byte[] payload) throws Exception {
        assertEquals(401, store(server, tokens, payload, "", null).statusCode(), "store without the admin token");
        assertEquals(401, query(server, "/api/kv/retrieve", tokens, "", null).statusCode(), "retrieve without the admin token");
        assertEquals(401, query(server, "/api/kv/lookup", tokens, "", null).statusCode(), "lookup without the admin token");
        assertEquals(400, store(server, tokens, Arrays.copyOf(payload, payload.length - 1), "", TOKEN).statusCode(), "wrong length");
        HttpResponse<byte[]> unknown = send(HttpRequest.newBuilder(URI.create(server.httpBase() + "/api/kv/lookup"))
                .header("Content-Type", "application/json").header("Authorization", "Bearer " + TOKEN)
                .POST(HttpRequest.BodyPublishers.ofString("{\"model_name\": \"other\", \"tokens\": [1, 2]}")).build());
        assertEquals(400, unknown.statusCode(), "a model no worker registered");
        // a terabyte declared and none of it sent: the 413 can only come from the declared length
        try (Socket socket = new Socket("127.0.0.1", server.httpPort())) {
            socket.setSoTimeout(10_000);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /api/kv/store HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN + "\r\nX-LMCache-Model-Name: "
                    + MODEL + "\r\nX-LMCache-Tokens: 1,2,3\r\nContent-Type: application/x-lmcache-kv; v=1\r\nContent-Length: "
                    + (1L << 40) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            String status = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII)).readLine();
            assertEquals("HTTP/1.1 413 Request Entity Too Large", status.strip().replace("Payload Too Large", "Request Entity Too Large"));
        }
        // a body that ends before its declared length: 400, and nothing of it lands
        int[] cut = JavaWorker.tokens(900, CHUNK);
        try (Socket socket = new Socket("127.0.0.1", server.httpPort())) {
            socket.setSoTimeout(10_000);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /api/kv/store HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN + "\r\nX-LMCache-Model-Name: "
                    + MODEL + "\r\nX-LMCache-Tokens: " + Arrays.stream(cut).mapToObj(Integer::toString).collect(Collectors.joining(","))
                    + "\r\nContent-Type: application/x-lmcache-kv; v=1\r\nContent-Length: " + payload.length / 2 + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(payload, 0, payload.length / 4);
            out.flush();
            socket.shutdownOutput();
            String status = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII)).readLine();
            assertTrue(status.startsWith("HTTP/1.1 400"), status);
        }
        assertEquals(0, JSON.readTree(query(server, "/api/kv/lookup", cut, "", TOKEN).body()).path("hit_chunks").asInt(), "aborted");
    }

    private static HttpResponse<byte[]> store(ServerProcess server, int[] tokens, byte[] payload, String salt, String token) {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(server.httpBase() + "/api/kv/store")).timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/x-lmcache-kv; v=1").header("X-LMCache-Model-Name", MODEL)
                .header("X-LMCache-Tokens", Arrays.stream(tokens).mapToObj(Integer::toString).collect(Collectors.joining(",")))
                .POST(HttpRequest.BodyPublishers.ofByteArray(payload));
        if (!salt.isEmpty()) {
            request.header("X-LMCache-Cache-Salt", salt);
        }
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return send(request.build());
    }

    private static HttpResponse<byte[]> query(ServerProcess server, String path, int[] tokens, String salt, String token) throws Exception {
        List<Integer> list = new ArrayList<>();
        for (int t : tokens) {
            list.add(t);
        }
        String body = JSON.writeValueAsString(Map.of("model_name", MODEL, "tokens", list, "cache_salt", salt));
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(server.httpBase() + path)).timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return send(request.build());
    }

    private static HttpResponse<byte[]> send(HttpRequest request) {
        try {
            return CLIENT.send(request, HttpResponse.BodyHandlers.ofByteArray());
        } catch (Exception e) {
            throw new AssertionError("HTTP " + request.uri() + " failed", e);
        }
    }

    private static String text(HttpResponse<byte[]> response) {
        return new String(response.body(), StandardCharsets.UTF_8);
    }
}
