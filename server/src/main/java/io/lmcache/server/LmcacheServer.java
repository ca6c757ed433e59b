package io.lmcache.server;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.assembly.Assembly;
import io.lmcache.server.config.HashAlgorithm;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.Versions;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.warmup.ScratchParts;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The composition root: opens {@link ServerParts#ALL} in dependency order, concludes the wiring, starts, and on close closes
 * everything last opened first ({@link Assembly}; one failing close never skips the rest). A new part goes into
 * {@link ServerParts}, not here (docs/assembly.md).
 */
public final class LmcacheServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheServer.class);

    private final Assembly assembly;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean closed;

    private LmcacheServer(ServerConfig config, GpuPart gpu) {
        ServerMetrics metrics = new ServerMetrics(config.operator().serviceInstanceId(), new ServerMetrics.Build(Versions.version(),
                Versions.commit()));
        metrics.showSaltsInClear(config.tenants().metricsClearSaltLabels());
        // its health check reads closed (runs on: lmcache-http-*)
        assembly = Assembly.open(ServerParts.ALL, config, metrics, new PartRoot(gpu, new AgentErrors(), () -> closed)).conclude();
    }

    /** The {@code --hash-algorithm} chain every chunk key is hashed with (LMCache's {@code TokenHasher}). */
    static Supplier<TokenHashChain> chainFactory(HashAlgorithm algorithm) {
        return switch (algorithm) {
            case HashAlgorithm.Blake3 b -> TokenHashChain::blake3;
            case HashAlgorithm.Sha256Cbor s -> () -> TokenHashChain.sha256Cbor(s.pythonHashSeed());
        };
    }

    /** Builds and starts a server; throws when a resource (port, memory) is unavailable. */
    public static LmcacheServer start(ServerConfig config) {
        return start(config, List.of());
    }

    /**
     * As {@link #start(ServerConfig)}, logging the configuration's {@code warnings} first. The GPU is opened before anything is
     * logged or allocated: {@code --device cuda} on a host without one is refused ({@code StartupException}) with nothing behind.
     */
    public static LmcacheServer start(ServerConfig config, List<String> warnings) {
        GpuPart gpu = GpuPart.open(config.device(), config.tuning());
        warnings.forEach(warning -> LOG.warn(LogText.clip(warning, LogText.MAX_LINE_CHARS)));
        LOG.info("lmcache-server {} starting (instance {}), configuration: {}", Versions.version(), LogText.clip(config.instanceId()),
                LogText.clipValues(config.describe()));
        gpu.logPath();
        ChunkHashes.use(chainFactory(config.hashAlgorithm()));
        LmcacheServer server = new LmcacheServer(config, gpu);
        try {
            server.assembly.start();
        } catch (RuntimeException | Error e) {
            server.close();
            throw e;
        }
        LOG.info("ready: ZeroMQ ROUTER on {}, chunk size {}", config.zmqEndpoint(), config.chunkSize());
        return server;
    }

    /**
     * How a warm-up opens its scratch server: the production parts of {@code ServerParts.SCRATCH} (for a warm-up run alone:
     * tests, tools; the server's own warm-ups are given it by their parts).
     */
    public static ScratchParts scratchParts() {
        return ServerParts::openScratch;
    }

    /** The parts that opened something, in opening order (the order test). */
    List<String> openOrder() {
        return assembly.opened();
    }

    /** The close steps' names, in the order {@link #close} runs them (the order test). */
    List<String> closeOrder() {
        return assembly.closeOrder();
    }

    /** {@code listener} hears, once and on the dying thread, that the ZeroMQ side can serve no more. */
    public void onTransportDeath(Consumer<String> listener) {
        assembly.get(RequestLoop.class).onTransportDeath(listener);
    }

    /** Blocks until {@link #close()} has finished. */
    public void awaitStopped() throws InterruptedException {
        stopped.await();
    }

    /** Graceful stop: stop accepting, answer what is in flight, then release everything, last built first. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        LOG.info("shutting down: answering in-flight requests, then closing");
        try {
            assembly.close();
        } finally {
            stopped.countDown();
            LOG.info("shut down");
        }
    }
}
