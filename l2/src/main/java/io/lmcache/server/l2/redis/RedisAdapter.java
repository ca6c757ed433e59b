package io.lmcache.server.l2.redis;

import io.lettuce.core.RedisException;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.Command;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import io.lmcache.server.l2.AdapterUsage;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.CompletionSignals;
import io.lmcache.server.l2.KeyBitsTask;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.KeyLocks;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.StoreTask;
import io.lmcache.server.l2.TaskResults;
import io.lmcache.server.l2.UsageAccounting;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code resp} and {@code valkey} (hybrid-and-l2.md §B.8): each key's raw object bytes in Redis or
 * Valkey, one node or a cluster (slots spread evenly: the key has no hash tag). SET per key for a
 * store (a task fails if any key fails; the bytes count only keys written), a pipelined EXISTS per
 * key for a lookup with a lock count per key kept here (the server has no locks; a locked key is
 * never deleted by eviction), GET per key into the caller's buffer for a load (a nil or a reply of
 * another length is a miss). Every command answers within {@code request_timeout}: a node that is
 * down fails its keys, so a LOOKUP sees a shorter prefix, and Lettuce reconnects when it is back.
 * Holds no L1 state: the buffers it is lent go back before their task answers ({@link LentBuffer}).
 */
public final class RedisAdapter implements L2Adapter {
    private static final Logger LOG = LoggerFactory.getLogger(RedisAdapter.class);
    /** delete() runs on the housekeeping thread: it waits this long for the DEL replies, later ones still count. */
    private static final long DELETE_WAIT_NS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final long CLOSE_WAIT_NS = TimeUnit.SECONDS.toNanos(5);

    private final L2AdapterSpec.Redis spec;
    private final String name;
    private final ScheduledThreadPoolExecutor scheduler;
    private final FailureLog failures;
    private final ReconnectLog reconnects;
    private final RedisLink link;
    private final NodeBreakers breakers;
    private final CommandSender sender;
    private final NodeProbe probe;
    private final ValueWindow window;
    private final TaskResults results = new TaskResults();
    private final UsageAccounting accounting;
    private final KeyLocks locks = new KeyLocks();
    private final Set<LentBuffer> lent = ConcurrentHashMap.newKeySet();
    private final LongAdder storedKeys = new LongAdder();
    private final LongAdder lookupKeys = new LongAdder();
    private final LongAdder lookupHits = new LongAdder();
    private final LongAdder loadedKeys = new LongAdder();
    private final LongAdder loadMisses = new LongAdder();
    private final LongAdder loadTooBig = new LongAdder();
    private volatile boolean closed;

    /** Starts connecting in the background; its threads (Lettuce's I/O and timer, the adapter's scheduler) come from {@code threads}. */
    public RedisAdapter(L2AdapterSpec.Redis spec, ThreadFactory threads) {
        this.spec = spec;
        this.name = spec.type() + " " + spec.nodes();
        this.scheduler = new ScheduledThreadPoolExecutor(1, threads);
        scheduler.setRemoveOnCancelPolicy(true); // one backstop timer per command, nearly all cancelled
        this.failures = new FailureLog(LOG, name);
        this.reconnects = new ReconnectLog(LOG, name);
        this.link = new RedisLink(spec, name, threads, scheduler, failures, reconnects);
        this.breakers = new NodeBreakers(LOG, name, scheduler, link::ping, spec.requestTimeoutNs());
        this.sender = new CommandSender(scheduler, spec.requestTimeoutNs(), breakers);
        this.probe = new NodeProbe(link, scheduler, spec.requestTimeoutNs());
        this.window = new ValueWindow(spec.numWorkers(), scheduler);
        this.accounting = new UsageAccounting(spec.maxCapacityBytes());
        link.start();
        probe.start();
    }

    @Override
    public String typeName() {
        return spec.type().equals("resp") ? "RESPL2Adapter" : "ValkeyL2Adapter";
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        results.setSignals(signals);
    }

    /** {@code [key_prefix@]model@rank08x@og_hex@hash_hex[@salt]}: no hash tag, so keys spread over every slot. */
    String wireKey(L2Key key) {
        return spec.keyPrefix().isEmpty() ? key.wireKey() : spec.keyPrefix() + "@" + key.wireKey();
    }

    // --- store ---------------------------------------------------------------------------------

    @Override
    public long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        long taskId = results.newTaskId();
        StoreTask task = new StoreTask(keys.size(), result -> results.storeDone(taskId, result));
        if (connections() == null) {
            task.failed();
            failures.failed(closed ? "closed" : "not_connected", keys.size(), "store of " + keys.size() + " key(s)", null);
            keys.forEach(key -> task.oneDone());
        } else {
            for (int i = 0; i < keys.size(); i++) {
                L2Key key = keys.get(i);
                LentBuffer value = lend(objects.get(i));
                String wire = wireKey(key);
                window.submit(() -> {
                    CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire).addValue(value);
                    if (spec.ttlMs() > 0) {
                        args.add("PX").add(spec.ttlMs());
                    }
                    sendValue(wire, new Command<>(CommandType.SET, new StatusOutput<>(ValueCodec.INSTANCE), args), value, (reply, error) -> {
                        if (error == null && "OK".equals(reply)) {
                            accounting.stored(List.of(key), new long[] {value.size()});
                            task.wrote(value.size());
                            storedKeys.increment();
                            failures.succeeded();
                        } else {
                            task.failed();
                            failures.failed(error == null ? "store_reply" : CommandSender.reason(error), 1, "SET " + wire + (error == null ? " answered "
                                    + reply : ""), error);
                        }
                        task.oneDone();
                    });
                });
            }
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return results.popStores();
    }

    // --- lookup and lock -----------------------------------------------------------------------

    /** EXISTS per key, all sent before any answer (pipelined); a stored object of another size is found here and misses at load. */
    @Override
    public long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        KeyBitsTask task = new KeyBitsTask(taskKeys.size(), found -> {
            lookupHits.add(found.popcount());
            results.lookupDone(taskId, found);
        });
        lookupKeys.add(taskKeys.size());
        RedisLink.Connections now = connections();
        if (now == null) {
            failures.failed(closed ? "closed" : "not_connected", taskKeys.size(), "lookup of " + taskKeys.size() + " key(s)", null);
            taskKeys.forEach(key -> task.oneDone());
        } else {
            for (int i = 0; i < taskKeys.size(); i++) {
                int index = i;
                L2Key key = taskKeys.get(i);
                // the lock comes first: an eviction between the answer and the lock could delete a key reported found
                locks.lock(key);
                String wire = wireKey(key);
                CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire);
                sender.send(now.control(), link.nodeOf(wire), new Command<>(CommandType.EXISTS, new IntegerOutput<>(ValueCodec.INSTANCE), args),
                        (count, error) -> {
                    if (error == null && count != null && count == 1) {
                        task.set(index);
                    } else {
                        locks.unlock(key);
                        if (error != null) {
                            failures.failed(CommandSender.reason(error), 1, "EXISTS " + wire, error);
                        }
                    }
                    task.oneDone();
                });
            }
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return results.takeLookup(taskId);
    }

    @Override
    public void submitUnlock(List<L2Key> keys) {
        // done inline: it cannot fail, so the unlock is never lost
        locks.unlockAll(keys);
    }

    // --- load ----------------------------------------------------------------------------------

    @Override
    public long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        KeyBitsTask task = new KeyBitsTask(taskKeys.size(), loaded -> results.loadDone(taskId, loaded));
        if (connections() == null) {
            failures.failed(closed ? "closed" : "not_connected", taskKeys.size(), "load of " + taskKeys.size() + " key(s)", null);
            taskKeys.forEach(key -> task.oneDone());
        } else {
            for (int i = 0; i < taskKeys.size(); i++) {
                int index = i;
                L2Key key = taskKeys.get(i);
                LentBuffer target = lend(buffers.get(i));
                String wire = wireKey(key);
                window.submit(() -> {
                    // GETRANGE 0..size: at most one byte more than the object, so a larger value planted under the key is refused by
                    // its length without being read (a GET would read all of it, holding the connection every other load shares)
                    LoadOutput output = new LoadOutput(target);
                    CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire).add(0).add(target.size());
                    sendValue(wire, new Command<>(CommandType.GETRANGE, output, args), target, (outcome, error) -> {
                        if (error == null && outcome == LoadOutput.Outcome.HIT) {
                            task.set(index);
                            accounting.stored(List.of(key), new long[] {target.size()});
                            accounting.accessed(List.of(key));
                            loadedKeys.increment();
                            failures.succeeded();
                        } else if (error == null && outcome == LoadOutput.Outcome.MISSING) {
                            loadMisses.increment(); // gone since the lookup (expired, evicted, deleted by another server): a miss, not a fault
                        } else {
                            if (error == null && outcome == LoadOutput.Outcome.TOO_BIG) {
                                loadTooBig.increment();
                            }
                            failures.failed(error != null ? CommandSender.reason(error) : loadReason(outcome), 1, "GETRANGE " + wire
                                    + (error == null ? " answered " + outcome + " for " + target.size() + " bytes" : ""), error);
                        }
                        task.oneDone();
                    });
                });
            }
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        return results.takeLoad(taskId);
    }

    // --- commands --------------------------------------------------------------------------------

    private RedisLink.Connections connections() {
        return closed ? null : link.connections();
    }

    private LentBuffer lend(MemorySegment segment) {
        LentBuffer buffer = new LentBuffer(segment);
        lent.add(buffer);
        return buffer;
    }

    /** A SET or GET on the values connection, holding a place in the window; the buffer goes back before {@code done} runs. */
    private <T> void sendValue(String wire, Command<String, LentBuffer, T> command, LentBuffer buffer, BiConsumer<T, Throwable> done) {
        RedisLink.Connections now = connections();
        BiConsumer<T, Throwable> giveBack = (value, error) -> {
            buffer.revoke();
            lent.remove(buffer);
            window.release();
            done.accept(value, error);
        };
        if (now == null) {
            giveBack.accept(null, new RedisException(closed ? "the adapter is closed" : "not connected"));
            return;
        }
        sender.send(now.values(), link.nodeOf(wire), command, giveBack);
    }

    private static String loadReason(LoadOutput.Outcome outcome) {
        return switch (outcome) {
            case TOO_BIG -> "load_too_big";
            case WRONG_SIZE -> "load_wrong_size";
            default -> "timeout";
        };
    }

    // --- delete, usage, status, close ------------------------------------------------------------

    /** Runs on the caller's thread (L2 eviction): DEL per unlocked key, waiting at most {@link #DELETE_WAIT_NS} for the replies. */
    @Override
    public List<L2Key> delete(List<L2Key> keys) {
        RedisLink.Connections now = link.connections();
        if (now == null) {
            return List.of();
        }
        List<L2Key> removed = Collections.synchronizedList(new ArrayList<>());
        List<L2Key> unlocked = keys.stream().filter(key -> !locks.isLocked(key)).toList();
        CountDownLatch answered = new CountDownLatch(unlocked.size());
        for (L2Key key : unlocked) {
            String wire = wireKey(key);
            CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire);
            sender.send(now.control(), link.nodeOf(wire), new Command<>(CommandType.DEL, new IntegerOutput<>(ValueCodec.INSTANCE), args),
                    (count, error) -> {
                if (error == null && count != null) {
                    accounting.deleted(List.of(key)); // gone either way: 0 means it expired or another server deleted it first
                    if (count == 1) {
                        removed.add(key);
                    }
                } else {
                    failures.failed(CommandSender.reason(error), 1, "DEL " + wire, error);
                }
                answered.countDown();
            });
        }
        try {
            answered.await(DELETE_WAIT_NS, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (removed) {
            return List.copyOf(removed);
        }
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
        Map<String, Object> status = RedisStatus.of(this, spec, link, probe.snapshot(), new RedisStatus.Counts(locks.lockedKeys(),
                window.inFlight(), window.waiting(), storedKeys.sum(), lookupKeys.sum(), lookupHits.sum(), loadedKeys.sum(), loadMisses.sum()),
                failures);
        if (!breakers.openNodes().isEmpty()) {
            status.put("is_healthy", false); // a node that does not answer serves none of its keys
        }
        status.putAll(eventCounts());
        status.put("open_nodes", breakers.openNodes());
        status.put("breakers", breakers.status());
        status.put("unreachable_nodes", reconnects.status());
        return status;
    }

    /** Breaker, oversized-value and reconnect counters (the server's metrics read these on each scrape). */
    @Override
    public Map<String, Long> eventCounts() {
        Map<String, Long> counts = new LinkedHashMap<>(breakers.counters());
        counts.put("load_too_big", loadTooBig.sum());
        counts.put("reconnect_attempts_failed", reconnects.failedAttempts());
        return counts;
    }

    NodeBreakers breakers() {
        return breakers;
    }

    /**
     * New tasks fail at once; those in flight get {@link #CLOSE_WAIT_NS} to answer; then every buffer still lent goes back (no copy
     * touches L1 after this returns), with persist_enabled false the keys this process wrote or read are deleted, and the
     * connections and threads end.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        window.close().forEach(Runnable::run);
        long deadlineNs = System.nanoTime() + CLOSE_WAIT_NS;
        while (!lent.isEmpty() && deadlineNs - System.nanoTime() > 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        if (!lent.isEmpty()) {
            LOG.warn("{}: {} value(s) still in flight after {} ms at close; abandoned", name, lent.size(), TimeUnit.NANOSECONDS.toMillis(
                    CLOSE_WAIT_NS));
        }
        lent.forEach(LentBuffer::revoke);
        if (!spec.persistEnabled()) {
            locks.clear();
            int removed = delete(accounting.knownKeys()).size();
            LOG.info("{}: persist_enabled is false: deleted the {} key(s) this process wrote or read", name, removed);
        }
        link.close();
        scheduler.shutdownNow();
    }
}
