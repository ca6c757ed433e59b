package io.lmcache.server.warmup;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import org.junit.jupiter.api.Test;

class WarmupFramesTest {
    @Test
    void blocksAreOneRunAscendingOrNoRunAtAllDescending() {
        // both warm-ups take their block ids here: consecutive ids are one piece run, reversed ones none (issue 52: the
        // planner's scattered branch compiled before a real request takes it)
        assertArrayEquals(new int[] {64, 65, 66, 67}, WarmupFrames.blocks(64, 4, false));
        assertArrayEquals(new int[] {67, 66, 65, 64}, WarmupFrames.blocks(64, 4, true));
        assertArrayEquals(new int[] {}, WarmupFrames.blocks(0, 0, true));
    }
}
