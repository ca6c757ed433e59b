package io.lmcache.server.l2;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * fs_native's I/O (hybrid-and-l2.md §B.6): L2 on a local or shared file system, one file per key (see
 * {@link FsNativeFiles} for names and how they are written and read). Its I/O runs on threads it
 * owns, each key of a task a job of its own: writes on {@code num_workers} writers, lookups and
 * loads on a read pool of their own ({@code read_io_depth}, default {@code num_workers}), so a
 * LOOKUP never waits behind the write-through backlog. A lookup is an existence and size check
 * per key (and of the format attribute, where the file has one), its lock held by the skeleton ({@link AsyncL2Adapter}: the disk
 * has no locks). At start a background scan adopts the files already under the base directory with LMCache object names (an
 * earlier run's, or a Python LMCache server's): oldest first, at most {@link #MAX_SCANNED_FILES}, so their bytes are in the usage
 * and L2 eviction can remove them.
 */
public final class FsNativeIo implements AdapterIo {
    private static final Logger LOG = LoggerFactory.getLogger(FsNativeIo.class);
    private static final long CLOSE_TIMEOUT_MS = 10_000;
    /** A temporary file this old belongs to a writer that died: removed at start. */
    private static final long STALE_TMP_MS = TimeUnit.HOURS.toMillis(1);
    /** Files of earlier processes counted at start, at most (a few hundred bytes of heap each); past it the newest are left out. */
    static final int MAX_SCANNED_FILES = 1 << 20;
    private static final long SCAN_JOIN_MS = 5_000;

    private final FsNativeSpec spec;
    private final AdapterLedger ledger;
    private final FsNativeFiles files;
    private final ExecutorService workers;
    private final ExecutorService readers;
    private final Thread scanner;
    private volatile Map<String, Object> scanStatus = Map.of("state", "running");
    private final LongAdder storeFailures = new LongAdder();
    private final LongAdder loadFailures = new LongAdder();
    private final LongAdder shortFilesRemoved = new LongAdder();
    private final LongAdder badKeys = new LongAdder();
    private final LongAdder sizeMismatches = new LongAdder();
    private final LongAdder layoutMismatches = new LongAdder();
    private final LongAdder badFormats = new LongAdder();
    private final AtomicBoolean failureLogged = new AtomicBoolean();
    private final AtomicLong lastErrorAtMs = new AtomicLong();
    private volatile String lastError = "";

    /** The base path as log lines quote it: clipped (a path of the operator's spec may be kilobytes long). */
    private String logBase() {
        return L2SpecException.clip(files.base(), L2SpecException.MAX_MESSAGE_CHARS);
    }

    public FsNativeIo(FsNativeSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        this.spec = spec;
        this.ledger = ledger;
        this.files = new FsNativeFiles(Path.of(spec.basePath()), spec.relativeTmpDir(), spec.useOdirect());
        files.onXattrsRefused = () -> LOG.warn("fs_native {}: the file system keeps no extended attribute ({}): object formats are not "
                + "recorded, loads check the size alone (counted once as event format_xattr_unsupported)", logBase(),
                L2SpecException.clip(files.xattrRefusal(), L2SpecException.MAX_MESSAGE_CHARS));
        this.workers = new ThreadPoolExecutor(spec.numWorkers(), spec.numWorkers(), 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(),
                threads);
        this.readers = new ThreadPoolExecutor(spec.readWorkers(), spec.readWorkers(), 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(),
                threads);
        // runs on: an fs worker thread; a start must not wait for a directory walk
        execute(workers, this::removeStaleTemporaries, () -> { });
        // runs on: a thread of its own, once; a start must not wait for a directory walk
        this.scanner = threads.newThread(this::scanEarlierFiles);
        scanner.start();
    }

    /** Tests only: the files, for their hooks. */
    FsNativeFiles files() {
        return files;
    }

    @Override
    public String typeName() {
        return "FSNativeL2Adapter";
    }

    // --- store ---------------------------------------------------------------------------------

    @Override
    public void store(L2Key key, MemorySegment object, Consumer<Stored> done) {
        // runs on: an fs writer thread (lmcache-l2-fs_native-*)
        execute(workers, () -> done.accept(write(key, object)), () -> done.accept(Stored.FAILED));
    }

    private Stored write(L2Key key, MemorySegment object) {
        String name = FsNativeFiles.fileName(key);
        if (name == null) {
            badKeys.increment();
            return Stored.FAILED;
        }
        try {
            return files.write(name, object, key.layout()) == FsNativeFiles.Write.WROTE ? Stored.WROTE : Stored.EXISTED;
        } catch (IOException | RuntimeException e) {
            storeFailures.increment();
            failed("write " + name, e);
            return Stored.FAILED;
        }
    }

    // --- lookup and load -----------------------------------------------------------------------

    @Override
    public void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found) {
        // runs on: an fs reader thread (lmcache-l2-fs_native-*); one job: a stat per key is far cheaper than a hand-off
        execute(readers, () -> {
            for (int i = 0; i < keys.size(); i++) {
                found.answer(i, exists(keys.get(i), objectBytesByGroup));
            }
        }, () -> {
            for (int i = 0; i < keys.size(); i++) {
                found.answer(i, false);
            }
        });
    }

    private boolean exists(L2Key key, Map<Integer, Long> objectBytesByGroup) {
        String name = FsNativeFiles.fileName(key);
        try {
            FsNativeFiles.Found exists = name == null ? FsNativeFiles.Found.MISSING
                    : files.exists(name, objectBytesByGroup.getOrDefault(key.objectGroup(), 0L), key.layout());
            shortFileRemoved(key, exists);
            formatMismatch(exists);
            return exists == FsNativeFiles.Found.WHOLE;
        } catch (IOException | RuntimeException e) {
            failed("look up " + name, e);
            return false;
        }
    }

    @Override
    public void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded) {
        for (int i = 0; i < keys.size(); i++) {
            int index = i;
            L2Key key = keys.get(i);
            MemorySegment buffer = buffers.get(i);
            // runs on: an fs reader thread (lmcache-l2-fs_native-*)
            execute(readers, () -> loaded.answer(index, read(key, buffer)), () -> loaded.answer(index, false));
        }
    }

    private boolean read(L2Key key, MemorySegment buffer) {
        String name = FsNativeFiles.fileName(key);
        if (name == null) {
            badKeys.increment();
            return false;
        }
        try {
            FsNativeFiles.Found read = files.read(name, buffer, key.layout());
            shortFileRemoved(key, read);
            formatMismatch(read);
            return read == FsNativeFiles.Found.WHOLE;
        } catch (IOException | RuntimeException e) {
            loadFailures.increment();
            failed("read " + name, e);
            return false;
        }
    }

    /** A short file (a writer that died before LMCache #4991's fix, a full disk) was removed: never served, no longer counted. */
    private void shortFileRemoved(L2Key key, FsNativeFiles.Found found) {
        if (found == FsNativeFiles.Found.SHORT) {
            shortFilesRemoved.increment();
            ledger.forget(key);
        }
    }

    /**
     * A file of this key in another format (another size, or another format attribute): a miss, counted, kept (it serves the
     * workers of its own layout; two layouts under one model name should not share an L2, see docs/l2.md).
     */
    private void formatMismatch(FsNativeFiles.Found found) {
        if (found == FsNativeFiles.Found.WRONG_SIZE) {
            sizeMismatches.increment();
        } else if (found == FsNativeFiles.Found.WRONG_FORMAT) {
            layoutMismatches.increment();
        } else if (found == FsNativeFiles.Found.BAD_FORMAT) {
            badFormats.increment();
        }
    }

    // --- delete, status, close -----------------------------------------------------------------

    /** Runs on the caller's thread (L2 eviction): an unlink is quick. A file gone already (removed by hand) is GONE. */
    @Override
    public void delete(L2Key key, Consumer<Deleted> done) {
        String name = FsNativeFiles.fileName(key);
        Deleted deleted = Deleted.FAILED;
        try {
            if (name != null) {
                deleted = files.delete(name) ? Deleted.REMOVED : Deleted.GONE;
            }
        } catch (IOException | RuntimeException e) {
            failed("delete " + name, e);
        }
        done.accept(deleted);
    }

    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("is_healthy", Files.isDirectory(files.base()));
        status.put("type", typeName());
        status.put("base_path", L2SpecException.clip(files.base(), L2SpecException.MAX_MESSAGE_CHARS));
        status.put("relative_tmp_dir", spec.relativeTmpDir());
        status.put("use_odirect", spec.useOdirect());
        status.put("num_workers", spec.numWorkers());
        status.put("read_workers", spec.readWorkers());
        status.put("read_ahead_size", null);
        status.put("pad_buffers_to_alignment", false);
        status.put("persist_enabled", spec.persistEnabled());
        AdapterUsage usage = ledger.usage();
        status.put("max_capacity_bytes", usage.totalCapacityBytes());
        status.put("used_bytes", usage.totalBytesUsed());
        status.put("usage_fraction", usage.usageFraction());
        status.put("locked_keys", ledger.lockedKeys());
        status.put("store_failures", storeFailures.sum());
        status.put("load_failures", loadFailures.sum());
        status.put("short_files_removed", shortFilesRemoved.sum());
        status.put("invalid_keys", badKeys.sum());
        status.put("odirect_fallbacks", files.odirectFallbacks.get());
        status.put("records_formats", files.recordsFormats());
        status.putAll(eventCounts());
        status.put("startup_scan", scanStatus);
        status.put("last_error", lastError);
        return status;
    }

    /**
     * Loads or lookups that found a file of another size ({@code format_mismatch_size}) or format attribute
     * ({@code format_mismatch_layout}) or a format attribute that names no format ({@code format_xattr_invalid}), and 1 once the
     * file system refused a format attribute ({@code format_xattr_unsupported}).
     */
    @Override
    public Map<String, Long> eventCounts() {
        Map<String, Long> counts = new LinkedHashMap<>();
        counts.put("format_mismatch_size", sizeMismatches.sum());
        counts.put("format_mismatch_layout", layoutMismatches.sum());
        counts.put("format_xattr_invalid", badFormats.sum());
        counts.put("format_xattr_unsupported", files.recordsFormats() ? 0L : 1L);
        return counts;
    }

    /** Waits (bounded) for the writers, readers and the start-up scan: their buffers are not touched after it. */
    @Override
    public void drain() {
        workers.shutdown();
        readers.shutdown();
        try {
            long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_TIMEOUT_MS);
            if (!workers.awaitTermination(CLOSE_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                    || !readers.awaitTermination(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                LOG.warn("fs_native {}: I/O still running after {} ms at close; left to finish", logBase(), CLOSE_TIMEOUT_MS);
            }
            scanner.join(SCAN_JOIN_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // --- listing ---------------------------------------------------------------------------------

    /** The cursor is the page's last file name, base64url: opaque to the caller, checked to be a name this adapter gives. */
    @Override
    public KeyPage listKeys(String model, int pageSize, String cursor) {
        String after = null;
        if (cursor != null) {
            try {
                after = new String(Base64.getUrlDecoder().decode(cursor), StandardCharsets.UTF_8);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("page_token is not one this adapter gave");
            }
            if (FsNativeFiles.parse(after) == null) {
                throw new IllegalArgumentException("page_token is not one this adapter gave");
            }
        }
        try {
            KeyPage page = files.list(model, pageSize, after);
            return page.nextCursor() == null ? page : new KeyPage(page.entries(),
                    Base64.getUrlEncoder().withoutPadding().encodeToString(page.nextCursor().getBytes(StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw new UncheckedIOException("listing " + logBase() + " failed", e);
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private static void execute(ExecutorService pool, Runnable job, Runnable rejected) {
        try {
            pool.execute(job);
        } catch (RejectedExecutionException e) {
            rejected.run(); // closing: the task still completes, as a failure
        }
    }

    /** The first failure is logged in full; later ones at most once a minute, all of them counted and the last in status. */
    private void failed(String what, Throwable e) {
        lastError = what + ": " + e;
        long nowMs = System.currentTimeMillis();
        long lastMs = lastErrorAtMs.get();
        if (failureLogged.compareAndSet(false, true) || (nowMs - lastMs > 60_000 && lastErrorAtMs.compareAndSet(lastMs, nowMs))) {
            lastErrorAtMs.set(nowMs);
            LOG.warn("fs_native {}: {} failed: {} (further failures are counted in /status, logged at most once a minute)", logBase(),
                    what, e.toString());
        }
    }

    /** Counts the files an earlier process left (oldest first), so usage covers them and L2 eviction can remove them. */
    private void scanEarlierFiles() {
        long startNs = System.nanoTime();
        try {
            FsNativeFiles.Scan scan = files.scan(MAX_SCANNED_FILES, ledger::closed);
            List<L2Key> keys = new ArrayList<>(scan.files().size());
            long[] sizes = new long[scan.files().size()];
            for (int i = 0; i < sizes.length; i++) {
                keys.add(scan.files().get(i).key());
                sizes[i] = scan.files().get(i).bytes();
            }
            AdapterLedger.Found found = ledger.found(keys, sizes);
            Map<String, Object> status = new LinkedHashMap<>();
            status.put("state", ledger.closed() ? "stopped" : "done");
            status.put("files", found.files());
            status.put("bytes", found.bytes());
            status.put("unrecognized_files", scan.unrecognized());
            status.put("truncated", scan.truncated());
            scanStatus = status;
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs);
            if (found.files() > 0 || scan.unrecognized() > 0) {
                LOG.info("fs_native {}: found {} object file(s), {} bytes, left by earlier runs in {} ms: counted in its usage, evictable "
                        + "oldest first{}", logBase(), found.files(), found.bytes(), ms, scan.truncated() ? " (only the oldest " + MAX_SCANNED_FILES
                        + " counted: more are there)" : "");
            }
            if (scan.unrecognized() > 0) {
                LOG.warn("fs_native {}: {} .data file(s) have no LMCache object name (an older version's name with a format field and a "
                        + "128-bit hash, or not a cache file): never read, counted or evicted; remove them by hand", logBase(),
                        scan.unrecognized());
            }
        } catch (IOException | RuntimeException e) {
            scanStatus = Map.of("state", "failed", "error", e.toString());
            failed("scan the files of earlier runs", e);
        }
    }

    private void removeStaleTemporaries() {
        try {
            for (Path stale : files.staleTemporaries(STALE_TMP_MS)) {
                Files.deleteIfExists(stale);
            }
        } catch (IOException | RuntimeException e) {
            failed("clean stale temporary files", e);
        }
    }
}
