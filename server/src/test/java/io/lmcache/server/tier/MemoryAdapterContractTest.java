package io.lmcache.server.tier;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterContract;

/** The controllers' in-memory test adapter keeps the adapter contract (from the l2 module's test-jar), so what they learn holds. */
class MemoryAdapterContractTest extends L2AdapterContract {
    @Override
    protected L2Adapter open() {
        return new MemoryAdapter();
    }
}
