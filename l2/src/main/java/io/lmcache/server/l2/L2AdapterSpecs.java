package io.lmcache.server.l2;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * Parses {@code --l2-adapter} JSON text: one JSON object and nothing after it, handed to the {@link L2AdapterType} its
 * {@code type} names ({@link L2AdapterTypes}), which checks every rule of hybrid-and-l2.md §B.5–§B.8, so a bad value stops the
 * start with one line naming it. Pure: nothing is created or touched on disk here.
 */
public final class L2AdapterSpecs {
    /** The types this server builds, in the registry's order. */
    public static final List<String> TYPES = L2AdapterTypes.names();
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Values no log line or {@code /config} shows: resp/valkey's password, s3's secret access key. */
    private static final List<String> SECRET_KEYS = List.of("password", "aws_secret_access_key");

    private L2AdapterSpecs() {}

    /** One adapter's JSON text; {@code resp}'s {@code LMCACHE_RESP_*} variables come from this process's environment. */
    public static L2AdapterSpec parse(String json) throws L2SpecException {
        return parse(json, System.getenv());
    }

    /** One adapter's JSON text, with the environment {@code resp} reads its overrides from. */
    public static L2AdapterSpec parse(String json, Map<String, String> env) throws L2SpecException {
        return parse(tree(json), env);
    }

    /** The JSON with the value of every secret key ({@link #SECRET_KEYS}) replaced by {@code "<set>"}: what logs and {@code /config} may show. */
    public static String redacted(String json) {
        try {
            JsonNode node = JSON.readTree(json);
            return redact(node) ? JSON.writeValueAsString(node) : json;
        } catch (JacksonException e) {
            return json; // refused by parse before it is ever shown
        }
    }

    /** Whether a password or secret key was replaced (the text is then written anew; otherwise it is shown as given). */
    private static boolean redact(JsonNode node) {
        boolean changed = false;
        if (node instanceof ObjectNode object) {
            for (String secret : SECRET_KEYS) {
                if (object.has(secret) && !object.get(secret).asText("").isEmpty()) {
                    object.put(secret, "<set>");
                    changed = true;
                }
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

    /** One adapter object already read (a decorator's inner one too), handed to the type its {@code type} names. */
    public static L2AdapterSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        if (node == null || !node.isObject()) {
            throw new L2SpecException("must be a JSON object with a \"type\", e.g. {\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}");
        }
        JsonNode type = node.get("type");
        if (type == null || !type.isTextual()) {
            throw new L2SpecException("needs a string \"type\" (one of " + String.join(", ", TYPES) + ")");
        }
        L2AdapterType adapterType = L2AdapterTypes.find(type.asText());
        if (adapterType == null) {
            throw new L2SpecException("unknown type '" + L2SpecException.clip(type.asText()) + "' (known: " + String.join(", ", TYPES) + ")");
        }
        return adapterType.parse(node, env);
    }

    private static String firstLine(String message) {
        int newline = message == null ? -1 : message.indexOf('\n');
        return message == null ? "" : (newline < 0 ? message : message.substring(0, newline)).strip();
    }
}
