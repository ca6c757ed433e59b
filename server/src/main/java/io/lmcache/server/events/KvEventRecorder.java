package io.lmcache.server.events;

import io.lmcache.server.events.KvEventLog.Medium;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import io.lmcache.server.storage.StoreListener;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkStore;
import io.lmcache.server.transfer.StoreRequest;
import io.lmcache.server.transfer.TransferPlan;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;

/**
 * Turns what L1 and L2 do into KV-event records (kv-events.md §6): a STORE's commit becomes one {@code stored} record per chunk it
 * wrote (kv ranks and object groups of one chunk collapse into one), a published object leaving L1 a {@code removed} one, and an
 * L2 write or delete the same with medium STORAGE. The chunk's tokens and parent come from the STORE (its key and the plan's
 * hash chain); an L2 write is announced with the binding its L1 STORE left, and skipped (counted) without one.
 */
public final class KvEventRecorder implements StoreListener {
    private final KvEventLog log;
    private final int chunkSize;
    /** Bindings for the L2 announcements; null without an L2 tier. */
    private final TokenBindings bindings;
    private final LongAdder unboundStores = new LongAdder();
    // the removal batch: written under the object store's lock only (one model at a time; a change of model flushes it)
    private final ChunkHash[] removedHashes = new ChunkHash[KvEventLog.REMOVED_PER_RECORD * 32];
    private final byte[] removedBytes = new byte[ChunkHash.BYTES * removedHashes.length];
    private int removedCount;
    private String removedModel;
    /** Whether this lock hold removed an announced object (under the object store's lock). */
    private boolean removedAny;

    public KvEventRecorder(KvEventLog log, boolean withL2) {
        this.log = log;
        this.chunkSize = log.chunkSize();
        this.bindings = withL2 && log.enabled() ? new TokenBindings() : null;
    }

    public KvEventLog log() {
        return log;
    }

    /** Joins {@code store}'s listener list (L1 removals and committed STOREs) when the channel is on. */
    public void attach(ObjectStore store) {
        if (log.enabled()) {
            store.listen(this);
        }
    }

    /** The listener to register on every L2 adapter (STORAGE records), or null when the channel is off. */
    public L2AdapterListener l2Listener() {
        return log.enabled() ? new L2Feed() : null;
    }

    public long unboundStores() {
        return unboundStores.sum();
    }

    /**
     * Right after a writer's commits (the store's lock released): a GPU STORE's chunks of which at least one object was written
     * become {@code stored} records; objects written without a token binding (an engine-driven COMMIT_STORE, no origin) are
     * counted as LMCache's {@code unbound_stores}, never announced.
     */
    @Override
    public void stored(Batch batch) {
        if (batch.origin() instanceof ChunkStore(CacheKey key, byte[] chain, int perChunk, int firstChunk)) {
            boolean[] written = new boolean[batch.objects().length / perChunk];
            for (int j = 0; j < written.length; j++) {
                for (int w = 0; w < perChunk; w++) {
                    written[j] |= batch.committed()[j * perChunk + w];
                }
            }
            recordStored(written, chain, firstChunk, key);
            return;
        }
        if (!(batch.origin() instanceof StoreRequest(TransferPlan plan, CacheKey key))) {
            unboundStores.add(batch.objects().length);
            return;
        }
        boolean[] written = new boolean[plan.range().count()];
        for (int j = 0; j < written.length; j++) {
            for (int g = 0; g < plan.parts().size(); g++) {
                written[j] |= batch.committed()[plan.objectIndex(j, g)];
            }
        }
        recordStored(written, plan.hashes().bytes(), plan.chunk(0), key);
    }

    /** {@code written[j]}: whether chunk {@code firstChunk + j} of {@code key} (hashes in {@code chain}) was stored. */
    private void recordStored(boolean[] written, byte[] chain, int firstChunk, CacheKey key) {
        boolean hashesOnly = hashesOnly(key);
        int[] tokens = hashesOnly ? null : key.tokenIds();
        boolean any = false;
        for (int j = 0; j < written.length; j++) {
            if (!written[j]) {
                continue;
            }
            int chunk = firstChunk + j;
            log.stored(Medium.CPU, key.modelName(), chain, chunk, tokens, hashesOnly);
            if (bindings != null) {
                ChunkHash hash = ChunkHash.unpack(chain, chunk);
                bindings.bind(key.modelName(), hash.w0(), hash.w1(), TokenBindings.Binding.of(tokens, chain, chunk, chunkSize));
            }
            any = true;
        }
        if (any) {
            log.appended();
        }
    }

    /**
     * A salted or tagged request's chunks are announced by hash only (kv-events-tenancy.md): the salt is a tenant's secret, and
     * LMCache's subscription and poll name no salt, so no reader can show it holds the salt; routing loses nothing, since a
     * salted prompt's hashes differ from the unsalted one's anyway.
     */
    static boolean hashesOnly(CacheKey key) {
        return key.cacheSalt() != null && !key.cacheSalt().isEmpty() || key.requestConfigs() != null && !key.tags().isEmpty();
    }

    // --- L1 removals: under the object store's lock ------------------------------------------------

    @Override
    public void removed(StoredObject object, String model, Keys keys, EvictionReason reason) {
        if (object.published()) { // a loaded copy was never announced
            removed(model, object.key().hash());
            removedAny = true;
        }
    }

    private void removed(String model, ChunkHash hash) {
        if (removedModel != null && !removedModel.equals(model) || removedCount == removedHashes.length) {
            flushRemoved();
        }
        removedModel = model;
        for (int i = 0; i < removedCount; i++) {
            if (removedHashes[i].equals(hash)) {
                return; // another rank's or group's object of the same chunk
            }
        }
        removedHashes[removedCount++] = hash;
    }

    @Override
    public void removalsEnded() {
        if (!removedAny) {
            return;
        }
        removedAny = false;
        flushRemoved();
        log.appended();
    }

    private void flushRemoved() {
        if (removedCount > 0) {
            for (int i = 0; i < removedCount; i++) {
                removedHashes[i].write(removedBytes, ChunkHash.BYTES * i);
            }
            log.removed(Medium.CPU, removedModel, removedBytes, removedCount);
        }
        removedCount = 0;
        removedModel = null;
    }

    // --- L2 --------------------------------------------------------------------------------------

    /** An adapter's stores and deletes, on its worker threads or the deleting thread. */
    private final class L2Feed implements L2AdapterListener {
        @Override
        public void onKeysStored(List<L2Key> keys, long[] sizes) {
            Set<L2Key> seen = new HashSet<>();
            for (L2Key key : keys) {
                if (!seen.add(L2Key.of(key.model(), 0, 0, key.hash(), ""))) {
                    continue;
                }
                TokenBindings.Binding binding = bindings.get(key.model(), key.hash().w0(), key.hash().w1());
                if (binding == null) {
                    unboundStores.increment(); // never announced without its tokens (an L2 copy of a chunk stored long ago)
                    continue;
                }
                log.stored(Medium.STORAGE, key.model(), binding.chain(), binding.chunk(), binding.tokens(), 0, binding.tokens() == null);
            }
            log.appended();
        }

        /** An L2 key's 32-byte chunk hash (L2 names carry all of it). */
        private static ChunkHash fullHash(L2Key key) {
            L2Hash hash = key.hash();
            return new ChunkHash(hash.w0(), hash.w1(), hash.w2(), hash.w3());
        }

        /** Keys an earlier process left: nothing binds them to tokens, so they are not announced (as LMCache). */
        @Override
        public void onKeysFound(List<L2Key> keys, long[] sizes) {
        }

        @Override
        public void onKeysDeleted(List<L2Key> keys) {
            Map<String, Set<L2Key>> byModel = new LinkedHashMap<>();
            for (L2Key key : keys) {
                byModel.computeIfAbsent(key.model(), m -> new LinkedHashSet<>())
                        .add(L2Key.of(key.model(), 0, 0, key.hash(), ""));
            }
            byModel.forEach((model, distinct) -> {
                byte[] hashList = new byte[ChunkHash.BYTES * distinct.size()];
                int i = 0;
                for (L2Key key : distinct) {
                    fullHash(key).write(hashList, ChunkHash.BYTES * i++);
                }
                log.removed(Medium.STORAGE, model, hashList, distinct.size());
            });
            log.appended();
        }
    }
}
