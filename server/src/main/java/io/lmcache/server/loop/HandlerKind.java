package io.lmcache.server.loop;

/** Where a handler runs (protocol doc §2.5); each op's kind is declared in the {@link OpTable}. */
public enum HandlerKind {
    /** Inline on the socket thread: short, and ordered before the peer's next request. */
    SYNC,
    /**
     * Inline on the socket thread when its payload is small and the CPU pool holds no earlier request
     * (so it cannot overtake one, e.g. a LOOKUP overtaking the END_SESSION before it); the CPU pool
     * otherwise. These are map lookups of a few µs, where the hand-off to a pool thread and back
     * (two thread wake-ups) would cost several times the work.
     */
    QUICK,
    /** The CPU pool ({@code --max-cpu-workers}). */
    NORMAL,
    /** The transfer pool ({@code --max-gpu-workers}), FIFO per peer identity. */
    AFFINITY,
    /**
     * A thread of its own, FIFO: reads of up to a page of a log (KV-event polls, a MiB or two each), which on the CPU pool made
     * every LOOKUP queued behind them wait (issue 45, N6). A peer that floods it delays only other such reads.
     */
    BACKGROUND
}
