package io.lmcache.server.storage;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A policy's numbers for {@code /status}: set by the lock holder (release stores, no fence on the
 * hot path), read one at a time without the lock, as {@link StoreCounts} does for the store's sizes.
 */
final class PolicyGauges {
    private final String[] names;
    private final AtomicLongArray values;

    PolicyGauges(String... names) {
        this.names = names.clone();
        this.values = new AtomicLongArray(names.length);
    }

    /** Lock held: sets the {@code index}-th number (in the order the names were given). */
    void set(int index, long value) {
        values.lazySet(index, value);
    }

    Map<String, Object> read(String policy) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("policy", policy);
        for (int i = 0; i < names.length; i++) {
            out.put(names[i], values.get(i));
        }
        return out;
    }
}
