package io.lmcache.server.tier;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.config.L2Settings;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.module.L2Prefetcher;
import io.lmcache.server.transfer.ObjectShape;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Loads from L2 what a LOOKUP did not find in L1 (hybrid-and-l2.md §B.4), an agent on lmcache-l2:
 * jobs arrive from the lookup handlers, at most {@code maxInFlight} run at once (the rest wait in
 * order), and each {@link PrefetchRequest} advances as its adapters answer. The waiting queue is
 * bounded: past it, a LOOKUP is answered from L1 alone, counted. So is a LOOKUP whose registered
 * layout has several object groups (its L2 keys would not line up with the LOOKUP's L1 locks).
 *
 * <p>Each job has a deadline, {@link #DEADLINE_NS} after it was submitted: a job still waiting then,
 * or a request whose adapters have not all answered, is answered with the LOOKUP's L1 hits (so
 * QUERY_PREFETCH_STATUS answers). A request that expired keeps its slot until its adapters'
 * late answers are in, and then gives back what they hold: L2 locks, and the L1 objects reserved
 * for loads, which are never freed while a load may still write into them.
 */
public final class PrefetchController implements Agent, L2Prefetcher {
    static final int MAX_WAITING = 4096;
    /** How long a LOOKUP waits for L2 at most, from its hand-over to the answer of QUERY_PREFETCH_STATUS. */
    static final long DEADLINE_NS = L2Settings.DEFAULT_PREFETCH_LOAD_TIMEOUT_NS;

    private final PrefetchContext ctx;
    private final ObjectShapes shapes;
    private final int maxInFlight;
    private final Runnable wake;
    private final LongSupplier nanoClock;
    private final long deadlineNs;
    private final ConcurrentLinkedQueue<PrefetchRequest.Pending> incoming = new ConcurrentLinkedQueue<>();
    private final AtomicInteger waitingCount = new AtomicInteger();
    private final ArrayDeque<PrefetchRequest.Pending> waiting = new ArrayDeque<>();
    private final List<PrefetchRequest> running = new ArrayList<>();
    private final AtomicInteger runningCount = new AtomicInteger();
    private final AtomicInteger expiredRunningCount = new AtomicInteger();
    private final LongAdder completed = new LongAdder();
    /** The adapters' LRU orders (those that evict), told of touched keys. */
    private final Consumer<List<L2Key>> recency;

    PrefetchController(PrefetchContext ctx, ObjectShapes shapes, int maxInFlight, Runnable wake) {
        this(ctx, shapes, maxInFlight, wake, System::nanoTime, DEADLINE_NS);
    }

    PrefetchController(PrefetchContext ctx, ObjectShapes shapes, int maxInFlight, Runnable wake, LongSupplier nanoClock, long deadlineNs) {
        this(ctx, shapes, maxInFlight, wake, nanoClock, deadlineNs, keys -> { });
    }

    /** {@code recency}: where {@link #touch} reports keys used (the L2 eviction LRUs; runs on a LOOKUP's thread). */
    PrefetchController(PrefetchContext ctx, ObjectShapes shapes, int maxInFlight, Runnable wake, LongSupplier nanoClock, long deadlineNs,
            Consumer<List<L2Key>> recency) {
        this.recency = recency;
        this.ctx = ctx;
        this.shapes = shapes;
        this.maxInFlight = maxInFlight;
        this.wake = wake;
        this.nanoClock = nanoClock;
        this.deadlineNs = deadlineNs;
    }

    @Override
    public String roleName() {
        return "l2-prefetch";
    }


    /**
     * Runs on the LOOKUP's thread: the covered prefix's L2 keys in the registered layout (every rank and object group) are told
     * to the LRUs as accessed; keys L2 does not hold are ignored there. No adapter is asked anything.
     */
    @Override
    public int touch(CacheKey key, byte[] hashes, int toChunk) {
        List<ObjectShape> layout = shapes.shapes(key.modelName(), key.worldSize());
        if (layout == null || layout.isEmpty() || toChunk <= 0 || key.worldSize() > L2Key.MAX_WORLD_SIZE) {
            return 0;
        }
        List<L2Key> keys = new ArrayList<>(toChunk * key.worldSize() * layout.size());
        for (int chunk = 0; chunk < toChunk; chunk++) {
            for (int rank = 0; rank < key.worldSize(); rank++) {
                for (ObjectShape shape : layout) {
                    keys.add(L2Keys.of(key.modelName(), L2Key.packKvRank(key.worldSize(), rank), ChunkHash.unpack(hashes, chunk),
                            key.cacheSalt(), shape));
                }
            }
        }
        recency.accept(keys);
        return keys.size();
    }

    /** Runs on the LOOKUP's thread (lmcache-request-loop or lmcache-normal-*): a queue append and a wake-up. */
    @Override
    public boolean submit(Job job) {
        List<ObjectShape> layout = shapes.shapes(job.key().modelName(), job.key().worldSize());
        if (layout == null || layout.isEmpty() || job.key().worldSize() > L2Key.MAX_WORLD_SIZE) {
            ctx.metrics().prefetchNoLayout.increment(); // no worker registered this model: nothing could receive the objects
            return false;
        }
        if (layout.size() > 1) {
            // keys per chunk would be world_size x groups, while the LOOKUP's leases map lock i to chunk i / world_size
            ctx.metrics().prefetchObjectGroups.increment();
            return false;
        }
        if (waitingCount.incrementAndGet() > MAX_WAITING) {
            waitingCount.decrementAndGet();
            ctx.metrics().prefetchQueueFull.increment();
            return false;
        }
        incoming.add(new PrefetchRequest.Pending(job, layout, nanoClock.getAsLong()));
        wake.run();
        return true;
    }

    @Override
    public int doWork() {
        int work = 0;
        for (PrefetchRequest.Pending pending = incoming.poll(); pending != null; pending = incoming.poll()) {
            waiting.add(pending);
            work++;
        }
        long nowNs = nanoClock.getAsLong();
        // the oldest wait first: those past the deadline never start
        for (PrefetchRequest.Pending head = waiting.peek(); head != null && nowNs - head.submittedNs() > deadlineNs; head = waiting.peek()) {
            waiting.poll();
            waitingCount.decrementAndGet();
            ctx.metrics().prefetchTimeouts.increment();
            head.job().completion().done(head.job().l1Hits(), head.job().l1Locks(), 0);
            completed.increment();
            work++;
        }
        while (running.size() < maxInFlight && !waiting.isEmpty()) {
            waitingCount.decrementAndGet();
            PrefetchRequest.Pending next = waiting.poll();
            running.add(new PrefetchRequest(ctx, next.job(), next.shapes(), next.submittedNs()));
            work++;
        }
        int expired = 0;
        for (Iterator<PrefetchRequest> it = running.iterator(); it.hasNext(); ) {
            PrefetchRequest request = it.next();
            work += request.poll();
            if (!request.answered() && nowNs - request.submittedNs() > deadlineNs) {
                ctx.metrics().prefetchTimeouts.increment();
                request.expire();
                work++;
            }
            if (request.done()) {
                it.remove();
                completed.increment();
            } else if (request.answered()) {
                expired++;
            }
        }
        runningCount.set(running.size());
        expiredRunningCount.set(expired);
        return work;
    }

    /** Shutdown: every LOOKUP still waiting or running is answered with its L1 hits. */
    @Override
    public void onClose() {
        for (PrefetchRequest.Pending pending = incoming.poll(); pending != null; pending = incoming.poll()) {
            waiting.add(pending);
        }
        for (PrefetchRequest.Pending pending : waiting) {
            pending.job().completion().done(pending.job().l1Hits(), pending.job().l1Locks(), 0);
        }
        waiting.clear();
        running.forEach(PrefetchRequest::abandon);
        running.clear();
    }

    /** {@code /status} {@code storage_manager.prefetch_controller}; counters only (lmcache-http-*). */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("is_healthy", true);
        status.put("prefetch_policy", ctx.retain() ? "retain" : "default");
        status.put("max_in_flight", maxInFlight);
        status.put("deadline_ms", TimeUnit.NANOSECONDS.toMillis(deadlineNs));
        status.put("in_flight_request_count", runningCount.get());
        status.put("expired_in_flight_request_count", expiredRunningCount.get());
        status.put("waiting_request_count", Math.max(0, waitingCount.get()));
        status.put("completed_request_count", completed.sum());
        status.put("timed_out_request_count", ctx.metrics().prefetchTimeouts.sum());
        status.put("l1_oom_key_count", ctx.metrics().prefetchL1Oom.sum());
        status.put("not_found_key_count", ctx.metrics().prefetchNotFound.sum());
        return status;
    }
}
