package io.lmcache.server.events;

import java.util.Arrays;
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
     * A chunk's tokens ({@code null} for a salted or tagged request's chunk, announced by hash only) and a hash chain of its
     * parent's hash and its own ({@code chunk} 1) or its own alone ({@code chunk} 0, a sequence's first chunk).
     */
    record Binding(int[] tokens, byte[] chain, int chunk) {
        /**
         * Chunk {@code chunk}'s own part of a STORE: its tokens and its and its parent's hashes, copied, so a binding holds about
         * a chunk's bytes, never the request's whole prompt (every key carries all of it): the table is bounded in bytes.
         */
        static Binding of(int[] tokens, byte[] chain, int chunk, int chunkSize) {
            int first = Math.max(0, chunk - 1);
            byte[] own = Arrays.copyOfRange(chain, 32 * first, 32 * (chunk + 1));
            int[] chunkTokens = tokens == null ? null : Arrays.copyOfRange(tokens, chunk * chunkSize, (chunk + 1) * chunkSize);
            return new Binding(chunkTokens, own, chunk - first);
        }
    }

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
