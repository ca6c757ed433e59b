package io.lmcache.server.metrics;

import java.util.List;

/**
 * What a catalogue entry declares of one meter (Aeron's {@code SystemCounterDescriptor}): its name as LMCache's exporter
 * spells it with dots ({@code lmcache_mp.l1_write_chunks}; Prometheus writes {@code lmcache_mp_l1_write_chunks_total}), its
 * help text, its type, the base unit a distribution summary appends to its name, and its label keys in the order a meter's
 * label values are given. The common {@code service_instance_id} is not one of them (the registry adds it to every series).
 *
 * @param name the dotted name, starting with {@code lmcache_mp.}
 * @param help the {@code # HELP} text
 * @param type what kind of meter the server makes of it
 * @param baseUnit a summary's unit ({@code chunks}), "" for none
 * @param labels the label keys; a meter gives one value for each, in this order
 */
public record MeterSpec(String name, String help, Type type, String baseUnit, List<String> labels) {
    /** The meter types the server makes. */
    public enum Type {
        COUNTER, GAUGE, TIMER, SUMMARY
    }

    private static final String PREFIX = "lmcache_mp.";

    public MeterSpec {
        if (!name.startsWith(PREFIX)) {
            throw new IllegalArgumentException("a metric name starts with " + PREFIX + ": " + name);
        }
        labels = List.copyOf(labels);
    }

    static MeterSpec counter(String name, String help, String... labels) {
        return new MeterSpec(name, help, Type.COUNTER, "", List.of(labels));
    }

    static MeterSpec gauge(String name, String help, String... labels) {
        return new MeterSpec(name, help, Type.GAUGE, "", List.of(labels));
    }

    static MeterSpec timer(String name, String help, String... labels) {
        return new MeterSpec(name, help, Type.TIMER, "", List.of(labels));
    }

    static MeterSpec summary(String name, String help, String baseUnit, String... labels) {
        return new MeterSpec(name, help, Type.SUMMARY, baseUnit, List.of(labels));
    }

    /** The name as the scrape writes it before any suffix: dots to underscores. */
    public String prometheusName() {
        return name.replace('.', '_');
    }

    /**
     * Micrometer's tags of a meter of this spec of {@code type}: the keys paired with {@code values}; a wrong type or a wrong
     * number of values is a programming error, refused.
     */
    String[] tags(Type expected, String... values) {
        if (type != expected) {
            throw new IllegalArgumentException(name + " is a " + type + ", not a " + expected);
        }
        if (values.length != labels.size()) {
            throw new IllegalArgumentException(name + " takes the labels " + labels + ", given " + values.length + " values");
        }
        String[] tags = new String[2 * values.length];
        for (int i = 0; i < values.length; i++) {
            tags[2 * i] = labels.get(i);
            tags[2 * i + 1] = values[i];
        }
        return tags;
    }
}
