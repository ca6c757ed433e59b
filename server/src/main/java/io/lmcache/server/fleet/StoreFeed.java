package io.lmcache.server.fleet;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import io.lmcache.server.storage.StoreListener;
import io.lmcache.server.storage.StoredObject;
import java.util.List;

/**
 * Feeds the event stream from the stores: L1 commits become {@code store} events and every L1 removal (eviction, expiry, clear,
 * {@code DELETE /cache/objects}) of a published object a {@code delete} event, as an entry of the store's listener list; each L2
 * adapter's stores, deletes and loads become its own, L1 reads {@code access} events, and a warm prefetch's loads L1
 * {@code store} events. Under the store's lock it only encodes the key and enqueues.
 */
final class StoreFeed implements StoreListener {
    private final CacheEventSink sink;

    private StoreFeed(CacheEventSink sink) {
        this.sink = sink;
    }

    /** Adds the feed to {@code store}'s listener list and to every adapter; call before the first STORE. */
    static void attach(CacheEventSink sink, ObjectStore store, List<L2Adapter> adapters) {
        store.listen(new StoreFeed(sink));
        for (L2Adapter adapter : adapters) {
            adapter.registerListener(new L2Feed(sink, new CacheEventSink.Place("l2", adapter.typeName(), false)));
        }
    }

    @Override
    public boolean committed(StoredObject object, Keys keys) {
        ChunkKey key = keys.keyOf(object);
        if (!key.hasTags()) { // LMCache's key has no tags: a tagged object has no name on this wire
            sink.stored(CacheEventSink.Place.L1_DRAM, EncodedKey.of(key), object.bytes());
        }
        return false;
    }

    /**
     * A warm prefetch's load, published as an ordinary object: a {@code store} event as LMCache's {@code finish_write} gives (its
     * removal is announced too), so the coordinator's directory sees the object moved here (LMCache's moves).
     */
    @Override
    public void loaded(StoredObject object, Keys keys) {
        ChunkKey key = keys.keyOf(object);
        if (!key.hasTags()) {
            sink.stored(CacheEventSink.Place.L1_DRAM, EncodedKey.of(key), object.bytes());
        }
    }

    /**
     * A copy out of an L1 object served a RETRIEVE: an {@code access} event (tier {@code l1}, backend "", §1.4.2), which keeps the
     * coordinator's LRU order of this server's L1 placements. LMCache sends one per key at a request's end; a chunk is read once
     * per request, so one per read is the same keys.
     */
    @Override
    public void read(StoredObject object, String salt, Keys keys) {
        ChunkKey key = keys.keyOf(object);
        if (!key.hasTags()) {
            sink.accessed(CacheEventSink.Place.L1_DRAM, EncodedKey.of(key)); // the stream sends access with backend ""
        }
    }

    @Override
    public void removed(StoredObject object, String model, Keys keys, EvictionReason reason) {
        if (!object.published()) { // a loaded copy was never announced
            return;
        }
        ChunkKey key = keys.keyOf(object);
        if (!key.hasTags()) { // as its store was never announced
            sink.deleted(CacheEventSink.Place.L1_DRAM, EncodedKey.of(key));
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
