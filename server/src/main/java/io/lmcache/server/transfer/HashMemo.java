package io.lmcache.server.transfer;

import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.storage.ChunkHash;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * The chunk-hash chains of recent keys, so that one prompt is hashed once, not once per request about it: vLLM's scheduler
 * asks LOOKUP again for a waiting request at every step, then RETRIEVEs the same prefix and STOREs what follows it, and
 * with tensor parallelism every rank's RETRIEVE and STORE carries the same tokens. A chunk's hash depends only on the
 * tokens up to its end, the chunk size and the chain ({@code --hash-algorithm}), so any earlier key whose tokens agree on
 * whole leading chunks gives their hashes. Hashing was most of a long prompt's planning (34 816 tokens: ~370 µs of a
 * Qwen-like RETRIEVE's ~560 µs plan on the H200, bench/RESULTS.md#gpu-hybrid-models); comparing and copying the same tokens costs a few µs.
 *
 * <p>Direct-mapped and lock-free: {@link #SLOTS} slots indexed by a fingerprint of the first chunk's tokens; a newer chain
 * replaces the slot's. Each entry covers at most {@link #MAX_TOKENS} tokens (at most ~17 MiB in all) and holds its own copy
 * of them, so no later write to a request's array can make it lie, unless the array is one the decoder shares between the
 * requests of the same token ids ({@link RequestDecoder#sharesTokenIds}), read-only by that contract: then the entry keeps
 * it by reference and a later request holding the same array matches by identity, without comparing its tokens (a
 * Qwen-like prompt's 139 KiB, twice per request: once to reuse, once to remember).
 */
final class HashMemo {
    static final int SLOTS = 64;
    static final int MAX_TOKENS = 1 << 16;

    /** One chain: {@code tokens} (at least its {@code chunks} whole chunks) and their hashes, for one chain instance and chunk size. */
    private record Entry(Object chain, int chunkSize, int[] tokens, int chunks, byte[] hashes) {}

    private final AtomicReferenceArray<Entry> slots = new AtomicReferenceArray<>(SLOTS);
    private final LongAdder reusedChunks = new LongAdder();

    /**
     * Copies into {@code hashes} the hashes of chunks {@code [fromChunk, c)} a remembered chain of the same tokens has, where
     * {@code c <= toChunk} is as far as its tokens agree with {@code tokens}; returns {@code c}, or {@code fromChunk} when no
     * chain helps. {@code hashes} holds chunks {@code 0..fromChunk-1} already.
     */
    int reuse(Object chain, int[] tokens, int chunkSize, int fromChunk, int toChunk, byte[] hashes) {
        if (toChunk <= fromChunk || tokens.length < chunkSize) {
            return fromChunk;
        }
        Entry entry = slots.get(slot(tokens, chunkSize));
        if (entry == null || entry.chain != chain || entry.chunkSize != chunkSize || entry.chunks <= fromChunk) {
            return fromChunk;
        }
        int common = commonChunks(entry, tokens, Math.min(toChunk, entry.chunks));
        if (common <= fromChunk) {
            return fromChunk;
        }
        System.arraycopy(entry.hashes, ChunkHash.BYTES * fromChunk, hashes, ChunkHash.BYTES * fromChunk, ChunkHash.BYTES * (common - fromChunk));
        reusedChunks.add(common - fromChunk);
        return common;
    }

    /** Remembers chunks {@code 0..chunks-1} of {@code tokens} and their {@code hashes} (at most {@link #MAX_TOKENS} tokens). */
    void remember(Object chain, int[] tokens, int chunkSize, int chunks, byte[] hashes) {
        int kept = Math.min(chunks, MAX_TOKENS / chunkSize);
        if (kept <= 0 || tokens.length < chunkSize) {
            return;
        }
        int slot = slot(tokens, chunkSize);
        Entry old = slots.get(slot);
        if (old != null && old.chain == chain && old.chunkSize == chunkSize && old.chunks >= kept && commonChunks(old, tokens, kept) == kept) {
            return; // it knows this chain as far already: no copy
        }
        int[] own = RequestDecoder.sharesTokenIds(tokens) ? tokens : Arrays.copyOf(tokens, kept * chunkSize);
        slots.set(slot, new Entry(chain, chunkSize, own, kept, Arrays.copyOf(hashes, ChunkHash.BYTES * kept)));
    }

    /** How many of the first {@code chunks} chunks of {@code entry} {@code tokens} has the same: all of them for the entry's own array. */
    private static int commonChunks(Entry entry, int[] tokens, int chunks) {
        if (entry.tokens == tokens) {
            return chunks;
        }
        int limit = chunks * entry.chunkSize;
        int differ = Arrays.mismatch(entry.tokens, 0, limit, tokens, 0, limit);
        return (differ < 0 ? limit : differ) / entry.chunkSize;
    }

    /** Chunk hashes taken from the memo instead of computed, since start. */
    long reusedChunks() {
        return reusedChunks.sum();
    }

    /** The slot of a chain: a fingerprint of its first chunk's tokens and the chunk size. */
    private static int slot(int[] tokens, int chunkSize) {
        int h = chunkSize;
        for (int i = 0; i < chunkSize; i++) {
            h = 31 * h + tokens[i];
        }
        h ^= h >>> 16;
        return h & (SLOTS - 1);
    }
}
