package io.lmcache.server.warmup;

import io.lmcache.server.assembly.Assembly;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.transfer.CopyPaths;

/**
 * How a warm-up opens its scratch server's parts: the production parts of the root's scratch list ({@code ServerParts.SCRATCH},
 * a sub-list of the server's own, which this package cannot import without a package cycle), opened by the same assembly
 * over a scratch configuration, concluded and not started. The root hands it to the warm-ups through their constructors, so
 * the warm-up runs the production wiring by construction (docs/assembly.md).
 */
@FunctionalInterface
public interface ScratchParts {
    /**
     * Opens the parts over {@code config} (see {@link ServerConfig#forWarmup}) and their own {@code metrics}; the L1 tier
     * is {@code pool} (scratch memory, every region ready), and a worker's copy path opens through {@code copyPaths} (null: from
     * its tensors, as the server's).
     */
    Assembly open(ServerConfig config, ServerMetrics metrics, L1Pool pool, CopyPaths.Opener copyPaths);
}
