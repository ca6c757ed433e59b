package io.lmcache.server.loop;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;

/**
 * Runs tasks in FIFO order per key on a shared pool: tasks of one key never overlap and never
 * reorder, tasks of different keys run in parallel up to the pool's size. This is how one
 * worker's STOREs and RETRIEVEs stay in order while different workers transfer at once. A key's
 * lane exists only while it has work, so dead peers leave nothing behind.
 */
public final class KeyedSerialExecutor<K> {
    private final Executor pool;
    private final Map<K, Lane> lanes = new HashMap<>();

    public KeyedSerialExecutor(Executor pool) {
        this.pool = pool;
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

    /** A task running on a lane: its key, the thread running it and when it started. */
    public record Running<K>(K key, Thread thread, long startedNs) {}

    /** The tasks that started at or before {@code startedBeforeNs} and are still running, one per lane at most. */
    public List<Running<K>> runningSince(long startedBeforeNs) {
        List<Running<K>> out = new ArrayList<>();
        synchronized (lanes) {
            for (Lane lane : lanes.values()) {
                Thread thread = lane.runner;
                long startedNs = lane.startedNs;
                if (thread != null && startedNs - startedBeforeNs <= 0) {
                    out.add(new Running<>(lane.key, thread, startedNs));
                }
            }
        }
        return out;
    }

    /** Keys with queued or running work (tests check that idle lanes are dropped). */
    int activeLanes() {
        synchronized (lanes) {
            return lanes.size();
        }
    }

    private final class Lane implements Runnable {
        private final K key;
        private final ArrayDeque<Runnable> tasks = new ArrayDeque<>();
        /** The thread running this lane's current task (null between tasks), and since when: read by {@link #runningSince}. */
        private volatile Thread runner;
        private volatile long startedNs;

        Lane(K key) {
            this.key = key;
        }

        @Override
        public void run() {
            while (true) {
                Runnable next;
                synchronized (lanes) {
                    next = tasks.poll();
                    if (next == null) {
                        lanes.remove(key);
                        return;
                    }
                }
                startedNs = System.nanoTime();
                runner = Thread.currentThread();
                try {
                    next.run();
                } catch (RuntimeException | Error e) {
                    // a task that throws must not strand the tasks queued behind it on this key: report it, go on
                    Thread thread = Thread.currentThread();
                    thread.getUncaughtExceptionHandler().uncaughtException(thread, e);
                } finally {
                    runner = null;
                }
            }
        }
    }
}
