package io.lmcache.server;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.CloseHelper;
import io.lmcache.server.agent.Housekeeping;
import io.lmcache.server.agent.IdleStrategy;
import io.lmcache.server.config.HashAlgorithm;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.Versions;
import io.lmcache.server.events.KvEventCounters;
import io.lmcache.server.events.KvEventStreams;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.http.ServerHttp;
import io.lmcache.server.http.ServerView;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.liveness.LivenessMeters;
import io.lmcache.server.liveness.Reaper;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.KvEventMetrics;
import io.lmcache.server.metrics.LookupCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.EngineDrivenTransferModule;
import io.lmcache.server.module.EventKinds;
import io.lmcache.server.module.KvEventModule;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.ManagementModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.module.ServerOps;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.storage.EvictionController;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.StoreMeters;
import io.lmcache.server.tables.TableMeters;
import io.lmcache.server.tier.L2Tier;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.warmup.GpuScratchWarmup;
import io.lmcache.server.warmup.GpuWarmups;
import io.lmcache.server.warmup.Warmup;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The composition root: builds the server's parts in dependency order, starts them, and closes
 * them in reverse order of construction ({@link CloseHelper#closeAll}: one failing close never
 * skips the rest). A part is one line below plus, if it holds anything, one {@link #add}.
 */
public final class LmcacheServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheServer.class);
    private static final long DRAIN_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    /** A reaped worker's release (unmap, IPC close) that takes longer is logged and counted. */
    private static final long RELEASE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long ACTIVITY_INTERVAL_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long MIN_RETAIN_NS = TimeUnit.MINUTES.toNanos(10);

    private final ServerConfig config;
    private final ServerMetrics metrics;
    /** What {@link #close} closes, in construction order; closed last to first. */
    private final List<AutoCloseable> parts = new ArrayList<>();
    /** What was built, closeable or not, in construction order. */
    private final List<String> built = new ArrayList<>();
    private final L1Tier l1;
    private final GpuPart gpu;
    private final ManagementModule management;
    private final AgentErrors agentErrors = new AgentErrors();
    private final AgentRunner housekeeping;
    private final L2Tier l2;
    private final AgentRunner cudaEvents;
    private final HttpApi http;
    private final HttpApi prometheusHttp;
    private final RequestLoop loop;
    private final AgentRunner kvEventStreams;
    private final ServerView view;
    /** The stream agent's longest sleep: a fallback, since appends, acks and new subscriptions wake it. */
    private static final long KV_EVENT_PARK_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long KV_EVENT_CLOSE_NS = TimeUnit.SECONDS.toNanos(2);
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean closed;

    private LmcacheServer(ServerConfig config, GpuPart gpu) {
        this.config = config;
        this.gpu = gpu;
        this.metrics = new ServerMetrics(config.operator().serviceInstanceId(), new ServerMetrics.Build(Versions.version(), Versions.commit()));
        metrics.showSaltsInClear(config.tenants().metricsClearSaltLabels());
        try {
            // runs on: the thread that calls close(); closed last, after every part that logs
            add("rate-limited log summaries", RateLimitedLog::flushPending);
            l1 = add("L1 tier", openL1(config, gpu));
            // closed before l1 (the pool is unpinned before its memory goes) and after the release thread (IPC closes need contexts)
            add("GPU backend", gpu.closer(l1));
            cudaEvents = add("CUDA event poller", gpu.eventsRunner(agentErrors));
            ReleaseThread releases = add("release thread", ReleaseThread.withTimeout(TestHooks.releaseTimeoutNs(config, RELEASE_TIMEOUT_NS)));
            // closed after the modules and before the release thread, which still frees what the last GPU completions give back
            add("GPU transfers in flight", gpu.drainer());
            LookupLeases leases = new LookupLeases(l1.store(), config.l1ReadTtlNs(), System::nanoTime);
            PrefetchResults prefetchResults = new PrefetchResults(config.l1ReadTtlNs(), System::nanoTime);
            // closed connections are remembered long enough for every liveness rule to use them
            PeerConnections connections = new PeerConnections(System::nanoTime, Math.max(config.workerRegistrationGraceNs(), MIN_RETAIN_NS));
            Liveness liveness = new Liveness(System::nanoTime, connections, config.workerDisconnectGraceNs());
            DataModules data = DataModules.open(config, l1, gpu, new DataModules.LookupState(leases, prefetchResults),
                    new DataModules.WorkerEnds(liveness, releases), metrics, new DataModules.Supervision(agentErrors, this::add));
            l2 = data.l2();
            LookupModule lookup = data.lookup();
            LmcacheDrivenTransferModule lmcacheDriven = data.lmcacheDriven();
            // closed before the GPU backend: a warm-up still running stops after its round and frees its scratch memory
            GpuWarmups gpuWarmups = add("GPU warm-ups", GpuScratchWarmup.forServer(config, l1.store(), gpu.backend()));
            if (lmcacheDriven != null) {
                lmcacheDriven.afterRegisterRun(gpuWarmups::afterRegister);
            }
            EngineDrivenTransferModule engineDriven = data.engineDriven();
            // built after the modules: the reaper runs over modules that are complete, and stops before they close
            opened("modules complete");
            ReplyQueue replies = new ReplyQueue();
            KvEventStreams streams = new KvEventStreams(data.events().log(), replies, System::nanoTime);
            KvEventModule kvEvents = new KvEventModule(data.events(), streams);
            // PINGs keep subscriptions alive; a reaped instance's subscription ends (the module itself reaps no worker)
            List<InstanceLivenessTarget> targets = Stream.concat(data.livenessTargets().stream(), Stream.of(kvEvents)).toList();
            Reaper reaper = new Reaper(targets, config.workerReapTimeoutNs(), config.workerRegistrationGraceNs(),
                    config.workerDisconnectGraceNs(), releases, connections, System::nanoTime);
            opened("reaper");
            opened("management");
            management = new ManagementModule(config.chunkSize(), l1.store(), targets, reaper, ServerView.livenessSettings(config));
            management.advertise(kvEvents);
            // runs on: lmcache-http-* (each scrape)
            StoreMeters.bind(metrics, l1.store());
            LivenessMeters.bind(metrics, reaper);
            LivenessMeters.bind(metrics, releases);
            metrics.gauge(LookupCatalogue.ACTIVE_PREFETCH_JOBS, lookup::pendingResults);
            TableMeters.bind(metrics, prefetchResults.table());
            TableMeters.bind(metrics, leases.table());
            gpu.bindMetrics(metrics);
            // STORE/RETRIEVE failures carry the GPU's complete event, which a GPU worker can open (64 zero bytes without CUDA);
            // runs on: lmcache-transfer-* (a failed STORE/RETRIEVE) or lmcache-request-loop (rejected during shutdown, over budget).
            // Isolated IPC (issue 47): each event handle is classified and answered in kind; --isolated-ipc only sets the warning
            EventKinds events = new EventKinds(gpu.backend(), FailureReplies.withEvents(gpu.backend()::failureEvent), metrics,
                    config.isolatedIpc());
            Dispatcher dispatcher = add("dispatcher", new Dispatcher(ServerOps.table(management, lookup, kvEvents, lmcacheDriven, engineDriven,
                    events), replies, metrics, config.maxCpuWorkers(), config.maxGpuWorkers(),
                    config.tuning().transferSpinNs()));
            // runs on: lmcache-housekeeping (each eviction tick); the flush writes the "suppressed N" summaries of floods that stopped
            List<EvictionController.Sweeper> sweepers = engineDriven == null ? List.of(leases::sweep, prefetchResults::sweep,
                    RateLimitedLog::flushAll) : List.of(leases::sweep, prefetchResults::sweep, RateLimitedLog::flushAll, engineDriven::sweep);
            // runs on: lmcache-housekeeping (the activity log reads the tracked-instance count)
            List<Agent> agents = Stream.of(l1.evictionController(config, sweepers),
                    new ActivityLog(metrics, dispatcher.meters(), l1.store(), reaper::trackedInstances, ACTIVITY_INTERVAL_NS), reaper, releases,
                    l2.evictionAgent()).filter(Objects::nonNull).toList();
            agentErrors.bindMeters(metrics, Stream.concat(agents.stream().map(Agent::roleName),
                    Stream.ofNullable(cudaEvents).map(runner -> runner.agent().roleName())).toList());
            // stops after the drain and before the modules it sweeps and reaps close
            housekeeping = add("housekeeping", Housekeeping.runner(agentErrors, agents));
            http = add("HTTP API", ServerHttp.bindApi(config));
            prometheusHttp = add("Prometheus HTTP", ServerHttp.bindPrometheus(config));
            loop = new RequestLoop(config.zmqEndpoint(), config.maxMessageBytes(), config.connections(), dispatcher, replies, connections, metrics);
            // closed first: in-flight requests are answered while all they use is open; runs on: the closing thread
            add("request loop (drain)", () -> loop.shutdown(DRAIN_TIMEOUT_NS));
            // closed before the loop drains, so every stream's final reply still goes out
            // spins, then parks until the earliest linger ends, never yields: while streams linger it idles after most turns,
            // and with 8 busy subscribers the five yields of the usual backoff were the thread's largest cost (64 % of its
            // native samples, bench/RESULTS.md#kv-event-subscribers)
            kvEventStreams = add("kv-event streams", new AgentRunner("lmcache-kv-events", streams, IdleStrategy.spinThenParkFor(streams::idleParkNs, KV_EVENT_PARK_NS),
                    agentErrors, KV_EVENT_CLOSE_NS));
            // runs on: whichever thread appends to the log or opens or acks a stream; unparks lmcache-kv-events
            streams.setWake(kvEventStreams::wake);
            loop.setStreamControl(streams);
            KvEventMetrics.bind(metrics, new KvEventCounters(data.events(), streams));
            // its health check reads closed and the agents' Errors; runs on: lmcache-http-*
            view = new ServerView(config, metrics, new ServerView.Storage(l1, l2, leases),
                    new ServerView.Modules(lookup, lmcacheDriven, engineDriven, management), new ServerView.Transport(loop, connections),
                    new ServerView.Device(gpu::status, gpu.stageNames()), () -> closed ? "shutting down" : agentErrors.fatalReason());
            view.gpuWarmups(gpuWarmups::status);
            ServerHttp.route(http, prometheusHttp, view, metrics, config, new ServerHttp.HookTargets(loop, releases, data.testCompletions()));
        } catch (RuntimeException | Error e) {
            CloseHelper.closeAll(parts.reversed());
            throw e;
        }
    }

    /** The pool; the GPU backend, opened before it, is closed here when the pool cannot be made (later, it is a part). */
    private static L1Tier openL1(ServerConfig config, GpuPart gpu) {
        try {
            return new L1Tier(config);
        } catch (RuntimeException | Error e) {
            gpu.backend().close();
            throw e;
        }
    }

    /** Records a part to close (null: nothing to close), named for the shutdown log; returns it. */
    private <T extends AutoCloseable> T add(String name, T part) {
        opened(name);
        parts.add(part == null ? null : new NamedCloser(name, part));
        return part;
    }

    /** Notes that {@code name} was built (the construction order {@link #openOrder} reports). */
    private void opened(String name) {
        built.add(name);
    }

    /** The names of what was built, in construction order (the order test pins the rules of the comments above). */
    List<String> openOrder() {
        return List.copyOf(built);
    }

    /** The names of the parts that close, in the order {@link #close} closes them (nulls: parts switched off, left out). */
    List<String> closeOrder() {
        return parts.reversed().stream().filter(Objects::nonNull).map(AutoCloseable::toString).toList();
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
            server.startParts();
        } catch (RuntimeException | Error e) {
            server.close();
            throw e;
        }
        LOG.info("ready: ZeroMQ ROUTER on {}, chunk size {}", config.zmqEndpoint(), config.chunkSize());
        return server;
    }

    private void startParts() {
        l1.startPreparation(gpu.regionStages(l1.pool()), gpu.numaPlacement(l1.pool(), config.operator().numaPlacement()));
        // while the pool's first region is prepared: the request path on scratch memory, so the first requests run compiled code;
        // rounds left over go on until the first request (closed first, before the loop drains)
        Warmup warmup = add("warm-up", Warmup.start(config, l1.pool().fileKey()));
        view.warmedUp(warmup::status);
        loop.onFirstRequest(warmup::firstRequest);
        housekeeping.start();
        l2.start();
        Stream.ofNullable(cudaEvents).forEach(AgentRunner::start);
        kvEventStreams.start();
        loop.start();
        management.start();
        ServerHttp.start(prometheusHttp, http);
    }

    /** {@code listener} hears, once and on the dying thread, that the ZeroMQ side can serve no more. */
    public void onTransportDeath(Consumer<String> listener) { loop.onTransportDeath(listener); }

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
            CloseHelper.closeAll(parts.reversed());
        } finally {
            stopped.countDown();
            LOG.info("shut down");
        }
    }
}
