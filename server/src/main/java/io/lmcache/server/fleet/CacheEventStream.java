package io.lmcache.server.fleet;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LMCache's cache-event stream to {@code POST {coordinator}/events} (lmcache/v1/mp_coordinator/cache_events.py,
 * fleet-and-operator-api.md §1.4). The stores' hooks append to a bounded bus (an overflow is counted, never waited on); the
 * {@code lmcache-coordinator-events} thread gathers the records into batches (a record joins the last pending batch when its
 * type, tier, backend and sharing match, never an earlier one, so a store then a delete of one key stay in order), and each
 * {@code flushInterval} stamps them with {@code seq} +1 per batch (a pending capacity declaration first), never reused, also when
 * the post fails: a gap is the coordinator's loss signal. Stamped batches join a spool of at most {@link #SPOOL_MAX_ENTRIES}
 * entries, posted head first in slices of at most {@link #SLICE_MAX_ENTRIES}; a transport error, 5xx, 408 or 429 keeps them and
 * backs off (0.5 s doubling to 30 s), any other refusal (422) drops the slice, counted as {@code rejected}. Over the bound the
 * oldest batches go ({@code spool_overflow}). Every batch carries the cumulative {@code dropped_events} of this incarnation.
 * Stamped batches also go to a {@link BatchRecorder} (the events trace, §3.3); without a coordinator ({@code http} null) they go
 * there only, and nothing is spooled.
 */
public final class CacheEventStream implements CacheEventSink, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CacheEventStream.class);
    private static final RateLimitedLog FAILED = new RateLimitedLog(LOG, "cache-event publish failures", 10);
    static final int BUS_CAPACITY = 65_536;
    static final int SPOOL_MAX_ENTRIES = 16_384;
    static final int SLICE_MAX_ENTRIES = 2_048;
    static final long BACKOFF_MIN_NS = TimeUnit.MILLISECONDS.toNanos(500);
    static final long BACKOFF_MAX_NS = TimeUnit.SECONDS.toNanos(30);
    private static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(50);

    /** A compartment's declared capacity (§1.4.5): {@code capacityBytes} 0 = undeclared. */
    public record Capacity(Place place, long capacityBytes) {}

    private record Event(String type, Place place, Map<String, Object> entry) {}

    /** A batch being gathered, then stamped and spooled. */
    private static final class Batch {
        final String type;
        final Place place;
        final List<Map<String, Object>> entries = new ArrayList<>();
        Map<String, Object> wire;

        Batch(String type, Place place) {
            this.type = type;
            this.place = place;
        }

        int weight() {
            return Math.max(1, entries.size());
        }
    }

    private final CoordinatorHttp http;
    private final String instanceId;
    private final long incarnation;
    private final long flushIntervalNs;
    private final Supplier<List<Capacity>> capacities;
    private final BatchRecorder recorder;
    private final ArrayBlockingQueue<Event> bus = new ArrayBlockingQueue<>(BUS_CAPACITY);
    private final Thread thread;
    private volatile boolean running = true;
    private volatile boolean declarationWanted = true; // at start, then after every registration
    // the events thread's own state
    private final List<Batch> pending = new ArrayList<>();
    private final ArrayDeque<Batch> spool = new ArrayDeque<>();
    private int spoolEntries;
    private long seq;
    private long capacityRevision;
    private long lastFlushNs;
    private long retryAtNs;
    private long backoffNs = BACKOFF_MIN_NS;
    // counters (read by metrics on any thread)
    final LongAdder busOverflow = new LongAdder();
    final LongAdder spoolOverflow = new LongAdder();
    final LongAdder rejected = new LongAdder();
    final LongAdder retries = new LongAdder();
    final LongAdder batchesPosted = new LongAdder();
    private volatile int spoolDepth;

    CacheEventStream(CoordinatorHttp http, String instanceId, long incarnation, long flushIntervalNs, Supplier<List<Capacity>> capacities) {
        this(http, instanceId, incarnation, flushIntervalNs, capacities, null);
    }

    /** {@code http} null: no coordinator (the batches go to {@code recorder} only); {@code recorder} null: none. */
    CacheEventStream(CoordinatorHttp http, String instanceId, long incarnation, long flushIntervalNs, Supplier<List<Capacity>> capacities,
            BatchRecorder recorder) {
        this.http = http;
        this.recorder = recorder;
        this.instanceId = instanceId;
        this.incarnation = incarnation;
        this.flushIntervalNs = flushIntervalNs;
        this.capacities = capacities;
        this.thread = Thread.ofPlatform().daemon().name("lmcache-coordinator-events").unstarted(this::run);
    }

    void start() {
        lastFlushNs = System.nanoTime();
        thread.start();
    }

    public long incarnation() {
        return incarnation;
    }

    /** The capacity topology is to be declared again at the next flush (after a registration; a topology change). */
    public void declareCapacity() {
        declarationWanted = true;
        LockSupport.unpark(thread);
    }

    // --- the hooks: any thread, under the stores' locks --------------------------------------------

    @Override
    public void stored(Place place, EncodedKey key, long sizeBytes) {
        record("store", place, entry(key, sizeBytes));
    }

    @Override
    public void deleted(Place place, EncodedKey key) {
        record("delete", place, entry(key, 0));
    }

    @Override
    public void accessed(Place place, EncodedKey key) {
        record("access", new Place(place.tier(), "", place.shared()), entry(key, 0));
    }

    private static Map<String, Object> entry(EncodedKey key, long sizeBytes) {
        Map<String, Object> entry = new LinkedHashMap<>();
        entry.put("key", key.toJson());
        entry.put("size_bytes", sizeBytes);
        // the tokens behind a chunk are not kept per object here: LMCache's "unknown" values (cache_events.py)
        entry.put("token_ids", List.of());
        entry.put("token_offset", -1);
        return entry;
    }

    private void record(String type, Place place, Map<String, Object> entry) {
        if (!bus.offer(new Event(type, place, entry))) {
            busOverflow.increment();
        }
    }

    // --- the events thread ---------------------------------------------------------------------------

    private void run() {
        while (running) {
            try {
                turn(System.nanoTime());
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                FAILED.warn("cache-event stream turn failed: {}", LogText.clip(String.valueOf(e)));
            }
            LockSupport.parkNanos(Math.min(flushIntervalNs, MAX_PARK_NS));
            if (Thread.interrupted() && !running) {
                return;
            }
        }
    }

    /** One turn: gather the bus, flush when the interval has passed (or a declaration waits), deliver when not backing off. */
    void turn(long nowNs) throws InterruptedException {
        gather();
        if (nowNs - lastFlushNs >= flushIntervalNs) {
            flush();
            lastFlushNs = nowNs;
        }
        if (!spool.isEmpty() && nowNs - retryAtNs >= 0) {
            deliver();
        }
    }

    private void gather() {
        for (Event event; (event = bus.poll()) != null; ) {
            Batch last = pending.isEmpty() ? null : pending.getLast();
            if (last == null || !last.type.equals(event.type()) || !last.place.equals(event.place())) {
                last = new Batch(event.type(), event.place());
                pending.add(last);
            }
            last.entries.add(event.entry());
        }
    }

    /** Stamps the pending declaration and batches (one seq each, one ts and dropped count for all) and spools them. */
    void flush() {
        List<Batch> stamped = new ArrayList<>();
        if (declarationWanted) {
            declarationWanted = false;
            capacityRevision++;
            for (Capacity capacity : capacities.get()) {
                Batch config = new Batch("config", capacity.place());
                config.wire = wire(config, capacity.capacityBytes());
                stamped.add(config);
            }
        }
        for (Batch batch : pending) {
            batch.wire = wire(batch, -1);
            stamped.add(batch);
        }
        pending.clear();
        if (stamped.isEmpty()) {
            return;
        }
        double ts = System.currentTimeMillis() / 1000.0;
        long dropped = droppedEvents();
        for (Batch batch : stamped) {
            batch.wire.put("seq", ++seq);
            batch.wire.put("ts", ts);
            batch.wire.put("dropped_events", dropped);
        }
        if (recorder != null) {
            recorder.recorded(stamped.stream().map(b -> b.wire).toList());
        }
        if (http == null) {
            return;
        }
        for (Batch batch : stamped) {
            spool.addLast(batch);
            spoolEntries += batch.weight();
        }
        trim();
    }

    private Map<String, Object> wire(Batch batch, long capacityBytes) {
        Map<String, Object> wire = new LinkedHashMap<>();
        wire.put("instance_id", instanceId);
        wire.put("incarnation", incarnation);
        wire.put("seq", 0L);
        wire.put("event_type", batch.type);
        wire.put("tier", batch.place.tier());
        wire.put("backend", batch.place.backend());
        wire.put("entries", batch.entries);
        wire.put("shared", batch.place.shared());
        wire.put("ts", 0.0);
        if (capacityBytes >= 0) {
            wire.put("capacity_bytes", capacityBytes);
            wire.put("capacity_revision", capacityRevision);
        }
        wire.put("dropped_events", 0L);
        return wire;
    }

    /** Posts slices from the head until the spool is empty or a post must be retried later. */
    private void deliver() throws InterruptedException {
        while (!spool.isEmpty()) {
            List<Batch> slice = new ArrayList<>();
            int entries = 0;
            for (Batch batch : spool) {
                if (!slice.isEmpty() && entries + batch.weight() > SLICE_MAX_ENTRIES) {
                    break;
                }
                slice.add(batch);
                entries += batch.weight();
            }
            int status;
            try {
                status = http.send("POST", "/events", Map.of("batches", slice.stream().map(b -> b.wire).toList())).status();
            } catch (IOException e) {
                status = -1;
                FAILED.warn("POST {}/events failed: {}", LogText.clip(http.baseUrl()), LogText.clip(String.valueOf(e)));
            }
            boolean retryable = status < 0 || status >= 500 || status == 408 || status == 429;
            if (retryable) {
                retries.increment();
                retryAtNs = System.nanoTime() + backoffNs;
                backoffNs = Math.min(BACKOFF_MAX_NS, backoffNs * 2);
                trim();
                return;
            }
            backoffNs = BACKOFF_MIN_NS;
            for (int i = 0; i < slice.size(); i++) {
                spoolEntries -= spool.removeFirst().weight();
            }
            if (status >= 200 && status < 300) {
                batchesPosted.add(slice.size());
            } else {
                rejected.add(entries);
                FAILED.warn("the coordinator refused {} cache events ({}): dropped", entries, status);
            }
            spoolDepth = spoolEntries;
        }
    }

    /** Drops the oldest batches while the spool is over its bound. */
    private void trim() {
        while (spoolEntries > SPOOL_MAX_ENTRIES && spool.size() > 1) {
            Batch oldest = spool.removeFirst();
            spoolEntries -= oldest.weight();
            spoolOverflow.add(oldest.entries.size());
        }
        spoolDepth = spoolEntries;
    }

    private long droppedEvents() {
        return busOverflow.sum() + spoolOverflow.sum() + rejected.sum();
    }

    int spoolDepth() {
        return spoolDepth;
    }

    /** The last flush: what the bus holds, then one delivery attempt; what is still spooled is abandoned (logged). */
    @Override
    public void close() {
        running = false;
        LockSupport.unpark(thread);
        try {
            thread.join(TimeUnit.SECONDS.toMillis(5));
            gather();
            flush();
            if (!spool.isEmpty()) {
                retryAtNs = System.nanoTime();
                deliver();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (spoolEntries > 0) {
            LOG.warn("{} cache events not delivered to the coordinator at shutdown", spoolEntries);
        }
    }
}
