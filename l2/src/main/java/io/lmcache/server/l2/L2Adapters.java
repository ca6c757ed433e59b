package io.lmcache.server.l2;

import io.lmcache.server.l2.redis.RedisAdapter;
import java.io.IOException;
import java.util.concurrent.ThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the adapter a spec describes (the factory side of the type registry in {@link L2AdapterSpecs}). */
public final class L2Adapters {
    private static final Logger LOG = LoggerFactory.getLogger(L2Adapters.class);

    private L2Adapters() {}

    /**
     * Creates the adapter; its worker threads come from {@code threads} (the server names and owns them).
     *
     * @throws IOException when its storage cannot be opened (a base_path that cannot be created, ...)
     */
    public static L2Adapter create(L2AdapterSpec spec, ThreadFactory threads) throws IOException {
        spec.warnings().forEach(LOG::warn);
        return switch (spec) {
            case L2AdapterSpec.FsNative fs -> new FsNativeAdapter(fs, threads);
            case L2AdapterSpec.FaultInject fault -> new FaultInjectAdapter(create(fault.inner(), threads), fault.rules());
            // connects in the background: a node or cluster that is not up yet is retried, not a start failure
            case L2AdapterSpec.Redis redis -> new RedisAdapter(redis, threads);
        };
    }
}
