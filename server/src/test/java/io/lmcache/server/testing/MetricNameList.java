package io.lmcache.server.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * testdata/lmcache-metric-names.txt: the series LMCache's MP server exports and its dashboard queries,
 * each required here (with its type and labels) or exempt with a reason. {@link #problems} says what a
 * scrape lacks, and which exemption has become stale because the series is exported now.
 */
public record MetricNameList(List<Entry> entries) {
    private static final Pattern METRIC = Pattern.compile("\\b((?:lmcache|grpc)_[A-Za-z0-9_]+|target_info)\\b");

    /** One line: a required series ({@code exempt} null) or an exempt name or {@code prefix*}. */
    public record Entry(String name, String type, List<String> labels, String exempt) {
        boolean matches(String metric) {
            if (name.endsWith("*")) {
                return metric.startsWith(name.substring(0, name.length() - 1));
            }
            // an exempt name may be a histogram too (the dashboard queries its _sum and _count)
            boolean histogram = exempt != null || type.equals("histogram");
            return metric.equals(name) || histogram && List.of(name + "_bucket", name + "_count", name + "_sum").contains(metric);
        }
    }

    public static MetricNameList read(Path file) throws IOException {
        List<Entry> entries = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int exempt = line.indexOf(" exempt: ");
            if (exempt >= 0) {
                entries.add(new Entry(line.substring(0, exempt).strip(), "", List.of(), line.substring(exempt + " exempt: ".length()).strip()));
                continue;
            }
            String[] parts = line.strip().split("\\s+");
            if (parts.length < 2 || !Set.of("counter", "fault-counter", "gauge", "histogram").contains(parts[1])) {
                throw new IllegalArgumentException("not 'name type [labels]' or 'name exempt: reason': " + line);
            }
            entries.add(new Entry(parts[0], parts[1], parts.length > 2 ? Arrays.asList(parts[2].split(",")) : List.of(), null));
        }
        return new MetricNameList(List.copyOf(entries));
    }

    /** What the scrape lacks (a series, one of a histogram's parts, a label) and the exemptions it proves stale; empty: all well. */
    public List<String> problems(Scrape scrape) {
        List<String> problems = new ArrayList<>();
        for (Entry entry : entries) {
            if (entry.exempt() != null) {
                scrape.names().stream().filter(entry::matches).findFirst()
                        .ifPresent(n -> problems.add(n + " is exported now: drop its exemption (" + entry.exempt() + ")"));
                continue;
            }
            List<String> parts = entry.type().equals("histogram") ? List.of("_bucket", "_count", "_sum") : List.of("");
            for (String part : parts) {
                List<Scrape.Sample> samples = scrape.samples().stream().filter(s -> s.name().equals(entry.name() + part)).toList();
                if (samples.isEmpty() && entry.type().equals("fault-counter")) {
                    continue;
                }
                if (samples.isEmpty()) {
                    problems.add(entry.name() + part + " (" + entry.type() + ") is not exported");
                    continue;
                }
                for (String label : entry.labels()) {
                    if (samples.stream().noneMatch(s -> s.labels().containsKey(label))) {
                        problems.add(entry.name() + part + " has no label " + label);
                    }
                }
            }
        }
        return problems;
    }

    /**
     * The fault counters' Micrometer names ({@code lmcache_mp_l1_read_failure_chunks_total}: {@code lmcache_mp.l1_read_failure_chunks}):
     * their series appear at the first fault, as LMCache's do, so healthy traffic cannot show them; the name in the sources must.
     */
    public List<String> faultCounterSourceNames() {
        return entries.stream().filter(e -> e.type().equals("fault-counter"))
                .map(e -> "lmcache_mp." + e.name().substring("lmcache_mp_".length(), e.name().length() - "_total".length())).toList();
    }

    /** The metric names in {@code queries} (PromQL) that no entry names. */
    public Set<String> unlisted(List<String> queries) {
        Set<String> unlisted = new TreeSet<>();
        for (String query : queries) {
            Matcher matcher = METRIC.matcher(query);
            while (matcher.find()) {
                String metric = matcher.group(1);
                if (entries.stream().noneMatch(e -> e.matches(metric))) {
                    unlisted.add(metric);
                }
            }
        }
        return unlisted;
    }
}
