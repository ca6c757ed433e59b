package io.lmcache.server.l2;

import java.util.List;

/**
 * One parsed {@code --l2-adapter} JSON object (hybrid-and-l2.md §B.5–§B.8): each type's own record, parsed and validated by its
 * {@link L2AdapterType}.
 */
public interface L2AdapterSpec {
    /** The JSON {@code type}, the name of the {@link L2AdapterType} that parsed it. */
    String type();

    /** The adapter's L2 eviction settings (its inner adapter's for a decorator); null: never evicted. */
    EvictionSpec eviction();

    /** Settings that were accepted but have no effect here, for a start-up warning each. */
    List<String> warnings();

    /** The capacity its usage is counted against (0: unknown). */
    long maxCapacityBytes();

    /** False: what this process wrote or read is removed at close. */
    boolean persistEnabled();

    /**
     * The {@code "eviction"} object: LRU by bytes at the watermark, or noop.
     *
     * @param lru false for {@code noop}
     */
    record EvictionSpec(boolean lru, double triggerWatermark, double evictionRatio) {}
}
