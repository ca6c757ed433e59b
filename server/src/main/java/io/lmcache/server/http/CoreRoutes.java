package io.lmcache.server.http;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/** {@code /}, {@code /healthcheck} and {@code /metrics}: read-only, GET (and HEAD) only. */
public final class CoreRoutes {
    private static final String PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";

    private CoreRoutes() {}

    /** {@code scrape} makes the Prometheus text of one scrape. */
    public static void register(HttpApi api, HealthCheck health, Supplier<String> scrape) {
        // runs on: lmcache-http-* (each route below, one virtual thread per exchange)
        api.route("/", (method, exchange) -> HttpApi.onlyGet(method,
                () -> HttpApi.Response.json(200, Map.of("status", "ok", "service", "LMCache HTTP API"))));
        api.route("/healthcheck", (method, exchange) -> HttpApi.onlyGet(method, () -> {
            String reason = health.unhealthyReason();
            if (reason == null) {
                return HttpApi.Response.json(200, Map.of("status", "healthy"));
            }
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("status", "unhealthy");
            body.put("reason", reason);
            return HttpApi.Response.json(503, body);
        }));
        api.route("/metrics", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.text(200, PROMETHEUS_TEXT, scrape.get())));
    }
}
