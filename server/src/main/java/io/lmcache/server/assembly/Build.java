package io.lmcache.server.assembly;

import io.lmcache.server.agent.Agent;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * What a part sees while it opens (LMCache's {@code build_ctx}): what the root gave (the configuration, the metrics) and what
 * the parts before it opened (by type), and where it leaves its closers, its agents (by thread role) and its {@code /status} block. Valid only while the
 * assembly opens its parts: after {@link Assembly#conclude} every call throws, so no wiring happens later.
 */
public interface Build {
    /** The one object of {@code type} a part before this one opened or offered; throws when there is none (or several). */
    <T> T require(Class<T> type);

    /** As {@link #require}, or null when no part opened one (its part is switched off). */
    <T> T optional(Class<T> type);

    /** As {@link #optional}, absent when no part opened one (a part the configuration switched off). */
    default <T> Optional<T> find(Class<T> type) {
        return Optional.ofNullable(optional(type));
    }

    /** Every object of {@code type} the parts before this one opened or offered, in opening order. */
    <T> List<T> all(Class<T> type);

    /** Offers {@code object} to the parts after this one, beside the part's own object (a part that opens several). */
    <T> T offer(T object);

    /** Threads that run the agents of several parts, each composed by the part that owns the thread. */
    enum Role {
        /** lmcache-housekeeping: eviction ticks, sweeps, the reaper, the release thread's watch, the activity log. */
        HOUSEKEEPING
    }

    /** An agent for {@code role}'s thread (null: none); the part that runs that thread takes them all ({@link #agents}). */
    void agent(Role role, Agent agent);

    /** The agents offered for {@code role} so far, in opening order. */
    List<Agent> agents(Role role);

    /** A block of {@code /status}: {@code supplier} runs on the HTTP threads, each request. */
    void status(String name, Supplier<Map<String, Object>> supplier);

    /** A close step, named for the shutdown log; the assembly closes them last first (null: nothing to close). */
    <T extends AutoCloseable> T onClose(String name, T closer);

    /** A start step, run by {@link Assembly#start} in opening order. */
    void onStart(String name, Runnable start);

    /** A step that opens the doors (the request loop, the HTTP listeners): run after every start step, in opening order. */
    void onServe(String name, Runnable serve);

    /** Every part's {@code /status} block ({@link Assembly#status}), read when called: for the part that serves {@code /status}. */
    Supplier<Map<String, Object>> statuses();
}
