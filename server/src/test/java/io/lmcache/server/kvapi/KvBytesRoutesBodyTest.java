package io.lmcache.server.kvapi;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.metrics.ServerCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.WireField;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The KV bytes API's JSON bodies (retrieve, lookup) as LMCache's pydantic model answers them: 422 for a token list over
 * {@link WireField#MAX_TOKENS} and for any value of the wrong type, each counted by status. No engine here, so a body that
 * parses whole gets the 503 that comes after parsing.
 */
class KvBytesRoutesBodyTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final HttpClient client = HttpClient.newHttpClient();
    private final ServerMetrics metrics = new ServerMetrics();
    private HttpApi api;

    @BeforeEach
    void start() throws Exception {
        api = new HttpApi("127.0.0.1", 0);
        new KvBytesRoutes(null, Optional.empty(), 256, 1 << 20, metrics).register(api, new AdminGuard("token", "127.0.0.1", metrics));
        api.start();
    }

    @AfterEach
    void stop() {
        api.close();
    }

    private String[] post(String path, String body) throws Exception {
        HttpResponse<String> response = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + api.port() + path))
                .header("Content-Type", "application/json").header("Authorization", "Bearer token")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        return new String[] {Integer.toString(response.statusCode()), JSON.readTree(response.body()).path("detail").asText()};
    }

    private long refused(int status) {
        return metrics.declare(ServerCatalogue.KV_API_REFUSED, Integer.toString(status)).sum();
    }

    /** {@code n} zeros as a JSON list. */
    private static String zeros(int n) {
        return "[" + "0,".repeat(n - 1) + "0]";
    }

    @Test
    void tokensAtTheLimitParseAndOneMoreIs422() throws Exception {
        assertEquals("503", post("/api/kv/lookup", "{\"model_name\": \"m\", \"tokens\": " + zeros(WireField.MAX_TOKENS) + "}")[0]);
        String[] over = post("/api/kv/retrieve", "{\"model_name\": \"m\", \"tokens\": " + zeros(WireField.MAX_TOKENS + 1) + "}");
        assertEquals("422", over[0]);
        assertEquals("tokens has more than " + WireField.MAX_TOKENS + " entries", over[1]);
        assertEquals(1, refused(422));
        assertEquals(1, refused(503));
    }

    @Test
    void wrongTypesAre422WithTheirDetail() throws Exception {
        String[][] cases = {
            {"{\"model_name\": \"m\", \"tokens\": [1, 2.5]}", "tokens[1] is not an int"},
            {"{\"model_name\": \"m\", \"tokens\": {}}", "tokens must be a list of ints"},
            {"{\"model_name\": \"m\", \"tokens\": [1], \"protocol_version\": \"1\"}", "protocol_version must be an int"},
            {"{\"model_name\": \"m\", \"tokens\": [1], \"cache_salt\": 1}", "cache_salt must be a string"},
            {"{\"tokens\": [1]}", "the body must be {\"model_name\": str, \"tokens\": [int], \"cache_salt\": str}"},
            {"\"m\"", "the body must be a JSON object"},
            {"{\"model_name\": \"m\", \"tokens\": [1", "the body is not JSON"},
        };
        for (String[] c : cases) {
            String[] answer = post("/api/kv/lookup", c[0]);
            assertEquals("422", answer[0], c[1]);
            assertEquals(c[1], answer[1]);
        }
        assertEquals(cases.length, refused(422));
    }
}
