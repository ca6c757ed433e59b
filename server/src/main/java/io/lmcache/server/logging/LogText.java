package io.lmcache.server.logging;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Strings from the wire as they go into a log line: clipped (a 255-byte peer id or a megabyte of
 * model name must not make a line huge) and with control characters replaced (no forged lines).
 */
public final class LogText {
    /** Peer ids, names and other single values from the wire. */
    public static final int MAX_VALUE_CHARS = 64;
    /** A whole message that may quote wire values (a decoder's or a layout check's). */
    public static final int MAX_MESSAGE_CHARS = 300;
    /** Items of one list or map a log line shows. */
    public static final int MAX_LIST_ITEMS = 64;
    /** A line that quotes operator input (a refused start's error, a configuration warning). */
    public static final int MAX_LINE_CHARS = 1000;
    /** A wire or configuration value a status page shows (a model name: long enough for a local path with a snapshot hash). */
    public static final int MAX_STATUS_CHARS = 256;
    private static final HexFormat HEX = HexFormat.of();

    private LogText() {}

    /** {@code value} (its toString) clipped to {@link #MAX_VALUE_CHARS}. */
    public static String clip(Object value) {
        return clip(value, MAX_VALUE_CHARS);
    }

    /** A value for a status page, clipped to {@link #MAX_STATUS_CHARS} (the length said when clipped). */
    public static String status(Object value) {
        return clip(value, MAX_STATUS_CHARS);
    }

    /** A message clipped to {@link #MAX_MESSAGE_CHARS}. */
    public static String message(Object value) {
        return clip(value, MAX_MESSAGE_CHARS);
    }

    /** {@code value} (its toString) clipped to {@code maxChars}, control characters as '?'. */
    public static String clip(Object value, int maxChars) {
        String text = String.valueOf(value);
        int length = text.length();
        int kept = Math.min(length, maxChars);
        StringBuilder out = new StringBuilder(kept + 24);
        for (int i = 0; i < kept; i++) {
            char c = text.charAt(i);
            out.append(Character.isISOControl(c) ? '?' : c);
        }
        if (length > maxChars) {
            out.append("...(").append(length).append(" chars)");
        }
        return out.toString();
    }

    /**
     * A configuration or status tree as a log line shows it: maps and lists kept (at most {@link #MAX_LIST_ITEMS} items each),
     * every other value clipped to {@link #MAX_VALUE_CHARS} (a megabyte given as a flag value must not make the start-up line huge).
     */
    public static Object clipValues(Object value) {
        return clipValues(value, MAX_VALUE_CHARS);
    }

    /** A configuration tree as a status page shows it: as {@link #clipValues(Object)}, every other value clipped to {@link #MAX_STATUS_CHARS}. */
    public static Object statusValues(Object value) {
        return clipValues(value, MAX_STATUS_CHARS);
    }

    private static Object clipValues(Object value, int maxChars) {
        return switch (value) {
            case Map<?, ?> map -> {
                Map<String, Object> out = new LinkedHashMap<>();
                map.entrySet().stream().limit(MAX_LIST_ITEMS).forEach(e -> out.put(clip(e.getKey()), clipValues(e.getValue(), maxChars)));
                if (map.size() > MAX_LIST_ITEMS) {
                    out.put("...", (map.size() - MAX_LIST_ITEMS) + " more");
                }
                yield out;
            }
            case Collection<?> list -> {
                List<Object> out = new ArrayList<>(list.stream().limit(MAX_LIST_ITEMS).map(item -> clipValues(item, maxChars)).toList());
                if (list.size() > MAX_LIST_ITEMS) {
                    out.add("...(" + list.size() + " items)");
                }
                yield out;
            }
            case null -> null;
            case Number number -> number;
            case Boolean bool -> bool;
            default -> clip(value, maxChars);
        };
    }

    /** Binary from the wire, as hex of at most {@link #MAX_VALUE_CHARS} digits. */
    public static String hex(byte[] bytes) {
        if (bytes == null) {
            return "null";
        }
        int kept = Math.min(bytes.length, MAX_VALUE_CHARS / 2);
        String hex = HEX.formatHex(bytes, 0, kept);
        return bytes.length > kept ? hex + "...(" + bytes.length + " bytes)" : hex;
    }

    /** The failure's message (its first line), or its type when it has none; the causes' messages are in it already. */
    public static String oneLine(Throwable failure) {
        String message = failure.getMessage();
        if (message == null || message.isBlank()) {
            Throwable cause = failure.getCause();
            return cause != null && cause != failure ? oneLine(cause) : failure.getClass().getSimpleName();
        }
        return message.strip().lines().findFirst().orElse("").strip();
    }
}
