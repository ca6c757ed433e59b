package io.lmcache.server.storage;

/**
 * The store's eviction order: the LRU list of evictable objects (its tail is the next victim, in
 * O(1)) and, per region, the objects in it (so a region can be drained and change size class).
 * Guarded by the object store's lock.
 */
final class EvictionLists {
    private final StoredObject[] regionHeads;
    private StoredObject lruHead;
    private StoredObject lruTail;
    private int lruSize;

    EvictionLists(int regions) {
        regionHeads = new StoredObject[regions];
    }

    StoredObject lruHead() {
        return lruHead;
    }

    /** The least recently used evictable object, or null. */
    StoredObject lruTail() {
        return lruTail;
    }

    int lruSize() {
        return lruSize;
    }

    /** Puts an object not on the list at its head (most recently used). */
    void pushLru(StoredObject object) {
        object.lruPrev = null;
        object.lruNext = lruHead;
        if (lruHead != null) {
            lruHead.lruPrev = object;
        }
        lruHead = object;
        if (lruTail == null) {
            lruTail = object;
        }
        object.inLru = true;
        lruSize++;
    }

    void unlinkLru(StoredObject object) {
        if (!object.inLru) {
            return;
        }
        if (object.lruPrev != null) {
            object.lruPrev.lruNext = object.lruNext;
        } else {
            lruHead = object.lruNext;
        }
        if (object.lruNext != null) {
            object.lruNext.lruPrev = object.lruPrev;
        } else {
            lruTail = object.lruPrev;
        }
        object.lruPrev = null;
        object.lruNext = null;
        object.inLru = false;
        lruSize--;
    }

    StoredObject regionHead(int region) {
        return regionHeads[region];
    }

    void linkRegion(StoredObject object, int region) {
        object.regionPrev = null;
        object.regionNext = regionHeads[region];
        if (regionHeads[region] != null) {
            regionHeads[region].regionPrev = object;
        }
        regionHeads[region] = object;
    }

    void unlinkRegion(StoredObject object, int region) {
        if (object.regionPrev != null) {
            object.regionPrev.regionNext = object.regionNext;
        } else if (regionHeads[region] == object) {
            regionHeads[region] = object.regionNext;
        }
        if (object.regionNext != null) {
            object.regionNext.regionPrev = object.regionPrev;
        }
        object.regionPrev = null;
        object.regionNext = null;
    }
}
