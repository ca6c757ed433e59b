package io.lmcache.server.agent;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The one place platform threads are made (the thread map is in {@code io.lmcache.server}'s
 * package-info): every thread has a readable name, for logs and thread dumps.
 */
public final class NamedThreads {
    private NamedThreads() {}

    /** An unstarted platform thread named exactly {@code name}. */
    public static Thread thread(String name, boolean daemon, Runnable task) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(daemon);
        return thread;
    }

    /**
     * Waits up to {@code timeoutNs} for a thread that was told to stop (by its flag: never interrupted); returns
     * whether it ended. An interrupt of the waiting thread ends the wait and is kept.
     */
    public static boolean join(Thread thread, long timeoutNs) {
        try {
            thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(timeoutNs)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !thread.isAlive();
    }

    /** Daemon threads named {@code prefix-0}, {@code prefix-1}, ... */
    public static ThreadFactory factory(String prefix) {
        AtomicInteger counter = new AtomicInteger();
        return runnable -> thread(prefix + "-" + counter.getAndIncrement(), true, runnable);
    }

    public static ExecutorService fixedPool(String prefix, int threads) {
        return new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(), factory(prefix));
    }

    /** As {@link #fixedPool}, on a queue whose idle threads busy-wait for a task before parking. */
    public static ThreadPoolExecutor spinningPool(String prefix, int threads, SpinningTaskQueue queue) {
        return new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, queue, factory(prefix));
    }
}
