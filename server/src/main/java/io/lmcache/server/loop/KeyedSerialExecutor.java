package io.lmcache.server.loop;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.function.IntConsumer;

/**
 * Runs tasks in FIFO order per key on a shared pool: tasks of one key never overlap and never
 * reorder, tasks of different keys run in parallel up to the pool's size. This is how one
 * worker's STOREs and RETRIEVEs stay in order while different workers transfer at once. A key's
 * lane exists only while it has work, so dead peers leave nothing behind. A lane whose task does
 * not return can be {@linkplain #abandon abandoned}: its later tasks go on, on a fresh thread.
 */
public final class KeyedSerialExecutor<K> {
    private final Executor pool;
    /** Told +1 when a lane's thread is abandoned (the pool needs one thread more to keep its size), -1 when it comes back. */
    private final IntConsumer spareThreads;
    private final Map<K, Lane> lanes = new HashMap<>();
    /** Guarded by {@link #lanes}: abandoned lanes whose task has not returned. */
    private final Set<Lane> abandoned = new HashSet<>();

    public KeyedSerialExecutor(Executor pool) {
        this(pool, delta -> { });
    }

    public KeyedSerialExecutor(Executor pool, IntConsumer spareThreads) {
        this.pool = pool;
        this.spareThreads = spareThreads;
    }

    public void execute(K key, Runnable task) {
        Lane start = null;
        synchronized (lanes) {
            Lane lane = lanes.get(key);
            if (lane == null) {
                lane = new Lane(key);
                lanes.put(key, lane);
                start = lane;
            }
            lane.tasks.add(task);
        }
        if (start != null) {
            try {
                pool.execute(start);
            } catch (RuntimeException e) {
                synchronized (lanes) {
                    lanes.remove(key);
                }
                throw e;
            }
        }
    }

    /** A task running on a lane: its key, the thread running it, when it started, and the task itself. */
    public record Running<K>(K key, Thread thread, long startedNs, Runnable task) {}

    /**
     * The tasks that started at or before {@code startedBeforeNs} and are still running, one per lane at most; abandoned
     * lanes' tasks too (their threads are still in them).
     */
    public List<Running<K>> runningSince(long startedBeforeNs) {
        List<Running<K>> out = new ArrayList<>();
        synchronized (lanes) {
            for (Lane lane : lanes.values()) {
                lane.addIfRunningSince(startedBeforeNs, out);
            }
            for (Lane lane : abandoned) {
                lane.addIfRunningSince(startedBeforeNs, out);
            }
        }
        return out;
    }

    /**
     * Gives up on {@code running}'s thread, if that task still runs on its lane: the lane's queued and later tasks go on in
     * order on a fresh thread ({@code spareThreads} is told +1 first, so the pool can grow by the thread it lost), and the
     * abandoned thread leaves when its task returns, if ever (-1 then). False when the task has ended or was abandoned already.
     * Only for a task whose work the tasks after it need not wait for: they may now run while it still does.
     */
    public boolean abandon(Running<K> running) {
        Lane fresh;
        synchronized (lanes) {
            Lane lane = lanes.get(running.key());
            if (lane == null || lane.running != running) {
                return false;
            }
            lane.abandoned = true;
            abandoned.add(lane);
            lanes.remove(running.key());
            fresh = lane.tasks.isEmpty() ? null : new Lane(running.key(), lane.tasks);
            if (fresh != null) {
                lanes.put(running.key(), fresh);
            }
        }
        spareThreads.accept(1);
        if (fresh != null) {
            try {
                pool.execute(fresh);
            } catch (RuntimeException e) {
                // the pool shut down: its queued tasks are dropped with the pool's own (the server's deadline runs on the
                // housekeeping thread, which stops before the dispatcher's pools do)
                synchronized (lanes) {
                    lanes.remove(running.key(), fresh);
                }
            }
        }
        return true;
    }

    /** Abandoned lanes whose task has not returned: threads the pool lent beyond its size. */
    public int abandonedRunning() {
        synchronized (lanes) {
            return abandoned.size();
        }
    }

    /** Keys with queued or running work (tests check that idle lanes are dropped). */
    int activeLanes() {
        synchronized (lanes) {
            return lanes.size();
        }
    }

    private final class Lane implements Runnable {
        private final K key;
        private final ArrayDeque<Runnable> tasks;
        /** The task running now (null between tasks), read by {@link #runningSince} and {@link #abandon}. */
        private volatile Running<K> running;
        /** Guarded by {@link #lanes}: set by {@link #abandon}; the thread then leaves once its task returns. */
        private boolean abandoned;

        Lane(K key) {
            this(key, new ArrayDeque<>());
        }

        Lane(K key, ArrayDeque<Runnable> tasks) {
            this.key = key;
            this.tasks = tasks;
        }

        @Override
        public void run() {
            Runnable next = poll();
            while (next != null) {
                running = new Running<>(key, Thread.currentThread(), System.nanoTime(), next);
                try {
                    next.run();
                } catch (RuntimeException | Error e) {
                    // a task that throws must not strand the tasks queued behind it on this key: report it, go on
                    Thread thread = Thread.currentThread();
                    thread.getUncaughtExceptionHandler().uncaughtException(thread, e);
                } finally {
                    running = null;
                }
                next = poll();
            }
        }

        void addIfRunningSince(long startedBeforeNs, List<Running<K>> out) {
            Running<K> task = running;
            if (task != null && task.startedNs() - startedBeforeNs <= 0) {
                out.add(task);
            }
        }

        /** The next task, or null when the lane is done: empty (and dropped), or abandoned (a fresh lane has its tasks). */
        private Runnable poll() {
            boolean cameBack;
            synchronized (lanes) {
                cameBack = abandoned && KeyedSerialExecutor.this.abandoned.remove(this);
                if (!abandoned) {
                    Runnable next = tasks.poll();
                    if (next == null) {
                        lanes.remove(key);
                    }
                    return next;
                }
            }
            if (cameBack) {
                spareThreads.accept(-1);
            }
            return null;
        }
    }
}
