package io.lmcache.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import io.lmcache.server.config.Versions;
import io.lmcache.server.logging.LogSetup;
import io.lmcache.server.logging.LogText;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.slf4j.LoggerFactory;

/**
 * The LMCache-compatible endpoints beyond the core ones: {@code /status}, {@code /config},
 * {@code /version}, {@code /lmc_version}, {@code /commit_id}, {@code GET /loglevel}, and the mutating ones, {@code POST} only and through the
 * {@link AdminGuard} (JSON, same origin, token or loopback): {@code POST /metrics/reset},
 * {@code POST /cache/clear}, {@code POST /loglevel}. A GET never changes anything (a browser
 * prefetches and crawlers follow links); nothing here reveals the environment.
 */
public final class ServerRoutes {
    /** What the routes need from the server. */
    public interface Server {
        Map<String, Object> status();

        Map<String, Object> config();

        /** Clears L1; returns what was cleared. */
        Map<String, Object> clear(boolean force);

        void resetMetrics();
    }

    private ServerRoutes() {}

    public static void register(HttpApi api, Server server, AdminGuard guard) {
        // runs on: lmcache-http-* (each route below, one virtual thread per exchange)
        api.route("/status", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.json(200, server.status())));
        api.route("/config", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.json(200, server.config())));
        // bare JSON strings, as LMCache answers them: the version with the commit as build metadata, and the commit
        api.route("/version", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.json(200, Versions.versionWithCommit())));
        api.route("/lmc_version", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.json(200, Versions.versionWithCommit())));
        api.route("/commit_id", (method, exchange) -> HttpApi.onlyGet(method, () -> HttpApi.Response.json(200, Versions.commit())));
        api.route("/metrics/reset", (method, exchange) -> {
            if (!method.equals("POST")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = guard.check(exchange);
            if (denied != null) {
                return denied;
            }
            server.resetMetrics();
            LoggerFactory.getLogger(ServerRoutes.class).info("metrics reset through HTTP by {}", exchange.getRemoteAddress());
            return HttpApi.Response.text(200, "text/plain; charset=utf-8", "ok");
        });
        api.route("/cache/clear", (method, exchange) -> {
            if (!method.equals("POST")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = guard.check(exchange);
            if (denied != null) {
                return denied;
            }
            JsonNode body = body(exchange);
            String tier = body.path("tier").asText("l1");
            if (!tier.equals("l1") && !tier.equals("all")) {
                return HttpApi.Response.json(400, Map.of("error", "tier must be l1 (the only tier this server has) or all, got " + tier));
            }
            Map<String, Object> cleared = server.clear(body.path("force").asBoolean(true));
            cleared.put("tier", "l1");
            Map<String, Object> response = new LinkedHashMap<>();
            response.put("status", "ok");
            response.put("cleared", cleared);
            return HttpApi.Response.json(200, response);
        });
        api.route("/loglevel", (method, exchange) -> {
            Map<String, String> query = query(exchange.getRequestURI().getRawQuery());
            if (method.equals("GET")) {
                if (query.containsKey("level")) {
                    return HttpApi.Response.json(405, Map.of("error", "GET /loglevel only reads; set a level with POST /loglevel and a"
                            + " JSON body {\"level\": \"DEBUG\", \"logger_name\": \"\"}"));
                }
            } else if (method.equals("POST")) {
                HttpApi.Response denied = guard.check(exchange);
                if (denied != null) {
                    return denied;
                }
                JsonNode body = body(exchange);
                String level = body.path("level").asText(query.get("level"));
                if (level == null || !isLevel(level)) {
                    return HttpApi.Response.json(400, Map.of("error", "unknown level '" + LogText.clip(level)
                            + "' (DEBUG, INFO, WARNING, ERROR)"));
                }
                String name = body.path("logger_name").asText(query.getOrDefault("logger_name", ""));
                if (!LogSetup.isSettable(name)) {
                    return HttpApi.Response.json(400, Map.of("error", "unknown logger '" + LogText.clip(name) + "': only the root (\"\")"
                            + " and the server's own loggers (" + LogSetup.OWN_PREFIX + ".*) that exist can be set"));
                }
                LogSetup.setLevel(name, level);
            } else {
                return HttpApi.methodNotAllowed(method);
            }
            Map<String, Object> response = new LinkedHashMap<>();
            response.put("level", LogSetup.rootLevel().toString());
            response.put("loggers", LogSetup.levels());
            return HttpApi.Response.json(200, response);
        });
    }

    private static boolean isLevel(String level) {
        return switch (level.strip().toUpperCase(Locale.ROOT)) {
            case "TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL", "OFF" -> true;
            default -> false;
        };
    }

    /** The JSON body, or an empty object (a body is optional everywhere here). */
    static JsonNode body(HttpExchange exchange) throws IOException {
        byte[] bytes = exchange.getRequestBody().readNBytes(64 * 1024);
        if (bytes.length == 0) {
            return HttpApi.JSON.createObjectNode();
        }
        try {
            return HttpApi.JSON.readTree(bytes);
        } catch (IOException e) {
            throw new BadRequest("the body is not JSON: " + e.getMessage().lines().findFirst().orElse(""));
        }
    }

    static Map<String, String> query(String raw) {
        Map<String, String> out = new LinkedHashMap<>();
        if (raw == null || raw.isEmpty()) {
            return out;
        }
        for (String pair : raw.split("&")) {
            int eq = pair.indexOf('=');
            String key = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
            String value = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
            out.put(key, value);
        }
        return out;
    }

    /** A client error with its message (answered 400). */
    public static final class BadRequest extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BadRequest(String message) {
            super(message);
        }
    }
}
