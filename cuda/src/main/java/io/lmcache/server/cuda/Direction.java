package io.lmcache.server.cuda;

/** Which way a transfer moves bytes, and so which stream it runs on. */
public enum Direction {
    /** GPU blocks to the pool (STORE): the normal-priority stream. */
    TO_POOL,
    /** The pool to GPU blocks (RETRIEVE): the high-priority stream, a request is waiting on it. */
    FROM_POOL
}
