package io.lmcache.server.storage;

import java.util.function.Consumer;

/**
 * One object's place in an eviction policy: the links of the list it is on ({@code list} null while it
 * is locked, i.e. not a victim), the queue it belongs to ({@code home}, kept while locked), its access
 * count and its owner (the tenant). Held in {@link StoredObject#policySlot}; guarded by the store's lock.
 */
final class PolicyNode {
    final StoredObject object;
    PolicyNode prev;
    PolicyNode next;
    NodeList list;
    int home;
    int freq;
    Object owner;
    /** A second node of the same object on another list (the tenant policy's per-tenant LRU). */
    PolicyNode twin;

    PolicyNode(StoredObject object) {
        this.object = object;
    }

    boolean linked() {
        return list != null;
    }

    /** Whether {@code object} is on one of its policy's lists, i.e. a candidate (every list-based policy's isEvictable). */
    static boolean linked(StoredObject object) {
        PolicyNode node = of(object);
        return node != null && node.linked();
    }

    /**
     * The end of {@code object} in its policy (every list policy's {@code onFreed}): takes it off its lists with the policy's
     * {@code unlink} and clears its slot; returns its node for the policy's own accounting, or null when it had none.
     */
    static PolicyNode release(StoredObject object, Consumer<StoredObject> unlink) {
        PolicyNode node = of(object);
        if (node != null) {
            unlink.accept(object);
            object.policySlot = null;
        }
        return node;
    }

    /** The node a policy put in {@code object}'s slot (null before the policy saw it, or after it was freed). */
    static PolicyNode of(StoredObject object) {
        return (PolicyNode) object.policySlot;
    }
}
