package io.lmcache.server.storage;

import io.lmcache.server.storage.StoreCounters.EvictionReason;
import io.lmcache.server.tables.WireKey;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * LMCache's sampled chunk lifecycle: how long chunks live in L1, how long they sat idle before
 * eviction, the gap between two touches of a chunk, and how soon an evicted chunk is stored again.
 * A chunk is sampled by its hash ({@code --metrics-sample-rate}, 1% by default), so every event of a
 * sampled chunk is seen and no other chunk costs more than the test. The per-salt access counts
 * behind {@code real_reuse_gap_objects} are kept for every chunk, as LMCache keeps them.
 *
 * <p>"Written" is the chunk's reservation (its copy follows within the request); "read" is a copy out
 * of it that served a RETRIEVE; "evicted" is the LRU removing it (watermark or demand; a clear is not
 * an eviction). The first entry of the store's listener list: called only under its lock, so nothing here is synchronized.
 */
public final class ChunkLifecycle implements StoreListener {
    /** Where the samples go (the metrics layer); all times in nanoseconds. */
    public interface Sink {
        void lifetime(long ns);

        void idleBeforeEvict(long ns);

        void reuseGap(long ns);

        void evictReuseGap(long ns);

        /** A read of a chunk of {@code salt}: the time since its last touch and the chunks of that salt touched since. */
        void realReuseGap(String salt, long ns, long accesses);
    }

    /** LMCache caps the evict-to-reuse gap: a chunk stored again later counts as this. */
    static final long EVICT_REUSE_CAP_NS = TimeUnit.SECONDS.toNanos(300);
    /** Evicted sampled chunks remembered for their reuse gap; the oldest go first. */
    private static final int EVICTED_REMEMBERED = 16_384;
    /** Distinct salts whose access counts are kept; past it the counts start over (salts can be per request). */
    private static final int SALTS_COUNTED = 4_096;
    private static final long SAMPLE_SCALE = 1L << 20;
    private static final Sink NONE = new Sink() {
        @Override
        public void lifetime(long ns) { }

        @Override
        public void idleBeforeEvict(long ns) { }

        @Override
        public void reuseGap(long ns) { }

        @Override
        public void evictReuseGap(long ns) { }

        @Override
        public void realReuseGap(String salt, long ns, long accesses) { }
    };

    /** The chunk's identity across evictions (the namespace id of a key may change when its last object goes). */
    private record ChunkId(ChunkHash hash, int kvRank, int group) {
        static ChunkId of(ObjectKey key) {
            return new ChunkId(key.hash(), key.kvRank(), key.group());
        }
    }

    /** A sampled chunk: when it was stored, its last touch, and its salt's access count then. */
    private static final class Touch {
        long storedNs;
        long atNs;
        long saltAccesses;
    }

    private final LongSupplier clockNs;
    private final Map<StoredObject, Touch> sampled = new IdentityHashMap<>();
    private final Map<String, long[]> saltAccesses = new HashMap<>();
    private final Map<ChunkId, Long> evictedAtNs = new LinkedHashMap<>(256, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<ChunkId, Long> eldest) {
            return size() > EVICTED_REMEMBERED;
        }
    };
    private volatile long sampleBelow = (long) (0.01 * SAMPLE_SCALE);
    private volatile Sink sink = NONE;

    /** Times come from {@code clockNs} (System::nanoTime in the server), not from the store's clock. */
    ChunkLifecycle(LongSupplier clockNs) {
        this.clockNs = clockNs;
    }

    /** {@code --metrics-sample-rate}: the fraction of chunks followed, in (0, 1]; set before traffic. */
    public void sampleRate(double rate) {
        sampleBelow = Math.round(rate * SAMPLE_SCALE);
    }

    public void sink(Sink sink) {
        this.sink = sink;
    }

    private boolean isSampled(ObjectKey key) {
        // the chunk hash is uniform: its low bits choose the sample, the same for every event of the chunk
        return (key.hash().w1() & (SAMPLE_SCALE - 1)) < sampleBelow;
    }

    private long countAccess(String wireSalt) {
        String salt = WireKey.of(wireSalt); // a megabyte of salt is not kept after its last object
        long[] count = saltAccesses.get(salt);
        if (count == null) {
            if (saltAccesses.size() >= SALTS_COUNTED) {
                saltAccesses.clear();
            }
            count = new long[1];
            saltAccesses.put(salt, count);
        }
        return ++count[0];
    }

    /** A chunk was reserved to be written. */
    @Override
    public void reserved(StoredObject object, String salt) {
        long accesses = countAccess(salt);
        if (!isSampled(object.key)) {
            return;
        }
        long nowNs = clockNs.getAsLong();
        Long evictedNs = evictedAtNs.remove(ChunkId.of(object.key));
        if (evictedNs != null) {
            sink.evictReuseGap(Math.min(nowNs - evictedNs, EVICT_REUSE_CAP_NS));
        }
        Touch touch = new Touch();
        touch.storedNs = nowNs;
        touch.atNs = nowNs;
        touch.saltAccesses = accesses;
        sampled.put(object, touch);
    }

    /** A copy out of the chunk served a RETRIEVE. */
    @Override
    public void read(StoredObject object, String salt, Keys keys) {
        long accesses = countAccess(salt);
        Touch touch = sampled.get(object);
        if (touch == null) {
            return;
        }
        long nowNs = clockNs.getAsLong();
        sink.reuseGap(nowNs - touch.atNs);
        sink.realReuseGap(salt, nowNs - touch.atNs, accesses - touch.saltAccesses - 1);
        touch.atNs = nowNs;
        touch.saltAccesses = accesses;
    }

    /** The chunk left the pool; an eviction (watermark or demand: the policy chose it) ends a sampled lifetime. */
    @Override
    public void removed(StoredObject object, String model, Keys keys, EvictionReason reason) {
        Touch touch = sampled.remove(object);
        if (touch == null || reason != EvictionReason.WATERMARK && reason != EvictionReason.DEMAND) {
            return;
        }
        long nowNs = clockNs.getAsLong();
        sink.lifetime(nowNs - touch.storedNs);
        sink.idleBeforeEvict(nowNs - touch.atNs);
        evictedAtNs.put(ChunkId.of(object.key), nowNs);
    }

    /** Sampled chunks in the pool now (tests). */
    int followed() {
        return sampled.size();
    }
}
