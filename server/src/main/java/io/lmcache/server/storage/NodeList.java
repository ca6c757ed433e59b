package io.lmcache.server.storage;

/**
 * A policy's intrusive doubly linked list of {@link PolicyNode}s: head is the newest (most recently
 * used or queued), tail the next to go; count and bytes kept as nodes come and go, all O(1).
 */
final class NodeList {
    private final String name;
    private PolicyNode head;
    private PolicyNode tail;
    private int size;
    private long bytes;

    NodeList(String name) {
        this.name = name;
    }

    PolicyNode tail() {
        return tail;
    }

    int size() {
        return size;
    }

    long bytes() {
        return bytes;
    }

    void pushHead(PolicyNode node) {
        if (node.list != null) {
            throw new IllegalStateException("node already on " + node.list.name + ": " + node.object);
        }
        node.prev = null;
        node.next = head;
        if (head != null) {
            head.prev = node;
        }
        head = node;
        if (tail == null) {
            tail = node;
        }
        node.list = this;
        size++;
        bytes += node.object.bytes;
    }

    /** Takes a node off this list (it must be on it). */
    void remove(PolicyNode node) {
        if (node.list != this) {
            throw new IllegalStateException("node not on " + name + ": " + node.object);
        }
        if (node.prev != null) {
            node.prev.next = node.next;
        } else {
            head = node.next;
        }
        if (node.next != null) {
            node.next.prev = node.prev;
        } else {
            tail = node.prev;
        }
        node.prev = null;
        node.next = null;
        node.list = null;
        size--;
        bytes -= node.object.bytes;
    }

    /** The links agree both ways, every node says it is here, and size and bytes equal a walk (audit). */
    void check() {
        int walked = 0;
        long walkedBytes = 0;
        PolicyNode previous = null;
        for (PolicyNode n = head; n != null; n = n.next) {
            if (n.list != this || n.prev != previous) {
                throw new IllegalStateException(name + " list broken at " + n.object);
            }
            if (n.object.isLocked() || n.object.doomed || n.object.state != StoredObject.State.READY) {
                throw new IllegalStateException("locked, doomed or unpublished object on " + name + ": " + n.object);
            }
            walked++;
            walkedBytes += n.object.bytes;
            previous = n;
        }
        if (previous != tail || walked != size || walkedBytes != bytes) {
            throw new IllegalStateException(name + " holds " + walked + " objects (" + walkedBytes + " bytes), counted " + size + " ("
                    + bytes + ")");
        }
    }
}
