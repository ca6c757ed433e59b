package io.lmcache.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.TenantUsage;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.LoggerFactory;

/**
 * LMCache's other spellings of routes this server has, answering as LMCache's do: {@code POST /clear-cache} and
 * {@code POST /api/clear-cache} (LMCache's {@code mp/http_apis/cache_api.py}: a forced clear of L1, {@code {"status": "ok"}}), and
 * the per-salt quota routes {@code PUT/GET/DELETE /api/quota/{salt}}, {@code /quota/{salt}} and {@code GET /api/quota}
 * (LMCache's {@code mp/http_apis/quota_api.py}: {@code limit_gb}, {@code current_usage_gb}, {@code _default} for the empty salt).
 * Guarded as their originals: a clear as every mutation, a quota by the admin token only (salts are tenants' secrets). A quota
 * under a policy other than IsolatedLRU is refused (409), where LMCache keeps it without effect.
 */
public final class LmcacheAliasRoutes {
    private static final double GIB = 1024.0 * 1024 * 1024;
    /** LMCache's limit on a salt (ObjectKey, vLLM's {@code _MAX_CACHE_SALT_LENGTH}). */
    private static final int MAX_SALT_CHARS = 128;

    private LmcacheAliasRoutes() {}

    public static void register(HttpApi api, ServerRoutes.Server server, ObjectStore store, AdminGuard guard) {
        // runs on: lmcache-http-* (one virtual thread per exchange), every route below
        for (String path : new String[] {"/clear-cache", "/api/clear-cache"}) {
            api.route(path, guard.postOnly(exchange -> {
                server.clear(true);
                LoggerFactory.getLogger(LmcacheAliasRoutes.class).info("cache cleared through HTTP {} by {}", path, exchange.getRemoteAddress());
                return HttpApi.Response.json(200, Map.of("status", "ok"));
            }));
        }
        api.route("/api/quota", (method, exchange) -> {
            if (!method.equals("GET")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = guard.checkRead(exchange);
            return denied != null ? denied : HttpApi.Response.json(200, Map.of("users", users(store)));
        });
        HttpApi.Route one = (method, exchange) -> quota(method, exchange, store, guard);
        api.routeUnder("/api/quota/", one);
        api.routeUnder("/quota/", one);
    }

    private static HttpApi.Response quota(String method, HttpExchange exchange, ObjectStore store, AdminGuard guard) throws Exception {
        String raw = exchange.getRequestURI().getRawPath();
        String salt = URLDecoder.decode(raw.substring(raw.indexOf("/quota/") + "/quota/".length()), StandardCharsets.UTF_8);
        if (salt.isEmpty() || salt.length() > MAX_SALT_CHARS || salt.contains("/")) {
            return HttpApi.Response.json(404, Map.of("error", "not found"));
        }
        HttpApi.Response denied = switch (method) {
            case "GET" -> guard.checkRead(exchange);
            case "PUT", "DELETE" -> guard.check(exchange, true);
            default -> HttpApi.methodNotAllowed(method);
        };
        if (denied != null) {
            return denied;
        }
        TenantUsage usage = usage(store, salt);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("cache_salt", salt);
        switch (method) {
            case "GET" -> {
                out.put("limit_gb", usage.quotaBytes() < 0 ? 0.0 : usage.quotaBytes() / GIB);
                out.put("current_usage_gb", usage.usedBytes() / GIB);
                out.put("exists", usage.quotaBytes() >= 0);
            }
            case "PUT" -> {
                JsonNode limit = ServerRoutes.body(exchange).path("limit_gb");
                if (!limit.isNumber() || !Double.isFinite(limit.asDouble()) || limit.asDouble() < 0 || limit.asDouble() * GIB > Long.MAX_VALUE) {
                    return HttpApi.Response.json(400, Map.of("error", "body must be {'limit_gb': <float>}, finite and non-negative"));
                }
                if (!store.setTenantQuota(salt, (long) (limit.asDouble() * GIB))) {
                    return notIsolated(store);
                }
                LoggerFactory.getLogger(LmcacheAliasRoutes.class).info("quota of tenant '{}' set to {} GiB through HTTP by {}",
                        LogText.clip(salt), limit.asDouble(), exchange.getRemoteAddress());
                out.put("limit_gb", limit.asDouble());
                out.put("status", "ok");
            }
            default -> {
                if (!store.setTenantQuota(salt, -1)) {
                    return notIsolated(store);
                }
                out.put("status", usage.quotaBytes() >= 0 ? "removed" : "not_found");
            }
        }
        return HttpApi.Response.json(200, out);
    }

    private static HttpApi.Response notIsolated(ObjectStore store) {
        return HttpApi.Response.json(409, Map.of("error", "--eviction-policy " + store.policy().flagValue()
                + " keeps no quotas; start the server with --eviction-policy IsolatedLRU"));
    }

    private static TenantUsage usage(ObjectStore store, String salt) {
        return store.tenantUsage().stream().filter(u -> u.tenant().equals(salt)).findFirst().orElse(new TenantUsage(salt, -1, 0, 0));
    }

    private static Map<String, Object> users(ObjectStore store) {
        Map<String, Object> users = new LinkedHashMap<>();
        for (TenantUsage usage : store.tenantUsage()) {
            if (usage.quotaBytes() >= 0) {
                users.put(usage.tenant(), Map.of("limit_gb", usage.quotaBytes() / GIB, "current_usage_gb", usage.usedBytes() / GIB));
            }
        }
        return users;
    }
}
