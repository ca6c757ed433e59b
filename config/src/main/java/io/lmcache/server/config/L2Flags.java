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

    static L2Settings validate(List<String> adapters, String storePolicy, String prefetchPolicy, int maxInFlight, long loadTimeoutNs,
            L2AdmissionSettings admission) throws ConfigException {
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
                maxInFlight, store.equals("full_attention_only"), loadTimeoutNs, admission);
    }

    /** {@code --l2-admission} ({@code all} or {@code frequency:N}) and {@code --l2-write-budget-bytes-per-second} (0: none). */
    static L2AdmissionSettings admission(String policy, String budget) throws ConfigException {
        String value = policy == null ? "all" : policy.strip();
        int minSightings;
        if (value.equals("all")) {
            minSightings = 1;
        } else if (value.startsWith("frequency:")) {
            minSightings = parseIntOr(value.substring("frequency:".length()), -1);
            if (minSightings < 2 || minSightings > L2AdmissionSettings.MAX_SIGHTINGS) {
                throw new ConfigException("--l2-admission", "frequency:N needs N in 2.." + L2AdmissionSettings.MAX_SIGHTINGS + ", got '"
                        + shown(policy) + "'");
            }
        } else {
            throw new ConfigException("--l2-admission", "must be all or frequency:N, got '" + shown(policy) + "'");
        }
        long bytesPerSecond = budget == null ? 0 : parseLongOr(budget.strip(), -1);
        if (bytesPerSecond < 0) {
            throw new ConfigException("--l2-write-budget-bytes-per-second", "must be a whole number of bytes >= 0, got '"
                    + shown(budget) + "'");
        }
        return new L2AdmissionSettings(minSightings, bytesPerSecond);
    }

    /** An operator's value echoed in a refusal, clipped (a flag's value may be anything). */
    private static String shown(String text) {
        return text == null || text.length() <= 64 ? String.valueOf(text) : text.substring(0, 64) + "...";
    }

    private static int parseIntOr(String text, int fallback) {
        try {
            return Integer.parseInt(text);
        } catch (NumberFormatException e) {
            return fallback;
        }
    }

    private static long parseLongOr(String text, long fallback) {
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            return fallback;
        }
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
