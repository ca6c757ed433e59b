package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.summary;
import static io.lmcache.server.metrics.MeterSpec.timer;

/** The series of the copies between a worker's GPU blocks (L0) and the pool (L1), and of the registrations and failures of the two transfer modes. */
public enum TransferCatalogue implements CatalogueEntry {
    STORE_BYTES(counter("lmcache_mp.store_bytes", "bytes copied into L1 by STORE")),
    RETRIEVE_BYTES(counter("lmcache_mp.retrieve_bytes", "bytes copied out of L1 by RETRIEVE")),
    STORE_COPY_SECONDS(counter("lmcache_mp.store_copy_seconds", "time from submitting a STORE's copy to its completion")),
    RETRIEVE_COPY_SECONDS(counter("lmcache_mp.retrieve_copy_seconds", "time from submitting a RETRIEVE's copy to its completion")),
    NUM_SUBMITTED_STORES(counter("lmcache_mp.num_submitted_stores", "STORE copies submitted, by device", "device")),
    NUM_SUBMITTED_RETRIEVES(counter("lmcache_mp.num_submitted_retrieves", "RETRIEVE copies submitted, by device", "device")),
    NUM_FINISHED_STORES(counter("lmcache_mp.num_finished_stores", "STORE copies finished (done or failed), by device", "device")),
    NUM_FINISHED_RETRIEVES(counter("lmcache_mp.num_finished_retrieves", "RETRIEVE copies finished (done or failed), by device", "device")),
    NUM_CHUNKS_LOADED(counter("lmcache_mp.num_chunks_loaded",
            "chunks RETRIEVE loaded into a worker's KV cache", "worker_id", "model_name", "cache_salt")),
    L0_L1_STORE_THROUGHPUT(summary("lmcache_mp.l0_l1_store_throughput_GB_per_second",
            "GB/s of each STORE copy, submit to completion", "", "engine_id", "device", "model_name")),
    L0_L1_LOAD_THROUGHPUT(summary("lmcache_mp.l0_l1_load_throughput_GB_per_second",
            "GB/s of each RETRIEVE copy, submit to completion", "", "engine_id", "device", "model_name")),
    STORE_COMMIT_DELAY(timer("lmcache_mp.store_commit_delay",
            "time from a STORE's copy ending on its device to its chunks being visible to lookups", "device")),
    GPU_COPY_SECONDS(counter("lmcache_mp.gpu_copy_seconds",
            "GPU time of completed copies, from the copy stream reaching a transfer to its last copy", "op")),
    GPU_COPY_BYTES(counter("lmcache_mp.gpu_copy_bytes", "bytes of completed GPU copies", "op")),
    TRANSFER_FAILURES(counter("lmcache_mp.transfer_failures", "STORE/RETRIEVE answered with false, by reason", "op", "reason")),
    ENGINE_DRIVEN_FAILURES(counter("lmcache_mp.engine_driven_failures",
            "engine-driven requests answered with a failure value, by op and reason", "op", "reason")),
    ENGINE_DRIVEN_EXPIRED(counter("lmcache_mp.engine_driven_expired",
            "engine-driven reservations and pinned retrieves reclaimed at their TTL", "kind")),
    ENGINE_DRIVEN_RELEASED(counter("lmcache_mp.engine_driven_released",
            "engine-driven reservations (kind store) and pinned retrieves (kind retrieve) given back because their worker is gone, by"
                    + " why: disconnect (its connection closed: reservations only, their memory kept until the reap or the TTL),"
                    + " unregister, reaped, replaced (a new REGISTER of the instance)", "kind", "reason")),
    UNKNOWN_UNREGISTERS(counter("lmcache_mp.unknown_unregisters", "UNREGISTERs of instances that are not registered", "mode")),
    MALFORMED_EVENT_HANDLES(counter("lmcache_mp.malformed_event_handles",
            "STORE/RETRIEVE refused for an event handle that is neither a 64-byte CUDA event nor a valid 81-byte timeline semaphore", "op")),
    EVENT_KIND_MISMATCHES(counter("lmcache_mp.event_kind_mismatches",
            "STORE/RETRIEVE served whose event kind contradicts --isolated-ipc (cuda_event while on, timeline while off)", "kind")),
    REGISTRATION_FAILURES(counter("lmcache_mp.registration_failures", "registrations refused (layout, mapping)")),
    LAYERWISE_REFUSED(counter("lmcache_mp.layerwise_requests_refused",
            "requests refused by layer-wise mode (--layerwise-batch): an event pool answered (0, []), a RETRIEVE_LAYERWISE answered"
                    + " as a miss, a per-chunk RETRIEVE refused in layer-wise mode; by op and reason (mode_off, unknown_instance,"
                    + " unsupported, malformed_event, per_chunk_in_layerwise_mode)", "op", "reason")),
    LAYERWISE_BATCHES(counter("lmcache_mp.layerwise_batches", "RETRIEVE_LAYERWISE layer batches enqueued, each with its pool event and frame")),
    HOST_COPY_RUNS(counter("lmcache_mp.host_copy_runs",
            "runs of CPU workers' STORE/RETRIEVE copies, by the thread that copied them: transfer (the request's own) or copy"
                    + " (an lmcache-copy-N helper)", "thread")),
    SHM_SEGMENTS_REFUSED(counter("lmcache_mp.shm_segments_refused", "CPU workers' shared-memory segments refused at REGISTER, by reason", "reason"));

    private final MeterSpec spec;

    TransferCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
