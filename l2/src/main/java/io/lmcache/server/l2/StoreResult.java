package io.lmcache.server.l2;

/**
 * The outcome of one store task: it succeeded or failed as a whole. {@code bytesTransferred}
 * counts bytes really written (0 on failure; a key already stored adds nothing).
 */
public record StoreResult(boolean ok, long bytesTransferred) {}
