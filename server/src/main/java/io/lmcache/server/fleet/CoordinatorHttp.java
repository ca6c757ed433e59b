package io.lmcache.server.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;

/**
 * The calls to the coordinator: JSON over HTTP/1.1, each bounded by LMCache's per-request timeout (2 s), a reply body read to at
 * most 64 KiB. A connection the peer closed between two calls (the coordinator's 10 s keep-alive) is retried once before it
 * counts as a failure (fleet-and-operator-api.md §1.3).
 */
final class CoordinatorHttp {
    static final Duration TIMEOUT = Duration.ofSeconds(2);
    private static final int MAX_REPLY_BYTES = 64 * 1024;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A reply: its status and its JSON body (an empty object when there is none or it is not JSON). */
    record Reply(int status, JsonNode body) {
        boolean ok() {
            return status >= 200 && status < 300;
        }
    }

    private final String baseUrl;
    private final HttpClient client;

    CoordinatorHttp(String baseUrl) {
        this.baseUrl = baseUrl;
        this.client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(TIMEOUT).build();
    }

    String baseUrl() {
        return baseUrl;
    }

    /** {@code method path} with {@code body} as JSON (null: none); throws IOException when no reply came. */
    Reply send(String method, String path, Object body) throws IOException, InterruptedException {
        byte[] bytes = body == null ? null : JSON.writeValueAsBytes(body);
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(baseUrl + path)).timeout(TIMEOUT)
                .method(method, bytes == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(bytes));
        if (bytes != null) {
            request.header("Content-Type", "application/json");
        }
        HttpRequest built = request.build();
        HttpResponse<InputStream> response;
        try {
            response = client.send(built, HttpResponse.BodyHandlers.ofInputStream());
        } catch (HttpTimeoutException e) {
            throw e;
        } catch (IOException e) {
            response = client.send(built, HttpResponse.BodyHandlers.ofInputStream()); // once: a keep-alive connection the peer closed
        }
        try (InputStream in = response.body()) {
            return new Reply(response.statusCode(), parse(in.readNBytes(MAX_REPLY_BYTES + 1))); // bounded before it is held
        }
    }

    private static JsonNode parse(byte[] body) {
        if (body == null || body.length == 0 || body.length > MAX_REPLY_BYTES) {
            return JSON.createObjectNode();
        }
        try {
            return JSON.readTree(body);
        } catch (IOException e) {
            return JSON.createObjectNode();
        }
    }

    void close() {
        client.close();
    }
}
