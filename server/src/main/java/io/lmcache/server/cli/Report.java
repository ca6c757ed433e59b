package io.lmcache.server.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * What {@code lmcache ping} and {@code lmcache describe} print, as LMCache's CLI prints it: a title
 * bar, optional section headers and {@code Label: value} lines, right-aligned to a width
 * ({@code --format terminal}), or the same entries as JSON ({@code --format json}).
 */
final class Report {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    /** One line: its key (JSON), label (terminal) and value (null prints as N/A). */
    record Entry(String key, String label, Object value) {}

    /** A section: unnamed (the first) or with a header. */
    record Section(String key, String label, List<Entry> entries) {}

    private final String title;
    private final int width;
    private final List<Section> sections = new ArrayList<>();

    Report(String title, int width) {
        this.title = title;
        this.width = width;
        sections.add(new Section("", null, new ArrayList<>()));
    }

    Report add(String key, String label, Object value) {
        sections.getLast().entries().add(new Entry(key, label, value));
        return this;
    }

    Report section(String key, String label) {
        sections.add(new Section(key, label, new ArrayList<>()));
        return this;
    }

    String render(String format) {
        return switch (format.toLowerCase(Locale.ROOT)) {
            case "json" -> json();
            case "terminal" -> terminal();
            default -> throw new IllegalArgumentException("--format must be terminal or json, got '" + format + "'");
        };
    }

    private String terminal() {
        StringBuilder out = new StringBuilder(center(" " + title + " ", '=')).append('\n');
        for (Section section : sections) {
            if (section.label() != null) {
                out.append(center(" " + section.label() + " ", '-')).append('\n');
            }
            for (Entry entry : section.entries()) {
                String value = format(entry.value());
                String label = entry.label() + ":";
                out.append(label).append(" ".repeat(Math.max(1, width - label.length() - value.length()))).append(value).append('\n');
            }
        }
        return out.append("=".repeat(width)).append('\n').toString();
    }

    private String json() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("title", title);
        Map<String, Object> metrics = new LinkedHashMap<>();
        for (Section section : sections) {
            Map<String, Object> entries = new LinkedHashMap<>();
            section.entries().forEach(entry -> entries.put(entry.key(), entry.value()));
            if (section.label() == null) {
                metrics.putAll(entries);
            } else {
                metrics.put(section.key(), entries);
            }
        }
        out.put("metrics", metrics);
        try {
            return JSON.writeValueAsString(out) + "\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private String center(String text, char fill) {
        int left = Math.max(0, (width - text.length()) / 2);
        int right = Math.max(0, width - text.length() - left);
        return String.valueOf(fill).repeat(left) + text + String.valueOf(fill).repeat(right);
    }

    private static String format(Object value) {
        if (value == null) {
            return "N/A";
        }
        if (value instanceof Double || value instanceof Float) {
            return String.format(Locale.ROOT, "%.2f", ((Number) value).doubleValue());
        }
        return String.valueOf(value);
    }
}
