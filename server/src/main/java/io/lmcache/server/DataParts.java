package io.lmcache.server;

import static io.lmcache.server.PartRoot.config;
import static io.lmcache.server.PartRoot.metrics;
import static io.lmcache.server.assembly.Part.after;

import io.lmcache.server.assembly.Build;
import io.lmcache.server.assembly.Part;
import io.lmcache.server.config.OperatorSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.diag.LookupHashLog;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.metrics.LookupCatalogue;
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
import io.lmcache.server.tier.RegisteredShapes;
import io.lmcache.server.tier.StoreController;
import io.lmcache.server.transfer.CompletionDelay;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.HostCopies;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.transfer.SegmentMappings;
import io.lmcache.server.transfer.ShmSegments;
import io.lmcache.server.transfer.StreamingCopy;
import io.lmcache.server.warmup.GpuWarmups;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The parts that move and find KV data (docs/assembly.md), in opening order: what the transfer modules share, the L2 tier
 * (and the window commit that writes through it), the two transfer modules (each opens nothing when
 * {@code --supported-transfer-mode} leaves it out, so its users find it absent) and the lookup module (which hands L1 misses
 * to the L2 prefetcher). The L2 tier reads the registered object shapes through {@link RegisteredShapes}, made first and
 * filled by each transfer module as it opens, so L2 (and the commit) opens before the modules and reaches them through
 * their constructors.
 */
final class DataParts {
    private static final Logger LOG = LoggerFactory.getLogger(DataParts.class);

    private DataParts() {}

    /**
     * What the transfer modules share: the object groups of each registration, the shapes L2 reads (filled by the modules),
     * the CPU workers' copy threads (issue 52; none without the LMCache-driven mode) and, with {@code --test-hooks}, the host
     * copies' completion delay.
     */
    record Basis(ObjectGroupCatalog objectGroups, RegisteredShapes shapes, Optional<HostCopies> hostCopies,
            Optional<CompletionDelay> testCompletions) {}

    // closed after the modules (registered before them): the copy threads and the delayed completions outlast every copy
    static final Part<Basis> BASIS = Part.of("transfer basis", List.of(after("GPU transfers in flight",
            "the GPU transfers in flight drain after the modules close"), after("lookup state", "the modules take the leases"),
            after("peers", "the modules follow their workers' liveness"), after("GPU warm-ups", "a REGISTER runs the GPU warm-up")), b -> {
                ServerConfig config = config(b);
                Optional<CompletionDelay> testCompletions = config.testHooks() ? Optional.of(new CompletionDelay()) : Optional.empty();
                testCompletions.ifPresent(delay -> b.onClose("test completions", delay));
                Optional<HostCopies> hostCopies = config.supportedTransferMode().allowsLmcacheDriven()
                        ? Optional.of(b.onClose("host copy threads", hostCopies(config, metrics(b)))) : Optional.empty();
                return new Basis(new ObjectGroupCatalog(config.separateObjectGroups()), new RegisteredShapes(), hostCopies, testCompletions);
            });

    /**
     * The L2 tier (an empty one without {@code --l2-adapter}) and, with {@code --commit-policy}, END_SESSION's window commit that
     * writes through its store controller (offered to the modules; its {@code storage_manager.window_commit} entry of /status).
     * A LOOKUP loads from L2 only for models whose lookup geometry is plain (hybrid ones look up in L1 alone, so skip_l1
     * keeps their objects).
     */
    static final Part<L2Tier> L2 = Part.of("L2 tier", List.of(after("transfer basis", "it reads the shapes the modules register")), b -> {
        ServerConfig config = config(b);
        L1Tier l1 = b.require(L1Tier.class);
        Basis basis = b.require(Basis.class);
        // runs on: lmcache-l2 (the store controller), per batch of committed objects; closed after the transfer modules: the
        // dispatcher and the loop have stopped by then, so no STORE commits and no END_SESSION flushes any more
        L2Tier l2 = b.onClose("L2 tier", L2Tier.open(config.l2(), new L1Side(l1.store(), l1.pool().segment()), config.chunkSize(),
                new ModelLayouts(basis.shapes(), StoreController.L2Lookups.of(basis.objectGroups())), metrics(b),
                b.require(PartRoot.class).agentErrors()));
        b.agent(Build.Role.HOUSEKEEPING, l2.evictionAgent());
        b.onStart("L2 tier", l2::start);
        windowCommit(config, l1, l2, basis.objectGroups(), metrics(b)).ifPresent(b::offer);
        return l2;
    });

    static final Part<LmcacheDrivenTransferModule> LMCACHE_DRIVEN = Part.of("lmcache-driven transfers", List.of(after("L2 tier",
            "its window commit writes through L2"), after("release thread", "it releases workers' mappings through it")), b -> {
                ServerConfig config = config(b);
                if (!config.supportedTransferMode().allowsLmcacheDriven()) {
                    return null;
                }
                L1Tier l1 = b.require(L1Tier.class);
                Basis basis = b.require(Basis.class);
                CopyPaths paths = new CopyPaths(shmSegments(config, l1, metrics(b)), b.require(PartRoot.class).gpu().backend(),
                        l1.pool().segment(), b.require(ReleaseThread.class), basis.testCompletions().orElse(null),
                        b.optional(CopyPaths.Opener.class), basis.hostCopies().orElse(null), b.require(GpuWarmups.class)::afterRegister);
                LmcacheDrivenTransferModule module = new LmcacheDrivenTransferModule(config.chunkSize(), l1.store(), b.require(LookupLeases.class),
                        metrics(b), b.require(Liveness.class), paths,
                        new LmcacheDrivenTransferModule.LookupSide(basis.objectGroups(), b.optional(WindowCommit.class),
                                config(b).layerwiseBatch()));
                // runs on: the thread that calls close(), as every part's close
                b.onClose("lmcache-driven transfers", module::close);
                basis.shapes().add(module::objectShapes);
                return module;
            });

    static final Part<EngineDrivenTransferModule> ENGINE_DRIVEN = Part.of("engine-driven transfers", List.of(after("L2 tier",
            "L2 reads the shapes it registers")), b -> {
                ServerConfig config = config(b);
                if (!config.supportedTransferMode().allowsEngineDriven()) {
                    return null;
                }
                L1Tier l1 = b.require(L1Tier.class);
                EngineDrivenTransferModule module = new EngineDrivenTransferModule(config.chunkSize(), l1.store(), l1.pool(),
                        b.require(LookupLeases.class), metrics(b), b.require(Liveness.class),
                        new EngineDrivenTransferModule.SlotTtls(config.l1WriteTtlNs(), config.l1ReadTtlNs()));
                b.onClose("engine-driven transfers", module::close);
                b.require(Basis.class).shapes().add(module::objectShapes);
                return module;
            });

    /**
     * LOOKUP and its prefetch status: L1 first, then L2 through the prefetcher; the window commit and, with
     * {@code --lookup-hash-log-dir}, the lookup-hash log's queue hear the LOOKUPs.
     */
    static final Part<LookupModule> LOOKUP = Part.of("lookup module", List.of(after("lmcache-driven transfers",
            "the modules are complete when the parts after it open"), after("engine-driven transfers",
            "the modules are complete when the parts after it open"), after("lookup-hash queue",
            "the lookup module queues each LOOKUP for the log")), b -> {
                ServerConfig config = config(b);
                LookupModule lookup = new LookupModule(config.chunkSize(), b.require(L1Tier.class).store(), b.require(LookupLeases.class),
                        b.require(PrefetchResults.class), metrics(b), b.require(Basis.class).objectGroups(),
                        new LookupModule.BeyondL1(b.require(L2Tier.class).prefetcher(), b.optional(WindowCommit.class),
                                b.find(LookupHashLog.class).<LookupModule.Observer>map(log -> log).orElse(LookupModule.Observer.NONE)));
                metrics(b).gauge(LookupCatalogue.ACTIVE_PREFETCH_JOBS, lookup::pendingResults);
                return lookup;
            });

    /** Every data part, in opening order. */
    static final List<Part<?>> ALL = List.of(BASIS, L2, LMCACHE_DRIVEN, ENGINE_DRIVEN, LOOKUP);

    /** {@code --commit-policy}: END_SESSION's window commit, fed by LOOKUPs and STOREs, writing through L2's store controller. */
    private static Optional<WindowCommit> windowCommit(ServerConfig config, L1Tier l1, L2Tier l2, ObjectGroupCatalog objectGroups,
            ServerMetrics metrics) {
        if (!config.commit().enabled()) {
            return Optional.empty();
        }
        if (l2.storeController() == null) {
            // LMCache drops a commit batch with a warning when no L2 adapter is active
            LOG.warn("--commit-policy {} without an --l2-adapter: no window will be committed", config.commit().policy().flagValue());
            return Optional.empty();
        }
        // runs on: lmcache-request-loop (END_SESSION), a queue append per object and a wake-up of lmcache-l2
        WindowCommit commit = new WindowCommit(config.commit(), config.chunkSize(), l1.store(), objectGroups, l2.storeController()::flush);
        TableMeters.bind(metrics, commit.table());
        return Optional.of(commit);
    }

    /** {@code --cpu-copy-threads}, or by default from the host's cores and NUMA nodes (the pool's regions sit on those). */
    private static HostCopies hostCopies(ServerConfig config, ServerMetrics metrics) {
        int threads = config.operator().cpuCopyThreads();
        if (threads == 0) {
            threads = HostCopies.defaultThreads(Runtime.getRuntime().availableProcessors(), NumaTopology.read(Path.of("/sys")).nodeCount());
        }
        StreamingCopy.Load streaming = config.tuning().nativeHostCopy() ? StreamingCopy.load()
                : new StreamingCopy.Absent("-Dlmcache.transfer.nativeCopy=false");
        LOG.info("CPU workers' copies: {} thread(s), the transfer thread included; {}", threads, streaming.describe());
        return HostCopies.start(threads, config.tuning().hostRunBytes(), streaming, metrics.declare(TransferCatalogue.HOST_COPY_RUNS, "transfer"),
                metrics.declare(TransferCatalogue.HOST_COPY_RUNS, "copy"));
    }

    /** CPU workers' segments: never the pool's file, mapped once per inode, within the budget the operator settings give. */
    private static ShmSegments shmSegments(ServerConfig config, L1Tier l1, ServerMetrics metrics) {
        OperatorSettings operator = config.operator();
        SegmentMappings.Caps caps = new SegmentMappings.Caps(operator.shmMaxSegments(), operator.shmMaxMappedBytes(),
                OperatorSettings.maxMapCount());
        return new ShmSegments(config.shmAllowAnyOwner(), l1.pool().fileKey(), new SegmentMappings(caps), metrics);
    }

}
