package io.lmcache.server.l2;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.Set;

/** The field readers every type's parser shares: each refuses a value of the wrong kind or range with one line, the value clipped. */
public final class SpecFields {
    /** Keys every adapter object may have, whatever its type. */
    public static final Set<String> GENERIC = Set.of("type", "eviction", "persist_enabled", "serde");

    private SpecFields() {}

    /** The {@code "eviction"} object, or null when absent. */
    public static L2AdapterSpec.EvictionSpec eviction(JsonNode node) throws L2SpecException {
        if (node == null || node.isNull()) {
            return null;
        }
        if (!node.isObject()) {
            throw new L2SpecException("\"eviction\" must be an object {\"eviction_policy\": \"LRU\", \"trigger_watermark\": 0.8, \"eviction_ratio\": 0.2}");
        }
        unknownKeys(node, "eviction", Set.of(), Set.of("eviction_policy", "trigger_watermark", "eviction_ratio"));
        String policy = text(node, "eviction_policy", "LRU");
        if (!policy.equals("LRU") && !policy.equals("noop")) {
            throw new L2SpecException("eviction: eviction_policy must be LRU or noop, got '" + L2SpecException.clip(policy) + "'");
        }
        double watermark = number(node, "trigger_watermark", 0.8, Double.MIN_VALUE, 1);
        double ratio = number(node, "eviction_ratio", 0.2, Double.MIN_VALUE, 1);
        return new L2AdapterSpec.EvictionSpec(policy.equals("LRU"), watermark, ratio);
    }

    /** Refuses the first key that is in neither set, {@code what} naming the object. */
    public static void unknownKeys(JsonNode node, String what, Set<String> generic, Set<String> own) throws L2SpecException {
        for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!generic.contains(name) && !own.contains(name)) {
                throw new L2SpecException(what + ": unknown key \"" + L2SpecException.clip(name) + "\"");
            }
        }
    }

    /** No serde wrappers here (LMCache's fp8 and the like). */
    public static void noSerde(JsonNode node) throws L2SpecException {
        if (node.has("serde")) {
            throw new L2SpecException("\"serde\" wrappers are not supported by this server");
        }
    }

    public static String text(JsonNode node, String key, String fallback) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isTextual()) {
            throw new L2SpecException("\"" + key + "\" must be a string, got " + L2SpecException.clip(value));
        }
        return value.asText();
    }

    public static boolean bool(JsonNode node, String key, boolean fallback) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isBoolean()) {
            throw new L2SpecException("\"" + key + "\" must be true or false, got " + L2SpecException.clip(value));
        }
        return value.asBoolean();
    }

    public static long integer(JsonNode node, String key, long fallback, long min, long max) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong() || value.asLong() < min || value.asLong() > max) {
            throw new L2SpecException("\"" + key + "\" must be an integer in " + min + ".." + max + ", got " + L2SpecException.clip(value));
        }
        return value.asLong();
    }

    public static double number(JsonNode node, String key, double fallback, double min, double max) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isNumber() || !(value.asDouble() >= min && value.asDouble() <= max)) {
            throw new L2SpecException("\"" + key + "\" must be a number in [" + (min == Double.MIN_VALUE ? "0 (exclusive)" : min) + ", "
                    + max + "], got " + L2SpecException.clip(value));
        }
        return value.asDouble();
    }
}
