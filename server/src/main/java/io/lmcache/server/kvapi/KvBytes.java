package io.lmcache.server.kvapi;

import io.lmcache.server.http.HttpApi;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkStore;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
    private static final int GROUP = 0;
    /** The body is moved a token row at a time (a few hundred bytes to a few KiB): buffered, so each row is no socket call. */
    private static final int IO_BUFFER_BYTES = 256 * 1024;

    /** What the counts of a store, retrieve or lookup are (LMCache's result fields). */
    public record Counts(int totalTokens, int totalChunks, int doneChunks, int chunkSize) {
        public int doneTokens() {
            return doneChunks * chunkSize;
        }
    }

    private final ObjectStore store;
    private final MemorySegment pool;
    private final KvBytesStream stream;

    public KvBytes(ObjectStore store, MemorySegment pool) {
        this.store = store;
        this.pool = pool;
        this.stream = new KvBytesStream(store, pool);
    }

    /** The framed stream revision's store, over the same objects. */
    KvBytesStream stream() {
        return stream;
    }

    /** A retrieve's framed stream (the manifest, then a shard frame per pinned object); closing {@code retrieved} stays the caller's. */
    KvBytesStream.Retrieval streamOf(String model, Retrieved retrieved, KvBytesLayout layout) {
        return new KvBytesStream.Retrieval(model, retrieved, layout, pool);
    }

    /** The whole-chunk hashes of {@code tokens} (trailing tokens are ignored, as LMCache's). */
    static byte[] hashes(String model, int worldSize, int[] tokens, String salt, int chunkSize) {
        int chunks = tokens.length / chunkSize;
        CacheKey key = new CacheKey(model, worldSize, 0, tokens, 0, chunks * chunkSize, "http-kv", salt, 0, RequestConfigs.NONE);
        return chunks == 0 ? new byte[0] : ChunkHashes.of(key, chunkSize, chunks);
    }

    static ChunkKey key(String model, String salt, int rank, byte[] hashes, int chunk) {
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
            fill(new BufferedInputStream(body, IO_BUFFER_BYTES), layout, reserved, chunks);
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

    /**
     * The longest cached prefix, its objects pinned until the returned body is written and closed (LMCache's stream revision holds
     * its read locks until the stream ends, too); non-destructive. Close it also when it is not sent.
     */
    public Retrieved retrieve(String model, int[] tokens, String salt, KvBytesLayout layout) {
        byte[] hashes = hashes(model, layout.worldSize(), tokens, salt, layout.chunkSize());
        int chunks = hashes.length / ChunkHash.BYTES;
        int ws = layout.worldSize();
        List<StoredObject[]> pinned = new ArrayList<>();
        for (int c = 0; c < chunks; c++) {
            StoredObject[] shards = new StoredObject[ws];
            for (int w = 0; w < ws; w++) {
                shards[w] = store.pinReady(key(model, salt, w, hashes, c), layout.objectBytes(), layout.format(), FILL_WAIT_NS);
                if (shards[w] == null) {
                    for (int u = 0; u < w; u++) {
                        store.unpin(shards[u], false);
                    }
                    return new Retrieved(new Counts(tokens.length, chunks, pinned.size(), layout.chunkSize()), layout, pinned);
                }
            }
            pinned.add(shards);
        }
        return new Retrieved(new Counts(tokens.length, chunks, pinned.size(), layout.chunkSize()), layout, pinned);
    }

    /** A retrieve's counts and its {@code [planes, layers, hit_tokens, D]} bytes, gathered from the pinned objects as they are written. */
    public final class Retrieved implements HttpApi.Streamed {
        private final Counts counts;
        private final KvBytesLayout layout;
        private List<StoredObject[]> pinned;

        Retrieved(Counts counts, KvBytesLayout layout, List<StoredObject[]> pinned) {
            this.counts = counts;
            this.layout = layout;
            this.pinned = pinned;
        }

        public Counts counts() {
            return counts;
        }

        @Override
        public long length() {
            return counts.doneChunks() * layout.chunkWireBytes();
        }

        /** Per chunk of the prefix, its objects by worker (pinned until {@link #close}). */
        List<StoredObject[]> pinnedChunks() {
            return pinned;
        }

        /** Writes the payload row by row (one token of every shard at a time: a row of the wire's D). */
        @Override
        public void writeTo(OutputStream body) throws IOException {
            BufferedOutputStream out = new BufferedOutputStream(body, IO_BUFFER_BYTES);
            int shardBytes = Math.toIntExact(layout.shardRowBytes());
            int ws = layout.worldSize();
            byte[] row = new byte[Math.toIntExact((long) shardBytes * ws)];
            MemorySegment rowSegment = MemorySegment.ofArray(row);
            for (int pl = 0; pl < layout.planeLayers(); pl++) {
                for (StoredObject[] shards : pinned) {
                    for (int t = 0; t < layout.chunkSize(); t++) {
                        long from = ((long) pl * layout.chunkSize() + t) * shardBytes;
                        for (int w = 0; w < ws; w++) {
                            MemorySegment.copy(pool, shards[w].offset() + from, rowSegment, (long) w * shardBytes, shardBytes);
                        }
                        out.write(row);
                    }
                }
            }
            out.flush();
        }

        /** Unpins the objects (once). */
        @Override
        public void close() {
            List<StoredObject[]> held = pinned;
            pinned = List.of();
            for (StoredObject[] shards : held) {
                for (StoredObject object : shards) {
                    store.unpin(object, true);
                }
            }
        }
    }
}
