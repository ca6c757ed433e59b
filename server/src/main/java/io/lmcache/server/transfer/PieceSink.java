package io.lmcache.server.transfer;

/** Receives the contiguous byte ranges of one copy: a range of a registered tensor and its place in a pool object. */
@FunctionalInterface
public interface PieceSink {
    void piece(int tensor, long tensorOffset, long objectOffset, long length);
}
