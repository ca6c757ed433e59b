package io.lmcache.server.tables;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * A table that outlives requests, keyed by a string from the wire: bounded in entries and in bytes (keys counted, in their
 * {@link WireKey} form, with each value's own estimate), oldest entry first out. Past a cap the oldest entries are evicted and
 * counted ({@link #evictions}), and handed to the caller, who releases what they hold. Insertion order is age order: a
 * {@link #put} of a key present moves it to the young end. Not thread-safe: the owner locks around every call; the gauges
 * ({@link #bytes}, {@link #size}, {@link #evictions}) may be read from any thread.
 *
 * @param <V> the value
 */
public final class BoundedTable<V> {
    /** A map entry's own cost (the entry, its links, the value's holder) beyond key and value. */
    private static final long ENTRY_OVERHEAD_BYTES = 80;

    private record Held<V>(V value, long bytes) {}

    private final String name;
    private final int maxEntries;
    private final long maxBytes;
    private final LinkedHashMap<String, Held<V>> map = new LinkedHashMap<>();
    private final LongAdder evictions = new LongAdder();
    private volatile long bytes;
    private volatile int size;

    public BoundedTable(String name, int maxEntries, long maxBytes) {
        this.name = name;
        this.maxEntries = maxEntries;
        this.maxBytes = maxBytes;
    }

    public String name() {
        return name;
    }

    /**
     * Puts {@code value} (its own heap estimate {@code valueBytes}) under {@code wire}, as the youngest entry; returns the value
     * it replaced, or null. Entries evicted to stay within the caps go into {@code evicted} (never the one just put).
     */
    public V put(String wire, V value, long valueBytes, List<V> evicted) {
        String key = WireKey.of(wire);
        Held<V> old = map.remove(key);
        if (old != null) {
            bytes -= old.bytes();
        }
        long cost = ENTRY_OVERHEAD_BYTES + WireKey.bytes(key) + Math.max(0, valueBytes);
        map.put(key, new Held<>(value, cost));
        bytes += cost;
        for (Iterator<Held<V>> it = map.values().iterator(); (map.size() > maxEntries || bytes > maxBytes) && map.size() > 1; ) {
            Held<V> oldest = it.next();
            it.remove();
            bytes -= oldest.bytes();
            evictions.increment();
            if (evicted != null) {
                evicted.add(oldest.value());
            }
        }
        size = map.size();
        return old == null ? null : old.value();
    }

    public V get(String wire) {
        Held<V> held = map.get(WireKey.of(wire));
        return held == null ? null : held.value();
    }

    public V remove(String wire) {
        Held<V> held = map.remove(WireKey.of(wire));
        if (held == null) {
            return null;
        }
        bytes -= held.bytes();
        size = map.size();
        return held.value();
    }

    /** Replaces the value of a present key in place (its age and cost kept); false when absent. */
    public boolean replace(String wire, V value) {
        String key = WireKey.of(wire);
        Held<V> held = map.get(key);
        if (held == null) {
            return false;
        }
        map.put(key, new Held<>(value, held.bytes()));
        return true;
    }

    /** Predicate over an entry's value for {@link #removeOldestWhile}. */
    @FunctionalInterface
    public interface Test<V> {
        boolean test(V value);
    }

    /** Removes entries from the oldest on while {@code expired} holds (a TTL sweep); the removed go into {@code removed}. */
    public int removeOldestWhile(Test<V> expired, List<V> removed) {
        int count = 0;
        for (Iterator<Held<V>> it = map.values().iterator(); it.hasNext(); ) {
            Held<V> held = it.next();
            if (!expired.test(held.value())) {
                break;
            }
            it.remove();
            bytes -= held.bytes();
            count++;
            if (removed != null) {
                removed.add(held.value());
            }
        }
        size = map.size();
        return count;
    }

    /** Every value, oldest first (a copy: the owner may change the table while using it). */
    public List<V> values() {
        return map.values().stream().map(Held::value).toList();
    }

    /** Entries held now. */
    public int size() {
        return size;
    }

    /** Estimated heap bytes held now (keys, values, entries). */
    public long bytes() {
        return bytes;
    }

    /** Entries evicted so far because a cap was reached. */
    public long evictions() {
        return evictions.sum();
    }

    public int maxEntries() {
        return maxEntries;
    }

    public long maxBytes() {
        return maxBytes;
    }
}
