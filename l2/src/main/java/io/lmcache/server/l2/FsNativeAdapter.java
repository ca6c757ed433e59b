package io.lmcache.server.l2;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * fs_native (hybrid-and-l2.md §B.6): L2 on a local or shared file system, one file per key (see
 * {@link FsNativeFiles} for names and how they are written and read). Its I/O runs on
 * {@code num_workers} threads it owns, each key of a task a job of its own. Lookup-and-lock is an
 * existence and size check plus a lock count per key, kept here (the disk has no locks): a locked
 * key is never deleted by eviction.
 */
public final class FsNativeAdapter implements L2Adapter {
    private static final Logger LOG = LoggerFactory.getLogger(FsNativeAdapter.class);
    private static final long CLOSE_TIMEOUT_MS = 10_000;
    /** A temporary file this old belongs to a writer that died: removed at start. */
    private static final long STALE_TMP_MS = TimeUnit.HOURS.toMillis(1);

    private final L2AdapterSpec.FsNative spec;
    private final FsNativeFiles files;
    private final ExecutorService workers;
    private final TaskResults results = new TaskResults();
    private final UsageAccounting accounting;
    private final Map<L2Key, Integer> locks = new ConcurrentHashMap<>();
    private final LongAdder storeFailures = new LongAdder();
    private final LongAdder loadFailures = new LongAdder();
    private final LongAdder shortFilesRemoved = new LongAdder();
    private final LongAdder badKeys = new LongAdder();
    private final AtomicBoolean failureLogged = new AtomicBoolean();
    private final AtomicLong lastErrorAtMs = new AtomicLong();
    private volatile String lastError = "";

    public FsNativeAdapter(L2AdapterSpec.FsNative spec, ThreadFactory threads) throws IOException {
        this.spec = spec;
        this.files = new FsNativeFiles(Path.of(spec.basePath()), spec.relativeTmpDir(), spec.useOdirect());
        this.accounting = new UsageAccounting(spec.maxCapacityBytes());
        this.workers = new ThreadPoolExecutor(spec.numWorkers(), spec.numWorkers(), 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(),
                threads);
        // runs on: an fs worker thread; a start must not wait for a directory walk
        execute(this::removeStaleTemporaries, () -> { });
    }

    @Override
    public String typeName() {
        return "FSNativeL2Adapter";
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        results.setSignals(signals);
    }

    // --- store ---------------------------------------------------------------------------------

    @Override
    public long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        PerKey task = new PerKey(taskKeys.size());
        AtomicBoolean ok = new AtomicBoolean(true);
        LongAdder written = new LongAdder();
        task.onDone = () -> results.storeDone(taskId, new StoreResult(ok.get(), ok.get() ? written.sum() : 0));
        for (int i = 0; i < taskKeys.size(); i++) {
            L2Key key = taskKeys.get(i);
            MemorySegment object = objects.get(i);
            // runs on: an fs worker thread (lmcache-l2-fs-*)
            execute(() -> {
                if (store(key, object, written)) {
                    accounting.stored(List.of(key), new long[] {object.byteSize()});
                } else {
                    ok.set(false);
                }
                task.oneDone();
            }, () -> {
                ok.set(false);
                task.oneDone();
            });
        }
        task.submitted();
        return taskId;
    }

    private boolean store(L2Key key, MemorySegment object, LongAdder written) {
        String name = FsNativeFiles.fileName(key);
        if (name == null) {
            badKeys.increment();
            return false;
        }
        try {
            if (files.write(name, object) == FsNativeFiles.Write.WROTE) {
                written.add(object.byteSize());
            }
            return true;
        } catch (IOException | RuntimeException e) {
            storeFailures.increment();
            failed("write " + name, e);
            return false;
        }
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return results.popStores();
    }

    // --- lookup and lock -----------------------------------------------------------------------

    @Override
    public long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        Map<Integer, Long> sizes = Map.copyOf(objectBytesByGroup);
        // runs on: an fs worker thread (lmcache-l2-fs-*); one job: a stat per key is far cheaper than a hand-off
        execute(() -> results.lookupDone(taskId, lookupAndLock(taskKeys, sizes)), () -> results.lookupDone(taskId, new Bitmap(taskKeys.size())));
        return taskId;
    }

    private Bitmap lookupAndLock(List<L2Key> keys, Map<Integer, Long> sizes) {
        Bitmap found = new Bitmap(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            L2Key key = keys.get(i);
            String name = FsNativeFiles.fileName(key);
            try {
                // the lock comes first: an eviction between the check and the lock could remove a file reported found
                locks.merge(key, 1, Integer::sum);
                FsNativeFiles.Found exists = name == null ? FsNativeFiles.Found.MISSING : files.exists(name, sizes.getOrDefault(key.objectGroup(), 0L));
                if (exists == FsNativeFiles.Found.WHOLE) {
                    found.set(i);
                } else {
                    unlock(key);
                    shortFileRemoved(key, exists);
                }
            } catch (IOException | RuntimeException e) {
                unlock(key);
                failed("look up " + name, e);
            }
        }
        return found;
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return results.takeLookup(taskId);
    }

    @Override
    public void submitUnlock(List<L2Key> keys) {
        // a map update cannot fail: done inline, so the unlock is never lost
        keys.forEach(this::unlock);
    }

    private void unlock(L2Key key) {
        locks.computeIfPresent(key, (k, count) -> count <= 1 ? null : count - 1);
    }

    // --- load ----------------------------------------------------------------------------------

    @Override
    public long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        Bitmap loaded = new Bitmap(taskKeys.size());
        PerKey task = new PerKey(taskKeys.size());
        task.onDone = () -> {
            Bitmap result;
            synchronized (loaded) {
                result = loaded.copy();
            }
            results.loadDone(taskId, result);
        };
        for (int i = 0; i < taskKeys.size(); i++) {
            int index = i;
            L2Key key = taskKeys.get(i);
            MemorySegment buffer = buffers.get(i);
            // runs on: an fs worker thread (lmcache-l2-fs-*)
            execute(() -> {
                if (load(key, buffer)) {
                    synchronized (loaded) {
                        loaded.set(index);
                    }
                    accounting.stored(List.of(key), new long[] {buffer.byteSize()});
                    accounting.accessed(List.of(key));
                }
                task.oneDone();
            }, task::oneDone);
        }
        task.submitted();
        return taskId;
    }

    private boolean load(L2Key key, MemorySegment buffer) {
        String name = FsNativeFiles.fileName(key);
        if (name == null) {
            badKeys.increment();
            return false;
        }
        try {
            FsNativeFiles.Found read = files.read(name, buffer);
            shortFileRemoved(key, read);
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
            accounting.deleted(List.of(key));
        }
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        return results.takeLoad(taskId);
    }

    // --- delete, usage, status -----------------------------------------------------------------

    /** Runs on the caller's thread (L2 eviction): unlinks are quick. Locked keys stay. */
    @Override
    public List<L2Key> delete(List<L2Key> keys) {
        List<L2Key> removed = new ArrayList<>();
        for (L2Key key : keys) {
            String name = FsNativeFiles.fileName(key);
            if (name == null || locks.containsKey(key)) {
                continue;
            }
            try {
                if (files.delete(name)) {
                    removed.add(key);
                }
            } catch (IOException | RuntimeException e) {
                failed("delete " + name, e);
            }
        }
        if (!removed.isEmpty()) {
            accounting.deleted(removed);
        }
        return removed;
    }

    @Override
    public AdapterUsage usage() {
        return accounting.usage();
    }

    @Override
    public void registerListener(L2AdapterListener listener) {
        accounting.register(listener);
    }

    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("is_healthy", Files.isDirectory(files.base()));
        status.put("type", typeName());
        status.put("base_path", files.base().toString());
        status.put("relative_tmp_dir", spec.relativeTmpDir());
        status.put("use_odirect", spec.useOdirect());
        status.put("num_workers", spec.numWorkers());
        status.put("read_ahead_size", null);
        status.put("pad_buffers_to_alignment", false);
        status.put("persist_enabled", spec.persistEnabled());
        AdapterUsage usage = usage();
        status.put("max_capacity_bytes", usage.totalCapacityBytes());
        status.put("used_bytes", usage.totalBytesUsed());
        status.put("usage_fraction", usage.usageFraction());
        status.put("locked_keys", locks.size());
        status.put("store_failures", storeFailures.sum());
        status.put("load_failures", loadFailures.sum());
        status.put("short_files_removed", shortFilesRemoved.sum());
        status.put("invalid_keys", badKeys.sum());
        status.put("odirect_fallbacks", files.odirectFallbacks.get());
        status.put("last_error", lastError);
        return status;
    }

    @Override
    public void close() {
        workers.shutdown();
        try {
            if (!workers.awaitTermination(CLOSE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                LOG.warn("fs_native {}: I/O still running after {} ms at close; left to finish", files.base(), CLOSE_TIMEOUT_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (!spec.persistEnabled()) {
            List<L2Key> known = accounting.knownKeys();
            locks.clear();
            int removed = delete(known).size();
            LOG.info("fs_native {}: persist_enabled is false: removed the {} file(s) this process wrote or read", files.base(), removed);
        }
    }

    // --- helpers ---------------------------------------------------------------------------------

    private void execute(Runnable job, Runnable rejected) {
        try {
            workers.execute(job);
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
            LOG.warn("fs_native {}: {} failed: {} (further failures are counted in /status, logged at most once a minute)", files.base(),
                    what, e.toString());
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

    /** Counts the per-key jobs of one task down, and the submitter's own count, so the task completes once, after both. */
    private static final class PerKey {
        private final AtomicInteger remaining;
        private volatile Runnable onDone = () -> { };

        PerKey(int count) {
            this.remaining = new AtomicInteger(count + 1);
        }

        void oneDone() {
            if (remaining.decrementAndGet() == 0) {
                onDone.run();
            }
        }

        /** Every job is queued: a task of no keys, or whose jobs all finished already, completes now. */
        void submitted() {
            oneDone();
        }
    }
}
