package io.lmcache.server.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.http.CacheObjectsRoute;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.l2.KeyPage;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.storage.ObjectStore;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code DELETE}/{@code GET /cache/objects} as LMCache's object service does them ({@code mp/cache_control/object_service.py},
 * {@code mp/http_apis/cache_api.py}): at most 10 000 keys, each checked before any is removed; the L1 part spares locked objects
 * unless {@code force}; the L2 part goes to the named adapter (default: the first), and only when the tier includes L2.
 * {@code deleted} counts the L1 removals plus the whole L2 batch, {@code skipped} the locked L1 keys; an adapter's failure is
 * {@code ok: false} with the error, still 200. Every removal reaches the event stream through the stores' feeds.
 */
public final class ObjectControl implements CacheObjectsRoute.Objects {
    private static final Logger LOG = LoggerFactory.getLogger(ObjectControl.class);
    static final int MAX_KEYS = 10_000;
    /** LMCache's {@code _MAX_PAGE_SIZE}. */
    static final int MAX_PAGE_SIZE = 5000;

    private final ObjectStore store;
    private final List<L2Adapter> adapters;

    public ObjectControl(ObjectStore store, List<L2Adapter> adapters) {
        this.store = store;
        this.adapters = List.copyOf(adapters);
    }

    @Override
    public HttpApi.Response delete(JsonNode body) {
        JsonNode keysNode = body.path("keys");
        if (!keysNode.isArray()) {
            return detail(422, "keys: a list of keys is required");
        }
        if (keysNode.size() > MAX_KEYS) {
            return detail(400, "too many keys: " + keysNode.size() + " > " + MAX_KEYS);
        }
        String tier = body.path("tier").asText("l2");
        if (!List.of("l1", "l2", "all").contains(tier)) {
            return detail(400, "tier must be l1, l2 or all, got " + LogText.clip(tier));
        }
        JsonNode force = body.path("force");
        if (!force.isMissingNode() && !force.isBoolean()) {
            return detail(422, "force must be a boolean");
        }
        List<EncodedKey> keys = new ArrayList<>(keysNode.size());
        for (int i = 0; i < keysNode.size(); i++) {
            try {
                keys.add(EncodedKey.parse(keysNode.get(i)));
            } catch (EncodedKey.Invalid e) {
                return detail(400, "keys[" + i + "]: " + e.getMessage());
            }
        }
        boolean withL2 = !tier.equals("l1");
        L2Adapter adapter = null;
        if (withL2) {
            if (adapters.isEmpty()) {
                return detail(503, "no L2 adapter is configured");
            }
            adapter = adapter(body.path("adapter"));
            if (adapter == null) {
                return detail(404, "no L2 adapter of type " + LogText.clip(body.path("adapter").asText()));
            }
        }
        int deleted = 0;
        int skipped = 0;
        if (!tier.equals("l2")) {
            for (EncodedKey key : keys) {
                switch (store.delete(key.chunkKey(), force.asBoolean(false))) {
                    case DELETED -> deleted++;
                    case LOCKED -> skipped++;
                    case ABSENT -> { }
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        String error = null;
        if (withL2) {
            try {
                adapter.delete(keys.stream().map(EncodedKey::l2Key).toList());
                deleted += keys.size(); // LMCache counts the whole batch: the adapter skips absent and locked keys itself
            } catch (RuntimeException e) {
                error = e.getClass().getSimpleName() + ": " + LogText.clip(e.getMessage());
                LOG.warn("DELETE /cache/objects: the {} adapter failed: {}", adapter.typeName(), error);
            }
        }
        out.put("deleted", deleted);
        out.put("skipped", skipped);
        out.put("ok", error == null);
        if (error != null) {
            out.put("error", error);
        }
        return HttpApi.Response.json(200, out);
    }

    /** {@code adapter}: a type name, or null/absent for the primary (first configured). */
    private L2Adapter adapter(JsonNode name) {
        if (name.isMissingNode() || name.isNull()) {
            return adapters.getFirst();
        }
        return adapters.stream().filter(a -> a.typeName().equals(name.asText())).findFirst().orElse(null);
    }

    /**
     * The paginated L2 listing (LMCache's {@code ObjectService.list_objects}): only {@code tier=l2}, {@code page_size} 1..5000,
     * the named adapter (default: the first). An adapter that cannot list answers 503 as LMCache's; a token it never gave, 400.
     * Salted objects are listed with their {@code cache_salt}, as LMCache's: the route is the admin's and the coordinator's (who
     * names them to evict them), and it shows names and sizes, never bytes.
     */
    @Override
    public HttpApi.Response list(Map<String, String> query) {
        String tier = query.getOrDefault("tier", "l2");
        if (!tier.equals("l2")) {
            return detail(400, "only tier=l2 can be listed, got " + LogText.clip(tier));
        }
        String pageSize = query.getOrDefault("page_size", "500");
        if (!pageSize.matches("\\d{1,4}") || Integer.parseInt(pageSize) < 1 || Integer.parseInt(pageSize) > MAX_PAGE_SIZE) {
            return detail(400, "page_size must be in 1.." + MAX_PAGE_SIZE);
        }
        if (adapters.isEmpty()) {
            return detail(503, "no L2 adapter is configured");
        }
        L2Adapter adapter = query.containsKey("adapter") && !query.get("adapter").isEmpty() ? adapters.stream()
                .filter(a -> a.typeName().equals(query.get("adapter"))).findFirst().orElse(null) : adapters.getFirst();
        if (adapter == null) {
            return detail(404, "no L2 adapter of type " + LogText.clip(query.get("adapter")));
        }
        String model = query.get("model_name");
        String token = query.get("page_token");
        KeyPage page;
        try {
            page = adapter.listKeys(model == null || model.isEmpty() ? null : model, Integer.parseInt(pageSize),
                    token == null || token.isEmpty() ? null : token);
        } catch (UnsupportedOperationException e) {
            return detail(503, "the " + adapter.typeName() + " adapter cannot list its keys");
        } catch (IllegalArgumentException e) {
            return detail(400, LogText.clip(e.getMessage()));
        } catch (RuntimeException e) {
            LOG.warn("GET /cache/objects: the {} adapter failed to list: {}", adapter.typeName(), LogText.clip(e.toString()));
            return detail(503, "the " + adapter.typeName() + " adapter failed to list: " + LogText.clip(e.getMessage()));
        }
        List<Map<String, Object>> entries = new ArrayList<>(page.entries().size());
        for (KeyPage.Entry entry : page.entries()) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("key", EncodedKey.of(entry.key()).toJson());
            out.put("size_bytes", entry.sizeBytes());
            entries.add(out);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("adapter", adapter.typeName());
        out.put("shared", false);
        out.put("entries", entries);
        out.put("next_page_token", page.nextCursor());
        return HttpApi.Response.json(200, out);
    }

    static HttpApi.Response detail(int status, String message) {
        return HttpApi.Response.json(status, Map.of("detail", message));
    }
}
