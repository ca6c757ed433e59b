package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;
import static io.lmcache.server.metrics.MeterSpec.summary;

/** The L2 tier's series under LMCache's names and labels (see L2Metrics): the wire label (cache_salt, model_name) of a family is its last label. */
public enum L2Catalogue implements CatalogueEntry {
    STORE_SUBMITTED_REQUESTS(counter("lmcache_mp.l2_store_submitted_requests", "L2 store tasks submitted (one per adapter and batch of objects)")),
    STORE_SUBMITTED_OBJECTS(counter("lmcache_mp.l2_store_submitted_objects_chunks", "objects submitted for writing to L2", "cache_salt")),
    STORE_COMPLETED_OBJECTS(counter("lmcache_mp.l2_store_completed_objects_chunks", "objects written to L2 (tasks that succeeded)", "cache_salt")),
    STORE_FAILED_OBJECTS(counter("lmcache_mp.l2_store_failed_objects_chunks", "objects of L2 store tasks that failed (not retried)", "cache_salt")),
    STORE_SKIPPED_OBJECTS(counter("lmcache_mp.l2_store_skipped_objects_chunks",
            "committed objects not written to L2, by reason (backlog: the write-through backlog was full; no_layout, "
            + "ambiguous_layout: no single registered world size has objects of that shape, so the packed kv rank is unknown; "
            + "sliding_window: --l2-store-policy full_attention_only kept it in L1)", "reason")),
    STORE_FLUSHED_OBJECTS(counter("lmcache_mp.l2_store_flushed_objects_chunks",
            "objects a window commit (--commit-policy) submitted to L2 at END_SESSION, the L1 copy kept")),
    STORE_FLUSH_SKIPPED_OBJECTS(counter("lmcache_mp.l2_store_flush_skipped_objects_chunks",
            "objects of a committed window not copied to L2 (no longer READY in L1, or the write-through backlog was full)")),
    ADMISSION_BYTES(counter("lmcache_mp.l2_admission_bytes",
            "committed bytes the L2 write-through decided on, by decision (admitted: sent at its STORE; admitted_on_lookup: sent "
            + "when a LOOKUP's L1 hit made it frequent enough; skipped: --l2-admission frequency:N had not seen it N times; "
            + "budget_dropped: past its tenant's --l2-write-budget-bytes-per-second)", "decision")),
    PREFETCH_LOOKUP_REQUESTS(counter("lmcache_mp.l2_prefetch_lookup_requests", "LOOKUPs that asked L2 for the chunks L1 did not hit")),
    PREFETCH_LOOKUP_OBJECTS(counter("lmcache_mp.l2_prefetch_lookup_objects_chunks", "objects asked of L2 by those LOOKUPs", "cache_salt")),
    PREFETCH_HIT_CHUNKS(counter("lmcache_mp.l2_prefetch_hit_chunks", "objects some L2 adapter reported present")),
    LOAD_SUBMITTED_REQUESTS(counter("lmcache_mp.l2_prefetch_load_submitted_requests", "L2 load tasks submitted (one per adapter and LOOKUP)")),
    LOAD_SUBMITTED_OBJECTS(counter("lmcache_mp.l2_prefetch_load_submitted_objects_chunks", "objects submitted for loading from L2", "cache_salt")),
    LOAD_COMPLETED_OBJECTS(counter("lmcache_mp.l2_prefetch_load_completed_chunks", "objects loaded from L2 into L1", "cache_salt")),
    PREFETCH_FAILURE_CHUNKS(counter("lmcache_mp.l2_prefetch_failure_chunks", "objects found in L2 but not loaded, by reason", "reason", "model_name")),
    PREFETCH_REJECTED_REQUESTS(counter("lmcache_mp.l2_prefetch_rejected_requests", "LOOKUPs answered from L1 alone, by reason", "reason")),
    PREFETCH_TIMEOUT_REQUESTS(counter("lmcache_mp.l2_prefetch_timeout_requests",
            "LOOKUPs whose L2 prefetch passed its deadline: answered with their L1 hits, the adapters' late answers cleaned up")),
    EVICTED_OBJECTS(counter("lmcache_mp.l2_evicted_objects_chunks", "objects L2 eviction removed", "cache_salt")),
    STORE_COMPLETED_REQUESTS(counter("lmcache_mp.l2_store_completed_requests", "L2 store tasks that succeeded", "l2_name", "adapter_index")),
    STORE_FAILED_REQUESTS(counter("lmcache_mp.l2_store_failed_requests", "L2 store tasks that failed", "l2_name", "adapter_index")),
    STORE_BYTES(counter("lmcache_mp.l2_store_bytes", "bytes written to L2 (a key already there adds none)", "l2_name", "adapter_index")),
    LOAD_COMPLETED_REQUESTS(counter("lmcache_mp.l2_load_completed_requests",
            "L2 load tasks finished (one per adapter and LOOKUP)", "l2_name", "adapter_index")),
    LOAD_BYTES(counter("lmcache_mp.l2_load_bytes", "bytes loaded from L2", "l2_name", "adapter_index")),
    STORE_THROUGHPUT(summary("lmcache_mp.l2_store_throughput_GB_per_second",
            "GB/s of each L2 store task that wrote bytes, submit to completion (queueing and I/O included)", "", "l2_name", "adapter_index")),
    LOAD_THROUGHPUT(summary("lmcache_mp.l2_load_throughput_GB_per_second",
            "GB/s of each L2 load task that loaded bytes, submit to completion (queueing and I/O included)", "", "l2_name", "adapter_index")),
    INFLIGHT_STORES(gauge("lmcache_mp.num_inflight_l2_stores", "L2 store tasks in flight", "l2_name", "adapter_index")),
    INFLIGHT_LOADS(gauge("lmcache_mp.num_inflight_l2_loads", "L2 load tasks in flight", "l2_name", "adapter_index")),
    INFLIGHT_LOAD_MEMORY(gauge("lmcache_mp.inflight_load_memory_usage_bytes", "L1 bytes reserved by L2 loads in flight", "l2_name", "adapter_index")),
    USAGE_BYTES(gauge("lmcache_mp.l2_usage_bytes", "bytes the adapter holds (fs_native: with earlier runs' files)", "l2_name", "adapter_index")),
    ADAPTER_EVENTS(counter("lmcache_mp.l2_adapter_events",
            "the adapter's own events, by kind (its /status entry says more)", "l2_name", "adapter_index", "event"));

    private final MeterSpec spec;

    L2Catalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
