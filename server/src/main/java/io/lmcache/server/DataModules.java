package io.lmcache.server;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.config.OperatorSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import io.lmcache.server.module.EngineDrivenTransferModule;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.module.WindowCommit;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.NumaTopology;
import io.lmcache.server.tables.TableMeters;
import io.lmcache.server.tier.L1Side;
import io.lmcache.server.tier.L2Tier;
import io.lmcache.server.tier.ModelLayouts;
import io.lmcache.server.tier.ObjectShapes;
import io.lmcache.server.tier.RegisteredShapes;
import io.lmcache.server.tier.StoreController;
import io.lmcache.server.transfer.CompletionDelay;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.HostCopies;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.transfer.SegmentMappings;
import io.lmcache.server.transfer.ShmSegments;
import io.lmcache.server.warmup.GpuWarmups;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.BiConsumer;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The modules that move and find KV data, built in dependency order for the composition root: the
 * two transfer modules (either may be off, per {@code --supported-transfer-mode}), the L2 tier (its
 * loads take the object shapes the transfer modules' workers registered) and the lookup module
 * (which hands L1 misses to the L2 prefetcher). Each close is registered through {@code closer} as
 * it is built, so the root closes them in reverse order.
 */
record DataModules(LmcacheDrivenTransferModule lmcacheDriven, EngineDrivenTransferModule engineDriven, L2Tier l2, LookupModule lookup,
        CompletionDelay testCompletions, Map<String, Supplier<Map<String, Object>>> storageStatus) {
    private static final Logger LOG = LoggerFactory.getLogger(DataModules.class);


    /**
     * What a LOOKUP leaves for later requests: the leases on its hits (for their RETRIEVE) and its prefetch results; and who
     * hears it ({@link LookupModule.Observer#NONE}: nobody).
     */
    record LookupState(LookupLeases leases, PrefetchResults prefetchResults, LookupModule.Observer observer) {}

    /**
     * How a worker's state ends: the liveness rules that decide when, and the release thread that frees its mappings; and what
     * its REGISTER starts: the GPU warm-up for its device.
     */
    record WorkerEnds(Liveness liveness, ReleaseThread releases, GpuWarmups gpuWarmups) {}

    /** How the root supervises what is built here: its agents' failures are counted in {@code agentErrors}, each close goes to {@code closer}. */
    record Supervision(AgentErrors agentErrors, BiConsumer<String, AutoCloseable> closer) {}

    static DataModules open(ServerConfig config, L1Tier l1, GpuPart gpu, LookupState lookups, WorkerEnds workers, ServerMetrics metrics,
            Supervision supervision) {
        LookupLeases leases = lookups.leases();
        PrefetchResults prefetchResults = lookups.prefetchResults();
        Liveness liveness = workers.liveness();
        ReleaseThread releases = workers.releases();
        AgentErrors agentErrors = supervision.agentErrors();
        BiConsumer<String, AutoCloseable> closer = supervision.closer();
        ObjectGroupCatalog objectGroups = new ObjectGroupCatalog(config.separateObjectGroups());
        CompletionDelay testCompletions = config.testHooks() ? new CompletionDelay() : null;
        closer.accept("test completions", testCompletions);
        // issue 52: CPU workers' copies spread over lmcache-copy-N; closed after the module (registered before it)
        HostCopies hostCopies = config.supportedTransferMode().allowsLmcacheDriven() ? hostCopies(config, metrics) : null;
        closer.accept("host copy threads", hostCopies);
        // the L2 tier reads the registered object shapes through this registry, so it opens before the transfer modules and the
        // window commit (which writes through L2) reaches the lmcache-driven module through its constructor; a LOOKUP loads from
        // L2 only for models whose lookup geometry is plain (hybrid ones look up in L1 alone, so skip_l1 keeps their objects)
        RegisteredShapes shapes = new RegisteredShapes();
        // runs on: lmcache-l2 (the store controller), per batch of committed objects
        L2Tier l2 = L2Tier.open(config.l2(), new L1Side(l1.store(), l1.pool().segment()), config.chunkSize(),
                new ModelLayouts(shapes, StoreController.L2Lookups.of(objectGroups)), metrics, agentErrors);
        boolean l2Closes = false;
        try {
            WindowCommit commit = windowCommit(config, l1, l2, objectGroups, metrics);
            LmcacheDrivenTransferModule lmcacheDriven = config.supportedTransferMode().allowsLmcacheDriven()
                    ? new LmcacheDrivenTransferModule(config.chunkSize(), l1.store(), leases, metrics, liveness, new CopyPaths(
                            shmSegments(config, l1, metrics), gpu.backend(), l1.pool().segment(), releases, testCompletions, hostCopies,
                            workers.gpuWarmups()::afterRegister),
                            new LmcacheDrivenTransferModule.LookupSide(objectGroups, commit, config.layerwiseBatch())) : null;
            // runs on: the thread that calls close(), as every part's close
            closer.accept("lmcache-driven transfers", lmcacheDriven == null ? null : lmcacheDriven::close);
            EngineDrivenTransferModule engineDriven = config.supportedTransferMode().allowsEngineDriven()
                    ? new EngineDrivenTransferModule(config.chunkSize(), l1.store(), l1.pool(), leases, metrics, liveness,
                            new EngineDrivenTransferModule.SlotTtls(config.l1WriteTtlNs(), config.l1ReadTtlNs())) : null;
            closer.accept("engine-driven transfers", engineDriven == null ? null : engineDriven::close);
            Stream.<ObjectShapes>of(lmcacheDriven == null ? null : lmcacheDriven::objectShapes,
                    engineDriven == null ? null : engineDriven::objectShapes).filter(Objects::nonNull).forEach(shapes::add);
            // closed after the loop and housekeeping, before the transfer modules
            closer.accept("L2 tier", l2);
            l2Closes = true;
            LookupModule lookup = new LookupModule(config.chunkSize(), l1.store(), leases, prefetchResults, metrics, objectGroups,
                    new LookupModule.BeyondL1(l2.prefetcher(), commit, lookups.observer()));
            // a storage_manager entry of /status, where LMCache's window commit shows
            Map<String, Supplier<Map<String, Object>>> storageStatus = commit == null ? Map.of() : Map.of("window_commit", commit::status);
            return new DataModules(lmcacheDriven, engineDriven, l2, lookup, testCompletions, storageStatus);
        } catch (RuntimeException | Error e) {
            if (!l2Closes) {
                l2.close(); // not yet registered (the transfer modules close before it): closed here
            }
            throw e;
        }
    }

    /**
     * {@code --commit-policy}: END_SESSION's window commit, fed by LOOKUPs and STOREs, writing through L2's store controller;
     * null when off.
     */
    private static WindowCommit windowCommit(ServerConfig config, L1Tier l1, L2Tier l2, ObjectGroupCatalog objectGroups,
            ServerMetrics metrics) {
        if (!config.commit().enabled()) {
            return null;
        }
        if (l2.storeController() == null) {
            // LMCache drops a commit batch with a warning when no L2 adapter is active
            LOG.warn("--commit-policy {} without an --l2-adapter: no window will be committed", config.commit().policy().flagValue());
            return null;
        }
        // runs on: lmcache-request-loop (END_SESSION), a queue append per object and a wake-up of lmcache-l2
        WindowCommit commit = new WindowCommit(config.commit(), config.chunkSize(), l1.store(), objectGroups, l2.storeController()::flush);
        TableMeters.bind(metrics, commit.table());
        return commit;
    }

    /** {@code --cpu-copy-threads}, or by default from the host's cores and NUMA nodes (the pool's regions sit on those). */
    private static HostCopies hostCopies(ServerConfig config, ServerMetrics metrics) {
        int threads = config.operator().cpuCopyThreads();
        if (threads == 0) {
            threads = HostCopies.defaultThreads(Runtime.getRuntime().availableProcessors(), NumaTopology.read(Path.of("/sys")).nodeCount());
        }
        LOG.info("CPU workers' copies: {} thread(s), the transfer thread included", threads);
        return HostCopies.start(threads, metrics.declare(TransferCatalogue.HOST_COPY_RUNS, "transfer"),
                metrics.declare(TransferCatalogue.HOST_COPY_RUNS, "copy"));
    }

    /** CPU workers' segments: never the pool's file, mapped once per inode, within the budget the operator settings give. */
    private static ShmSegments shmSegments(ServerConfig config, L1Tier l1, ServerMetrics metrics) {
        OperatorSettings operator = config.operator();
        SegmentMappings.Caps caps = new SegmentMappings.Caps(operator.shmMaxSegments(), operator.shmMaxMappedBytes(),
                OperatorSettings.maxMapCount());
        return new ShmSegments(config.shmAllowAnyOwner(), l1.pool().fileKey(), new SegmentMappings(caps), metrics);
    }

    /** The modules the reaper watches (those that are on). */
    List<InstanceLivenessTarget> livenessTargets() {
        return Stream.<InstanceLivenessTarget>of(lmcacheDriven, engineDriven).filter(Objects::nonNull).toList();
    }
}
