package io.lmcache.server.module;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.PendingFills;
import io.lmcache.server.storage.PrefixKeys;
import io.lmcache.server.transfer.LookupGeometry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A LOOKUP of a model with several object groups or windows (hybrid-and-l2.md §A.5): reads which
 * chunks each group has, folds them into the hit ({@link LookupFold}), then read-locks exactly the
 * retained objects. A retained object evicted between the two steps is a hole: the locks taken are
 * given back and the fold runs again without it, so the hit shrinks cleanly. Chunks being written count
 * as present and are watched in {@code fills} (the caller looks again when their writes end).
 */
final class WindowedLookup {
    /** The locks a lookup took, lock {@code i} on chunk {@code chunks[i]} of kv rank {@code ranks[i]}. */
    record Locked(int hits, List<ObjectStore.ReadLock> locks, int[] chunks, int[] ranks) {}

    private WindowedLookup() {}

    /** @param hashes the hashes of chunks {@code [0, chunks)} */
    static Locked lookup(ObjectStore store, CacheKey key, LookupGeometry geometry, byte[] hashes, int chunks, int readers,
            PendingFills fills) {
        int worldSize = key.worldSize();
        boolean[][] present = new boolean[geometry.groups()][chunks];
        for (int g = 0; g < geometry.groups(); g++) {
            if (LookupFold.keeps(geometry, g)) {
                store.presence(new PrefixKeys(key.modelName(), key.cacheSalt(), key.tags(), worldSize, g, hashes), 0, chunks, present[g], fills);
            }
        }
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        while (true) {
            int hit = LookupFold.largestPrefix(geometry, present, chunks);
            locks.clear();
            int[] lockChunks = new int[0];
            int hole = -1;
            int holeGroup = -1;
            for (int g = 0; g < geometry.groups() && hole < 0 && hit > 0; g++) {
                if (!LookupFold.keeps(geometry, g)) {
                    continue;
                }
                int from = LookupFold.firstKept(geometry, g, hit);
                int before = locks.size();
                int found = store.lookupAndLock(new PrefixKeys(key.modelName(), key.cacheSalt(), key.tags(), worldSize, g, hashes), from, hit, readers, locks,
                        fills);
                lockChunks = appendChunks(lockChunks, from, (locks.size() - before) / Math.max(1, worldSize), worldSize);
                if (found < hit - from) {
                    hole = from + found;
                    holeGroup = g;
                }
            }
            if (hole < 0) {
                return new Locked(hit, locks, lockChunks, ranks(lockChunks.length, worldSize));
            }
            // evicted since the presence pass: give the locks back and fold again without that chunk
            for (ObjectStore.ReadLock lock : locks) {
                store.releaseRead(lock, readers);
            }
            present[holeGroup][hole] = false;
        }
    }

    private static int[] appendChunks(int[] chunks, int from, int count, int worldSize) {
        int[] out = Arrays.copyOf(chunks, chunks.length + count * worldSize);
        for (int c = 0; c < count; c++) {
            Arrays.fill(out, chunks.length + c * worldSize, chunks.length + (c + 1) * worldSize, from + c);
        }
        return out;
    }

    /** {@code lookupAndLock} locks a chunk's ranks in order, so lock {@code i}'s rank is {@code i % worldSize}. */
    private static int[] ranks(int count, int worldSize) {
        int[] ranks = new int[count];
        for (int i = 0; i < count; i++) {
            ranks[i] = i % worldSize;
        }
        return ranks;
    }
}
