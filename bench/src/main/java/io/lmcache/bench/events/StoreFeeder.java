package io.lmcache.bench.events;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.testing.JavaWorker;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The KV-event benchmarks' STOREs: one CPU worker (JavaWorker: 2 layers, bf16, 256 KiB per chunk) storing a new one-chunk prefix
 * per STORE, so that every STORE appends a {@code stored} record (and evictions {@code removed} ones once the pool is full).
 * {@link #storeNew} is one such STORE, closed loop (KvEventStoreBench times them); a feeder instance issues them in the background
 * at a fixed rate while {@link #resume resumed} (RequestLatencyBench keeps the event streams busy with it while PING and LOOKUP
 * are timed). It PINGs the server every few seconds, as a worker does, so that the reaper keeps its registration.
 */
public final class StoreFeeder implements AutoCloseable {
    public static final int CHUNK = 256;
    static final int BLOCKS = CHUNK / 16;
    public static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 2 * BLOCKS, 16, 2, 64);
    private static final long PING_INTERVAL_NS = TimeUnit.SECONDS.toNanos(5);
    private static final long BACKOFF_NS = TimeUnit.MILLISECONDS.toNanos(100);

    private final String endpoint;
    private final String model;
    private final long instanceId;
    private final long periodNs;
    private final AtomicLong stores = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private JavaWorker worker;
    private volatile boolean stop = true;
    private Thread thread;
    private long seed = 1_000_000;
    private volatile String lastFailure = "";

    /** A registered worker of {@code model} on {@code endpoint}, paused; {@code storesPerS} while resumed. */
    public StoreFeeder(String endpoint, String model, long instanceId, double storesPerS) {
        if (!(storesPerS > 0)) {
            throw new IllegalArgumentException("--feed-stores-per-s must be positive: " + storesPerS);
        }
        this.endpoint = endpoint;
        this.model = model;
        this.instanceId = instanceId;
        this.periodNs = (long) (1e9 / storesPerS);
        connect();
    }

    /** A registered worker of {@code model}, its blocks filled: ready for {@link #storeNew}. */
    public static JavaWorker worker(String endpoint, long instanceId, String model) {
        JavaWorker worker = new JavaWorker(endpoint, instanceId, model, GEOMETRY);
        try {
            worker.register();
            worker.fill(JavaWorker.range(0, BLOCKS), 1);
            return worker;
        } catch (RuntimeException | AssertionError e) {
            worker.close();
            throw e;
        }
    }

    /** One STORE of a new one-chunk prefix (its tokens drawn from {@code seed}); whether the server took it. */
    public static boolean storeNew(JavaWorker worker, long seed) {
        return worker.store(JavaWorker.tokens(seed, CHUNK), 0, CHUNK, JavaWorker.range(0, BLOCKS), "s");
    }

    private void connect() {
        worker = worker(endpoint, instanceId, model);
    }

    /** A new worker registration (the server was started again); only while paused. */
    public void reconnect() {
        worker.close();
        connect();
    }

    /** Starts storing (the worker passes to a new thread: its socket is used by one thread at a time). */
    public void resume() {
        stop = false;
        // runs on: bench-feeder, storing at the fixed rate until paused
        thread = NamedThreads.thread("bench-feeder", true, this::feed);
        thread.start();
    }

    /** Stops storing; returns once the feeding thread has ended (after its STORE in flight, if any). */
    public void pause() throws InterruptedException {
        stop = true;
        if (thread != null) {
            thread.join();
            thread = null;
        }
    }

    /** STOREs the server took so far. */
    public long stores() {
        return stores.get();
    }

    /** STOREs that failed or got no reply so far. */
    public long failures() {
        return failures.get();
    }

    public String lastFailure() {
        return lastFailure;
    }

    private void feed() {
        long nextNs = System.nanoTime();
        long pingNs = nextNs;
        while (!stop) {
            long nowNs = System.nanoTime();
            if (nextNs - nowNs > 0) {
                LockSupport.parkNanos(nextNs - nowNs);
                continue;
            }
            try {
                if (nowNs - pingNs >= 0) {
                    worker.ping();
                    pingNs = nowNs + PING_INTERVAL_NS;
                }
                if (storeNew(worker, seed++)) {
                    stores.incrementAndGet();
                } else {
                    fail("STORE answered False");
                }
            } catch (RuntimeException | AssertionError e) {
                fail(e.toString()); // the server restarting or gone: counted, tried again at the next slot
                nextNs = System.nanoTime() + BACKOFF_NS;
            }
            nextNs += periodNs;
            if (System.nanoTime() - nextNs > periodNs) {
                nextNs = System.nanoTime(); // fell behind: the fixed rate resumes from now, without a catch-up burst
            }
        }
    }

    private void fail(String why) {
        failures.incrementAndGet();
        lastFailure = why;
    }

    @Override
    public void close() throws InterruptedException {
        pause();
        worker.close();
    }
}
