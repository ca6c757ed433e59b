package io.lmcache.server.tier;

import io.lmcache.server.l2.Bitmap;

/**
 * How many leading chunks a set of present keys makes a hit. The keys are chunk-major:
 * {@code keysPerChunk} per chunk (every kv rank, then every object group). A hybrid registration
 * replaces this with the window-aware fold of hybrid-and-l2.md §A.5.
 */
@FunctionalInterface
public interface PrefixFold {
    int hitChunks(Bitmap present, int chunks, int keysPerChunk);

    /** The leading run of chunks whose keys are all present (LMCache's {@code TrimPolicy.PREFIX}). */
    PrefixFold LEADING_RUN = (present, chunks, keysPerChunk) -> keysPerChunk == 0 ? 0
            : Math.min(chunks, present.countLeadingOnes() / keysPerChunk);
}
