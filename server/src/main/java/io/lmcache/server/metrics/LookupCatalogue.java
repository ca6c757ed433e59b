package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/**
 * LOOKUP's series: LMCache's lookup counters per model_name and cache_salt (see {@link LookupMetrics}), the deprecated
 * unlabelled tier split, bad lookups and the results not yet queried.
 */
public enum LookupCatalogue implements CatalogueEntry {
    ACTIVE_PREFETCH_JOBS(gauge("lmcache_mp.active_prefetch_jobs", "LOOKUP results not yet queried")),
    BAD_LOOKUPS(counter("lmcache_mp.bad_lookups", "lookups with an invalid key (answered with 0 hits)")),
    REQUESTED_TOKENS(counter("lmcache_mp.lookup_requested_tokens", "tokens asked for by LOOKUP (whole chunks)", "model_name", "cache_salt")),
    HIT_TOKENS(counter("lmcache_mp.lookup_hit_tokens", "tokens found by LOOKUP (leading whole chunks on every kv rank)", "model_name", "cache_salt")),
    HIT_L1_TOKENS(counter("lmcache_mp.lookup_hit_l1_tokens", "of lookup_hit_tokens: tokens L1 served on its own", "model_name", "cache_salt")),
    HIT_L2_TOKENS(counter("lmcache_mp.lookup_hit_l2_tokens",
            "of lookup_hit_tokens: tokens an L2 load added beyond L1's prefix", "model_name", "cache_salt")),
    HIT_L1_KEYS(counter("lmcache_mp.lookup_hit_l1_keys",
            "objects of LOOKUP hits found in L1 (one per chunk, kv rank and object group)", "model_name", "cache_salt")),
    HIT_L2_KEYS(counter("lmcache_mp.lookup_hit_l2_keys", "objects of LOOKUP hits loaded from L2", "model_name", "cache_salt")),
    LOOKUPS(counter("lmcache_mp.lookups_requests", "completed LOOKUPs, early exits included", "model_name", "cache_salt")),
    EARLY_EXITS(counter("lmcache_mp.lookup_early_exit_requests",
            "LOOKUPs that returned before probing the cache, by reason (they count 0 tokens)", "model_name", "cache_salt", "reason")),
    COVERED_TOUCHED_OBJECTS(counter("lmcache_mp.lookup_covered_touched_objects",
            "objects of the prefix a LOOKUP's engine already holds (lmcache.hint.engine_computed_tokens) marked recently used "
                    + "without a lock or a load, by tier", "tier")),
    DEPRECATED_HIT_L1(counter("lmcache_mp.lookup_hit_l1", "DEPRECATED, removed in the next release: use lmcache_mp_lookup_hit_l1_tokens_total")),
    DEPRECATED_HIT_L2(counter("lmcache_mp.lookup_hit_l2", "DEPRECATED, removed in the next release: use lmcache_mp_lookup_hit_l2_tokens_total"));

    private final MeterSpec spec;

    LookupCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
