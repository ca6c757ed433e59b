package io.lmcache.server.tier;

import io.lmcache.server.storage.ObjectStore;
import java.lang.foreign.MemorySegment;

/** The L1 tier as L2 sees it: the store objects are committed to and loaded into, and the pool memory that holds their bytes. */
public record L1Side(ObjectStore store, MemorySegment pool) {}
