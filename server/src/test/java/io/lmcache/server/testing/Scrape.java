package io.lmcache.server.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * One Prometheus text scrape, parsed into samples: a name, its labels and a value. Enough of the
 * 0.0.4 text format for what this server writes (comments skipped, quoted label values with
 * escapes, NaN and infinities).
 */
public record Scrape(List<Sample> samples) {
    /** One line of the scrape. */
    public record Sample(String name, Map<String, String> labels, double value) {}

    public static Scrape parse(String text) {
        List<Sample> samples = new ArrayList<>();
        for (String line : text.lines().toList()) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int brace = line.indexOf('{');
            int space = line.indexOf(' ');
            String name;
            Map<String, String> labels = new TreeMap<>();
            String rest;
            if (brace >= 0 && brace < space) {
                name = line.substring(0, brace);
                int end = parseLabels(line, brace + 1, labels);
                rest = line.substring(end + 1).strip();
            } else {
                name = line.substring(0, space);
                rest = line.substring(space + 1).strip();
            }
            String value = rest.split("\\s+")[0];
            samples.add(new Sample(name, labels, switch (value) {
                case "NaN" -> Double.NaN;
                case "+Inf" -> Double.POSITIVE_INFINITY;
                case "-Inf" -> Double.NEGATIVE_INFINITY;
                default -> Double.parseDouble(value);
            }));
        }
        return new Scrape(List.copyOf(samples));
    }

    /** Parses {@code k="v",...} from {@code from}; returns the index of the closing brace. */
    private static int parseLabels(String line, int from, Map<String, String> labels) {
        int i = from;
        while (line.charAt(i) != '}') {
            int eq = line.indexOf('=', i);
            String key = line.substring(i, eq).strip();
            StringBuilder value = new StringBuilder();
            int j = eq + 2;
            while (line.charAt(j) != '"') {
                char c = line.charAt(j);
                if (c == '\\') {
                    char next = line.charAt(++j);
                    value.append(next == 'n' ? '\n' : next);
                } else {
                    value.append(c);
                }
                j++;
            }
            labels.put(key, value.toString());
            i = j + 1;
            if (line.charAt(i) == ',') {
                i++;
            }
        }
        return i;
    }

    /** The distinct metric names. */
    public List<String> names() {
        return samples.stream().map(Sample::name).distinct().sorted().toList();
    }
}
