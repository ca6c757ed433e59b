package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;

/**
 * The whole chunks a key's token range {@code [start, end)} covers. {@code start} must be
 * chunk-aligned; {@code end} too, except that it may be the token count, whose partial last chunk
 * is never stored or looked up (only whole chunks are).
 */
public record ChunkRange(int firstChunk, int endChunk) {

    public int count() {
        return endChunk - firstChunk;
    }

    /** The range, or null with the reason in {@code why[0]}. */
    public static ChunkRange of(CacheKey key, int chunkSize, String[] why) {
        int tokens = key.tokenIds().length;
        if (key.start() < 0 || key.start() > key.end() || key.end() > tokens) {
            why[0] = "token range [" + key.start() + ", " + key.end() + ") is outside the " + tokens + " tokens";
            return null;
        }
        if (key.start() % chunkSize != 0) {
            why[0] = "token range start " + key.start() + " is not a multiple of the chunk size " + chunkSize;
            return null;
        }
        if (key.end() % chunkSize != 0 && key.end() != tokens) {
            why[0] = "token range end " + key.end() + " is neither a multiple of the chunk size " + chunkSize + " nor the token count";
            return null;
        }
        return new ChunkRange(key.start() / chunkSize, key.end() / chunkSize);
    }
}
