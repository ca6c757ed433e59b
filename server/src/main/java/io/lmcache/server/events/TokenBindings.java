package io.lmcache.server.events;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a chunk's hash stands for (LMCache's binding LRU of 65 536 entries, kv-events.md §6): its tokens and its parent, kept
 * from the STORE that wrote it so that the L2 write that follows can be announced with them. Bounded: the oldest binding goes
 * first. Used only with an L2 tier; any thread.
 */
final class TokenBindings {
    static final int CAPACITY = 65_536;

    /**
     * Chunk {@code chunk} of the STORE's tokens and hash chain (its own arrays, shared, never written); {@code tokens} null for a
     * salted or tagged request's chunk, announced by hash only.
     */
    record Binding(int[] tokens, byte[] chain, int chunk) {}

    /** A chunk of a model by its hash's first 16 bytes: what the L2 keys carry today (they are all 32 bytes apart from that). */
    private record Key(String model, long hashHi, long hashLo) {}

    private final ConcurrentHashMap<Key, Binding> bindings = new ConcurrentHashMap<>();
    private final ArrayBlockingQueue<Key> order = new ArrayBlockingQueue<>(CAPACITY);

    void bind(String model, long hashHi, long hashLo, Binding binding) {
        Key key = new Key(model, hashHi, hashLo);
        if (bindings.put(key, binding) != null) {
            return;
        }
        while (!order.offer(key)) {
            Key oldest = order.poll();
            if (oldest != null) {
                bindings.remove(oldest);
            }
        }
    }

    Binding get(String model, long hashHi, long hashLo) {
        return bindings.get(new Key(model, hashHi, hashLo));
    }

    int size() {
        return bindings.size();
    }
}
