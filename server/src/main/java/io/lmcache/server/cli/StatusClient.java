package io.lmcache.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** GETs from a running server's HTTP API (what {@code lmcache ping} and {@code describe} read). */
final class StatusClient {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    /** The answer: status code, body and the round trip. */
    record Answer(int status, String body, long roundTripNs) {}

    /** Why nothing usable came back; the message is what the CLI prints. */
    static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    private final String baseUrl;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(TIMEOUT).build();

    StatusClient(String url) {
        this.baseUrl = normalize(url);
    }

    /** {@code host:port} gets {@code http://}; a trailing slash goes. */
    static String normalize(String url) {
        String withScheme = url.startsWith("http://") || url.startsWith("https://") ? url : "http://" + url;
        return withScheme.endsWith("/") ? withScheme.substring(0, withScheme.length() - 1) : withScheme;
    }

    String baseUrl() {
        return baseUrl;
    }

    Answer get(String path) throws Failure {
        return send("GET", path, null, null);
    }

    /**
     * {@code method} on {@code path}: a JSON body when {@code jsonBody} is not null, and {@code Authorization: Bearer} when
     * {@code token} is not empty (the admin endpoints' guard reads it).
     */
    Answer send(String method, String path, String jsonBody, String token) throws Failure {
        long startNs = System.nanoTime();
        try {
            // a --url that is no URI fails here, as a failure to connect does, not with an uncaught exception
            HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(baseUrl + path)).timeout(TIMEOUT);
            if (jsonBody != null) {
                request.header("Content-Type", "application/json");
            }
            if (token != null && !token.isEmpty()) {
                request.header("Authorization", "Bearer " + token);
            }
            request.method(method, jsonBody == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(jsonBody));
            HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
            return new Answer(response.statusCode(), response.body(), System.nanoTime() - startNs);
        } catch (IOException | IllegalArgumentException e) {
            throw new Failure("Cannot connect to " + baseUrl + path + ": " + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("interrupted");
        }
    }

    /** As {@link #send}, for a JSON answer: a status other than 2xx is a failure carrying the server's {@code error}. */
    JsonNode sendJson(String method, String path, String jsonBody, String token) throws Failure {
        Answer answer = send(method, path, jsonBody, token);
        JsonNode body;
        try {
            body = answer.body().isBlank() ? JSON.createObjectNode() : JSON.readTree(answer.body());
        } catch (IOException e) {
            throw new Failure("HTTP " + answer.status() + " from " + baseUrl + path + " (not JSON): " + answer.body().strip());
        }
        if (answer.status() / 100 != 2) {
            String message = body.path("error").asText(body.path("detail").asText(body.path("message").asText(answer.body().strip())));
            throw new Failure("Server error: HTTP " + answer.status() + " from " + baseUrl + path + ": " + message);
        }
        return body;
    }

    /** The JSON at {@code path}; a non-200 answer or a body that is not JSON is a failure. */
    JsonNode json(String path) throws Failure {
        Answer answer = get(path);
        if (answer.status() != 200) {
            throw new Failure("HTTP " + answer.status() + " from " + baseUrl + path + ": " + answer.body().strip());
        }
        try {
            return JSON.readTree(answer.body());
        } catch (IOException e) {
            throw new Failure(baseUrl + path + " did not answer JSON: " + e.getMessage());
        }
    }
}
