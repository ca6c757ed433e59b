package io.lmcache.server.l2;

import java.io.IOException;
import java.util.concurrent.ThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the adapter a spec describes: its type's I/O ({@link L2AdapterTypes}) under the one skeleton ({@link AsyncL2Adapter}). */
public final class L2Adapters {
    private static final Logger LOG = LoggerFactory.getLogger(L2Adapters.class);

    private L2Adapters() {}

    /**
     * Creates the adapter; its worker threads come from {@code threads} (the server names and owns them). A Redis adapter connects
     * in the background: a node or cluster that is not up yet is retried, not a start failure.
     *
     * @throws IOException when its storage cannot be opened (a base_path that cannot be created, ...)
     */
    public static L2Adapter create(L2AdapterSpec spec, ThreadFactory threads) throws IOException {
        spec.warnings().forEach(LOG::warn);
        AdapterLedger ledger = new AdapterLedger(spec.maxCapacityBytes());
        return new AsyncL2Adapter(L2AdapterTypes.open(spec, threads, ledger), ledger, spec.persistEnabled());
    }
}
