package io.lmcache.server.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * LMCache's lookup counters (its {@code LookupMetricsSubscriber}, fed by {@code MP_LOOKUP_PREFETCH_END}),
 * one set per {@code model_name} and {@code cache_salt}: {@code lookup_requested_tokens} and
 * {@code lookup_hit_tokens}; the hit split by tier, {@code lookup_hit_l1_tokens} (what L1 served on its
 * own) and {@code lookup_hit_l2_tokens} (what an L2 load added), l1 + l2 == hit for every lookup; the
 * hit objects by tier ({@code lookup_hit_l1_keys}, {@code lookup_hit_l2_keys}: one per chunk, kv rank
 * and object group); {@code lookups_requests}, every completed LOOKUP, early exits included; and
 * {@code lookup_early_exit_requests{reason}}, those that returned before probing the cache (they add 0
 * tokens and 0 keys). A LOOKUP counts once, when its hit count is known (at once from L1, or when its
 * L2 prefetch completes); a LOOKUP with an invalid key counts only in {@code lmcache_mp_bad_lookups_total}.
 *
 * <p>The unlabelled {@code lookup_hit_l1_total} and {@code lookup_hit_l2_total} are this server's
 * earlier spelling of the tier split, kept for one release as deprecated aliases.
 */
public final class LookupMetrics {
    /**
     * Why a LOOKUP returned before probing the cache, as LMCache's {@code reason} label says it. LMCache
     * has two more, {@code no_gpu_context} and {@code no_group_layout_descs}: it answers 0 to a LOOKUP for
     * a model (and world size) no worker registered; this server looks such a LOOKUP up as any other.
     */
    public enum EarlyExit {
        /** Fewer tokens than one chunk: nothing to look up. */
        EMPTY_CHUNK_HASHES("empty_chunk_hashes"),
        /** The load policy declined ({@code lmcache.skip_load}): the engine recomputes; LMCache's label (kv_load_policy.py). */
        LOAD_POLICY_RECOMPUTE("load_policy_recompute");

        private final String label;

        EarlyExit(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    /** One model's and salt's series; {@code earlyExits} indexed by {@link EarlyExit#ordinal()}. */
    private record Series(LongAdder requested, LongAdder hit, LongAdder l1, LongAdder l2, LongAdder l1Keys, LongAdder l2Keys,
            LongAdder lookups, LongAdder[] earlyExits) {}

    private final ServerMetrics metrics;
    private final LabelValues labels;
    /** By model label, then salt label (not the wire strings). */
    private final Map<String, Map<String, Series>> series = new ConcurrentHashMap<>();
    private final AtomicInteger pairs = new AtomicInteger();
    private final LongAdder requestedTokens = new LongAdder();
    private final LongAdder hitTokens = new LongAdder();
    private final LongAdder deprecatedL1;
    private final LongAdder deprecatedL2;

    LookupMetrics(ServerMetrics metrics, LabelValues labels) {
        this.metrics = metrics;
        this.labels = labels;
        deprecatedL1 = metrics.counter(LookupCatalogue.DEPRECATED_HIT_L1);
        deprecatedL2 = metrics.counter(LookupCatalogue.DEPRECATED_HIT_L2);
    }

    /**
     * A completed LOOKUP that probed the cache: {@code requestedTokens} (whole chunks) asked for, {@code l1Tokens} of its hit
     * served by L1 on its own and {@code l2Tokens} more loaded from L2; {@code l1Keys} and {@code l2Keys} the objects of each.
     */
    public void completed(String model, String cacheSalt, long requestedTokens, long l1Tokens, long l2Tokens, long l1Keys, long l2Keys) {
        Series s = series(model, cacheSalt);
        s.lookups.increment();
        s.requested.add(requestedTokens);
        s.hit.add(l1Tokens + l2Tokens);
        s.l1.add(l1Tokens);
        s.l2.add(l2Tokens);
        s.l1Keys.add(l1Keys);
        s.l2Keys.add(l2Keys);
        this.requestedTokens.add(requestedTokens);
        hitTokens.add(l1Tokens + l2Tokens);
        deprecatedL1.add(l1Tokens);
        deprecatedL2.add(l2Tokens);
    }

    /** A completed LOOKUP that returned before probing the cache (0 tokens asked for, 0 found). */
    public void earlyExit(String model, String cacheSalt, EarlyExit reason) {
        earlyExit(model, cacheSalt, reason, 0);
    }

    /** The same, with the (whole-chunk) tokens it asked for: a declined LOOKUP's count as requested and unserved, as LMCache's. */
    public void earlyExit(String model, String cacheSalt, EarlyExit reason, long requestedTokens) {
        Series s = series(model, cacheSalt);
        s.lookups.increment();
        s.earlyExits[reason.ordinal()].increment();
        s.requested.add(requestedTokens);
        this.requestedTokens.add(requestedTokens);
    }

    /** Tokens asked for by every LOOKUP so far (the activity log's rate). */
    public long requestedTokens() {
        return requestedTokens.sum();
    }

    public long hitTokens() {
        return hitTokens.sum();
    }

    /**
     * The series of this model and salt, found by their label values (bounded, see {@link LabelValues}), never by the wire
     * strings themselves: a peer sending a new salt or a megabyte model name with every LOOKUP leaves nothing behind. Past
     * {@link #MAX_SERIES} pairs, new pairs count under {@code _other} for both.
     */
    private Series series(String model, String cacheSalt) {
        String modelLabel = labels.of("model_name", model);
        String saltLabel = labels.of("cache_salt", cacheSalt);
        Map<String, Series> bySalt = series.get(modelLabel);
        Series found = bySalt == null ? null : bySalt.get(saltLabel);
        if (found != null) {
            return found;
        }
        if (pairs.get() >= MAX_SERIES) {
            modelLabel = LabelValues.OTHER;
            saltLabel = LabelValues.OTHER;
            bySalt = series.get(modelLabel);
            found = bySalt == null ? null : bySalt.get(saltLabel);
            if (found != null) {
                return found;
            }
        }
        String m = modelLabel;
        String salt = saltLabel;
        return series.computeIfAbsent(m, k -> new ConcurrentHashMap<>()).computeIfAbsent(salt, k -> {
            pairs.incrementAndGet();
            return create(m, salt);
        });
    }

    /** Pairs of (model, salt) label values with series of their own, at most; then both fold into {@code _other}. */
    static final int MAX_SERIES = 512;

    private Series create(String model, String salt) {
        LongAdder[] earlyExits = new LongAdder[EarlyExit.values().length];
        for (EarlyExit reason : EarlyExit.values()) {
            earlyExits[reason.ordinal()] = metrics.declare(LookupCatalogue.EARLY_EXITS, model, salt, reason.label());
        }
        return new Series(metrics.declare(LookupCatalogue.REQUESTED_TOKENS, model, salt), metrics.declare(LookupCatalogue.HIT_TOKENS, model, salt),
                metrics.declare(LookupCatalogue.HIT_L1_TOKENS, model, salt), metrics.declare(LookupCatalogue.HIT_L2_TOKENS, model, salt),
                metrics.declare(LookupCatalogue.HIT_L1_KEYS, model, salt), metrics.declare(LookupCatalogue.HIT_L2_KEYS, model, salt),
                metrics.declare(LookupCatalogue.LOOKUPS, model, salt), earlyExits);
    }
}
