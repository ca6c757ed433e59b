package io.lmcache.server.storage;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A policy's numbers for {@code /status}: set by the lock holder (release stores, no fence on the
 * hot path), read one at a time without the lock, as {@link StoreCounts} does for the store's sizes.
 * Each policy names its numbers with an enum of its own; {@code /status} shows each under the
 * constant's name in lower case, in declaration order.
 *
 * @param <G> the policy's gauge names
 */
final class PolicyGauges<G extends Enum<G>> {
    private final G[] gauges;
    private final AtomicLongArray values;

    PolicyGauges(Class<G> names) {
        this.gauges = names.getEnumConstants();
        this.values = new AtomicLongArray(gauges.length);
    }

    /** Lock held: sets {@code gauge}. */
    void set(G gauge, long value) {
        values.lazySet(gauge.ordinal(), value);
    }

    Map<String, Object> read(String policy) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("policy", policy);
        for (G gauge : gauges) {
            out.put(gauge.name().toLowerCase(Locale.ROOT), values.get(gauge.ordinal()));
        }
        return out;
    }
}
