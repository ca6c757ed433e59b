package io.lmcache.server;

import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.Versions;
import io.lmcache.server.http.CoreRoutes;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.ManagementModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.module.RequestHandlers;
import io.lmcache.server.storage.EvictionController;
import io.lmcache.server.storage.L1Tier;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the server's parts in dependency order, starts them, and stops them in reverse. */
public final class LmcacheServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheServer.class);
    private static final long DRAIN_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    /** The loop wakes at least every 100 ms even when idle; a longer silence means it is stuck. */
    private static final long LOOP_STALL_NS = TimeUnit.SECONDS.toNanos(2);

    private final ServerConfig config;
    private final ServerMetrics metrics = new ServerMetrics();
    private final ReplyQueue replies = new ReplyQueue();
    private final L1Tier l1;
    private final LookupLeases leases;
    private final PrefetchResults prefetchResults;
    private final Dispatcher dispatcher;
    private final RequestLoop loop;
    private final HttpApi http;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean closed;

    private LmcacheServer(ServerConfig config) {
        this.config = config;
        FailureReplies failures = new FailureReplies(config.chunkSize());
        l1 = new L1Tier(config);
        leases = new LookupLeases(l1.store(), config.l1ReadTtlNs(), System::nanoTime);
        prefetchResults = new PrefetchResults(config.l1ReadTtlNs(), System::nanoTime);
        ManagementModule management = new ManagementModule(config.chunkSize(), l1.store());
        LookupModule lookup = new LookupModule(config.chunkSize(), l1.store(), leases, prefetchResults, metrics);
        LmcacheDrivenTransferModule lmcacheDriven = new LmcacheDrivenTransferModule(config.chunkSize(), l1.store(),
                l1.pool().segment(), leases, metrics);
        RequestHandlers handlers = new RequestHandlers(management, lookup, lmcacheDriven, failures);
        dispatcher = new Dispatcher(handlers, replies, metrics, failures, config.maxCpuWorkers(), config.maxGpuWorkers());
        HttpApi createdHttp = null;
        try {
            createdHttp = config.httpPort() == 0 ? null : createHttp(config);
            loop = new RequestLoop(config.zmqEndpoint(), dispatcher, replies);
        } catch (RuntimeException e) {
            if (createdHttp != null) {
                createdHttp.close();
            }
            l1.close();
            throw e;
        }
        http = createdHttp;
    }

    private HttpApi createHttp(ServerConfig config) {
        try {
            HttpApi api = new HttpApi(config.httpHost(), config.httpPort());
            CoreRoutes.register(api, this::unhealthyReason, metrics.prometheus());
            return api;
        } catch (java.io.IOException e) {
            throw new IllegalStateException("cannot bind the HTTP API to " + config.httpHost() + ":" + config.httpPort() + ": " + e.getMessage(), e);
        }
    }

    /** Null when healthy; otherwise what is wrong (for /healthcheck). */
    public String unhealthyReason() {
        if (closed) {
            return "shutting down";
        }
        if (!loop.isRunning()) {
            return "request loop is not running";
        }
        long sinceTurnNs = System.nanoTime() - loop.lastTurnNs();
        if (sinceTurnNs > LOOP_STALL_NS) {
            return "request loop has not turned for " + TimeUnit.NANOSECONDS.toMillis(sinceTurnNs) + " ms";
        }
        return null;
    }

    /** Builds and starts a server; throws when a resource (port, memory) is unavailable. */
    public static LmcacheServer start(ServerConfig config) {
        LOG.info("lmcache-server {} starting (instance {})", Versions.version(), config.instanceId());
        LOG.info("configuration: {}", config.describe());
        LmcacheServer server = new LmcacheServer(config);
        List<EvictionController.Sweeper> sweepers = List.of(server.leases::sweep, server.prefetchResults::sweep);
        server.l1.start(config, List.of(), sweepers);
        server.loop.start();
        if (server.http != null) {
            server.http.start();
        }
        LOG.info("ready: ZeroMQ ROUTER on {}, chunk size {}", config.zmqEndpoint(), config.chunkSize());
        return server;
    }

    public ServerConfig config() {
        return config;
    }

    public ServerMetrics metrics() {
        return metrics;
    }

    /** Test hook and /healthcheck check: stops the request loop without draining. */
    public void haltLoop() throws InterruptedException {
        loop.halt();
    }

    /** Blocks until {@link #close()} has finished. */
    public void awaitStopped() throws InterruptedException {
        stopped.await();
    }

    /** Graceful stop: stop accepting, answer what is in flight, then release everything. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        LOG.info("shutting down: answering in-flight requests, then closing");
        try {
            loop.shutdown(DRAIN_TIMEOUT_NS);
            if (http != null) {
                http.close();
            }
            dispatcher.close();
            l1.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.warn("error while shutting down", e);
        } finally {
            stopped.countDown();
            LOG.info("shut down");
        }
    }
}
