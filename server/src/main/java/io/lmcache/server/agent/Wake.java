package io.lmcache.server.agent;

import java.util.concurrent.locks.LockSupport;

/**
 * How work for an agent unparks the agent's thread: created first, then given to the agent's constructor (which runs it when
 * work arrives) and to its {@link AgentRunner}'s (which binds its thread to it), so neither needs the other and nothing is
 * wired after construction. Before the runner exists, or without one (tests), running it does nothing.
 */
public final class Wake implements Runnable {
    private volatile Thread thread;

    /** Any thread: ends the bound thread's current park early, so new work is seen at once. */
    @Override
    public void run() {
        Thread bound = thread;
        if (bound != null) {
            LockSupport.unpark(bound);
        }
    }

    /** The runner's constructor: one handle serves one runner. */
    void bind(Thread runnerThread) {
        if (thread != null) {
            throw new IllegalStateException("a wake handle serves one runner");
        }
        thread = runnerThread;
    }
}
