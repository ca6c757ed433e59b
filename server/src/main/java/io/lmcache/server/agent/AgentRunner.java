package io.lmcache.server.agent;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one {@link Agent} on one named daemon thread (Agrona's AgentRunner): onStart, then doWork
 * and idle until closed, then onClose, all on that thread. A failing turn is counted and logged
 * by {@link AgentErrors} and the loop goes on. Close is by flag and unpark with a bounded join;
 * the thread is never interrupted (an interrupt can break a JeroMQ or NIO resource it touches).
 */
public final class AgentRunner implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AgentRunner.class);

    private final Agent agent;
    private final IdleStrategy idle;
    private final AgentErrors errors;
    private final long closeTimeoutNs;
    private final Thread thread;
    private final AtomicBoolean started = new AtomicBoolean();
    private final AtomicBoolean agentClosed = new AtomicBoolean();
    private volatile boolean running = true;

    public AgentRunner(String threadName, Agent agent, IdleStrategy idle, AgentErrors errors, long closeTimeoutNs) {
        this.agent = agent;
        this.idle = idle;
        this.errors = errors;
        this.closeTimeoutNs = closeTimeoutNs;
        // runs on: threadName (this runner's thread)
        this.thread = NamedThreads.thread(threadName, true, this::run);
    }

    /** As the other constructor, with {@code wake} (which the agent was given) bound to this runner's thread. */
    public AgentRunner(String threadName, Agent agent, IdleStrategy idle, AgentErrors errors, long closeTimeoutNs, Wake wake) {
        this(threadName, agent, idle, errors, closeTimeoutNs);
        wake.bind(thread);
    }

    /** Starts the thread (once; a runner closed before it started never starts). */
    public void start() {
        if (started.compareAndSet(false, true)) {
            thread.start();
        }
    }

    public Agent agent() {
        return agent;
    }

    /** Any thread: ends the current park early, so new work is seen at once. */
    public void wake() {
        LockSupport.unpark(thread);
    }

    public boolean isRunning() {
        return running && thread.isAlive();
    }

    private void run() {
        try {
            try {
                agent.onStart();
            } catch (Throwable t) {
                errors.record(agent.roleName(), t);
            }
            while (running) {
                int work;
                try {
                    work = agent.doWork();
                } catch (Throwable t) {
                    errors.record(agent.roleName(), t);
                    work = 0; // a failing agent idles like an idle one rather than spin on its failure
                }
                idle.idle(work);
            }
        } finally {
            closeAgent();
        }
    }

    private void closeAgent() {
        if (agentClosed.compareAndSet(false, true)) {
            try {
                agent.onClose();
            } catch (Throwable t) {
                errors.record(agent.roleName(), t);
            }
        }
    }

    /**
     * Stops the loop after the turn in hand and waits up to the close timeout for onClose. A turn
     * that overruns is logged and left to finish on its own (daemon) thread.
     */
    @Override
    public void close() {
        running = false;
        if (started.compareAndSet(false, true)) {
            closeAgent(); // never started: onClose runs here, once
            return;
        }
        if (Thread.currentThread() == thread) {
            return; // closed from its own agent: the loop ends after this turn
        }
        LockSupport.unpark(thread);
        if (!NamedThreads.join(thread, closeTimeoutNs)) {
            LOG.warn("{} ({}) did not stop within {} ms; left to finish its turn", thread.getName(), agent.roleName(),
                    TimeUnit.NANOSECONDS.toMillis(closeTimeoutNs));
        }
    }

    @Override
    public String toString() {
        return "AgentRunner[" + thread.getName() + "]";
    }
}
