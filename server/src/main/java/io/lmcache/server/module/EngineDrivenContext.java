package io.lmcache.server.module;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.protocol.EngineDrivenRegistration;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tables.WireKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One registered engine-driven worker and what it has in flight: reservations (PREPARE_STORE
 * without COMMIT_STORE) and pinned retrieves (PREPARE_RETRIEVE without COMMIT_RETRIEVE). Its maps
 * are guarded by the context itself, a leaf lock never held across calls into the store.
 */
final class EngineDrivenContext {
    /** Prepared and not committed, reservations and pinned retrieves (and remembered misses) together: far above one per request. */
    static final int MAX_PENDING = 1024;
    /** The keys' bytes those may hold. */
    static final long MAX_PENDING_BYTES = 4L << 20;

    /**
     * A reservation's identity: the key without request id, configs and readers (§7.3), the prefix named by its last chunk. Model
     * and salt in their {@link WireKey} form: a megabyte of model name is not kept until the commit.
     */
    record PendingKey(String model, String salt, RequestTags tags, int worldSize, int workerId, int start, int end, ChunkHash last) {
        PendingKey {
            model = WireKey.of(model);
            salt = WireKey.of(salt);
        }

        long bytes() {
            long tagBytes = 0;
            for (RequestTags.Tag tag : tags.tags()) {
                tagBytes += WireKey.bytes(tag.name()) + WireKey.bytes(tag.value()) + 32;
            }
            return 128 + WireKey.bytes(model) + WireKey.bytes(salt) + tagBytes;
        }
    }

    record Pending(List<StoredObject> objects, long createdNs) {}

    final EngineDrivenRegistration registration;
    final long objectBytes;
    final int[] slotShape;
    final int format;
    private final Map<PendingKey, Pending> writes = new HashMap<>();
    private final Map<PendingKey, Pending> reads = new HashMap<>();
    /**
     * Reservations given up when the worker's connection closed: out of the store's sight, no longer committable, their memory
     * still the worker's (it may only have lost its connection) until the reap, UNREGISTER or the write TTL frees it.
     */
    private final List<Pending> disowned = new ArrayList<>();
    /** The bytes of the keys of {@code writes} and {@code reads}. */
    private long pendingBytes;

    EngineDrivenContext(EngineDrivenRegistration registration, long objectBytes, int[] slotShape, int format) {
        this.registration = registration;
        this.objectBytes = objectBytes;
        this.slotShape = slotShape;
        this.format = format;
    }

    /** Whether one more pending entry of {@code key} fits the caps ({@link #MAX_PENDING}, {@link #MAX_PENDING_BYTES}). */
    synchronized boolean admits(PendingKey key) {
        return writes.size() + reads.size() + disowned.size() < MAX_PENDING && pendingBytes + key.bytes() <= MAX_PENDING_BYTES;
    }

    /** Records a reservation; returns the one it replaces (the caller aborts it). */
    synchronized Pending putWrite(PendingKey key, Pending pending) {
        return counted(key, writes.put(key, pending));
    }

    synchronized Pending takeWrite(PendingKey key) {
        return uncounted(key, writes.remove(key));
    }

    /** Records a pinned retrieve (or a miss, with no objects); returns the one it replaces (the caller unpins it). */
    synchronized Pending putRead(PendingKey key, Pending pending) {
        return counted(key, reads.put(key, pending));
    }

    synchronized Pending takeRead(PendingKey key) {
        return uncounted(key, reads.remove(key));
    }

    private Pending counted(PendingKey key, Pending replaced) {
        if (replaced == null) {
            pendingBytes += key.bytes();
        }
        return replaced;
    }

    private Pending uncounted(PendingKey key, Pending removed) {
        if (removed != null) {
            pendingBytes -= key.bytes();
        }
        return removed;
    }

    synchronized long pendingBytes() {
        return pendingBytes;
    }

    synchronized boolean hasWrites() {
        return !writes.isEmpty();
    }

    /** Moves the reservations to the disowned list and returns them (the caller disowns their objects in the store). */
    synchronized List<Pending> disownWrites() {
        List<Pending> moved = new ArrayList<>(writes.values());
        writes.keySet().forEach(key -> pendingBytes -= key.bytes());
        writes.clear();
        disowned.addAll(moved);
        return moved;
    }

    /** Empties the maps and the disowned list; the caller gives back what they held. */
    synchronized void drain(List<Pending> writesOut, List<Pending> readsOut) {
        writesOut.addAll(writes.values());
        writesOut.addAll(disowned);
        readsOut.addAll(reads.values());
        writes.clear();
        disowned.clear();
        reads.clear();
        pendingBytes = 0;
    }

    /** Moves what is older than its TTL out of the maps; the caller gives it back. */
    synchronized void collectExpired(long writeCutoffNs, long readCutoffNs, List<Pending> writesOut, List<Pending> readsOut) {
        collectOlder(writes, writeCutoffNs, writesOut);
        for (Iterator<Pending> it = disowned.iterator(); it.hasNext(); ) {
            Pending p = it.next();
            if (p.createdNs() - writeCutoffNs < 0) {
                it.remove();
                writesOut.add(p);
            }
        }
        collectOlder(reads, readCutoffNs, readsOut);
    }

    private void collectOlder(Map<PendingKey, Pending> pending, long cutoffNs, List<Pending> out) {
        for (Iterator<Map.Entry<PendingKey, Pending>> it = pending.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<PendingKey, Pending> entry = it.next();
            if (entry.getValue().createdNs() - cutoffNs < 0) {
                it.remove();
                pendingBytes -= entry.getKey().bytes();
                out.add(entry.getValue());
            }
        }
    }

    /** This instance's {@code non_cuda_context_meta} entry. */
    synchronized Map<String, Object> status() {
        EngineDrivenRegistration r = registration;
        Map<String, Object> entry = new LinkedHashMap<>();
        entry.put("model_name", LogText.status(r.modelName()));
        entry.put("world_size", r.worldSize());
        entry.put("block_size", r.blockSize());
        entry.put("use_mla", r.useMla());
        entry.put("pending_stores", writes.size());
        entry.put("pending_retrieves", reads.size());
        return entry;
    }
}
