package io.lmcache.server.kvapi;

import io.lmcache.server.http.HttpApi;
import io.lmcache.server.kvapi.KvFrames.Frame;
import io.lmcache.server.kvapi.KvFrames.FrameException;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkStore;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The framed stream revision of the KV bytes API over the L1 store (LMCache {@code lmcache/v1/multiprocess/kv_bytes.py}
 * {@code store_kv_bytes_by_tokens} / {@code retrieve_kv_bytes_by_tokens}, served by {@code http_apis/kv_api.py@772fdcda}): a store
 * takes one full chunk per frame and lands it before the next (reserve, split along D into the workers' objects, commit), so a
 * stream cut short keeps the prefix it landed; a retrieve sends each pinned object as one shard frame. Keys are the raw revision's
 * ({@link KvBytes}), so either revision reads what the other stored.
 */
final class KvBytesStream {
    /** A chunk's header is a few dozen bytes; a stream may spend this much per chunk on them in all, plus one {@link KvFrames#MAX_HEADER_BYTES}. */
    static final int CHUNK_HEADER_ALLOWANCE = 256;
    private static final int COPY_BYTES = 256 * 1024;

    private final ObjectStore store;
    private final MemorySegment pool;

    KvBytesStream(ObjectStore store, MemorySegment pool) {
        this.store = store;
        this.pool = pool;
    }

    /**
     * Stores the {@code store_chunk} frames that follow the manifest. The caller has checked the manifest (shape, dtype, model);
     * a frame out of order, of the wrong length or type, a stream that ends early or carries more chunks is a {@link FrameException},
     * after which the chunks already landed stay (LMCache's chunk-scoped reservations).
     */
    KvBytes.Counts store(String model, int[] tokens, String salt, KvBytesLayout layout, KvFrames.Reader frames)
            throws FrameException, IOException {
        int chunkSize = layout.chunkSize();
        int ws = layout.worldSize();
        byte[] hashes = KvBytes.hashes(model, ws, tokens, salt, chunkSize);
        int chunks = hashes.length / ChunkHash.BYTES;
        CacheKey origin = new CacheKey(model, ws, 0, tokens, 0, chunks * chunkSize, "http-kv", salt, 0, RequestConfigs.NONE);
        long headerBudget = KvFrames.MAX_HEADER_BYTES + (long) chunks * CHUNK_HEADER_ALLOWANCE;
        boolean[] landed = new boolean[chunks];
        byte[] row = new byte[Math.toIntExact(layout.shardRowBytes() * ws)];
        for (int c = 0; ; c++) {
            Frame frame = frames.next(layout.chunkWireBytes(), (int) Math.max(0, Math.min(KvFrames.MAX_HEADER_BYTES, headerBudget)));
            if (frame == null) {
                if (c != chunks) {
                    throw new FrameException("expected " + chunks + " chunks, got " + c);
                }
                break;
            }
            frame.header().requireType("store_chunk");
            long index = frame.header().requireInt("chunk_index");
            if (index != c) {
                throw new FrameException("expected store chunk " + c + ", got " + index);
            }
            if (c >= chunks) {
                throw new FrameException("received more chunks than expected (" + chunks + ")");
            }
            if (frame.payloadLength() != layout.chunkWireBytes()) {
                throw new FrameException("chunk " + c + " byte length " + frame.payloadLength() + " does not match expected "
                        + layout.chunkWireBytes());
            }
            headerBudget -= frame.headerLength();
            landed[c] = storeChunk(new Target(model, salt, layout, hashes, origin), c, frames, row);
        }
        int stored = 0;
        while (stored < chunks && landed[stored]) {
            stored++;
        }
        return new KvBytes.Counts(chunks * chunkSize, chunks, stored, chunkSize);
    }

    /** What a stream stores into: the keys' parts, the layout, the hash chain, and the origin its commits name. */
    private record Target(String model, String salt, KvBytesLayout layout, byte[] hashes, CacheKey origin) {}

    /** One chunk: reserve its shards, copy each token row's D into them, commit; whether every shard is stored now. */
    private boolean storeChunk(Target target, int c, KvFrames.Reader frames, byte[] row) throws FrameException, IOException {
        KvBytesLayout layout = target.layout();
        int ws = layout.worldSize();
        StoredObject[] reserved = new StoredObject[ws];
        boolean reservable = true;
        for (int w = 0; w < ws && reservable; w++) {
            reserved[w] = store.reserve(KvBytes.key(target.model(), target.salt(), w, target.hashes(), c), layout.objectBytes(), layout.format());
            reservable = reserved[w] != ObjectStore.NO_MEMORY;
        }
        if (!reservable) {
            // LMCache's reserve_write(..., "all"): a chunk lands whole or not at all
            for (StoredObject object : reserved) {
                abort(object);
            }
            reserved = new StoredObject[ws];
        }
        try {
            fill(layout, reserved, frames, row);
        } catch (IOException | FrameException | RuntimeException e) {
            for (StoredObject object : reserved) {
                abort(object);
            }
            throw e;
        }
        StoredObject[] writes = new StoredObject[ws];
        for (int w = 0; w < ws; w++) {
            writes[w] = reserved[w] == ObjectStore.EXISTS ? null : reserved[w];
        }
        boolean[] committed = store.commitEach(writes, new ChunkStore(target.origin(), target.hashes(), ws, c));
        boolean landed = reservable;
        for (int w = 0; w < ws; w++) {
            landed &= reserved[w] == ObjectStore.EXISTS || committed[w];
        }
        return landed;
    }

    /** The chunk's payload, {@code [planes x layers][chunk tokens][D]}, a row of D at a time, each worker's slice into its object. */
    private void fill(KvBytesLayout layout, StoredObject[] reserved, KvFrames.Reader frames, byte[] row) throws FrameException, IOException {
        int shardBytes = Math.toIntExact(layout.shardRowBytes());
        MemorySegment rowSegment = MemorySegment.ofArray(row);
        for (int pl = 0; pl < layout.planeLayers(); pl++) {
            for (int t = 0; t < layout.chunkSize(); t++) {
                frames.readPayload(row, 0, row.length);
                long at = ((long) pl * layout.chunkSize() + t) * shardBytes;
                for (int w = 0; w < reserved.length; w++) {
                    StoredObject object = reserved[w];
                    if (object != null && object != ObjectStore.EXISTS) {
                        MemorySegment.copy(rowSegment, (long) w * shardBytes, pool, object.offset() + at, shardBytes);
                    }
                }
            }
        }
    }

    private void abort(StoredObject object) {
        if (object != null && object != ObjectStore.EXISTS && object != ObjectStore.NO_MEMORY) {
            store.abort(object);
        }
    }

    /** A retrieve's stream: the manifest, then one shard frame per pinned object, chunk by chunk, worker by worker. */
    static final class Retrieval implements HttpApi.Streamed {
        private final KvBytes.Retrieved retrieved;
        private final KvBytesLayout layout;
        private final MemorySegment pool;
        private final byte[] manifest;
        private final long length;

        Retrieval(String model, KvBytes.Retrieved retrieved, KvBytesLayout layout, MemorySegment pool) {
            this.retrieved = retrieved;
            this.layout = layout;
            this.pool = pool;
            this.manifest = manifest(model, retrieved.counts(), layout);
            long total = manifest.length;
            for (int c = 0; c < retrieved.counts().doneChunks(); c++) {
                for (int w = 0; w < layout.worldSize(); w++) {
                    total += shardHead(c, w).length + layout.objectBytes();
                }
            }
            this.length = total;
        }

        /** LMCache's {@code _retrieve_manifest}: a miss has the full shape {@code [0,0,0,0]}; no whole chunk, no shard shape either. */
        static byte[] manifest(String model, KvBytes.Counts counts, KvBytesLayout layout) {
            boolean none = counts.totalChunks() == 0;
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("model_name", model);
            fields.put("total_tokens", counts.totalChunks() * counts.chunkSize());
            fields.put("total_chunks", counts.totalChunks());
            fields.put("hit_tokens", counts.doneTokens());
            fields.put("hit_chunks", counts.doneChunks());
            fields.put("chunk_size", counts.chunkSize());
            fields.put("world_size", layout.worldSize());
            fields.put("shape", counts.doneChunks() == 0 ? new int[4] : layout.fullShape(counts.doneTokens()));
            fields.put("shard_shape", none ? new int[4] : layout.shardShape());
            fields.put("dtype", none ? "torch.uint8" : layout.torchDtype());
            return KvFrames.encodeHead("retrieve_manifest", fields, 0);
        }

        private byte[] shardHead(int chunk, int worker) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("chunk_index", chunk);
            fields.put("worker_id", worker);
            return KvFrames.encodeHead("retrieve_shard", fields, layout.objectBytes());
        }

        @Override
        public long length() {
            return length;
        }

        /** The objects' pins go with the stream: released once it is written or dropped. */
        @Override
        public void close() {
            retrieved.close();
        }

        @Override
        public void writeTo(OutputStream body) throws IOException {
            BufferedOutputStream out = new BufferedOutputStream(body, COPY_BYTES);
            out.write(manifest);
            byte[] buffer = new byte[(int) Math.min(COPY_BYTES, layout.objectBytes())];
            MemorySegment bufferSegment = MemorySegment.ofArray(buffer);
            int c = 0;
            for (StoredObject[] shards : retrieved.pinnedChunks()) {
                for (int w = 0; w < shards.length; w++) {
                    out.write(shardHead(c, w));
                    for (long at = 0; at < layout.objectBytes(); at += buffer.length) {
                        int n = (int) Math.min(buffer.length, layout.objectBytes() - at);
                        MemorySegment.copy(pool, shards[w].offset() + at, bufferSegment, 0, n);
                        out.write(buffer, 0, n);
                    }
                }
                c++;
            }
            out.flush();
        }
    }
}
