package io.lmcache.server;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.assembly.Build;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.metrics.ServerMetrics;
import java.util.function.BooleanSupplier;

/**
 * What the composition root opens before the parts (the GPU, before the banner) and what only it knows (whether it is
 * closing), offered to every part beside the configuration and the metrics; its own file so that {@link ServerParts} and
 * {@link DataParts} both read it without reading each other.
 */
record PartRoot(GpuPart gpu, AgentErrors agentErrors, BooleanSupplier closing) {
    static ServerConfig config(Build b) {
        return b.require(ServerConfig.class);
    }

    static ServerMetrics metrics(Build b) {
        return b.require(ServerMetrics.class);
    }
}
