package io.lmcache.server;

import static io.lmcache.server.PartRoot.config;
import static io.lmcache.server.PartRoot.metrics;
import static io.lmcache.server.assembly.Part.after;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.Housekeeping;
import io.lmcache.server.agent.IdleStrategy;
import io.lmcache.server.agent.Wake;
import io.lmcache.server.assembly.Assembly;
import io.lmcache.server.assembly.Build;
import io.lmcache.server.assembly.Part;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.DiagnosticsSettings;
import io.lmcache.server.config.Versions;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.diag.DiagnosticsParts;
import io.lmcache.server.diag.EventsTrace;
import io.lmcache.server.diag.LookupHashLog;
import io.lmcache.server.events.KvEventCounters;
import io.lmcache.server.events.KvEventLog;
import io.lmcache.server.events.KvEventRecorder;
import io.lmcache.server.events.KvEventStreams;
import io.lmcache.server.fleet.FleetPart;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.http.ServerHttp;
import io.lmcache.server.http.ServerView;
import io.lmcache.server.kvapi.KvBytes;
import io.lmcache.server.kvapi.KvBytesRoutes;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.liveness.LivenessMeters;
import io.lmcache.server.liveness.Reaper;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.LaneStallWatch;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.KvEventMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.EventKinds;
import io.lmcache.server.module.WindowCommit;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.EngineDrivenTransferModule;
import io.lmcache.server.module.KvEventModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.ManagementModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.module.ServerOps;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.storage.EvictionController;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.StoreMeters;
import io.lmcache.server.tier.L2Tier;
import io.lmcache.server.tier.ObjectShapes;
import io.lmcache.server.tables.TableMeters;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.ObjectGroup;
import io.lmcache.server.warmup.GpuScratchWarmup;
import io.lmcache.server.warmup.GpuWarmups;
import io.lmcache.server.warmup.ScratchParts;
import io.lmcache.server.warmup.Warmup;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server's parts, in the one list {@link #ALL} the composition root opens (docs/assembly.md): each part names the parts it
 * comes after, with the reason (a close rule is such an edge: a part closes before every part it comes after), opens its
 * objects from what they opened, and registers its closers, agents, start steps and {@code /status} blocks. A new feature is
 * one more part here plus its own classes.
 */
final class ServerParts {
    private static final Logger LOG = LoggerFactory.getLogger(ServerParts.class);
    private static final long DRAIN_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    /** A reaped worker's release (unmap, IPC close) that takes longer is logged and counted. */
    private static final long RELEASE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long ACTIVITY_INTERVAL_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long MIN_RETAIN_NS = TimeUnit.MINUTES.toNanos(10);
    /** The stream agent's longest sleep: a fallback, since appends, acks and new subscriptions wake it. */
    private static final long KV_EVENT_PARK_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long KV_EVENT_CLOSE_NS = TimeUnit.SECONDS.toNanos(2);

    private ServerParts() {}

    /** What a LOOKUP leaves for later requests: the leases on its hits (for their RETRIEVE) and its prefetch results. */
    record Lookups(LookupLeases leases, PrefetchResults prefetchResults) {}

    /** Who is connected and the liveness rules over them. */
    record Peers(PeerConnections connections, Liveness liveness) {}

    /**
     * The KV-event channel's request side: the stream agent, the module that serves SUBSCRIBE/POLL, and the handle that wakes
     * the agent's thread (created before both, bound by the runner of lmcache-kv-events).
     */
    record KvEventChannel(KvEventStreams streams, KvEventModule module, ReplyQueue replies, Wake wake) {}

    /** The HTTP listeners: the API and the separate Prometheus port (null without one). */
    record HttpListeners(HttpApi api, HttpApi prometheus) {}

    // runs on: the thread that calls close(); closed last, after every part that logs
    static final Part<Object> LOG_SUMMARIES = Part.of("rate-limited log summaries", List.of(),
            b -> b.onClose("rate-limited log summaries", RateLimitedLog::flushPending));

    /**
     * The pool; its preparation (prefault, pin, NUMA placement) is the first start step. A warm-up's scratch server gives its
     * pool (scratch memory, ready as it is: nothing to prepare).
     */
    static final Part<L1Tier> L1 = Part.of("L1 tier", List.of(after("rate-limited log summaries", "the summaries are written after every part that logs")),
            b -> {
                ServerConfig config = config(b);
                L1Pool scratch = b.optional(L1Pool.class);
                if (scratch != null) {
                    return b.onClose("L1 tier", L1Tier.ready(config, scratch));
                }
                GpuPart gpu = b.require(PartRoot.class).gpu();
                L1Tier l1 = b.onClose("L1 tier", openL1(config, gpu));
                b.onStart("L1 pool preparation", () -> l1.startPreparation(gpu.regionStages(l1.pool()),
                        gpu.numaPlacement(l1.pool(), config.operator().numaPlacement())));
                return l1;
            });

    static final Part<AutoCloseable> GPU_BACKEND = Part.of("GPU backend", List.of(after("L1 tier", "the pool is unpinned before its memory goes")),
            b -> b.onClose("GPU backend", b.require(PartRoot.class).gpu().closer(b.require(L1Tier.class))));

    /** The runner of lmcache-cuda-events. */
    record CudaEvents(AgentRunner runner) {}

    /** lmcache-cuda-events; off without CUDA (no thread for nothing). */
    static final Part<CudaEvents> CUDA_EVENTS = Part.of("CUDA event poller", List.of(after("GPU backend", "it polls the backend's events")), b -> {
        PartRoot root = b.require(PartRoot.class);
        AgentRunner runner = b.onClose("CUDA event poller", root.gpu().eventsRunner(root.agentErrors()));
        if (runner == null) {
            return null;
        }
        b.onStart("CUDA event poller", runner::start);
        return new CudaEvents(runner);
    });

    static final Part<ReleaseThread> RELEASES = Part.of("release thread", List.of(after("CUDA event poller",
            "a reaped worker's IPC closes need the CUDA contexts: the GPU backend closes after it")), b -> {
        ReleaseThread releases = b.onClose("release thread", ReleaseThread.withTimeout(TestHooks.releaseTimeoutNs(config(b), RELEASE_TIMEOUT_NS)));
        b.agent(Build.Role.HOUSEKEEPING, releases);
        LivenessMeters.bind(metrics(b), releases);
        return releases;
    });

    static final Part<AutoCloseable> GPU_DRAIN = Part.of("GPU transfers in flight", List.of(after("release thread",
            "the last GPU completions still give back what the release thread frees")),
            b -> b.onClose("GPU transfers in flight", b.require(PartRoot.class).gpu().drainer()));

    static final Part<Lookups> LOOKUPS = Part.of("lookup state", List.of(after("L1 tier", "leases lock L1 objects")), b -> {
        ServerConfig config = config(b);
        LookupLeases leases = b.offer(new LookupLeases(b.require(L1Tier.class).store(), config.l1ReadTtlNs(), System::nanoTime));
        PrefetchResults prefetchResults = b.offer(new PrefetchResults(config.l1ReadTtlNs(), System::nanoTime));
        TableMeters.bind(metrics(b), prefetchResults.table());
        TableMeters.bind(metrics(b), leases.table());
        return new Lookups(leases, prefetchResults);
    });

    static final Part<Peers> PEERS = Part.of("peers", List.of(), b -> {
        ServerConfig config = config(b);
        // closed connections are remembered long enough for every liveness rule to use them
        PeerConnections connections = b.offer(new PeerConnections(System::nanoTime, Math.max(config.workerRegistrationGraceNs(), MIN_RETAIN_NS)));
        return new Peers(connections, b.offer(new Liveness(System::nanoTime, connections, config.workerDisconnectGraceNs())));
    });

    /** The GPU warm-up at each device's first REGISTER; built before the transfer modules, which run it after a REGISTER. */
    static final Part<GpuWarmups> GPU_WARMUPS = Part.of("GPU warm-ups", List.of(after("GPU backend",
            "a warm-up still running stops after its round and frees its scratch memory before the backend closes")), b -> {
        GpuWarmups warmups = b.onClose("GPU warm-ups", GpuScratchWarmup.forServer(ServerParts::openScratch, config(b), b.require(L1Tier.class).store(),
                b.require(PartRoot.class).gpu().backend()));
        b.status("gpu_warmups", warmups::status);
        return warmups;
    });

    /** {@code --lookup-hash-log-dir}: the LOOKUPs' queue, given to the lookup module; written by {@link #LOOKUP_HASH_LOG}. */
    static final Part<LookupHashLog> LOOKUP_HASH_QUEUE = Part.of("lookup-hash queue", List.of(),
            b -> config(b).diagnostics().lookupHashLogEnabled() ? new LookupHashLog() : null);

    /**
     * The lookup-hash log's writer (issue 49, fleet-and-operator-api.md §3.4) on lmcache-lookup-hashes: it reads the shapes the
     * transfer modules registered; closed before them, after writing what is still queued.
     */
    static final Part<AgentRunner> LOOKUP_HASH_LOG = Part.of("lookup-hash log", List.of(after("lookup module",
            "it reads the registered shapes"), after("lookup-hash queue", "it writes the queued LOOKUPs")), b -> {
        LookupHashLog queue = b.optional(LookupHashLog.class);
        if (queue == null) {
            return null;
        }
        AgentRunner runner = b.onClose("lookup-hash log", DiagnosticsParts.lookupHashWriter(config(b), queue, metrics(b),
                b.find(LmcacheDrivenTransferModule.class).<ObjectShapes>map(module -> module::objectShapes).orElse(null),
                b.find(EngineDrivenTransferModule.class).<ObjectShapes>map(module -> module::objectShapes).orElse(null),
                b.require(PartRoot.class).agentErrors()));
        b.onStart("lookup-hash log", runner::start);
        return runner;
    });

    /** {@code --trace-level events}: the cache-event stream's batches recorded to {@code --trace-output} (§3.3). */
    static final Part<EventsTrace> EVENTS_TRACE = Part.of("events trace", List.of(), b -> {
        ServerConfig config = config(b);
        if (config.diagnostics().traceLevel() != DiagnosticsSettings.TraceLevel.EVENTS) {
            return null;
        }
        EventsTrace trace = b.onClose("events trace", DiagnosticsParts.eventsTrace(config, Versions.version(), metrics(b)));
        b.status("events_trace", trace::status);
        return trace;
    });

    /**
     * The LMCache fleet (issue 49): coordinator membership, the cache-event feed on the store's listener list and on every L2
     * adapter, {@code /cache/objects}. Opened after the stores, so it closes before them; opened before the request loop, so its
     * last events are flushed and it deregisters after the loop drains. Its threads start once HTTP serves (see {@link #VIEW}).
     */
    static final Part<FleetPart> FLEET = Part.of("fleet", List.of(after("lookup module", "its feed hears the stores; it closes before them"),
            after("events trace", "the trace records the batches until the last flush")), b -> {
                L2Tier l2 = b.require(L2Tier.class);
                FleetPart fleet = b.onClose("fleet", FleetPart.open(config(b), b.require(L1Tier.class).store(), l2.adapters(),
                        b.optional(EventsTrace.class), l2.warmPrefetches()));
                fleet.bindMetrics(metrics(b));
                return fleet;
            });

    /**
     * LMCache's HTTP KV bytes API (issue 49, {@code /api/kv/*}) over L1, in the layouts the LMCache-driven path registered; its
     * stores go through the store's reserve and commit, so the listeners hear them as any STORE. Routed by {@link #VIEW}.
     */
    static final Part<KvBytesRoutes> KV_BYTES = Part.of("HTTP KV bytes API", List.of(after("lookup module",
            "it reads the registered layouts and writes the store")), b -> {
                L1Tier l1 = b.require(L1Tier.class);
                Optional<Function<String, Map<Integer, List<ObjectGroup>>>> registered = b.find(LmcacheDrivenTransferModule.class)
                        .map(module -> module::objectGroups);
                return new KvBytesRoutes(new KvBytes(l1.store(), l1.pool().segment()), registered, config(b).chunkSize(), l1.pool().bytes(),
                        metrics(b));
            });

    /**
     * The KV-event log (one incarnation per process: its start time in ns, as LMCache's) and its recorder, fed by L1's listener
     * list (after the L2 write-through, before the fleet's feed) and by the L2 adapters' listeners.
     */
    static final Part<KvEventRecorder> KV_EVENT_RECORDER = Part.of("kv-event recorder", List.of(after("lookup module",
            "it hears the L1 store and the L2 adapters")), b -> {
        ServerConfig config = config(b);
        Instant now = Instant.now();
        KvEventLog log = new KvEventLog(config.kvEventLogSize(), config.chunkSize(), now.getEpochSecond() * 1_000_000_000L + now.getNano());
        KvEventRecorder recorder = new KvEventRecorder(log, config.l2().enabled());
        recorder.attach(b.require(L1Tier.class).store());
        L2AdapterListener feed = recorder.l2Listener();
        if (feed != null) {
            b.require(L2Tier.class).registerListener(feed);
        }
        return recorder;
    });

    /** The KV-event streams (SUBSCRIBE/POLL) over the log the recorder fills. */
    static final Part<KvEventChannel> KV_EVENTS = Part.of("kv-event module", List.of(after("lookup module", "it streams the recorder's log"),
            after("kv-event recorder", "it streams the recorder's log")), b -> {
        ReplyQueue replies = b.offer(new ReplyQueue());
        KvEventRecorder recorder = b.require(KvEventRecorder.class);
        // runs on: whichever thread appends to the log or opens or acks a stream; unparks lmcache-kv-events
        Wake wake = new Wake();
        KvEventStreams streams = new KvEventStreams(recorder.log(), replies, System::nanoTime, wake);
        KvEventModule module = new KvEventModule(recorder, streams);
        KvEventMetrics.bind(metrics(b), new KvEventCounters(recorder, streams));
        return new KvEventChannel(streams, module, replies, wake);
    });

    // built after the modules: the reaper runs over modules that are complete, and stops before they close
    static final Part<Reaper> REAPER = Part.of("reaper", List.of(after("lookup module", "the reaper runs over modules that are complete"),
            after("kv-event module", "a reaped instance's subscription ends")), b -> {
        ServerConfig config = config(b);
        Reaper reaper = new Reaper(targets(b), config.workerReapTimeoutNs(), config.workerRegistrationGraceNs(), config.workerDisconnectGraceNs(),
                b.require(ReleaseThread.class), b.require(PeerConnections.class), System::nanoTime);
        b.agent(Build.Role.HOUSEKEEPING, reaper);
        LivenessMeters.bind(metrics(b), reaper);
        return reaper;
    });

    static final Part<ManagementModule> MANAGEMENT = Part.of("management", List.of(after("reaper", "management reports the reaper's targets")),
            b -> new ManagementModule(config(b).chunkSize(), b.require(L1Tier.class).store(), targets(b), b.require(Reaper.class),
                    ServerView.livenessSettings(config(b)), b.require(KvEventChannel.class).module()));

    // STORE/RETRIEVE failures carry the GPU's complete event, which a GPU worker can open (64 zero bytes without CUDA);
    // runs on: lmcache-transfer-* (a failed STORE/RETRIEVE) or lmcache-request-loop (rejected during shutdown, over budget).
    // Isolated IPC (issue 47): each event handle is classified and answered in kind; --isolated-ipc only sets the warning
    static final Part<Dispatcher> DISPATCHER = Part.of("dispatcher", List.of(after("management", "it serves every module's ops"),
            after("lookup module", "no handler runs on a closed module: the dispatcher closes before the modules")), b -> {
        ServerConfig config = config(b);
        GpuBackend gpu = b.require(PartRoot.class).gpu().backend();
        EventKinds events = new EventKinds(gpu, FailureReplies.withEvents(gpu::failureEvent), metrics(b), config.isolatedIpc());
        ServerConfig.Lanes lanes = config.transferLanes(gpu.available(), Runtime.getRuntime().availableProcessors());
        LOG.info("transfer lanes: {} ({})", lanes.count(), lanes.why());
        return b.onClose("dispatcher", new Dispatcher(ServerOps.table(b.require(ManagementModule.class), b.require(LookupModule.class),
                b.require(KvEventChannel.class).module(), b.find(LmcacheDrivenTransferModule.class), b.find(EngineDrivenTransferModule.class),
                events), b.require(ReplyQueue.class),
                metrics(b), config.maxCpuWorkers(), lanes.count(), config.tuning().transferSpinNs()));
    });

    // runs on: lmcache-housekeeping (each eviction tick, the activity log); stops after the drain and before the modules it
    // sweeps and reaps close; the flush writes the "suppressed N" summaries of floods that stopped
    static final Part<AgentRunner> HOUSEKEEPING = Part.of("housekeeping", List.of(after("dispatcher", "the activity log reads its meters"),
            after("reaper", "it runs the reaper")), b -> {
        L1Tier l1 = b.require(L1Tier.class);
        Lookups lookups = b.require(Lookups.class);
        List<EvictionController.Sweeper> sweepers = new ArrayList<>(List.of(lookups.leases()::sweep, lookups.prefetchResults()::sweep,
                RateLimitedLog::flushAll));
        b.find(EngineDrivenTransferModule.class).ifPresent(module -> sweepers.add(module::sweep));
        Reaper reaper = b.require(Reaper.class);
        b.agent(Build.Role.HOUSEKEEPING, l1.evictionController(config(b), sweepers));
        b.agent(Build.Role.HOUSEKEEPING, new ActivityLog(metrics(b), b.require(Dispatcher.class).meters(), l1.store(),
                reaper::trackedInstances, ACTIVITY_INTERVAL_NS));
        b.agent(Build.Role.HOUSEKEEPING, new LaneStallWatch(b.require(Dispatcher.class), metrics(b),
                TestHooks.laneDeadlineNs(config(b), LaneStallWatch.STALL_NS)));
        AgentErrors errors = b.require(PartRoot.class).agentErrors();
        List<Agent> agents = b.agents(Build.Role.HOUSEKEEPING);
        CudaEvents cudaEvents = b.optional(CudaEvents.class);
        errors.bindMeters(metrics(b), Stream.concat(agents.stream().map(Agent::roleName),
                Stream.ofNullable(cudaEvents).map(events -> events.runner().agent().roleName())).toList());
        AgentRunner runner = b.onClose("housekeeping", Housekeeping.runner(errors, agents));
        b.onStart("housekeeping", runner::start);
        return runner;
    });

    static final Part<HttpListeners> HTTP = Part.of("HTTP", List.of(after("housekeeping", "requests are answered while the sweeps run")), b -> {
        HttpApi api = b.onClose("HTTP API", ServerHttp.bindApi(config(b)));
        return new HttpListeners(api, b.onClose("Prometheus HTTP", ServerHttp.bindPrometheus(config(b))));
    });

    // closed first (but for the warm-up and the streams): in-flight requests are answered while all they use is open. The
    // warm-up's run is made here (started and closed by its own part): the loop tells it of the first request
    static final Part<RequestLoop> LOOP = Part.of("request loop", List.of(after("HTTP", "the drain comes before the listeners close")), b -> {
        ServerConfig config = config(b);
        WarmupRun warmup = b.offer(new WarmupRun(ServerParts::openScratch, config, b.require(L1Tier.class)));
        RequestLoop loop = new RequestLoop(config.zmqEndpoint(), config.maxMessageBytes(), config.connections(),
                new RequestLoop.Serving(b.require(Dispatcher.class), b.require(ReplyQueue.class), b.require(KvEventChannel.class).streams(),
                        warmup::firstRequest), b.require(PeerConnections.class), metrics(b));
        b.onClose("request loop (drain)", () -> loop.shutdown(DRAIN_TIMEOUT_NS));
        return loop;
    });

    // closed before the loop drains, so every stream's final reply still goes out; spins, then parks until the earliest linger
    // ends, never yields: while streams linger it idles after most turns, and with 8 busy subscribers the five yields of the
    // usual backoff were the thread's largest cost (bench/RESULTS.md#kv-event-subscribers)
    static final Part<AgentRunner> KV_EVENT_STREAMS = Part.of("kv-event streams", List.of(after("request loop",
            "every stream's final reply goes out before the loop drains")), b -> {
        KvEventChannel channel = b.require(KvEventChannel.class);
        KvEventStreams streams = channel.streams();
        AgentRunner runner = b.onClose("kv-event streams", new AgentRunner("lmcache-kv-events", streams,
                IdleStrategy.spinThenParkFor(streams::idleParkNs, KV_EVENT_PARK_NS), b.require(PartRoot.class).agentErrors(), KV_EVENT_CLOSE_NS,
                channel.wake()));
        b.onStart("kv-event streams", runner::start);
        return runner;
    });

    /** The start-up JIT warm-up on scratch memory while the pool's first region is prepared; closed first of all. */
    static final Part<WarmupRun> WARMUP = Part.of("warm-up", List.of(after("kv-event streams", "the warm-up stops before anything it uses"),
            after("request loop", "rounds left over go on until the first request past a client's start")), b -> {
        WarmupRun run = b.require(WarmupRun.class);
        b.onClose("warm-up", run);
        b.onStart("warm-up", run::start);
        b.status("jit_warmup", run::status);
        return run;
    });

    // its health check reads whether the root is closing and the agents' Errors; runs on: lmcache-http-*
    static final Part<ServerView> VIEW = Part.of("status view", List.of(after("warm-up", "it shows every part's status"),
            after("fleet", "it routes the coordinator's calls"), after("HTTP KV bytes API", "it routes /api/kv/*")), b -> {
        ServerConfig config = config(b);
        PartRoot root = b.require(PartRoot.class);
        RequestLoop loop = b.require(RequestLoop.class);
        HttpListeners http = b.require(HttpListeners.class);
        // a storage_manager entry of /status, where LMCache's window commit shows
        Map<String, Supplier<Map<String, Object>>> storageStatus = b.find(WindowCommit.class)
                .<Map<String, Supplier<Map<String, Object>>>>map(commit -> Map.of("window_commit", commit::status)).orElse(Map.of());
        ServerView view = new ServerView(config, metrics(b), new ServerView.Storage(b.require(L1Tier.class), b.require(L2Tier.class),
                b.require(LookupLeases.class), storageStatus),
                new ServerView.Modules(b.require(LookupModule.class), b.find(LmcacheDrivenTransferModule.class),
                        b.find(EngineDrivenTransferModule.class), b.require(ManagementModule.class)),
                new ServerView.Transport(loop, b.require(PeerConnections.class)), new ServerView.Device(root.gpu()::status, root.gpu().stageNames()),
                new ServerView.Root(() -> root.closing().getAsBoolean() ? "shutting down" : root.agentErrors().fatalReason(), b.statuses()));
        root.gpu().bindMetrics(metrics(b));
        StoreMeters.bind(metrics(b), b.require(L1Tier.class).store());
        FleetPart fleet = b.require(FleetPart.class);
        KvBytesRoutes kvBytes = b.require(KvBytesRoutes.class);
        ServerHttp.route(http.api(), http.prometheus(), view, metrics(b), config,
                new ServerHttp.HookTargets(loop, b.require(ReleaseThread.class)::blockNextRelease,
                        b.find(LmcacheDrivenTransferModule.class).<Runnable>map(module -> module::blockNextRegister).orElse(null),
                        b.require(DataParts.Basis.class).testCompletions().map(delay -> (ServerHttp.CompletionDelays) delay::set).orElse(null)),
                        (api, guard) -> {
                            fleet.route(api, guard);
                            kvBytes.register(api, guard);
                        });
        b.onServe("request loop", loop::start);
        b.onServe("management", b.require(ManagementModule.class)::start);
        b.onServe("HTTP", () -> ServerHttp.start(http.prometheus(), http.api()));
        // the coordinator may call back as soon as the server registers
        b.onServe("fleet", b.require(FleetPart.class)::start);
        return view;
    });

    /** Every part of the server, in list order (the after-edges decide where they differ). */
    static final List<Part<?>> ALL = List.of(LOG_SUMMARIES, L1, GPU_BACKEND, CUDA_EVENTS, RELEASES, GPU_DRAIN, LOOKUPS, PEERS, GPU_WARMUPS,
            LOOKUP_HASH_QUEUE, DataParts.BASIS, DataParts.L2, DataParts.LMCACHE_DRIVEN, DataParts.ENGINE_DRIVEN, DataParts.LOOKUP,
            LOOKUP_HASH_LOG, KV_EVENT_RECORDER, EVENTS_TRACE, FLEET, KV_BYTES, KV_EVENTS, REAPER, MANAGEMENT, DISPATCHER, HOUSEKEEPING, HTTP,
            LOOP, KV_EVENT_STREAMS, WARMUP, VIEW);

    /**
     * The parts a warm-up's scratch server opens ({@link #openScratch}): those of {@link #ALL} a request runs through, from the
     * store to the dispatcher, and nothing that reaches beyond the scratch memory or serves a door: no GPU backend, poller or
     * drain (the server's own), no fleet, HTTP, housekeeping thread, request loop (the scratch server opens its own, on an
     * in-process endpoint, halfway through its rounds), KV-event stream thread or nested warm-up. The order test compares it
     * with {@link #ALL}.
     */
    static final List<Part<?>> SCRATCH = ALL.stream().filter(Set.of(L1, RELEASES, LOOKUPS, PEERS, GPU_WARMUPS, DataParts.BASIS,
            DataParts.L2, DataParts.LMCACHE_DRIVEN, DataParts.ENGINE_DRIVEN, DataParts.LOOKUP, KV_EVENT_RECORDER, KV_EVENTS, REAPER, MANAGEMENT,
            DISPATCHER)::contains).toList();

    /**
     * Opens {@link #SCRATCH} over a warm-up's scratch configuration (the warm-ups' {@link ScratchParts}): its L1 tier over
     * {@code pool}, the worker's copy path from {@code copyPaths} (or its tensors), a host-only GPU part, agent errors of its own;
     * concluded, never started (its store's regions are ready as they are, and it runs no agent thread).
     */
    static Assembly openScratch(ServerConfig config, ServerMetrics metrics, L1Pool pool, CopyPaths.Opener copyPaths) {
        PartRoot root = new PartRoot(GpuPart.hostOnly(), new AgentErrors(), () -> false);
        return Assembly.open(SCRATCH, Stream.of(config, metrics, root, pool, copyPaths).filter(Objects::nonNull).toArray()).conclude();
    }


    /** The modules the reaper watches (those that are on), and the KV-event module: PINGs keep subscriptions alive. */
    private static List<InstanceLivenessTarget> targets(Build b) {
        return Stream.of(b.find(LmcacheDrivenTransferModule.class).stream(), b.find(EngineDrivenTransferModule.class).stream(),
                Stream.of(b.require(KvEventChannel.class).module())).<InstanceLivenessTarget>flatMap(s -> s).toList();
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

    /** The start-up warm-up: opened with the parts, started after the pool's preparation, closed first. */
    static final class WarmupRun implements AutoCloseable {
        private final ScratchParts parts;
        private final ServerConfig config;
        private final L1Tier l1;
        private volatile Warmup warmup;

        WarmupRun(ScratchParts parts, ServerConfig config, L1Tier l1) {
            this.parts = parts;
            this.config = config;
            this.l1 = l1;
        }

        /** While the pool's first region is prepared: the request path on scratch memory, so the first requests run compiled code. */
        void start() {
            warmup = Warmup.start(parts, config, l1.pool().fileKey());
        }

        /**
         * The request loop's first request past a client's start (on lmcache-request-loop, once): the background rounds
         * stop. The loop serves only after every start step, so the warm-up has started by then.
         */
        void firstRequest() {
            Warmup w = warmup;
            if (w != null) {
                w.firstRequest();
            }
        }

        Map<String, Object> status() {
            Warmup w = warmup;
            return w == null ? Warmup.Result.OFF.toMap() : w.status();
        }

        @Override
        public void close() {
            Warmup w = warmup;
            if (w != null) {
                w.close();
            }
        }
    }
}
