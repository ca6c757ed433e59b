package io.lmcache.server.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** HTTP helpers for tests: GET/POST and reading one sample out of a /metrics scrape. */
public final class Http {
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private Http() {}

    public static HttpResponse<String> get(String url) {
        return send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).GET().build());
    }

    /** A GET with {@code headers} (name, value, ...), e.g. {@code Authorization}. */
    public static HttpResponse<String> get(String url, String... headers) {
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).GET();
        for (int i = 0; i + 1 < headers.length; i += 2) {
            builder.header(headers[i], headers[i + 1]);
        }
        return send(builder.build());
    }

    /** A POST as a real client sends one: JSON ({@code Content-Type: application/json}) unless {@code headers} say otherwise. */
    public static HttpResponse<String> post(String url, String body, String... headers) {
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10))
                .POST(HttpRequest.BodyPublishers.ofString(body));
        boolean typed = false;
        for (int i = 0; i + 1 < headers.length; i += 2) {
            builder.header(headers[i], headers[i + 1]);
            typed |= headers[i].equalsIgnoreCase("Content-Type");
        }
        if (!typed) {
            builder.header("Content-Type", "application/json");
        }
        return send(builder.build());
    }

    /** A POST with no body and no Content-Type, as a bare {@code curl -X POST} sends it. */
    public static HttpResponse<String> postBare(String url) {
        return send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10))
                .POST(HttpRequest.BodyPublishers.noBody()).build());
    }

    /** A HEAD request (the body handler sees none). */
    public static HttpResponse<String> head(String url) {
        return send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10))
                .method("HEAD", HttpRequest.BodyPublishers.noBody()).build());
    }

    public static HttpResponse<String> send(HttpRequest request) {
        try {
            return CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * The value of the sample {@code name} whose labels include every {@code key="value"} given,
     * summed over the matching series; 0 when none matches.
     */
    public static double metric(String scrape, String name, String... labelPairs) {
        Pattern line = Pattern.compile("^" + Pattern.quote(name) + "(\\{[^}]*\\})?\\s+(\\S+)$", Pattern.MULTILINE);
        Matcher matcher = line.matcher(scrape);
        double sum = 0;
        while (matcher.find()) {
            String labels = matcher.group(1) == null ? "" : matcher.group(1);
            boolean all = true;
            for (int i = 0; i + 1 < labelPairs.length; i += 2) {
                if (!labels.contains(labelPairs[i] + "=\"" + labelPairs[i + 1] + "\"")) {
                    all = false;
                    break;
                }
            }
            if (all) {
                sum += Double.parseDouble(matcher.group(2));
            }
        }
        return sum;
    }

    public static double metric(ServerProcess server, String name, String... labelPairs) {
        return metric(get(server.httpBase() + "/metrics").body(), name, labelPairs);
    }
}
