package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;
import static io.lmcache.server.metrics.MeterSpec.summary;
import static io.lmcache.server.metrics.MeterSpec.timer;

/** The L1 tier's series under LMCache's names: the object store's counters and gauges, allocation and read failures, and the chunk lifecycle histograms. */
public enum L1Catalogue implements CatalogueEntry {
    WRITE_CHUNKS(counter("lmcache_mp.l1_write_chunks", "chunk objects written to L1 (one per chunk per kv rank)")),
    READ_CHUNKS(counter("lmcache_mp.l1_read_chunks", "chunk objects read from L1")),
    WRITE_BYTES(counter("lmcache_mp.l1_write_bytes", "bytes written to L1")),
    READ_BYTES(counter("lmcache_mp.l1_read_bytes", "bytes read from L1")),
    EVICTED_CHUNKS(counter("lmcache_mp.l1_evicted_chunks", "chunk objects removed from L1, by reason", "reason")),
    EVICTED_BYTES(counter("lmcache_mp.l1_evicted_bytes", "bytes removed from L1, by reason", "reason")),
    EVICTION_LOOP_TICKS(counter("lmcache_mp.l1_eviction_loop_ticks", "passes of the eviction controller")),
    EVICTION_LOOP_TRIGGERED(counter("lmcache_mp.l1_eviction_loop_triggered", "passes that found usage at the watermark")),
    EVICTION_FAILURES(counter("lmcache_mp.l1_eviction_failures", "eviction passes that failed (the controller kept running)")),
    ALLOCATION_FAILURE_CHUNKS(counter("lmcache_mp.l1_allocation_failure_chunks", "chunks that found no room in L1", "during", "model_name")),
    LOCK_EXPIRIES(counter("lmcache_mp.l1_lock_expiries", "locks reclaimed at their TTL", "kind")),
    FORMAT_MISMATCHES(counter("lmcache_mp.l1_format_mismatches", "reads of an object stored in another layout (a miss)")),
    READS_AFTER_WRITES(counter("lmcache_mp.l1_reads_after_writes", "RETRIEVE reads that met a chunk still being written and waited for its write")),
    LOOKUPS_AFTER_WRITES(counter("lmcache_mp.l1_lookups_after_writes", "LOOKUP passes left pending until the writes in flight they met ended")),
    LOOKUP_WATCHES_REFUSED(counter("lmcache_mp.l1_lookup_watches_refused",
            "chunks being written a LOOKUP counted as misses: too many lookups waited already")),
    READ_SHARE_MISSES(counter("lmcache_mp.l1_read_share_miss_chunks",
            "chunks a LOOKUP counted as misses: its tenant's read locks held their share of the pool (--tenant-read-lock-share)")),
    MEMORY_USAGE_BYTES(gauge("lmcache_mp.l1_memory_usage_bytes", "bytes of L1 holding objects")),
    MEMORY_TOTAL_BYTES(gauge("lmcache_mp.l1_memory_total_bytes", "size of the L1 pool")),
    MEMORY_READY_BYTES(gauge("lmcache_mp.l1_memory_ready_bytes", "bytes of L1 prepared and allocatable")),
    USAGE_RATIO(gauge("lmcache_mp.l1_usage_ratio", "L1 used bytes over its size")),
    OBJECTS(gauge("lmcache_mp.l1_objects", "chunk objects in L1")),
    READ_FAILURE_CHUNKS(counter("lmcache_mp.l1_read_failure_chunks",
            "chunks a RETRIEVE could not read from L1 (after its LOOKUP found them)", "during", "reason", "model_name")),
    CHUNK_LIFETIME(timer("lmcache_mp.l1_chunk_lifetime", "sampled L1 chunks: eviction time minus store time")),
    CHUNK_IDLE_BEFORE_EVICT(timer("lmcache_mp.l1_chunk_idle_before_evict", "sampled L1 chunks: eviction time minus last touch")),
    CHUNK_REUSE_GAP(timer("lmcache_mp.l1_chunk_reuse_gap", "sampled L1 chunks: time between two touches")),
    CHUNK_EVICT_REUSE_GAP(timer("lmcache_mp.l1_chunk_evict_reuse_gap",
            "sampled L1 chunks: eviction to the next store of the same chunk (at most 300 s)")),
    REAL_REUSE_GAP(timer("lmcache_mp.real_reuse_gap", "sampled chunks: time from their last touch to a read, by cache salt", "cache_salt")),
    REAL_REUSE_GAP_OBJECTS(summary("lmcache_mp.real_reuse_gap_objects",
            "sampled chunks: chunks of the same salt touched between their last touch and a read", "chunks", "cache_salt"));

    private final MeterSpec spec;

    L1Catalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
