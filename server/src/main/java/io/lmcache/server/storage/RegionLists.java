package io.lmcache.server.storage;

/**
 * Per region, the objects in it, so a region can be drained and change size class when a size class
 * needs room (the order of eviction is the {@link EvictionPolicy}'s). Guarded by the object store's lock.
 */
final class RegionLists {
    private final StoredObject[] regionHeads;

    RegionLists(int regions) {
        regionHeads = new StoredObject[regions];
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
