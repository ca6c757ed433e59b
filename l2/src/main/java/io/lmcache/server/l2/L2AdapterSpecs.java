package io.lmcache.server.l2;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Parses and validates {@code --l2-adapter} JSON objects (the registry of adapter types): every
 * rule of hybrid-and-l2.md §B.5–§B.8 (resp and valkey in {@link RedisSpecs}), so a bad value stops the start with one line naming it.
 * Pure: nothing is created or touched on disk here.
 */
public final class L2AdapterSpecs {
    /** The types this server builds. */
    public static final List<String> TYPES = List.of("fs_native", "fault_inject", "resp", "valkey");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long GIB = 1L << 30;
    static final Set<String> GENERIC = Set.of("type", "eviction", "persist_enabled", "serde");
    private static final Set<String> FS_NATIVE = Set.of("base_path", "num_workers", "relative_tmp_dir", "use_odirect", "read_ahead_size",
            "max_capacity_gb", "disk_high_watermark", "disk_min_free_gb", "read_io_depth", "read_max_bytes_in_flight", "shard_directories");
    /** Accepted for compatibility, with a warning that they do nothing here. */
    private static final Set<String> FS_NATIVE_IGNORED = Set.of("read_ahead_size", "disk_high_watermark", "disk_min_free_gb",
            "read_max_bytes_in_flight");
    private static final Set<String> FAULT_INJECT = Set.of("type", "inner", "rate", "seed", "gap_indices", "gap_tail_ratios");

    private L2AdapterSpecs() {}

    /** One adapter's JSON text; {@code resp}'s {@code LMCACHE_RESP_*} variables come from this process's environment. */
    public static L2AdapterSpec parse(String json) throws L2SpecException {
        return parse(json, System.getenv());
    }

    /** One adapter's JSON text, with the environment {@code resp} reads its overrides from. */
    public static L2AdapterSpec parse(String json, Map<String, String> env) throws L2SpecException {
        return parse(tree(json), env);
    }

    /** The JSON with the value of every {@code "password"} key replaced by {@code "<set>"}: what logs and {@code /config} may show. */
    public static String redacted(String json) {
        try {
            JsonNode node = JSON.readTree(json);
            return redact(node) ? JSON.writeValueAsString(node) : json;
        } catch (JacksonException e) {
            return json; // refused by parse before it is ever shown
        }
    }

    /** Whether a password was replaced (the text is then written anew; otherwise it is shown as given). */
    private static boolean redact(JsonNode node) {
        boolean changed = false;
        if (node instanceof ObjectNode object) {
            if (object.has("password") && !object.get("password").asText("").isEmpty()) {
                object.put("password", "<set>");
                changed = true;
            }
            for (JsonNode child : object) {
                changed |= redact(child);
            }
        }
        return changed;
    }

    /** One JSON value and nothing after it: {@code {fs},{resp}} would otherwise be read as its first adapter alone. */
    private static JsonNode tree(String json) throws L2SpecException {
        try (JsonParser parser = JSON.createParser(json)) {
            JsonNode node = JSON.readTree(parser);
            if (node != null && hasMore(parser)) {
                throw new L2SpecException("trailing data after the JSON object (at character " + parser.currentTokenLocation().getCharOffset()
                        + "): give each adapter its own --l2-adapter");
            }
            return node;
        } catch (JacksonException e) {
            throw new L2SpecException("not valid JSON: " + firstLine(e.getOriginalMessage()));
        } catch (IOException e) {
            throw new L2SpecException("not readable as JSON: " + e.getMessage()); // a String source: not expected
        }
    }

    /** Anything but the end after the first value, a separator that cannot start one ({@code ,}) too. */
    private static boolean hasMore(JsonParser parser) throws IOException {
        try {
            return parser.nextToken() != null;
        } catch (JacksonException e) {
            return true;
        }
    }

    private static L2AdapterSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        if (node == null || !node.isObject()) {
            throw new L2SpecException("must be a JSON object with a \"type\", e.g. {\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}");
        }
        JsonNode type = node.get("type");
        if (type == null || !type.isTextual()) {
            throw new L2SpecException("needs a string \"type\" (one of " + String.join(", ", TYPES) + ")");
        }
        return switch (type.asText()) {
            case "fs_native" -> fsNative(node);
            case "fault_inject" -> faultInject(node, env);
            case "resp" -> RedisSpecs.resp(node, env);
            case "valkey" -> RedisSpecs.valkey(node);
            default -> throw new L2SpecException("unknown type '" + L2SpecException.clip(type.asText()) + "' (known: " + String.join(", ", TYPES) + ")");
        };
    }

    private static L2AdapterSpec.FsNative fsNative(JsonNode node) throws L2SpecException {
        unknownKeys(node, "fs_native", GENERIC, FS_NATIVE);
        if (node.has("serde")) {
            throw new L2SpecException("\"serde\" wrappers are not supported by this server");
        }
        if (node.has("shard_directories") && node.get("shard_directories").asBoolean(false)) {
            throw new L2SpecException("fs_native: \"shard_directories\" is not supported by this server");
        }
        JsonNode base = node.get("base_path");
        if (base == null || !base.isTextual() || base.asText().isBlank()) {
            throw new L2SpecException("fs_native: \"base_path\" is required (a directory, created if missing)");
        }
        if (base.asText().indexOf('\0') >= 0) {
            throw new L2SpecException("fs_native: \"base_path\" contains a NUL character");
        }
        int workers = (int) integer(node, "num_workers", 4, 1, 256);
        int readWorkers = (int) integer(node, "read_io_depth", 0, 0, 256);
        String tmpDir = text(node, "relative_tmp_dir", "");
        if (tmpDir.startsWith("/") || List.of(tmpDir.split("/")).contains("..") || tmpDir.indexOf('\0') >= 0) {
            throw new L2SpecException("fs_native: \"relative_tmp_dir\" must be a relative path inside base_path, got '" + L2SpecException.clip(tmpDir) + "'");
        }
        boolean odirect = bool(node, "use_odirect", false);
        double capacityGb = number(node, "max_capacity_gb", 0, 0, 1 << 30);
        boolean persist = bool(node, "persist_enabled", true);
        L2AdapterSpec.EvictionSpec eviction = eviction(node.get("eviction"));
        List<String> warnings = new ArrayList<>();
        for (String ignored : FS_NATIVE_IGNORED) {
            if (node.has(ignored)) {
                warnings.add("fs_native: \"" + ignored + "\" is accepted but has no effect in this server");
            }
        }
        if (capacityGb > 0 && eviction == null) {
            warnings.add("fs_native: max_capacity_gb without an \"eviction\" block only counts bytes; nothing bounds the disk use");
        }
        if (eviction != null && eviction.lru() && capacityGb == 0) {
            warnings.add("fs_native: an \"eviction\" block needs max_capacity_gb > 0 to evict anything");
        }
        return new L2AdapterSpec.FsNative(base.asText(), workers, readWorkers == 0 ? workers : readWorkers, tmpDir, odirect,
                (long) (capacityGb * GIB), persist, eviction, warnings);
    }

    private static L2AdapterSpec.FaultInject faultInject(JsonNode node, Map<String, String> env) throws L2SpecException {
        unknownKeys(node, "fault_inject", Set.of(), FAULT_INJECT);
        JsonNode inner = node.get("inner");
        if (inner == null || !inner.isObject()) {
            throw new L2SpecException("fault_inject: 'inner' must be an adapter spec object with a 'type' field");
        }
        L2AdapterSpec innerSpec;
        try {
            innerSpec = parse(inner, env);
        } catch (L2SpecException e) {
            throw new L2SpecException("fault_inject inner: " + e.getMessage());
        }
        JsonNode rate = node.get("rate");
        if (rate != null && (!rate.isNumber() || !(rate.asDouble() >= 0 && rate.asDouble() <= 1))) {
            throw new L2SpecException("fault_inject: rate must be a number in [0, 1], got " + L2SpecException.clip(rate));
        }
        JsonNode seed = node.get("seed");
        if (seed != null && (!seed.isIntegralNumber() || !seed.canConvertToLong())) {
            throw new L2SpecException("fault_inject: seed must be an integer, got " + L2SpecException.clip(seed));
        }
        List<Integer> gapIndices = new ArrayList<>();
        JsonNode gaps = node.get("gap_indices");
        if (gaps != null) {
            if (!gaps.isArray()) {
                throw new L2SpecException("fault_inject: gap_indices must be a list of non-negative integers, got " + L2SpecException.clip(gaps));
            }
            for (JsonNode gap : gaps) {
                if (!gap.isIntegralNumber() || !gap.canConvertToInt() || gap.asInt() < 0) {
                    throw new L2SpecException("fault_inject: gap_indices must be a list of non-negative integers, got " + L2SpecException.clip(gaps));
                }
                gapIndices.add(gap.asInt());
            }
        }
        List<Double> ratios = new ArrayList<>();
        JsonNode tail = node.get("gap_tail_ratios");
        if (tail != null) {
            if (!tail.isArray()) {
                throw new L2SpecException("fault_inject: gap_tail_ratios must be a list of floats in [0, 1], got " + L2SpecException.clip(tail));
            }
            for (JsonNode ratio : tail) {
                if (!ratio.isNumber() || !(ratio.asDouble() >= 0 && ratio.asDouble() <= 1)) {
                    throw new L2SpecException("fault_inject: gap_tail_ratios must be a list of floats in [0, 1], got " + L2SpecException.clip(tail));
                }
                ratios.add(ratio.asDouble());
            }
        }
        FaultRules rules = new FaultRules(rate == null ? 0.0 : rate.asDouble(), seed == null ? 0 : seed.asLong(), new TreeSet<>(gapIndices),
                ratios);
        return new L2AdapterSpec.FaultInject(innerSpec, rules);
    }

    static L2AdapterSpec.EvictionSpec eviction(JsonNode node) throws L2SpecException {
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

    static void unknownKeys(JsonNode node, String what, Set<String> generic, Set<String> own) throws L2SpecException {
        for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!generic.contains(name) && !own.contains(name)) {
                throw new L2SpecException(what + ": unknown key \"" + L2SpecException.clip(name) + "\"");
            }
        }
    }

    static String text(JsonNode node, String key, String fallback) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isTextual()) {
            throw new L2SpecException("\"" + key + "\" must be a string, got " + L2SpecException.clip(value));
        }
        return value.asText();
    }

    static boolean bool(JsonNode node, String key, boolean fallback) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isBoolean()) {
            throw new L2SpecException("\"" + key + "\" must be true or false, got " + L2SpecException.clip(value));
        }
        return value.asBoolean();
    }

    static long integer(JsonNode node, String key, long fallback, long min, long max) throws L2SpecException {
        JsonNode value = node.get(key);
        if (value == null) {
            return fallback;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong() || value.asLong() < min || value.asLong() > max) {
            throw new L2SpecException("\"" + key + "\" must be an integer in " + min + ".." + max + ", got " + L2SpecException.clip(value));
        }
        return value.asLong();
    }

    static double number(JsonNode node, String key, double fallback, double min, double max) throws L2SpecException {
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

    private static String firstLine(String message) {
        int newline = message == null ? -1 : message.indexOf('\n');
        return message == null ? "" : (newline < 0 ? message : message.substring(0, newline)).strip();
    }
}
