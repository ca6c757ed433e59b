package io.lmcache.server.storage;

/**
 * Resident bytes and objects per home queue of a two-queue policy (ARC's T1/T2, S3-FIFO's small/main), locked objects
 * included: a node's home stays while it is off the lists. Home 0 is none (new, freed or evicted): its slot is a sink,
 * never read. Guarded by the store's lock.
 */
final class HomeTally {
    private final long[] bytes = new long[3];
    private final int[] objects = new int[3];

    /** Moves {@code node} (and its bytes) from its home to {@code home}. */
    void move(PolicyNode node, int home) {
        long size = node.object.bytes;
        bytes[node.home] -= size;
        objects[node.home]--;
        node.home = home;
        bytes[home] += size;
        objects[home]++;
    }

    long bytes(int home) {
        return bytes[home];
    }

    int objects(int home) {
        return objects[home];
    }
}
