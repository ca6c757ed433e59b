package io.lmcache.server.tier;


import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.L2AdmissionSettings;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.L2Prefetcher;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoreMeters;
import io.lmcache.server.transfer.GroupKind;
import io.lmcache.server.transfer.LookupGeometry;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tier.admission.L2WriteGate;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectShape;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The store and prefetch controllers against in-memory adapters and a real L1 store over real memory. */
class L2ControllersTest {
    private static final int CHUNK = 16;
    private static final int CHUNKS = 4;
    private static final long OBJECT_BYTES = 64 * 1024;
    private static final int FORMAT = 1;
    private static final int[] TOKENS = IntStream.range(0, CHUNK * CHUNKS).map(i -> i * 7 + 3).toArray();
    private final Arena arena = Arena.ofShared();
    private final ServerMetrics serverMetrics = new ServerMetrics();
    private final L2Metrics metrics = new L2Metrics(serverMetrics);
    private ObjectStore store;
    private MemorySegment pool;
    private final byte[] hashes = ChunkHashes.of(key("x"), CHUNK, CHUNKS);
    /** What the workers registered: one object group at world size 1, unless a test says otherwise. */
    private ObjectShapes shapes = model -> Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)));
    private StoreController.L2Lookups lookups = (model, worldSize) -> true;
    private int maxInFlight = 8;
    private long nowNs;

    @AfterEach
    void close() {
        arena.close();
    }

    private void l1(int objects) {
        long bytes = objects * OBJECT_BYTES;
        pool = arena.allocate(bytes, 4096);
        store = ReadyStores.lru(bytes, bytes);
    }

    private static CacheKey key(String requestId) {
        return key(requestId, 1);
    }

    private static CacheKey key(String requestId, int worldSize) {
        return new CacheKey("org/model", worldSize, CacheKey.NO_WORKER, TOKENS, 0, TOKENS.length, requestId, "", 1, RequestConfigs.NONE);
    }

    /** Chunk {@code chunk}'s key as world size 1 writes it: LMCache's packed kv rank 0x01000100, and the object's format. */
    private L2Key l2Key(int chunk) {
        ChunkHash hash = ChunkHash.unpack(hashes, chunk);
        return L2Key.of("org/model", 0x01000100, 0, new L2Hash(hash.w0(), hash.w1(), hash.w2(), hash.w3()), "");
    }

    private static byte[] pattern(int seed) {
        byte[] bytes = new byte[(int) OBJECT_BYTES];
        Arrays.fill(bytes, (byte) seed);
        bytes[0] = (byte) (seed * 31);
        return bytes;
    }

    private void has(MemoryAdapter adapter, int chunk, int seed) {
        adapter.data.put(l2Key(chunk), pattern(seed));
    }

    private record Setup(LookupModule lookup, PrefetchController controller, LookupLeases leases) {}

    private Setup prefetch(boolean retain, L2Adapter... adapters) {
        for (int a = 0; a < adapters.length; a++) {
            metrics.adapter(serverMetrics, a, "memory", () -> 0);
        }
        PrefetchContext ctx = new PrefetchContext(List.of(adapters), store, pool, CHUNK, PrefixFold.LEADING_RUN, retain,
                metrics);
        PrefetchController controller = new PrefetchController(ctx, model -> shapes.byWorldSize(model), maxInFlight, () -> { }, () -> nowNs,
                PrefetchController.DEADLINE_NS);
        LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        return new Setup(new LookupModule(CHUNK, store, leases, results, serverMetrics, new ObjectGroupCatalog(true), controller), controller,
                leases);
    }

    /** LOOKUP, then QUERY: None until the controller has run the prefetch through. */
    private static Reply lookupAndRun(Setup setup, String requestId) {
        setup.lookup().lookup(new Request.Lookup(key(requestId), 1));
        assertEquals(Reply.NONE, setup.lookup().query(requestId), "QUERY_PREFETCH_STATUS answers None while the prefetch runs");
        for (int turn = 0; turn < 10; turn++) {
            setup.controller().doWork();
        }
        return setup.lookup().query(requestId);
    }

    private byte[] l1Bytes(int chunk) {
        StoredObject object = store.pinReady(new ChunkKey("org/model", "", 0, 0, ChunkHash.unpack(hashes, chunk)), OBJECT_BYTES, FORMAT);
        try {
            return pool.asSlice(object.offset(), OBJECT_BYTES).toArray(ValueLayout.JAVA_BYTE);
        } finally {
            store.unpin(object, false);
        }
    }

    @Test
    void theLowestAdapterLoadsEachKeyAndEveryL2LockIsGivenBack() {
        l1(8);
        MemoryAdapter first = new MemoryAdapter();
        MemoryAdapter second = new MemoryAdapter();
        for (int chunk = 0; chunk < CHUNKS; chunk++) {
            has(second, chunk, 20 + chunk);
        }
        has(first, 0, 10);
        has(first, 1, 11);
        Setup setup = prefetch(false, first, second);
        assertEquals(new Reply.Int(CHUNKS), lookupAndRun(setup, "r"));
        assertArrayEquals(pattern(10), l1Bytes(0), "adapter 0 had chunk 0: it loaded it");
        assertArrayEquals(pattern(22), l1Bytes(2), "only adapter 1 had chunk 2");
        assertTrue(first.lockedKeys() == 0 && second.lockedKeys() == 0, "phase-1 and phase-2 unlocks balance every lookup lock");
        assertEquals(List.of(l2Key(0), l2Key(1)), second.unlocks.getFirst(), "adapter 1's keys that adapter 0 loads: unlocked at once");
        assertEquals(CHUNKS, store.snapshot().readLocked(), "each loaded object published with its reader's lock");
        setup.leases().end("r");
        assertEquals(0, store.snapshot().objects(), "temporary objects leave L1 with their last read lock");
        assertEquals(CHUNKS, metrics.loadCompletedObjects.sum());
        store.checkInvariants();
    }

    @Test
    void aLoadInFlightShowsInTheGaugesAndTheSeriesCarryLmcachesNamesAndLabels() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        has(adapter, 1, 2);
        adapter.holdLoads = true;
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("held"), 1));
        for (int turn = 0; turn < 10; turn++) {
            setup.controller().doWork();
        }
        L2Metrics.Adapter counters = metrics.adapter(0);
        assertEquals(1, counters.inflightLoads().get(), "one load task, not answered yet");
        assertEquals(2 * OBJECT_BYTES, counters.inflightLoadBytes().get(), "the L1 bytes reserved for its two objects");
        String during = serverMetrics.scrape();
        assertTrue(during.contains("lmcache_mp_inflight_load_memory_usage_bytes{adapter_index=\"0\",l2_name=\"memory\"} " + 2.0 * OBJECT_BYTES),
                during);
        assertTrue(during.contains("lmcache_mp_l2_prefetch_failure_chunks_total{model_name=\"org/model\",reason=\"not_found\"} 0.0"),
                "declared at zero with the model's first prefetch:\n" + during);
        adapter.releaseLoads();
        for (int turn = 0; turn < 10; turn++) {
            setup.controller().doWork();
        }
        assertEquals(new Reply.Int(2), setup.lookup().query("held"));
        assertEquals(0, counters.inflightLoads().get());
        assertEquals(0, counters.inflightLoadBytes().get());
        assertEquals(1, counters.loadThroughput().count(), "one GB/s sample per finished load task");
        String scrape = serverMetrics.scrape();
        for (String line : List.of("lmcache_mp_l2_prefetch_lookup_requests_total 1.0",
                "lmcache_mp_l2_prefetch_lookup_objects_chunks_total{cache_salt=\"\"} 4.0", "lmcache_mp_l2_prefetch_hit_chunks_total 2.0",
                "lmcache_mp_l2_prefetch_load_submitted_requests_total 1.0",
                "lmcache_mp_l2_prefetch_load_submitted_objects_chunks_total{cache_salt=\"\"} 2.0",
                "lmcache_mp_l2_prefetch_load_completed_chunks_total{cache_salt=\"\"} 2.0",
                "lmcache_mp_l2_load_completed_requests_total{adapter_index=\"0\",l2_name=\"memory\"} 1.0",
                "lmcache_mp_l2_load_bytes_total{adapter_index=\"0\",l2_name=\"memory\"} " + 2.0 * OBJECT_BYTES,
                "lmcache_mp_l2_load_throughput_GB_per_second_count{adapter_index=\"0\",l2_name=\"memory\"} 1",
                "lmcache_mp_num_inflight_l2_loads{adapter_index=\"0\",l2_name=\"memory\"} 0.0",
                "lmcache_mp_l2_usage_bytes{adapter_index=\"0\",l2_name=\"memory\"} 0.0")) {
            assertTrue(scrape.contains(line), line + " in\n" + scrape);
        }
        setup.leases().end("held");
        store.checkInvariants();
    }

    @Test
    void aGapTrimsThePlanAndAFailedLoadShrinksThePrefixAgain() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        has(adapter, 1, 2);
        has(adapter, 3, 4);
        Setup setup = prefetch(false, adapter);
        assertEquals(new Reply.Int(2), lookupAndRun(setup, "gap"), "chunk 2 is missing: chunk 3 is never loaded");
        assertEquals(List.of(l2Key(3)), adapter.unlocks.getFirst(), "found but outside the prefix: unlocked before any load");
        setup.leases().end("gap");

        adapter.failingLoads.add(l2Key(1));
        assertEquals(new Reply.Int(1), lookupAndRun(setup, "failed"), "the load of chunk 1 failed: the prefix re-folds to 1");
        assertEquals(1, metrics.prefetchNotFound.sum());
        assertEquals(1, store.snapshot().objects(), "the failed reservation was dropped");
        assertEquals(0, adapter.lockedKeys());
        setup.leases().end("failed");
        assertEquals(0, store.snapshot().objects());
        store.checkInvariants();
    }

    @Test
    void noRoomInL1TrimsThePlanAndIsCounted() {
        l1(2);
        StoreMeters.bind(serverMetrics, store);
        MemoryAdapter adapter = new MemoryAdapter();
        for (int chunk = 0; chunk < CHUNKS; chunk++) {
            has(adapter, chunk, chunk);
        }
        Setup setup = prefetch(false, adapter);
        assertEquals(new Reply.Int(2), lookupAndRun(setup, "oom"));
        assertEquals(2, metrics.prefetchL1Oom.sum());
        String scrape = serverMetrics.scrape();
        assertTrue(scrape.contains("lmcache_mp_l2_prefetch_failure_chunks_total{model_name=\"org/model\",reason=\"l1_oom\"} 2.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l1_allocation_failure_chunks_total{during=\"l2_prefetch\",model_name=\"org/model\"} 2.0"),
                scrape);
        assertFalse(scrape.contains("during=\"l1_store\""), "a prefetch's failures are not a STORE's");
        assertEquals(0, adapter.lockedKeys());
        store.checkInvariants();
    }

    @Test
    void retainKeepsLoadedObjectsAfterTheirLastReader() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        Setup setup = prefetch(true, adapter);
        assertEquals(new Reply.Int(1), lookupAndRun(setup, "keep"));
        setup.leases().end("keep");
        assertEquals(1, store.snapshot().objects());
        assertEquals(1, store.snapshot().evictable(), "an ordinary L1 object now");
    }

    @Test
    void anEndedRequestGivesBackWhatItsPrefetchLoaded() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        has(adapter, 1, 2);
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("gone"), 1));
        setup.lookup().endSession(new Request.EndSession("gone", null));
        for (int turn = 0; turn < 10; turn++) {
            setup.controller().doWork();
        }
        assertEquals(0, store.snapshot().objects(), "nobody will retrieve them: released at completion");
        assertEquals(0, store.snapshot().readLocked());
        assertEquals(new Reply.Int(0), setup.lookup().query("gone"));
    }

    @Test
    void l1HitsAreKeptAndOnlyTheRestIsAskedOfL2() {
        l1(8);
        StoredObject first = store.reserve(new ChunkKey("org/model", "", 0, 0, ChunkHash.unpack(hashes, 0)), OBJECT_BYTES, FORMAT);
        store.commit(first);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 1, 2);
        Setup setup = prefetch(false, adapter);
        assertEquals(new Reply.Int(2), lookupAndRun(setup, "mixed"));
        assertEquals(3, metrics.prefetchLookupObjects.sum(), "chunks 1..3: chunk 0 was an L1 hit");
        assertEquals(CHUNK, serverMetrics.registry().find("lmcache_mp.lookup_hit_l1_tokens").functionCounter().count(), 0.0, "one chunk's tokens from L1");
        assertEquals(CHUNK, serverMetrics.registry().find("lmcache_mp.lookup_hit_l2_tokens").functionCounter().count(), 0.0, "one from L2");
    }

    // --- store controller -----------------------------------------------------------------------

    private StoredObject commit(int chunk) {
        StoredObject object = store.reserve(new ChunkKey("org/model", "", 0, 0, ChunkHash.unpack(hashes, chunk)), OBJECT_BYTES, FORMAT);
        pool.asSlice(object.offset(), OBJECT_BYTES).copyFrom(MemorySegment.ofArray(pattern(chunk)));
        assertTrue(store.commit(object));
        return object;
    }

    private StoreController storeController(boolean skipL1, long backlogBytes, MemoryAdapter... adapters) {
        return storeController(skipL1, backlogBytes, new L2WriteGate(L2AdmissionSettings.ALL, 1024, metrics, System::nanoTime), adapters);
    }

    private StoreController storeController(boolean skipL1, long backlogBytes, L2WriteGate gate, MemoryAdapter... adapters) {
        for (int a = 0; a < adapters.length; a++) {
            metrics.adapter(serverMetrics, a, "memory", () -> 0);
        }
        StoreController controller = new StoreController(List.of(adapters), new L1Side(store, pool), skipL1, new ModelLayouts(
                model -> shapes.byWorldSize(model), (model, worldSize) -> lookups.consultsL2(model, worldSize)),
                new StoreController.Admission(gate, backlogBytes), metrics, () -> { });
        store.listen(controller);
        return controller;
    }

    @Test
    void frequencyAdmissionTurnsTheFirstStoreAwayAndWritesTheObjectWhenALookupSeesItAgain() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        L2WriteGate gate = new L2WriteGate(new L2AdmissionSettings(2, 0), 1024, metrics, System::nanoTime);
        StoreController writes = storeController(false, Long.MAX_VALUE, gate, adapter);
        commit(0);
        writes.doWork();
        assertTrue(adapter.data.isEmpty(), "seen once: not written");
        assertEquals(OBJECT_BYTES, metrics.admissionSkippedBytes.sum());
        assertEquals(OBJECT_BYTES, store.evict(Long.MAX_VALUE, StoreCounters.EvictionReason.WATERMARK), "no hold kept for L2: evictable");
        commit(0);
        writes.doWork();
        assertArrayEquals(pattern(0), adapter.data.get(l2Key(0)), "the second STORE of the same chunk is admitted");
        assertEquals(OBJECT_BYTES, metrics.admissionAdmittedBytes.sum());

        commit(1);
        writes.doWork();
        assertFalse(adapter.data.containsKey(l2Key(1)));
        L2Prefetcher lookups = L1HitAdmission.wrap(new PrefetchController(new PrefetchContext(List.of(adapter), store, pool, CHUNK,
                PrefixFold.LEADING_RUN, false, metrics), model -> shapes.byWorldSize(model), maxInFlight, () -> { }), gate, store, writes);
        LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupModule lookup = new LookupModule(CHUNK, store, leases, new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime),
                serverMetrics, new ObjectGroupCatalog(true), lookups);
        lookup.lookup(new Request.Lookup(key("again"), 1));
        writes.doWork();
        assertArrayEquals(pattern(1), adapter.data.get(l2Key(1)), "a LOOKUP's L1 hit was its second sighting: written from L1");
        assertEquals(OBJECT_BYTES, metrics.admissionAdmittedOnLookupBytes.sum());
        int tasks = adapter.storeTasks;
        lookup.endSession(new Request.EndSession("again", null));
        lookup.lookup(new Request.Lookup(key("third"), 1));
        writes.doWork();
        assertEquals(tasks, adapter.storeTasks, "admitted once: a third sighting writes nothing");
        assertTrue(((Map<?, ?>) writes.status().get("admission")).get("policy").equals("frequency:2"));
    }

    @Test
    void writeThroughHoldsTheObjectUntilEveryAdapterAnswered() {
        l1(8);
        MemoryAdapter fast = new MemoryAdapter();
        MemoryAdapter slow = new MemoryAdapter();
        slow.holdStores = true;
        StoreController controller = storeController(false, Long.MAX_VALUE, fast, slow);
        commit(0);
        controller.doWork();
        assertArrayEquals(pattern(0), fast.data.get(l2Key(0)));
        assertEquals(0, store.evict(Long.MAX_VALUE, StoreCounters.EvictionReason.WATERMARK), "held for the slow adapter: not evictable");
        slow.releaseStores();
        controller.doWork();
        assertArrayEquals(pattern(0), slow.data.get(l2Key(0)));
        assertEquals(OBJECT_BYTES, store.evict(Long.MAX_VALUE, StoreCounters.EvictionReason.WATERMARK), "given back: evictable again");
        assertEquals(2, metrics.storeCompletedObjects.sum());
        assertEquals(1, metrics.adapter(0).storeThroughput().count(), "one GB/s sample per store task that wrote bytes");
        assertEquals(1, metrics.adapter(1).storeThroughput().count());
        String scrape = serverMetrics.scrape();
        assertTrue(scrape.contains("lmcache_mp_l2_store_submitted_requests_total 2.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_store_submitted_objects_chunks_total{cache_salt=\"\"} 2.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_store_completed_objects_chunks_total{cache_salt=\"\"} 2.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_store_completed_requests_total{adapter_index=\"1\",l2_name=\"memory\"} 1.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_store_throughput_GB_per_second_count{adapter_index=\"0\",l2_name=\"memory\"} 1"), scrape);
        assertTrue(scrape.contains("lmcache_mp_num_inflight_l2_stores{adapter_index=\"1\",l2_name=\"memory\"} 0.0"), scrape);
        serverMetrics.reset();
        assertEquals(0, metrics.adapter(0).storeThroughput().count(), "a reset histogram starts again");
        assertEquals(0, metrics.storeCompletedObjects.sum());
        assertTrue(serverMetrics.scrape().contains("lmcache_mp_l2_store_throughput_GB_per_second_count{adapter_index=\"0\",l2_name=\"memory\"} 0"));
    }

    @Test
    void aFailedStoreIsCountedNotRetriedAndTheObjectStaysInL1() {
        l1(8);
        MemoryAdapter good = new MemoryAdapter();
        MemoryAdapter bad = new MemoryAdapter();
        bad.failStores = true;
        StoreController controller = storeController(true, Long.MAX_VALUE, good, bad);
        commit(0);
        for (int turn = 0; turn < 5; turn++) {
            controller.doWork();
        }
        assertEquals(1, bad.storeTasks, "never retried");
        assertEquals(1L, controller.status().get("failed_task_count"));
        assertEquals(1L, controller.status().get("failed_key_count"));
        assertEquals(1, store.snapshot().objects(), "skip_l1 drops only what every adapter stored");
        assertEquals(1, store.snapshot().evictable());
    }

    @Test
    void skipL1DropsWhatEveryAdapterStoredAndTheBacklogIsBounded() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        adapter.holdStores = true;
        StoreController controller = storeController(true, OBJECT_BYTES, adapter);
        commit(0);
        commit(1);
        assertEquals(1, metrics.storeSkippedObjects.sum(), "the second object found the backlog full: L1 only");
        assertEquals(1, store.snapshot().pinned());
        controller.doWork();
        adapter.releaseStores();
        controller.doWork();
        assertFalse(adapter.data.containsKey(l2Key(1)));
        assertEquals(1, store.snapshot().objects(), "chunk 0 moved to L2, chunk 1 stayed");
        assertEquals(1, store.counters().evictions(StoreCounters.EvictionReason.MOVED_TO_L2));
        store.checkInvariants();
    }

    // --- the L2 key's layout identity (review item 1) --------------------------------------------

    /** Writes chunks 0..3 through to the adapter, then empties L1, so a LOOKUP can only hit them in L2. */
    private void writeThroughAndClearL1(MemoryAdapter adapter) {
        StoreController controller = storeController(false, Long.MAX_VALUE, adapter);
        for (int chunk = 0; chunk < CHUNKS; chunk++) {
            commit(chunk);
        }
        controller.doWork();
        store.unlisten(controller);
        assertEquals(CHUNKS, adapter.data.size());
        store.evict(Long.MAX_VALUE, StoreCounters.EvictionReason.WATERMARK);
        assertEquals(0, store.snapshot().objects());
    }

    @Test
    void writeThroughKeysCarryThePackedKvRankAndTheFormat() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        writeThroughAndClearL1(adapter);
        assertArrayEquals(pattern(2), adapter.data.get(l2Key(2)), "world size 1, rank 0: kv rank 0x01000100; the object's format");
        Setup setup = prefetch(false, adapter);
        assertEquals(new Reply.Int(CHUNKS), lookupAndRun(setup, "same"), "the same layout finds its objects again");
        setup.leases().end("same");
    }

    @Test
    void aLayoutLmcacheNeverWritesIsAnotherKeyNeverALoad() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        writeThroughAndClearL1(adapter);
        // the model is registered again in a layout whose bytes are not LMCache's (HND blocks in block order, a GPU's fallback
        // without the transposing kernel), of the same size:
        // its objects are named apart (an L2 tag), so the LMCache-layout objects stored before are not its keys
        shapes = model -> Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT + 1, FORMAT + 1, "v1 torch.bfloat16[2,2,256,2x64] hnd16;")));
        Setup setup = prefetch(false, adapter);
        assertEquals(new Reply.Int(0), lookupAndRun(setup, "other-format"));
        assertEquals(0, adapter.loadTasks, "nothing was loaded");
        assertEquals(0, store.snapshot().objects());
        store.checkInvariants();
    }

    @Test
    void anotherWorldSizeNeverSharesAnObject() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        writeThroughAndClearL1(adapter);
        // a TP=2 deployment of the model whose per-rank objects happen to have the TP=1 size and format
        shapes = model -> Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)), 2, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)));
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("tp2", 2), 1));
        for (int turn = 0; turn < 10; turn++) {
            setup.controller().doWork();
        }
        assertEquals(new Reply.Int(0), setup.lookup().query("tp2"), "rank 0 of TP=2 (0x02000200) is not rank 0 of TP=1 (0x01000100)");
        assertEquals(0, adapter.loadTasks);
    }

    @Test
    void anObjectWhoseWorldSizeCannotBeToldStaysL1Only() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        shapes = model -> Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)), 2, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)));
        StoreController controller = storeController(true, Long.MAX_VALUE, adapter);
        commit(0);
        controller.doWork();
        assertEquals(0, adapter.storeTasks, "rank 0 of world size 1 or 2: no key is right, none is written");
        assertEquals(1, metrics.storeAmbiguousLayout.sum());
        shapes = model -> Map.of();
        commit(1);
        controller.doWork();
        assertEquals(1, metrics.storeNoLayout.sum(), "no worker of the model is registered (any more)");
        String scrape = serverMetrics.scrape();
        for (String reason : List.of("ambiguous_layout", "no_layout")) {
            String line = "lmcache_mp_l2_store_skipped_objects_chunks_total{reason=\"" + reason + "\"} 1.0";
            assertTrue(scrape.contains(line), line + " in\n" + scrape);
        }
        assertTrue(scrape.contains("lmcache_mp_l2_store_skipped_objects_chunks_total{reason=\"backlog\"} 0.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_store_submitted_requests_total 0.0"), "neither was submitted:\n" + scrape);
        assertEquals(2, store.snapshot().objects(), "both stay in L1, skip_l1 or not");
        assertEquals(2, store.snapshot().evictable(), "their holds were given back");
        assertEquals(0L, controller.status().get("held_bytes"));
    }

    // --- skip_l1 and hybrid models (review item 3) -----------------------------------------------

    @Test
    void skipL1KeepsTheObjectsOfModelsWhoseLookupNeverReadsL2() {
        l1(8);
        ObjectGroupCatalog catalog = new ObjectGroupCatalog(true);
        // a hybrid model: a full-attention group and a sliding window of 2 chunks; its LOOKUP folds in L1 alone
        catalog.publish("org/model", 1, new LookupGeometry(new int[] {-1, 2}, new GroupKind[] {GroupKind.ATTENTION, GroupKind.ATTENTION}));
        lookups = (model, worldSize) -> catalog.lookupGeometry(model, worldSize).plain(); // as the L2 tier part (DataParts) builds it
        MemoryAdapter adapter = new MemoryAdapter();
        StoreController controller = storeController(true, Long.MAX_VALUE, adapter);
        commit(0);
        controller.doWork();
        assertArrayEquals(pattern(0), adapter.data.get(l2Key(0)), "written through");
        assertEquals(1, store.snapshot().objects(), "and kept in L1: dropped, it could never hit again");
        assertEquals(0, store.counters().evictions(StoreCounters.EvictionReason.MOVED_TO_L2));
        assertEquals(1L, controller.status().get("skip_l1_kept_key_count"));
        catalog.publish("org/model", 1, LookupGeometry.SINGLE);
        commit(1);
        controller.doWork();
        assertEquals(1, store.snapshot().objects(), "registered again as a plain model: skip_l1 moves chunk 1 to L2");
        assertEquals(1, store.counters().evictions(StoreCounters.EvictionReason.MOVED_TO_L2));
    }

    // --- several object groups (review item 4) ---------------------------------------------------

    @Test
    void aLayoutOfSeveralObjectGroupsIsAnsweredFromL1AloneAndItsLocksLineUp() {
        l1(8);
        StoredObject first = store.reserve(new ChunkKey("org/model", "", 0, 0, ChunkHash.unpack(hashes, 0)), OBJECT_BYTES, FORMAT);
        store.commit(first);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 1, 2);
        shapes = model -> Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT), new ObjectShape(1, OBJECT_BYTES / 2, FORMAT)));
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("groups"), 1));
        assertEquals(new Reply.Int(1), setup.lookup().query("groups"), "answered at once with the L1 hit: no prefetch");
        setup.controller().doWork();
        assertEquals(0, adapter.lookupTasks, "L2 was not asked");
        assertEquals(1, metrics.prefetchObjectGroups.sum());
        String scrape = serverMetrics.scrape();
        assertTrue(scrape.contains("lmcache_mp_l2_prefetch_rejected_requests_total{reason=\"object_groups\"} 1.0"), scrape);
        assertTrue(scrape.contains("lmcache_mp_l2_prefetch_rejected_requests_total{reason=\"no_layout\"} 0.0"), scrape);
        assertEquals(1, store.snapshot().readLocked(), "the L1 hit's lock is the lease's");
        setup.leases().end("groups");
        assertEquals(0, store.snapshot().readLocked(), "and given back with it");
        store.checkInvariants();
    }

    // --- the prefetch deadline (review item 2) ---------------------------------------------------

    @Test
    void aLoadPastTheDeadlineAnswersWithTheL1HitsAndKeepsItsReservationsUntilTheAdapterAnswers() {
        l1(8);
        StoredObject first = store.reserve(new ChunkKey("org/model", "", 0, 0, ChunkHash.unpack(hashes, 0)), OBJECT_BYTES, FORMAT);
        store.commit(first);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 1, 2);
        has(adapter, 2, 3);
        adapter.holdLoads = true;
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("slow"), 1));
        for (int turn = 0; turn < 5; turn++) {
            setup.controller().doWork();
        }
        assertEquals(1, adapter.loadTasks);
        assertEquals(Reply.NONE, setup.lookup().query("slow"), "loading");
        nowNs += PrefetchController.DEADLINE_NS - 1;
        setup.controller().doWork();
        assertEquals(Reply.NONE, setup.lookup().query("slow"), "not yet past the deadline");
        nowNs += 2;
        setup.controller().doWork();
        assertEquals(new Reply.Int(1), setup.lookup().query("slow"), "past it: the LOOKUP's L1 hit, at once");
        assertEquals(1, metrics.prefetchTimeouts.sum());
        assertTrue(serverMetrics.scrape().contains("lmcache_mp_l2_prefetch_timeout_requests_total 1.0"), serverMetrics.scrape());
        assertEquals(3, store.snapshot().objects(), "the two objects the load writes into are still reserved");
        assertEquals(1, setup.controller().status().get("in_flight_request_count"), "its slot is held until the adapter answers");
        L2Metrics.Adapter counters = metrics.adapter(0);
        assertEquals(1, counters.inflightLoads().get(), "still in flight: the adapter has not answered");
        assertEquals(2 * OBJECT_BYTES, counters.inflightLoadBytes().get(), "and still writing into its two reserved objects");
        adapter.releaseLoads();
        for (int turn = 0; turn < 5; turn++) {
            setup.controller().doWork();
        }
        assertEquals(1, store.snapshot().objects(), "the late load's objects are dropped once it answered");
        assertEquals(0, adapter.lockedKeys(), "and its keys unlocked in L2");
        assertEquals(0, setup.controller().status().get("in_flight_request_count"));
        assertEquals(0, counters.inflightLoads().get(), "the late answer took it out of the gauges, once");
        assertEquals(0, counters.inflightLoadBytes().get());
        assertEquals(1, counters.loadCompleted().sum(), "the task finished, late");
        assertEquals(0, metrics.loadCompletedObjects.sum(), "but published nothing");
        assertEquals(1, store.snapshot().readLocked(), "the L1 hit's lock is the lease's");
        setup.leases().end("slow");
        assertEquals(0, store.snapshot().readLocked());
        store.checkInvariants();
    }

    @Test
    void aLoadAbandonedAtShutdownLeavesTheInFlightGaugesOnceExpiredOrNot() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        has(adapter, 1, 2);
        adapter.holdLoads = true;
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("expired"), 1));
        setup.controller().doWork();
        nowNs += PrefetchController.DEADLINE_NS + 1;
        setup.controller().doWork();
        assertEquals(new Reply.Int(0), setup.lookup().query("expired"), "past the deadline, its load still in flight");
        // another model's prompt (the expired load still holds this one's reservations)
        CacheKey other = new CacheKey("org/other", 1, CacheKey.NO_WORKER, TOKENS, 0, TOKENS.length, "running", "", 1, RequestConfigs.NONE);
        byte[] otherHashes = ChunkHashes.of(other, CHUNK, CHUNKS);
        for (int chunk = 0; chunk < 2; chunk++) {
            ChunkHash hash = ChunkHash.unpack(otherHashes, chunk);
            adapter.data.put(L2Key.of("org/other", 0x01000100, 0, new L2Hash(hash.w0(), hash.w1(), hash.w2(), hash.w3()), ""),
                    pattern(chunk));
        }
        setup.lookup().lookup(new Request.Lookup(other, 1));
        for (int turn = 0; turn < 3; turn++) {
            setup.controller().doWork();
        }
        L2Metrics.Adapter counters = metrics.adapter(0);
        assertEquals(2, counters.inflightLoads().get(), "two loads in flight, one of an expired prefetch");
        assertEquals(4 * OBJECT_BYTES, counters.inflightLoadBytes().get());
        setup.controller().onClose();
        assertEquals(new Reply.Int(0), setup.lookup().query("running"), "answered with its L1 hits at shutdown");
        assertEquals(0, counters.inflightLoads().get(), "both left the gauges");
        assertEquals(0, counters.inflightLoadBytes().get());
        assertEquals(0, counters.loadCompleted().sum(), "neither finished");
        adapter.releaseLoads();
        setup.controller().doWork();
        assertEquals(0, counters.inflightLoads().get(), "a late answer after shutdown changes nothing");
    }

    @Test
    void aLookupOrAWaitPastTheDeadlineIsAnsweredAndItsLateLocksAreGivenBack() {
        l1(8);
        MemoryAdapter adapter = new MemoryAdapter();
        has(adapter, 0, 1);
        adapter.holdLookups = true;
        maxInFlight = 1;
        Setup setup = prefetch(false, adapter);
        setup.lookup().lookup(new Request.Lookup(key("running"), 1));
        setup.controller().doWork();
        setup.lookup().lookup(new Request.Lookup(key("waiting"), 1));
        setup.controller().doWork();
        assertEquals(1, adapter.lookupTasks, "one in flight, one waiting its turn");
        nowNs += PrefetchController.DEADLINE_NS + 1;
        setup.controller().doWork();
        assertEquals(new Reply.Int(0), setup.lookup().query("running"));
        assertEquals(new Reply.Int(0), setup.lookup().query("waiting"), "the waiting one never started");
        assertEquals(2, metrics.prefetchTimeouts.sum());
        assertEquals(1, adapter.lookupTasks);
        adapter.releaseLookups();
        setup.controller().doWork();
        assertEquals(0, adapter.lockedKeys(), "what the late lookup found and locked is unlocked");
        assertEquals(0, adapter.loadTasks, "and never loaded");
        assertEquals(0, store.snapshot().objects());
        assertEquals(0, setup.controller().status().get("in_flight_request_count"));
    }
}
