package io.lmcache.server.liveness;

/**
 * Where UNREGISTER, the reaper and the last returned lease hand a native resource (shm mapping,
 * CUDA IPC mapping) to be freed: they only enqueue, so a close that hangs in the driver never
 * runs on the socket thread or under a lock the socket thread takes.
 */
@FunctionalInterface
public interface EndOfLifeQueue {
    /** One release: frees what it names; may throw (then it is counted and retried). */
    @FunctionalInterface
    interface Release {
        void run() throws Exception;
    }

    /** Queues {@code release}; false when the queue is full (the release is then counted as dropped, never run inline). */
    boolean enqueue(String what, Release release);
}
