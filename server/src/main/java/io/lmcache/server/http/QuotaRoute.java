package io.lmcache.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.TenantUsage;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.LoggerFactory;

/**
 * {@code /quota}: the per-tenant (cache salt) soft quotas of {@code --eviction-policy IsolatedLRU}.
 * {@code GET} shows each tenant's quota and usage (without the store's lock); {@code POST} with
 * {@code {"tenant": "...", "quota_bytes": N}} sets one ({@code -1} removes it; {@code _default} is the
 * bucket of the empty salt and of every salt without a quota of its own) and answers that tenant's line only. Both take the
 * admin token, also from loopback (see {@link AdminGuard#checkRead}): the salts are tenants' secrets, and a quota is a
 * share of the pool another tenant must not set. Under another policy a POST is refused (409): nothing would enforce it.
 */
public final class QuotaRoute {
    private QuotaRoute() {}

    public static void register(HttpApi api, ObjectStore store, AdminGuard guard) {
        // runs on: lmcache-http-* (one virtual thread per exchange)
        api.route("/quota", (method, exchange) -> {
            if (method.equals("GET")) {
                HttpApi.Response denied = guard.checkRead(exchange);
                return denied != null ? denied : HttpApi.Response.json(200, quotas(store));
            }
            if (!method.equals("POST")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = guard.check(exchange, true);
            if (denied != null) {
                return denied;
            }
            JsonNode body = ServerRoutes.body(exchange);
            JsonNode tenant = body.path("tenant");
            JsonNode quota = body.path("quota_bytes");
            if (!tenant.isTextual() || tenant.asText().length() > 1024 || !quota.canConvertToLong() || quota.asLong() < -1) {
                return HttpApi.Response.json(400, Map.of("error", "the body must be {\"tenant\": \"<cache_salt or _default>\", "
                        + "\"quota_bytes\": N} with N >= 0, or -1 to remove the quota"));
            }
            if (!store.setTenantQuota(tenant.asText(), quota.asLong())) {
                return HttpApi.Response.json(409, Map.of("error", "--eviction-policy " + store.policy().flagValue()
                        + " keeps no quotas; start the server with --eviction-policy IsolatedLRU"));
            }
            LoggerFactory.getLogger(QuotaRoute.class).info("quota of tenant '{}' set to {} bytes through HTTP by {}",
                    LogText.clip(tenant.asText()), quota.asLong(), exchange.getRemoteAddress());
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("eviction_policy", store.policy().flagValue());
            out.put("tenant", changed(store, tenant.asText()));
            return HttpApi.Response.json(200, out);
        });
    }

    /** The line of the tenant just set; a tenant whose quota was removed and that holds nothing has none: zeros then. */
    private static Map<String, Object> changed(ObjectStore store, String name) {
        for (TenantUsage usage : store.tenantUsage()) {
            if (usage.tenant().equals(name)) {
                return line(usage);
            }
        }
        return line(new TenantUsage(name, -1, 0, 0));
    }

    private static Map<String, Object> quotas(ObjectStore store) {
        List<Map<String, Object>> tenants = new ArrayList<>();
        for (TenantUsage usage : store.tenantUsage()) {
            tenants.add(line(usage));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("eviction_policy", store.policy().flagValue());
        out.put("tenants", tenants);
        return out;
    }

    private static Map<String, Object> line(TenantUsage usage) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("tenant", usage.tenant());
        line.put("quota_bytes", usage.quotaBytes() < 0 ? null : usage.quotaBytes());
        line.put("used_bytes", usage.usedBytes());
        line.put("objects", usage.objects());
        line.put("over_quota", usage.quotaBytes() >= 0 && usage.usedBytes() > usage.quotaBytes());
        return line;
    }
}
