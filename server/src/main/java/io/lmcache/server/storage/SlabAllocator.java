package io.lmcache.server.storage;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * O(1) allocation of pool memory in size classes. The pool is cut into fixed regions (the units
 * that are prefaulted and pinned); a region serves one size class at a time, carved into equal
 * slots, so objects of one model layout (which all have one size) pack with no fragmentation and
 * no object spans two regions. A slot comes from the region's stack of freed slots or, failing
 * that, its bump pointer; a region whose last object is freed goes back to the free regions and
 * can serve another class. Offsets are 64-bit.
 *
 * <p>Not thread-safe: the object store calls it under its lock.
 */
public final class SlabAllocator {
    public static final long ALIGN_BYTES = 4096;
    private static final int NONE = -1;

    private final long poolBytes;
    private final long regionBytes;
    private final int regionCount;

    // per region; a region with slotBytes 0 is free (or not ready yet)
    private final long[] slotBytes;
    private final int[] slotCount;
    private final int[] bump;
    private final int[] live;
    private final int[][] freeSlots;
    private final int[] freeTop;
    /** One bit per slot: catches a double free before it can corrupt the free stack. */
    private final long[][] allocatedBits;
    private final boolean[] ready;
    // free regions: a stack of ready, unassigned regions
    private final int[] freeRegions;
    private int freeRegionTop;
    // per size class, a doubly linked list of its regions that have room
    private final int[] partialNext;
    private final int[] partialPrev;
    private final Map<Long, SizeClass> classes = new HashMap<>();

    private long usedBytes;
    private long readyBytes;
    private long liveObjects;

    /** Regions of one slot size, and which of them have a free slot. */
    private static final class SizeClass {
        final long slotBytes;
        int partialHead = NONE;
        int regions;

        SizeClass(long slotBytes) {
            this.slotBytes = slotBytes;
        }
    }

    public SlabAllocator(long poolBytes, long regionBytes) {
        if (regionBytes <= 0 || regionBytes % ALIGN_BYTES != 0 || poolBytes <= 0) {
            throw new IllegalArgumentException("pool " + poolBytes + " / region " + regionBytes);
        }
        this.poolBytes = poolBytes;
        this.regionBytes = regionBytes;
        this.regionCount = (int) ((poolBytes + regionBytes - 1) / regionBytes);
        slotBytes = new long[regionCount];
        slotCount = new int[regionCount];
        bump = new int[regionCount];
        live = new int[regionCount];
        freeSlots = new int[regionCount][];
        freeTop = new int[regionCount];
        allocatedBits = new long[regionCount][];
        ready = new boolean[regionCount];
        freeRegions = new int[regionCount];
        partialNext = new int[regionCount];
        partialPrev = new int[regionCount];
        Arrays.fill(partialNext, NONE);
        Arrays.fill(partialPrev, NONE);
    }

    public static long roundUp(long bytes) {
        return (bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
    }

    public int regionCount() {
        return regionCount;
    }

    public long regionBytes() {
        return regionBytes;
    }

    public long regionOffset(int region) {
        return region * regionBytes;
    }

    public long regionLength(int region) {
        return Math.min(regionBytes, poolBytes - regionOffset(region));
    }

    public int regionOf(long offset) {
        return (int) (offset / regionBytes);
    }

    /** The largest object a region can hold (region 0 is always a full region, or the whole pool). */
    public long maxObjectBytes() {
        return regionLength(0);
    }

    /** Makes a region allocatable (after it has been prefaulted, and pinned where DMA needs it). */
    public void addReadyRegion(int region) {
        if (ready[region]) {
            return;
        }
        ready[region] = true;
        readyBytes += regionLength(region);
        freeRegions[freeRegionTop++] = region;
    }

    /**
     * At most {@code max} regions new objects come from next: the head of each size class's regions with room (in no
     * particular class order), then the free regions from the top of their stack down ({@link #allocate} takes the top).
     */
    public int[] nextAllocationRegions(int max) {
        int[] out = new int[Math.max(0, max)];
        int n = 0;
        for (SizeClass sizeClass : classes.values()) {
            if (n < out.length && sizeClass.partialHead != NONE) {
                out[n++] = sizeClass.partialHead;
            }
        }
        for (int i = freeRegionTop - 1; i >= 0 && n < out.length; i--) {
            out[n++] = freeRegions[i];
        }
        return Arrays.copyOf(out, n);
    }

    public boolean isReady(int region) {
        return ready[region];
    }

    /** Pool offset of a new slot for {@code bytes} (rounded to 4 KiB), or -1 when no region has room. */
    public long allocate(long bytes) {
        long size = roundUp(Math.max(1, bytes));
        SizeClass sizeClass = classes.get(size);
        int region = sizeClass == null ? NONE : sizeClass.partialHead;
        if (region == NONE) {
            region = takeFreeRegion(size);
            if (region == NONE) {
                return -1;
            }
            if (sizeClass == null) {
                sizeClass = new SizeClass(size);
                classes.put(size, sizeClass);
            }
            assign(region, sizeClass);
        }
        int slot;
        if (freeTop[region] > 0) {
            slot = freeSlots[region][--freeTop[region]];
        } else {
            slot = bump[region]++;
        }
        allocatedBits[region][slot >>> 6] |= 1L << slot;
        live[region]++;
        if (freeTop[region] == 0 && bump[region] == slotCount[region]) {
            unlinkPartial(region, sizeClass);
        }
        usedBytes += size;
        liveObjects++;
        return regionOffset(region) + slot * size;
    }

    /** Frees the slot at {@code offset} (as returned by {@link #allocate}). */
    public void free(long offset) {
        int region = regionOf(offset);
        long size = slotBytes[region];
        if (size == 0) {
            throw new IllegalStateException("free of " + offset + " in an unassigned region " + region);
        }
        long within = offset - regionOffset(region);
        if (within % size != 0) {
            throw new IllegalStateException("free of " + offset + ": not a slot boundary of region " + region);
        }
        int slot = (int) (within / size);
        if (slot >= bump[region] || (allocatedBits[region][slot >>> 6] & (1L << slot)) == 0) {
            throw new IllegalStateException("free of " + offset + ": slot " + slot + " of region " + region + " is not allocated");
        }
        allocatedBits[region][slot >>> 6] &= ~(1L << slot);
        SizeClass sizeClass = classes.get(size);
        boolean wasFull = freeTop[region] == 0 && bump[region] == slotCount[region];
        freeSlots[region][freeTop[region]++] = slot;
        live[region]--;
        usedBytes -= size;
        liveObjects--;
        if (live[region] == 0) {
            if (!wasFull) {
                unlinkPartial(region, sizeClass);
            }
            release(region, sizeClass);
        } else if (wasFull) {
            linkPartial(region, sizeClass);
        }
    }

    /** Whether {@code offset} is the start of an allocated slot. */
    public boolean isAllocated(long offset) {
        int region = regionOf(offset);
        long size = slotBytes[region];
        if (size == 0 || (offset - regionOffset(region)) % size != 0) {
            return false;
        }
        int slot = (int) ((offset - regionOffset(region)) / size);
        return slot < bump[region] && (allocatedBits[region][slot >>> 6] & (1L << slot)) != 0;
    }

    /** Whether a new object of {@code bytes} would fit without evicting anything. */
    public boolean hasRoomFor(long bytes) {
        SizeClass sizeClass = classes.get(roundUp(Math.max(1, bytes)));
        return (sizeClass != null && sizeClass.partialHead != NONE) || freeRegionTop > 0;
    }

    /** Slot size of the region holding {@code offset}. */
    public long slotBytesAt(long offset) {
        return slotBytes[regionOf(offset)];
    }

    public long usedBytes() {
        return usedBytes;
    }

    public long readyBytes() {
        return readyBytes;
    }

    public long liveObjects() {
        return liveObjects;
    }

    public int freeRegions() {
        return freeRegionTop;
    }

    public int readyRegions() {
        int count = 0;
        for (boolean r : ready) {
            count += r ? 1 : 0;
        }
        return count;
    }

    private int takeFreeRegion(long size) {
        // the last region may be short: only take one that holds at least one slot
        for (int i = freeRegionTop - 1; i >= 0; i--) {
            int region = freeRegions[i];
            if (regionLength(region) >= size) {
                freeRegions[i] = freeRegions[--freeRegionTop];
                return region;
            }
        }
        return NONE;
    }

    private void assign(int region, SizeClass sizeClass) {
        int slots = (int) (regionLength(region) / sizeClass.slotBytes);
        slotBytes[region] = sizeClass.slotBytes;
        slotCount[region] = slots;
        bump[region] = 0;
        live[region] = 0;
        freeTop[region] = 0;
        if (freeSlots[region] == null || freeSlots[region].length < slots) {
            freeSlots[region] = new int[slots];
            // a released region has every bit clear already, so a reused bitmap needs no reset
            allocatedBits[region] = new long[(slots + 63) >>> 6];
        }
        sizeClass.regions++;
        linkPartial(region, sizeClass);
    }

    private void release(int region, SizeClass sizeClass) {
        slotBytes[region] = 0;
        slotCount[region] = 0;
        bump[region] = 0;
        freeTop[region] = 0;
        sizeClass.regions--;
        if (sizeClass.regions == 0) {
            classes.remove(sizeClass.slotBytes);
        }
        freeRegions[freeRegionTop++] = region;
    }

    private void linkPartial(int region, SizeClass sizeClass) {
        partialPrev[region] = NONE;
        partialNext[region] = sizeClass.partialHead;
        if (sizeClass.partialHead != NONE) {
            partialPrev[sizeClass.partialHead] = region;
        }
        sizeClass.partialHead = region;
    }

    private void unlinkPartial(int region, SizeClass sizeClass) {
        int prev = partialPrev[region];
        int next = partialNext[region];
        if (prev != NONE) {
            partialNext[prev] = next;
        } else {
            sizeClass.partialHead = next;
        }
        if (next != NONE) {
            partialPrev[next] = prev;
        }
        partialPrev[region] = NONE;
        partialNext[region] = NONE;
    }
}
