package io.lmcache.server.storage;

import io.lmcache.server.config.StartupException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.function.IntConsumer;
import java.util.function.IntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The L1 pool: one {@link MemorySegment} of {@code --l1-size-gb}, 64-bit offsets. Backed by a file
 * in /dev/shm (so engine-driven workers can map it) that this process holds an exclusive lock on
 * while it lives and that ends in the pool's marker ({@link PoolSegmentFile}): a marked segment
 * nobody locks is a dead server's and is removed at start; anything else under the name (a
 * worker's segment) is never touched, and start-up is refused; ours is removed at close. When
 * /dev/shm is too small (or {@code --shm-name ""}), anonymous memory instead. Mapping costs
 * nothing up front; background threads prefault (and, with a GPU, pin) the pool region by
 * region, and each region becomes allocatable as soon as it is ready, so the server serves
 * within moments of start at any size.
 */
public final class L1Pool implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(L1Pool.class);
    static final Path SHM_DIR = Path.of("/dev/shm");
    static final String DEFAULT_PREFIX = "lmcache_l1_pool_";
    private static final int OWNER_ONLY = 0600;

    /** One step of getting a region ready (prefault is built in; a GPU backend adds pinning). */
    public interface RegionStage {
        String name();

        void prepare(int region, MemorySegment slice) throws Exception;
    }

    private final MemorySegment segment;
    private final Arena arena;
    private final long bytes;
    private final long regionBytes;
    private final int regionCount;
    private final Path shmPath;
    private final Object fileKey;
    private final FileChannel lockChannel;
    private final FileLock fileLock;
    private volatile PoolPreparation preparation;
    private volatile NumaPlacement placement = NumaPlacement.none("not started");

    /** The /dev/shm file behind a shared pool: its path, its identity, and the channel and lock this process holds on it. */
    private record ShmFile(Path path, Object fileKey, FileChannel lockChannel, FileLock lock) {}

    /** {@code file}: null for anonymous memory; {@code arena}: null for memory another owner frees ({@link #over}). */
    private L1Pool(MemorySegment segment, Arena arena, long bytes, long regionBytes, ShmFile file) {
        this.segment = segment;
        this.arena = arena;
        this.bytes = bytes;
        this.regionBytes = regionBytes;
        this.regionCount = (int) ((bytes + regionBytes - 1) / regionBytes);
        this.shmPath = file == null ? null : file.path();
        this.fileKey = file == null ? null : file.fileKey();
        this.lockChannel = file == null ? null : file.lockChannel();
        this.fileLock = file == null ? null : file.lock();
    }

    /** Opens the pool with its file owner-only (tests). */
    public static L1Pool open(String shmName, long bytes, long regionBytes) {
        return open(shmName, bytes, regionBytes, OWNER_ONLY);
    }

    /**
     * Opens the pool: in /dev/shm under {@code shmName}, or anonymous when the name is empty or shm is too small. Its file
     * gets exactly {@code shmMode} (0600; 0660 lets engine-driven workers of another uid in the server's group map it).
     */
    public static L1Pool open(String shmName, long bytes, long regionBytes, int shmMode) {
        if (!shmName.isEmpty()) {
            removeStaleSegments(shmName);
            long usable = usableShmBytes();
            if (usable >= bytes + PoolSegmentFile.MARKER_BYTES) {
                try {
                    return openShared(shmName, bytes, regionBytes, shmMode);
                } catch (IOException e) {
                    LOG.warn("cannot create the L1 pool in /dev/shm/{} ({}); using anonymous memory: engine-driven shared-memory"
                            + " transfers are unavailable", shmName, e.getMessage());
                }
            } else {
                LOG.warn("/dev/shm has {} MiB free, the pool needs {} MiB: using anonymous memory instead; engine-driven"
                        + " shared-memory transfers are unavailable (enlarge /dev/shm, e.g. --shm-size for containers)",
                        usable >> 20, bytes >> 20);
            }
        }
        return openAnonymous(bytes, regionBytes);
    }

    private static L1Pool openShared(String shmName, long bytes, long regionBytes, int shmMode) throws IOException {
        Path path = SHM_DIR.resolve(shmName);
        int fd = Posix.createExclusive(path, shmMode);
        FileChannel channel;
        Object fileKey;
        try {
            // /proc/self/fd/N opens the inode just created, never the name again
            Path opened = Path.of("/proc/self/fd", Integer.toString(fd));
            fileKey = Files.readAttributes(opened, "unix:fileKey").get("fileKey");
            channel = FileChannel.open(opened, StandardOpenOption.READ, StandardOpenOption.WRITE);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(path);
            throw e instanceof IOException io ? io : new IOException(e);
        } finally {
            Posix.close(fd);
        }
        FileLock lock;
        try {
            lock = channel.tryLock();
            if (lock == null) {
                throw new IOException("another process locked " + path + " as it was created");
            }
            // sparse: extending the file costs nothing until pages are touched; the marker page comes after the pool
            PoolSegmentFile.writeMarker(channel, bytes);
            Arena arena = Arena.ofShared();
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
            LOG.info("L1 pool: {} MiB in /dev/shm/{} (mode 0{}, regions of {} MiB)", bytes >> 20, shmName, Integer.toOctalString(shmMode),
                    regionBytes >> 20);
            return new L1Pool(segment, arena, bytes, regionBytes, new ShmFile(path, fileKey, channel, lock));
        } catch (IOException | RuntimeException e) {
            channel.close();
            Files.deleteIfExists(path);
            throw e instanceof IOException io ? io : new IOException(e);
        }
    }

    /**
     * A pool over {@code memory} its caller owns and frees after closing this pool (the warm-up's scratch servers: a few MiB
     * off the heap, or pinned scratch memory), with every region ready as it is: nothing to prefault or pin. {@code fileKey}
     * is the file a worker's REGISTER may never name (the real pool's; null: none).
     */
    public static L1Pool over(MemorySegment memory, long regionBytes, Object fileKey) {
        return new L1Pool(memory, null, memory.byteSize(), regionBytes, fileKey == null ? null : new ShmFile(null, fileKey, null, null));
    }

    private static L1Pool openAnonymous(long bytes, long regionBytes) {
        long address = Posix.mmapAnonymous(bytes);
        if (address == 0) {
            throw new IllegalStateException("cannot map " + (bytes >> 20) + " MiB of anonymous memory for the L1 pool");
        }
        Arena arena = Arena.ofShared();
        // runs on: the thread that closes the arena (the server's close)
        MemorySegment segment = MemorySegment.ofAddress(address).reinterpret(bytes, arena, s -> Posix.munmap(address, bytes));
        LOG.info("L1 pool: {} MiB of anonymous memory (regions of {} MiB)", bytes >> 20, regionBytes >> 20);
        return new L1Pool(segment, arena, bytes, regionBytes, null);
    }

    private static long usableShmBytes() {
        try {
            return Files.getFileStore(SHM_DIR).getUsableSpace();
        } catch (IOException e) {
            return 0;
        }
    }

    /**
     * Removes our segment name if a dead server's pool holds it, and any default-named pool of a
     * dead server. Only files with the pool's marker that nobody locks are deleted; for our own
     * name, a live pool or anything that is not a pool refuses the start (exit 2).
     */
    static void removeStaleSegments(String shmName) {
        Path own = SHM_DIR.resolve(shmName);
        if (Files.exists(own, LinkOption.NOFOLLOW_LINKS)) {
            PoolSegmentFile.Found found = PoolSegmentFile.removeIfStale(own);
            switch (found.state()) {
                case REMOVED -> { }
                case LIVE_POOL -> throw new StartupException("--shm-name", "/dev/shm/" + shmName
                        + " is the L1 pool of another running server; pick another name");
                case NOT_A_POOL -> throw new StartupException("--shm-name", "/dev/shm/" + shmName + " is taken by something that is not"
                        + " an lmcache pool (it " + found.detail() + "; a worker's segment, perhaps): left alone; pick another name");
            }
        }
        try (DirectoryStream<Path> pools = Files.newDirectoryStream(SHM_DIR, DEFAULT_PREFIX + "*")) {
            for (Path pool : pools) {
                PoolSegmentFile.removeIfStale(pool);
            }
        } catch (IOException e) {
            LOG.debug("cannot scan /dev/shm for stale pools: {}", e.getMessage());
        }
    }

    /**
     * Starts the background preparation: each region is prefaulted, then run through {@code stages}.
     * Without stages (host memory only) every region is handed to {@code ready} at once, lowest
     * first, and prefaulting just saves later page faults; with stages (pinning for DMA) a region
     * is handed over when its last stage is done ({@link PoolPreparation}: several threads, regions
     * taken in order, so the first are usable within moments either way). {@code threadsOverride}: the preparation's
     * threads ({@code -Dlmcache.l1.prepareThreads}); 0 chooses from the cores and the pages.
     */
    public void startPreparation(List<RegionStage> stages, IntConsumer ready, int threadsOverride) {
        startPreparation(stages, ready, NumaPlacement.none("not asked"), threadsOverride);
    }

    /**
     * As {@link #startPreparation(List, IntConsumer, int)}, placing each region on its NUMA node before its first touch: the
     * preparation takes each region's slice just before it prefaults it, on the thread that does, so the placement runs
     * there ({@code mbind}, or binding that thread to the node's CPUs for first touch; the threads are one-shot, so the
     * binding ends with them) and the preparation itself knows nothing of it.
     */
    public void startPreparation(List<RegionStage> stages, IntConsumer ready, NumaPlacement numa, int threadsOverride) {
        placement = numa;
        numa.probe(this::slice);
        IntFunction<MemorySegment> placedSlices = numa.method() == NumaPlacement.Method.NONE ? this::slice : region -> {
            MemorySegment slice = slice(region);
            numa.beforeFirstTouch(region, slice);
            return slice;
        };
        if (stages.isEmpty()) {
            // the allocator takes the most recently added region first: add the highest first
            for (int region = regionCount - 1; region >= 0; region--) {
                ready.accept(region);
            }
        }
        boolean hugePages = HugePages.probe().forPool(isShared());
        PoolPreparation.Plan plan = new PoolPreparation.Plan(PoolPreparation.threads(Runtime.getRuntime().availableProcessors(), hugePages,
                threadsOverride), hugePages);
        preparation = new PoolPreparation(placedSlices, regionCount, bytes, regionBytes, stages, stages.isEmpty() ? region -> { } : ready, plan);
        preparation.start();
    }

    public MemorySegment segment() {
        return segment;
    }

    public MemorySegment slice(int region) {
        long offset = (long) region * regionBytes;
        return segment.asSlice(offset, Math.min(regionBytes, bytes - offset));
    }

    public long bytes() {
        return bytes;
    }

    public long regionBytes() {
        return regionBytes;
    }

    public int regionCount() {
        return regionCount;
    }

    public int preparedRegions() {
        PoolPreparation running = preparation;
        return running == null ? 0 : running.prepared();
    }

    /** Threads preparing the pool (0 before it starts). */
    public int preparationThreads() {
        PoolPreparation running = preparation;
        return running == null ? 0 : running.threadCount();
    }

    /** Whether the host backs this pool with huge pages when asked (what the thread count was chosen by). */
    public boolean preparationHugePages() {
        PoolPreparation running = preparation;
        return running != null && running.hugePages();
    }

    /** Each region's NUMA node and how it was placed ({@code /status}). */
    public Map<String, Object> numaStatus() {
        return placement.status(regionCount);
    }

    public String preparationError() {
        PoolPreparation running = preparation;
        return running == null ? "" : running.error();
    }

    /** The segment's name in /dev/shm (no leading slash), or "" for anonymous memory. */
    public String shmName() {
        return shmPath == null ? "" : shmPath.getFileName().toString();
    }

    /**
     * The pool file's identity (device and inode, as {@code unix:fileKey} gives it), or null for anonymous memory: what a
     * worker's REGISTER may never name, whatever the name it uses.
     */
    public Object fileKey() {
        return fileKey;
    }

    public boolean isShared() {
        return shmPath != null;
    }

    /** Stops the preparation threads after the regions in hand (idempotent). */
    public void stopPreparation() {
        PoolPreparation running = preparation;
        if (running != null) {
            running.stop();
        }
    }

    @Override
    public void close() {
        stopPreparation();
        if (arena != null) {
            arena.close();
        }
        if (shmPath != null) {
            try {
                Files.deleteIfExists(shmPath);
                fileLock.release();
                lockChannel.close();
            } catch (IOException e) {
                LOG.warn("cannot remove {}: {}", shmPath, e.getMessage());
            }
        }
    }
}
