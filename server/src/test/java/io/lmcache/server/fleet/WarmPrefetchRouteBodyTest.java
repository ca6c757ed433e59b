package io.lmcache.server.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.metrics.ServerMetrics;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code POST /cache/prefetches}'s body as LMCache answers it (its prefetch service's 400 for too many token ids, pydantic's
 * 422 for a wrong type, 413 past the byte bound): each refusal's status and detail, and each counted once. No L2 here, so a
 * body that parses whole gets the 503 that comes after parsing.
 */
class WarmPrefetchRouteBodyTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final HttpClient client = HttpClient.newHttpClient();
    private final WarmPrefetchRoute route = new WarmPrefetchRoute(null);
    private HttpApi api;

    @BeforeEach
    void start() throws Exception {
        api = new HttpApi("127.0.0.1", 0);
        route.register(api, new AdminGuard("token", "127.0.0.1", new ServerMetrics()), peer -> true);
        api.start();
    }

    @AfterEach
    void stop() {
        api.close();
    }

    private String[] post(String body) throws Exception {
        HttpResponse<String> response = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + api.port() + "/cache/prefetches"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        return new String[] {Integer.toString(response.statusCode()), JSON.readTree(response.body()).path("detail").asText()};
    }

    private static String body(String tokenIds, String worldSize) {
        return "{\"model_name\": \"m\", \"world_size\": " + worldSize + ", \"token_ids\": " + tokenIds + "}";
    }

    /** {@code n} zeros as a JSON list. */
    private static String zeros(int n) {
        return "[" + "0,".repeat(n - 1) + "0]";
    }

    @Test
    void tokenIdsAtTheLimitParseAndOneMoreIs400() throws Exception {
        assertEquals("503", post(body(zeros(WarmPrefetchRoute.MAX_TOKEN_IDS), "1"))[0], "parsed whole: then no L2");
        String[] over = post(body(zeros(WarmPrefetchRoute.MAX_TOKEN_IDS + 1), "1"));
        assertEquals("400", over[0]);
        assertEquals("too many token_ids in a single request (limit=1000000)", over[1]);
        assertEquals(2, route.refused.sum());
    }

    @Test
    void wrongTypesAre422WithTheirDetailAndABodyPastItsBound413() throws Exception {
        String[][] cases = {
            {body("[1, \"2\"]", "1"), "422", "token_ids[1] is not an int"},
            {body("\"1,2\"", "1"), "422", "token_ids must be a list of ints"},
            {body("[1]", "\"1\""), "422", "world_size must be an integer >= 1"},
            {"{\"model_name\": 1, \"world_size\": 1, \"token_ids\": [1]}", "422", "model_name must be a string"},
            {"[1]", "422", "the body must be a JSON object"},
            {"{\"token_ids\": [1,", "422", "the body is not JSON"},
            {body("[1]", "1").replace("}", ", \"tags\": 1}"), "422", "tags must be an object"},
            {"x".repeat(WarmPrefetchRoute.MAX_BODY_BYTES + 1), "413", "the body is larger than 16777216 bytes"},
        };
        for (String[] c : cases) {
            String[] answer = post(c[0]);
            assertEquals(c[1], answer[0], c[2]);
            assertEquals(c[2], answer[1]);
        }
        assertEquals(cases.length, route.refused.sum());
    }
}
