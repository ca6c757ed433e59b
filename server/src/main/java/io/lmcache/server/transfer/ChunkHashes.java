package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.storage.ChunkHash;
import java.util.function.Supplier;

/**
 * The prefix-chained hashes of a key's chunks, LMCache's {@code TokenHasher} chain for
 * {@code --hash-algorithm} ({@link TokenHashChain}): a flyweight over one {@code byte[]}, 32 bytes per
 * chunk, read per chunk with {@link #hash}. The static methods keep the raw form for the lookup path,
 * which hashes only as far as the cache holds the prefix ({@link #extend}), with one chain instance
 * per thread and no allocation per chunk. A STORE's hashes are {@linkplain #deferred deferred}: each chunk is hashed when its
 * copy is planned, so the hashing of the later chunks overlaps the copies of the earlier ones.
 */
public final class ChunkHashes {
    /** The process's chain, one instance per thread (a chain keeps its digest and buffer). */
    private record Chains(String name, ThreadLocal<TokenHashChain> perThread) {}

    private static volatile Chains chains = chains(TokenHashChain::blake3);
    /** Recent keys' chains: a prompt is hashed once, not once per LOOKUP, RETRIEVE, STORE and rank ({@link HashMemo}). */
    private static final HashMemo MEMO = new HashMemo();

    private final byte[] hashes;
    private final int endChunk;
    /** Null once every chunk is hashed; else the deferred key, its chunk size and the chain it started with. */
    private CacheKey pendingKey;
    private int chunkSize;
    private Chains pendingChains;
    /** Chunks {@code 0..hashedTo-1} are in {@link #hashes}; written under this object's lock, read without it. */
    private volatile int hashedTo;

    private ChunkHashes(byte[] hashes, int endChunk) {
        this.hashes = hashes;
        this.endChunk = endChunk;
        this.hashedTo = endChunk;
    }

    private static Chains chains(Supplier<TokenHashChain> factory) {
        return new Chains(factory.get().name(), ThreadLocal.withInitial(factory));
    }

    /**
     * The chain every key of this process is hashed with ({@code --hash-algorithm}); set once at start, before traffic
     * (LMCache's default blake3 until then).
     */
    public static void use(Supplier<TokenHashChain> factory) {
        chains = chains(factory);
    }

    /** The chain's {@code --hash-algorithm} name. */
    public static String algorithm() {
        return chains.name();
    }

    /** The hashes of chunks {@code 0..endChunk-1} of a key. */
    public static ChunkHashes hash(CacheKey key, int chunkSize, int endChunk) {
        return new ChunkHashes(of(key, chunkSize, endChunk), endChunk);
    }

    /**
     * A STORE's hashes, computed as they are asked for: those a remembered chain of the same tokens has are copied now, the
     * rest chunk by chunk on the first {@link #hash} of each (a long prompt's hashing took ~560 µs of a Qwen-like 64-chunk
     * STORE's plan on the H200, all of it before the first copy; bench/RESULTS.md#gpu-hybrid-models). {@link #complete} hashes what is left
     * and remembers the chain.
     */
    public static ChunkHashes deferred(CacheKey key, int chunkSize, int endChunk) {
        byte[] hashes = new byte[ChunkHash.BYTES * endChunk];
        Chains current = chains;
        ChunkHashes deferred = new ChunkHashes(hashes, endChunk);
        deferred.hashedTo = MEMO.reuse(current, key.tokenIds(), chunkSize, 0, endChunk, hashes);
        if (deferred.hashedTo < endChunk) {
            deferred.pendingKey = key;
            deferred.chunkSize = chunkSize;
            deferred.pendingChains = current;
        }
        return deferred;
    }

    /** Chunk {@code chunk}'s hash (for a deferred chain, computed with those before it if it is not yet). */
    public ChunkHash hash(int chunk) {
        if (chunk >= hashedTo) {
            hashTo(chunk + 1);
        }
        return ChunkHash.unpack(hashes, chunk);
    }

    /** The hashes themselves, 32 bytes per chunk, all computed; shared, never to be written (the KV-event log reads parents here). */
    public byte[] bytes() {
        complete();
        return hashes;
    }

    /** Hashes every chunk not hashed yet and remembers a deferred chain for the next key of the same tokens. */
    public void complete() {
        if (hashedTo < endChunk) {
            hashTo(endChunk);
        }
    }

    private synchronized void hashTo(int toChunk) {
        int from = hashedTo;
        if (toChunk <= from) {
            return;
        }
        pendingChains.perThread().get().hashChunks(pendingKey.tokenIds(), chunkSize, from, toChunk, hashes);
        hashedTo = toChunk;
        if (toChunk == endChunk) {
            MEMO.remember(pendingChains, pendingKey.tokenIds(), chunkSize, endChunk, hashes);
            pendingKey = null;
            pendingChains = null;
        }
    }

    /** Chunks hashed: {@code 0..endChunk-1}. */
    public int endChunk() {
        return endChunk;
    }

    /** Hashes of chunks {@code 0..endChunk-1} (32 bytes each), remembered for the next key of the same tokens. */
    public static byte[] of(CacheKey key, int chunkSize, int endChunk) {
        byte[] hashes = new byte[ChunkHash.BYTES * endChunk];
        extend(key, chunkSize, 0, endChunk, hashes);
        remember(key, chunkSize, endChunk, hashes);
        return hashes;
    }

    /**
     * Adds the hashes of chunks {@code [fromChunk, toChunk)} to {@code hashes}, which holds those before them: those a
     * remembered chain of the same leading tokens has are copied, the rest computed.
     */
    public static void extend(CacheKey key, int chunkSize, int fromChunk, int toChunk, byte[] hashes) {
        Chains current = chains;
        int done = MEMO.reuse(current, key.tokenIds(), chunkSize, fromChunk, toChunk, hashes);
        if (done < toChunk) {
            current.perThread().get().hashChunks(key.tokenIds(), chunkSize, done, toChunk, hashes);
        }
    }

    /** Remembers the hashes of a key's chunks {@code 0..chunks-1} (what an incremental lookup computed) for later keys. */
    public static void remember(CacheKey key, int chunkSize, int chunks, byte[] hashes) {
        MEMO.remember(chains, key.tokenIds(), chunkSize, chunks, hashes);
    }

    /** Chunk hashes copied from a remembered chain instead of computed, since start. */
    public static long reusedChunks() {
        return MEMO.reusedChunks();
    }
}
