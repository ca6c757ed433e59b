package io.lmcache.server.kvapi;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkStore;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * LMCache's {@code MPCacheEngine.store_bytes / retrieve_bytes / lookup_bytes} over the L1 store. Each chunk is one object per
 * worker, keyed as the ZeroMQ path keys it (model, salt, no tags, kv rank = worker, group 0, the {@code --hash-algorithm} chain),
 * so a chunk stored here is a hit for vLLM's LOOKUP and RETRIEVE and the reverse, and a salt reaches only its own chunks. Stores
 * go through reserve and commit, so the store listeners (KV events, L2 write-through, cache events) see them as any STORE.
 */
public final class KvBytes {
    /** A read waits this long for a STORE still copying (the request-after-reply rule of the ZeroMQ path). */
    static final long FILL_WAIT_NS = TimeUnit.SECONDS.toNanos(2);
    /** Largest retrieve body: a hit that would be larger is cut to the chunks that fit (the reply is one array). */
    static final long MAX_RETRIEVE_BYTES = 1L << 30;
    private static final int GROUP = 0;

    /** What the counts of a store, retrieve or lookup are (LMCache's result fields). */
    public record Counts(int totalTokens, int totalChunks, int doneChunks, int chunkSize) {
        public int doneTokens() {
            return doneChunks * chunkSize;
        }
    }

    /** A retrieve's counts and the {@code [planes, layers, hit_tokens, D]} bytes (empty on a miss). */
    public record Retrieved(Counts counts, byte[] payload) {}

    private final ObjectStore store;
    private final MemorySegment pool;

    public KvBytes(ObjectStore store, MemorySegment pool) {
        this.store = store;
        this.pool = pool;
    }

    /** The whole-chunk hashes of {@code tokens} (trailing tokens are ignored, as LMCache's). */
    static byte[] hashes(String model, int worldSize, int[] tokens, String salt, int chunkSize) {
        int chunks = tokens.length / chunkSize;
        CacheKey key = new CacheKey(model, worldSize, 0, tokens, 0, chunks * chunkSize, "http-kv", salt, 0, RequestConfigs.NONE);
        return chunks == 0 ? new byte[0] : ChunkHashes.of(key, chunkSize, chunks);
    }

    private static ChunkKey key(String model, String salt, int rank, byte[] hashes, int chunk) {
        return new ChunkKey(model, salt, RequestTags.NONE, rank, GROUP, ChunkHash.unpack(hashes, chunk));
    }

    /**
     * Stores the payload, read from {@code body} straight into reserved objects (never the whole request on the heap). Objects
     * already stored are kept; one that cannot be reserved ends the stored prefix. Commits run last chunk first, so the head of a
     * prefix outlives its tail ({@link ObjectStore#commitEach}, whose listeners hear a {@link ChunkStore}). An {@link IOException}
     * (a short body) aborts every reservation.
     */
    public Counts store(String model, int[] tokens, String salt, KvBytesLayout layout, InputStream body) throws IOException {
        int chunkSize = layout.chunkSize();
        byte[] hashes = hashes(model, layout.worldSize(), tokens, salt, chunkSize);
        int chunks = hashes.length / ChunkHash.BYTES;
        StoredObject[][] reserved = new StoredObject[chunks][layout.worldSize()];
        int reservable = chunks;
        for (int c = 0; c < chunks && reservable == chunks; c++) {
            for (int w = 0; w < layout.worldSize(); w++) {
                StoredObject object = store.reserve(key(model, salt, w, hashes, c), layout.objectBytes(), layout.format());
                if (object == ObjectStore.NO_MEMORY) {
                    reservable = c;
                    break;
                }
                reserved[c][w] = object;
            }
        }
        try {
            fill(body, layout, reserved, chunks);
        } catch (IOException | RuntimeException e) {
            abortAll(reserved);
            throw e;
        }
        int ws = layout.worldSize();
        StoredObject[] writes = new StoredObject[chunks * ws];
        for (int c = 0; c < chunks; c++) {
            for (int w = 0; w < ws; w++) {
                StoredObject object = reserved[c][w];
                writes[c * ws + w] = object == ObjectStore.EXISTS ? null : object;
            }
        }
        CacheKey origin = new CacheKey(model, ws, 0, tokens, 0, chunks * chunkSize, "http-kv", salt, 0, RequestConfigs.NONE);
        boolean[] committed = store.commitEach(writes, new ChunkStore(origin, hashes, ws));
        boolean[] landed = new boolean[chunks];
        for (int c = 0; c < chunks; c++) {
            landed[c] = c < reservable;
            for (int w = 0; w < ws; w++) {
                landed[c] &= reserved[c][w] == ObjectStore.EXISTS || committed[c * ws + w];
            }
        }
        int stored = 0;
        while (stored < chunks && landed[stored]) {
            stored++;
        }
        return new Counts(tokens.length, chunks, stored, chunkSize);
    }

    /** Reads rows of {@code [planeLayers][chunks][chunk tokens][world size shards]} into the objects (skipping unreserved ones). */
    private void fill(InputStream body, KvBytesLayout layout, StoredObject[][] reserved, int chunks) throws IOException {
        int shardBytes = Math.toIntExact(layout.shardRowBytes());
        int ws = layout.worldSize();
        byte[] row = new byte[Math.toIntExact((long) shardBytes * ws)];
        MemorySegment rowSegment = MemorySegment.ofArray(row);
        for (int pl = 0; pl < layout.planeLayers(); pl++) {
            for (int c = 0; c < chunks; c++) {
                for (int t = 0; t < layout.chunkSize(); t++) {
                    if (body.readNBytes(row, 0, row.length) != row.length) {
                        throw new IOException("the body ended early");
                    }
                    long at = ((long) pl * layout.chunkSize() + t) * shardBytes;
                    for (int w = 0; w < ws; w++) {
                        StoredObject object = reserved[c][w];
                        if (object != null && object != ObjectStore.EXISTS) {
                            MemorySegment.copy(rowSegment, (long) w * shardBytes, pool, object.offset() + at, shardBytes);
                        }
                    }
                }
            }
        }
    }

    private void abortAll(StoredObject[][] reserved) {
        for (StoredObject[] chunk : reserved) {
            for (StoredObject object : chunk) {
                if (object != null && object != ObjectStore.EXISTS) {
                    store.abort(object);
                }
            }
        }
    }

    /** The longest prefix of whole chunks whose every shard is in L1 (ready objects; nothing is locked). */
    public Counts lookup(String model, int[] tokens, String salt, KvBytesLayout layout) {
        byte[] hashes = hashes(model, layout.worldSize(), tokens, salt, layout.chunkSize());
        int chunks = hashes.length / ChunkHash.BYTES;
        int ws = layout.worldSize();
        ChunkKey[] keys = new ChunkKey[chunks * ws];
        for (int c = 0; c < chunks; c++) {
            for (int w = 0; w < ws; w++) {
                keys[c * ws + w] = key(model, salt, w, hashes, c);
            }
        }
        boolean[] ready = new boolean[keys.length];
        store.readyKeys(keys, ready);
        int hit = 0;
        while (hit < keys.length && ready[hit]) {
            hit++;
        }
        return new Counts(tokens.length, chunks, hit / ws, layout.chunkSize());
    }

    /** The longest cached prefix's bytes; non-destructive (each object is pinned only while it is copied out). */
    public Retrieved retrieve(String model, int[] tokens, String salt, KvBytesLayout layout) {
        byte[] hashes = hashes(model, layout.worldSize(), tokens, salt, layout.chunkSize());
        int chunks = (int) Math.min(hashes.length / ChunkHash.BYTES, MAX_RETRIEVE_BYTES / layout.chunkWireBytes());
        int ws = layout.worldSize();
        List<StoredObject[]> pinned = new ArrayList<>();
        try {
            for (int c = 0; c < chunks; c++) {
                StoredObject[] shards = new StoredObject[ws];
                boolean whole = true;
                for (int w = 0; w < ws && whole; w++) {
                    shards[w] = store.pinReady(key(model, salt, w, hashes, c), layout.objectBytes(), layout.format(), FILL_WAIT_NS);
                    whole = shards[w] != null;
                }
                pinned.add(shards);
                if (!whole) {
                    break;
                }
            }
            int hit = pinned.isEmpty() || pinned.getLast()[ws - 1] != null ? pinned.size() : pinned.size() - 1;
            byte[] payload = hit == 0 ? new byte[0] : gather(layout, pinned, hit);
            return new Retrieved(new Counts(tokens.length, hashes.length / ChunkHash.BYTES, hit, layout.chunkSize()), payload);
        } finally {
            for (StoredObject[] shards : pinned) {
                for (StoredObject object : shards) {
                    if (object != null) {
                        store.unpin(object, true);
                    }
                }
            }
        }
    }

    private byte[] gather(KvBytesLayout layout, List<StoredObject[]> pinned, int hit) {
        int shardBytes = Math.toIntExact(layout.shardRowBytes());
        int ws = layout.worldSize();
        byte[] out = new byte[Math.toIntExact(hit * layout.chunkWireBytes())];
        MemorySegment outSegment = MemorySegment.ofArray(out);
        long at = 0;
        for (int pl = 0; pl < layout.planeLayers(); pl++) {
            for (int c = 0; c < hit; c++) {
                for (int t = 0; t < layout.chunkSize(); t++) {
                    long from = ((long) pl * layout.chunkSize() + t) * shardBytes;
                    for (int w = 0; w < ws; w++) {
                        MemorySegment.copy(pool, pinned.get(c)[w].offset() + from, outSegment, at, shardBytes);
                        at += shardBytes;
                    }
                }
            }
        }
        return out;
    }
}
