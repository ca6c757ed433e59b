package io.lmcache.server.l2;

/**
 * How an adapter says a result is ready, one signal per kind of task: the Java form of LMCache's
 * three event fds per adapter. Each runs on the adapter's thread right after the result is stored,
 * so it must only wake the controller (never block or call back into the adapter).
 */
public record CompletionSignals(Runnable storeDone, Runnable lookupDone, Runnable loadDone) {
    public static final CompletionSignals NONE = new CompletionSignals(() -> { }, () -> { }, () -> { });

    /** All three wake the same thing (the controllers share one thread). */
    public static CompletionSignals all(Runnable wake) {
        return new CompletionSignals(wake, wake, wake);
    }
}
