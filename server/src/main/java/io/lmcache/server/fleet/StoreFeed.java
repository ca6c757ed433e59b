package io.lmcache.server.fleet;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.CommitListener;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.RemovalListener;
import java.util.List;

/**
 * Feeds the event stream from the stores: L1 commits become {@code store} events and every L1 removal (eviction, expiry, clear,
 * {@code DELETE /cache/objects}) a {@code delete} event; each L2 adapter's stores, deletes and loads become its own. Until the
 * object store has a listener list (issue 46) it chains itself in front of the one feed of each kind the store has (the L2 write
 * path, the KV-event log), passing everything on unchanged.
 */
final class StoreFeed implements CommitListener, RemovalListener {
    private final CacheEventSink sink;
    private final CommitListener nextCommit;
    private final RemovalListener nextRemoval;

    private StoreFeed(CacheEventSink sink, CommitListener nextCommit, RemovalListener nextRemoval) {
        this.sink = sink;
        this.nextCommit = nextCommit;
        this.nextRemoval = nextRemoval;
    }

    /** Chains the feed into {@code store} and every adapter; call before the first STORE. */
    static void attach(CacheEventSink sink, ObjectStore store, List<L2Adapter> adapters) {
        StoreFeed feed = new StoreFeed(sink, store.commitListener(), store.removalListener());
        store.setCommitListener(feed);
        store.setRemovalListener(feed);
        for (L2Adapter adapter : adapters) {
            adapter.registerListener(new L2Feed(sink, new CacheEventSink.Place("l2", adapter.typeName(), false)));
        }
    }

    @Override
    public boolean committed(Committed committed) {
        if (!committed.key().hasTags()) { // LMCache's key has no tags: a tagged object has no name on this wire
            sink.stored(CacheEventSink.Place.L1_DRAM, EncodedKey.of(committed.key()), committed.object().bytes());
        }
        return nextCommit != null && nextCommit.committed(committed);
    }

    @Override
    public void removed(String model, ChunkHash hash) {
        if (nextRemoval != null) {
            nextRemoval.removed(model, hash);
        }
    }

    @Override
    public void removed(String model, String salt, boolean tagged, int kvRank, int group, ChunkHash hash, long bytes) {
        if (!tagged) { // as its store was never announced
            sink.deleted(CacheEventSink.Place.L1_DRAM, EncodedKey.of(new ChunkKey(model, salt, kvRank, group, hash)));
        }
        if (nextRemoval != null) {
            nextRemoval.removed(model, salt, tagged, kvRank, group, hash, bytes);
        }
    }

    @Override
    public void batchEnded() {
        if (nextRemoval != null) {
            nextRemoval.batchEnded();
        }
    }

    /** One adapter's keys, as LMCache's L2 events (§1.4.2). */
    private record L2Feed(CacheEventSink sink, CacheEventSink.Place place) implements L2AdapterListener {
        @Override
        public void onKeysStored(List<L2Key> keys, long[] sizes) {
            for (int i = 0; i < keys.size(); i++) {
                sink.stored(place, EncodedKey.of(keys.get(i)), sizes[i]);
            }
        }

        /** Keys an earlier process left: the coordinator learns of them as stores (its directory starts empty). */
        @Override
        public void onKeysFound(List<L2Key> keys, long[] sizes) {
            onKeysStored(keys, sizes);
        }

        @Override
        public void onKeysAccessed(List<L2Key> keys) {
            keys.forEach(key -> sink.accessed(place, EncodedKey.of(key)));
        }

        @Override
        public void onKeysDeleted(List<L2Key> keys) {
            keys.forEach(key -> sink.deleted(place, EncodedKey.of(key)));
        }
    }
}
