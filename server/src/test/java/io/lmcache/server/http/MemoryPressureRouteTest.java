package io.lmcache.server.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.http.MemoryPressureRoute.Level;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A tier's level from its used and capacity bytes and its eviction watermark (the spec's §3.1). */
class MemoryPressureRouteTest {
    @Test
    void theLevelFollowsTheRatioAgainstTheWatermarkAndTheCapacity() {
        assertEquals(Level.NORMAL, MemoryPressureRoute.level(0L, 100L, 0.8));
        assertEquals(Level.NORMAL, MemoryPressureRoute.level(79L, 100L, 0.8));
        assertEquals(Level.HIGH, MemoryPressureRoute.level(80L, 100L, 0.8), "at the watermark");
        assertEquals(Level.HIGH, MemoryPressureRoute.level(99L, 100L, 0.8));
        assertEquals(Level.CRITICAL, MemoryPressureRoute.level(100L, 100L, 0.8), "full");
        assertEquals(Level.CRITICAL, MemoryPressureRoute.level(150L, 100L, 0.8), "over (an L2 counts what others wrote too)");
        assertEquals(Level.NORMAL, MemoryPressureRoute.level(99L, 100L, null), "no watermark: never high");
        assertEquals(Level.CRITICAL, MemoryPressureRoute.level(100L, 100L, null));
    }

    @Test
    void withoutBothNumbersTheLevelIsUnknown() {
        assertEquals(Level.UNKNOWN, MemoryPressureRoute.level(null, 100L, 0.8));
        assertEquals(Level.UNKNOWN, MemoryPressureRoute.level(10L, null, 0.8));
        assertEquals(Level.UNKNOWN, MemoryPressureRoute.level(10L, 0L, 0.8), "a capacity of 0 is LMCache's unknown");
        assertEquals(Level.UNKNOWN, MemoryPressureRoute.level(-1L, 100L, 0.8));
    }

    @Test
    void levelsRankUnknownBelowEveryKnownOne() {
        assertEquals(Level.CRITICAL, Collections.max(List.of(Level.UNKNOWN, Level.HIGH, Level.CRITICAL, Level.NORMAL)));
        assertEquals("critical", Level.CRITICAL.wire());
    }
}
