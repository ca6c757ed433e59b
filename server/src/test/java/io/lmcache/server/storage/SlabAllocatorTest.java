package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SlabAllocatorTest {
    private static final long MIB = 1 << 20;

    private static SlabAllocator ready(long pool, long region) {
        SlabAllocator allocator = new SlabAllocator(pool, region);
        for (int r = 0; r < allocator.regionCount(); r++) {
            allocator.addReadyRegion(r);
        }
        return allocator;
    }

    @Test
    void theNextAllocationRegionsAreTheOnesAllocateTakes() {
        SlabAllocator allocator = new SlabAllocator(64 * MIB, 16 * MIB);
        assertEquals(0, allocator.nextAllocationRegions(2).length, "no region ready: none");
        for (int r = 0; r < allocator.regionCount(); r++) {
            allocator.addReadyRegion(r);
        }
        int[] next = allocator.nextAllocationRegions(2);
        assertEquals(2, next.length);
        long first = allocator.allocate(MIB);
        assertEquals(next[0], allocator.regionOf(first), "the first allocation comes from the first region named");
        assertEquals(next[0], allocator.nextAllocationRegions(1)[0], "a region with room comes first");
        for (int i = 1; i < 16; i++) {
            allocator.allocate(MIB); // fills the first region
        }
        assertEquals(next[1], allocator.regionOf(allocator.allocate(MIB)), "then the second");
        int[] after = allocator.nextAllocationRegions(10);
        assertEquals(3, after.length, "the partly used region and the 2 free ones (a full region is not named)");
        assertEquals(next[1], after[0]);
    }

    @Test
    void oneSizeClassPacksRegionsExactly() {
        SlabAllocator allocator = ready(64 * MIB, 16 * MIB);
        Set<Long> offsets = new HashSet<>();
        for (int i = 0; i < 64; i++) {
            long offset = allocator.allocate(MIB);
            assertTrue(offset >= 0, "allocation " + i);
            assertEquals(0, offset % SlabAllocator.ALIGN_BYTES);
            assertTrue(offsets.add(offset));
        }
        assertEquals(-1, allocator.allocate(MIB), "64 x 1 MiB fill 64 MiB exactly");
        assertEquals(64 * MIB, allocator.usedBytes());
        for (long offset : offsets) {
            allocator.free(offset);
        }
        assertEquals(0, allocator.usedBytes());
        assertEquals(4, allocator.freeRegions(), "empty regions go back to the free list");
    }

    @Test
    void sizesRoundUpToFourKibAndNeverSpanRegions() {
        SlabAllocator allocator = ready(32 * MIB, 16 * MIB);
        long a = allocator.allocate(5 * MIB + 1);
        long b = allocator.allocate(5 * MIB + 1);
        long c = allocator.allocate(5 * MIB + 1);
        assertEquals(5 * MIB + 4096, allocator.slotBytesAt(a));
        for (long offset : new long[] {a, b, c}) {
            assertEquals(allocator.regionOf(offset), allocator.regionOf(offset + allocator.slotBytesAt(offset) - 1), "object within one region");
        }
    }

    @Test
    void objectSizesOfNonPowerOfTwoChunksPackAndReuseTheirRegions() {
        for (int chunk : new int[] {544, 784, 944}) {
            // a Qwen-like hybrid: 2 x 28 attention layers of 1 x 256 bf16 per token, and one Mamba snapshot object
            long attention = 2L * 28 * chunk * 256 * 2;
            long snapshot = 2L * 3 * chunk * 96 * 2 + 6;
            SlabAllocator allocator = ready(64 * MIB, 16 * MIB);
            Set<Long> offsets = new HashSet<>();
            long slot = SlabAllocator.roundUp(attention);
            long perRegion = 16 * MIB / slot;
            for (int i = 0; i < 2 * perRegion; i++) {
                long offset = allocator.allocate(attention);
                assertTrue(offset >= 0, chunk + ": allocation " + i);
                assertEquals(allocator.regionOf(offset), allocator.regionOf(offset + slot - 1), "object within one region");
                assertTrue(offsets.add(offset));
            }
            long state = allocator.allocate(snapshot);
            assertTrue(state >= 0);
            assertTrue(offsets.stream().noneMatch(o -> allocator.regionOf(o) == allocator.regionOf(state)),
                    "the snapshot class takes a region of its own");
            assertEquals(SlabAllocator.roundUp(snapshot), allocator.slotBytesAt(state));
            for (long offset : offsets) {
                allocator.free(offset);
            }
            allocator.free(state);
            assertEquals(0, allocator.usedBytes());
            assertEquals(4, allocator.freeRegions(), chunk + ": every region is free again");
        }
    }

    @Test
    void anEmptiedRegionChangesClass() {
        SlabAllocator allocator = ready(16 * MIB, 16 * MIB);
        long small = allocator.allocate(MIB);
        assertEquals(-1, allocator.allocate(8 * MIB), "the only region serves 1 MiB objects");
        allocator.free(small);
        assertTrue(allocator.allocate(8 * MIB) >= 0, "emptied, it takes the other class");
    }

    @Test
    void onlyReadyRegionsServe() {
        SlabAllocator allocator = new SlabAllocator(32 * MIB, 16 * MIB);
        assertEquals(-1, allocator.allocate(MIB));
        allocator.addReadyRegion(1);
        long offset = allocator.allocate(MIB);
        assertEquals(1, allocator.regionOf(offset));
        assertEquals(16 * MIB, allocator.readyBytes());
    }

    @Test
    void aShortLastRegionOnlyTakesWhatFits() {
        SlabAllocator allocator = ready(20 * MIB, 16 * MIB);
        assertEquals(2, allocator.regionCount());
        assertEquals(4 * MIB, allocator.regionLength(1));
        long big = allocator.allocate(10 * MIB);
        assertEquals(0, allocator.regionOf(big));
        assertEquals(-1, allocator.allocate(10 * MIB), "the 4 MiB region cannot hold 10 MiB");
        assertNotEquals(-1, allocator.allocate(2 * MIB));
    }

    @Test
    void badFreesAreRefused() {
        SlabAllocator allocator = ready(16 * MIB, 16 * MIB);
        long offset = allocator.allocate(MIB);
        assertThrows(IllegalStateException.class, () -> allocator.free(offset + 4096));
        assertThrows(IllegalStateException.class, () -> allocator.free(offset + 2 * MIB));
        allocator.free(offset);
        assertThrows(IllegalStateException.class, () -> allocator.free(offset), "double free");
    }
}
