package io.lmcache.server.fleet;

/**
 * What the stores tell the fleet's event stream (fleet-and-operator-api.md §1.4.2): an object written, removed or read, in one
 * tier and backend. Called under the stores' locks, so an implementation only records and returns.
 */
public interface CacheEventSink {
    /** Where an object lives: LMCache's tier ({@code l1}/{@code l2}), backend ({@code dram}, an adapter's type) and sharing. */
    record Place(String tier, String backend, boolean shared) {
        public static final Place L1_DRAM = new Place("l1", "dram", false);
    }

    void stored(Place place, EncodedKey key, long sizeBytes);

    void deleted(Place place, EncodedKey key);

    void accessed(Place place, EncodedKey key);
}
