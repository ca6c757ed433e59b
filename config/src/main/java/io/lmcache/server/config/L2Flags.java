package io.lmcache.server.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2SpecException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The L2 flags' rules: each {@code --l2-adapter} parsed by the adapter registry, refused as {@code --l2-adapter #i: ...}. */
final class L2Flags {
    private static final ObjectMapper JSON = new ObjectMapper();

    private L2Flags() {}

    /** The longest {@code --l2-prefetch-load-timeout} taken (a day; LMCache sets no bound, nanoseconds do). */
    static final double MAX_LOAD_TIMEOUT_SECONDS = 86_400;

    static L2Settings validate(List<String> adapters, String storePolicy, String prefetchPolicy, int maxInFlight, long loadTimeoutNs)
            throws ConfigException {
        List<String> json = adapters == null ? List.of() : adapters;
        List<L2AdapterSpec> specs = new ArrayList<>();
        for (int i = 0; i < json.size(); i++) {
            try {
                specs.add(L2AdapterSpecs.parse(json.get(i)));
            } catch (L2SpecException e) {
                throw new ConfigException("--l2-adapter #" + i, e.getMessage());
            }
        }
        String store = storePolicy.strip();
        if (!store.equals("default") && !store.equals("skip_l1") && !store.equals("full_attention_only")) {
            throw new ConfigException("--l2-store-policy", "must be default, skip_l1 or full_attention_only, got '" + storePolicy + "'");
        }
        String prefetch = prefetchPolicy.strip();
        if (!prefetch.equals("default") && !prefetch.equals("retain")) {
            throw new ConfigException("--l2-prefetch-policy", "must be default or retain, got '" + prefetchPolicy + "'");
        }
        // /config and the start-up log show the adapters' JSON: never a resp/valkey password
        return new L2Settings(json.stream().map(L2AdapterSpecs::redacted).toList(), specs, store.equals("skip_l1"), prefetch.equals("retain"),
                maxInFlight, store.equals("full_attention_only"), loadTimeoutNs);
    }

    /** {@code --l2-prefetch-load-timeout}: seconds, finite and positive as LMCache requires; absent = this server's default. */
    static long loadTimeoutNs(String seconds) throws ConfigException {
        if (seconds == null) {
            return L2Settings.DEFAULT_PREFETCH_LOAD_TIMEOUT_NS;
        }
        double value;
        try {
            value = Double.parseDouble(seconds.strip());
        } catch (NumberFormatException e) {
            value = Double.NaN;
        }
        if (!Double.isFinite(value) || value <= 0 || value > MAX_LOAD_TIMEOUT_SECONDS) {
            throw new ConfigException("--l2-prefetch-load-timeout", "must be a finite positive number of seconds up to "
                    + (long) MAX_LOAD_TIMEOUT_SECONDS + ", got '" + seconds + "'");
        }
        return Math.max(1, (long) (value * 1e9));
    }

    /** A TOML {@code l2_adapter}: a JSON string, an inline table, or an array of those, each one adapter. */
    static void fromToml(Object value, List<String> out) throws ConfigException {
        if (value instanceof List<?> list) {
            for (Object item : list) {
                fromToml(item, out);
            }
        } else if (value instanceof String text) {
            out.add(text);
        } else if (value instanceof Map<?, ?> table) {
            try {
                out.add(JSON.writeValueAsString(table));
            } catch (JsonProcessingException e) {
                throw new ConfigException("--config-file", "l2_adapter: " + e.getOriginalMessage());
            }
        } else {
            throw new ConfigException("--config-file", "l2_adapter must be a JSON string, a table, or an array of them, got " + value);
        }
    }
}
